"""Opening profile files: ``.gz`` and ``.xz`` transparently, and every I/O problem as a one-line BenanzaError.

A compressed part is read under caps (``expansion_caps``): a 305 KB ``.xz`` log that expands to
2 GB of newlines once kept ``analyze`` busy for minutes. Real bundle parts expand at most ~400x
and hold under 3 lines per compressed byte; a part past the caps is refused in one line that
says how to read it anyway (decompress it: plain files have no cap, their cost is their size).
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import lzma
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from benanza.errors import BenanzaError

# Compressed suffix -> binary opener (bundles ship their large logs compressed).
OPENERS: dict[str, Any] = {".gz": gzip.open, ".xz": lzma.open}
MAX_RATIO = 1000  # decompressed characters per compressed byte (shipped parts: <= 383)
FLOOR_CHARS = 64 << 20  # ... beyond this floor, so that small files never trip it
MAX_LINES_PER_BYTE = 10  # lines per compressed byte (shipped logs: <= 2.5)
FLOOR_LINES = 1 << 20
MAX_LINE_CHARS = 1 << 20  # one log line longer than this is no log line
_CHUNK = 8192  # bytes a read takes (io.TextIOWrapper's chunk size)
_BLOCK = 1 << 20  # characters iter_text gathers into one block (about a thousand cuDNN log records)
MAX_JSON_CHARS = 1 << 30  # a JSON part is held whole in memory: never more than this, compressed or not


def expansion_caps(path: Path) -> tuple[int | None, int | None]:
    """(characters, lines) a part may expand to: None (no cap) for a plain file, whose reading cost
    is its size on disk; for ``.gz``/``.xz`` a multiple of the compressed size."""
    if path.suffix not in OPENERS:
        return None, None
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BenanzaError(f"{path}: cannot open: {exc.strerror or exc}") from exc
    return FLOOR_CHARS + MAX_RATIO * size, FLOOR_LINES + MAX_LINES_PER_BYTE * size


def _too_big(path: Path, what: str) -> BenanzaError:
    tool = "xz" if path.suffix == ".xz" else "gzip"
    return BenanzaError(f"{path}: expands past {what} (from {path.stat().st_size:,} compressed bytes): refused as a "
                        f"decompression bomb; to read it anyway, decompress it ({tool} -d) and give the plain file")


def open_text(path: Path) -> IO[str]:
    """Open a text file for reading, decompressing it when its name ends in ``.gz`` or ``.xz``."""
    try:
        if path.suffix in OPENERS:
            return io.TextIOWrapper(OPENERS[path.suffix](path, "rb"), encoding="utf-8", errors="replace")
        return path.open("r", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BenanzaError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def _open_binary(path: Path) -> IO[bytes]:
    try:
        return OPENERS[path.suffix](path, "rb") if path.suffix in OPENERS else path.open("rb")
    except OSError as exc:
        raise BenanzaError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def iter_lines(path: Path) -> Iterator[str]:
    """Yield the lines of a (possibly compressed) text file without their line ends, within the caps.

    A gzip stream cut short (a log copied while it was written) ends the iteration
    quietly: the caller sees a truncated last record and reports it.

    The text is what ``open_text`` reads (the same ``read1`` calls of ``_CHUNK`` bytes through the same
    decoder as ``io.TextIOWrapper``, so a cut stream ends on the same line), split a chunk at a time:
    ``readline`` per line cost as much as the cuDNN log reader itself (32 million lines in the shipped
    bundles, CI time, docs/RESULTS.md §16).
    """
    for piece in _pieces(path):
        lines = piece.split("\n")
        lines.pop()  # the empty text after the piece's last line end
        yield from lines


def iter_text(path: Path) -> Iterator[str]:
    """The lines ``iter_lines`` yields, each with a ``\\n`` line end (a last line without one gets one),
    joined into blocks of about ``_BLOCK`` characters; a block holds whole lines only.

    Why: a reader that finds its records with ``str.find`` in a block of text, not line by line, parses
    a cuDNN log several times faster (CI time, docs/RESULTS.md §16). The caps and errors are those of
    ``iter_lines``: an error comes after a block holding every line before the line that broke a cap.
    """
    block: list[str] = []
    size = 0
    pieces = _pieces(path)
    while True:
        try:
            piece = next(pieces, None)
        except BenanzaError:
            if block:
                yield "".join(block)  # the lines before the error, as iter_lines yields them before raising
            raise
        if piece is None:
            break
        block.append(piece)
        size += len(piece)
        if size >= _BLOCK:
            yield "".join(block)
            block, size = [], 0
    if block:
        yield "".join(block)


def _pieces(path: Path) -> Iterator[str]:
    """The whole lines of each ``_CHUNK`` read, as text with their ``\\n`` line ends, within the caps
    (checked line by line only in a piece that could break one)."""
    max_chars, max_lines = expansion_caps(path)
    chars = lines = 0
    decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder("utf-8")(errors="replace"), translate=True)
    pending = ""  # the text after the last line end read so far
    with _open_binary(path) as fh:
        try:
            while True:
                data = fh.read1(_CHUNK)  # type: ignore[attr-defined]
                text = pending + decoder.decode(data, final=not data)
                cut = text.rfind("\n") + 1  # the piece is text[:cut], its lines each with their line end
                pending = text[cut:]
                count = text.count("\n", 0, cut)
                if (cut > MAX_LINE_CHARS and max(map(len, text[:cut].split("\n"))) >= MAX_LINE_CHARS) or (
                        max_chars is not None and (chars + cut > max_chars or lines + count > max_lines)):  # type: ignore[operator]
                    good = 0  # a line of these breaks a cap: find which, as a line-by-line read would
                    for part in text[:cut].split("\n")[:-1]:
                        lines, chars = lines + 1, chars + len(part) + 1
                        try:
                            _check(path, part, lines, chars, max_chars, max_lines)
                        except BenanzaError:
                            if good:
                                yield text[:good]
                            raise
                        good += len(part) + 1
                elif cut:
                    lines, chars = lines + count, chars + cut
                if cut:
                    yield text[:cut]
                if not data:
                    break
                _check(path, pending, lines + 1, chars, None, None)  # a line this long already breaks its cap
            if pending:  # the last line, without a line end
                lines, chars = lines + 1, chars + len(pending)
                _check(path, pending, lines, chars, max_chars, max_lines)
                yield pending + "\n"
        except EOFError:
            return
        except (OSError, zlib.error, lzma.LZMAError) as exc:
            raise BenanzaError(f"{path}: cannot read: {exc}") from exc


def _check(path: Path, line: str, lines: int, chars: int, max_chars: int | None, max_lines: int | None) -> None:
    """Refuse line number ``lines`` (its text without the line end) when it or the ``chars`` read so far
    break a cap."""
    if len(line) >= MAX_LINE_CHARS:
        raise BenanzaError(f"{path}: line {lines} is longer than {MAX_LINE_CHARS:,} characters: not a text log")
    if max_chars is not None and (chars > max_chars or lines > max_lines):  # type: ignore[operator]
        raise _too_big(path, f"{max_chars:,} characters" if chars > max_chars else f"{max_lines:,} lines")


def load_json(path: Path) -> Any:
    """Parse a whole JSON file (possibly compressed), within the caps; bad JSON names the file and the position."""
    max_chars = min(expansion_caps(path)[0] or MAX_JSON_CHARS, MAX_JSON_CHARS)
    with open_text(path) as fh:
        try:
            text = fh.read(max_chars + 1)
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
            raise BenanzaError(f"{path}: cannot read: {exc}") from exc
    if len(text) > max_chars:
        raise _too_big(path, f"{max_chars:,} characters") if path.suffix in OPENERS else \
            BenanzaError(f"{path}: larger than {max_chars:,} characters: refused (a JSON part is read whole)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenanzaError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    except RecursionError:
        raise BenanzaError(f"{path}: JSON nested too deeply to read") from None
