"""iter_lines reads a chunk at a time: it must yield exactly the lines, and raise exactly the errors,
of a line-by-line ``readline`` through ``open_text`` (its earlier form, kept here as the reference),
on every shipped log and on the edge cases a chunk boundary could break; so must iter_text's blocks."""

from __future__ import annotations

import gzip
import lzma
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from benanza.errors import BenanzaError
from benanza.profile import _io
from benanza.profile._io import iter_lines, iter_text, open_text

ROOT = Path(__file__).resolve().parent.parent
CHUNK = _io._CHUNK


def readline_lines(path: Path) -> Iterator[str]:
    """The reference: iter_lines as it was, one ``readline`` per line, caps checked per line."""
    max_chars, max_lines = _io.expansion_caps(path)
    chars = lines = 0
    with open_text(path) as fh:
        try:
            for line in iter(lambda: fh.readline(_io.MAX_LINE_CHARS), ""):
                lines += 1
                chars += len(line)
                if len(line) >= _io.MAX_LINE_CHARS and not line.endswith("\n"):
                    raise BenanzaError(f"{path}: line {lines} is longer than {_io.MAX_LINE_CHARS:,} characters: "
                                       "not a text log")
                if max_chars is not None and (chars > max_chars or lines > max_lines):  # type: ignore[operator]
                    raise _io._too_big(path, f"{max_chars:,} characters" if chars > max_chars
                                       else f"{max_lines:,} lines")
                yield line.rstrip("\r\n")
        except EOFError:
            return
        except (OSError, zlib.error, lzma.LZMAError) as exc:
            raise BenanzaError(f"{path}: cannot read: {exc}") from exc


def outcome(lines: Iterator[str]) -> tuple[list[str], str | None]:
    """The lines yielded and the error that ended them (None at the end of the file)."""
    got: list[str] = []
    try:
        for line in lines:
            got.append(line)
    except BenanzaError as exc:
        return got, str(exc)
    return got, None


def text_lines(path: Path) -> Iterator[str]:
    """The lines of iter_text's blocks: each block whole lines, each line with its line end."""
    for block in iter_text(path):
        assert block.endswith("\n")
        yield from block.split("\n")[:-1]


def same(path: Path) -> tuple[list[str], str | None]:
    new = outcome(iter_lines(path))
    assert new == outcome(readline_lines(path)) == outcome(text_lines(path)), path
    return new


def write(path: Path, data: bytes) -> Path:
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix)
    if opener is None:
        path.write_bytes(data)
    else:
        with opener(path, "wb") as fh:
            fh.write(data)
    return path


SHIPPED = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("perfdb/bundles/vgg19_b1_*/*.log.xz"))


@pytest.mark.parametrize("log", [*SHIPPED, "tests/data/samples/torch2.11_conv3x3_cudnn_api.log.gz"])
def test_a_shipped_log_reads_the_same(log: str) -> None:
    assert same(ROOT / log)[0]


EDGES = {
    "line ends of every kind": b"a\r\nb\rc\n\n\r\r\nlast",
    "CR LF split by a chunk": b"x" * (CHUNK - 1) + b"\r\n" + b"y\n",
    "CR ending a chunk": b"x" * (CHUNK - 1) + b"\r" + b"y\r",
    "a character split by a chunk": b"x" * (CHUNK - 1) + "é€".encode() + b"\nz\n",
    "bytes that are no UTF-8": b"ok\n\xff\xfe bad\n" + b"x" * (CHUNK - 1) + b"\xe2\x82",
    "blank and trailing line ends": b"\n\n a \n\n\n",
    "empty": b"",
    "one line, no end": b"no newline at all",
}


@pytest.mark.parametrize("suffix", ["", ".gz", ".xz"])
@pytest.mark.parametrize("case", sorted(EDGES))
def test_chunk_boundaries_keep_the_lines(tmp_path: Path, case: str, suffix: str) -> None:
    same(write(tmp_path / f"edge.log{suffix}", EDGES[case]))


def test_a_cut_gzip_stream_ends_on_the_same_line(tmp_path: Path) -> None:
    whole = gzip.compress(b"".join(b"line %d %s\n" % (i, b"z" * (i % 97)) for i in range(20000)))
    for cut in (len(whole) // 7, len(whole) // 3, len(whole) // 2 + 11, len(whole) - 9):
        path = tmp_path / f"cut{cut}.log.gz"
        path.write_bytes(whole[:cut])
        assert 0 < len(same(path)[0]) <= 20000


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_line_too_long_is_refused_after_the_lines_before_it(tmp_path: Path, suffix: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "MAX_LINE_CHARS", 3 * CHUNK + 5)
    for length in (3 * CHUNK + 4, 3 * CHUNK + 5, 5 * CHUNK):
        for tail in (b"\n", b"", b"\nafter\n"):
            data = b"first\nsecond\n" + b"L" * length + tail
            lines, error = same(write(tmp_path / f"long{length}{len(tail)}.log{suffix}", data))
            assert (error is None) == (length < 3 * CHUNK + 5)
            if error:
                assert lines == ["first", "second"] and "line 3 is longer" in error


@pytest.mark.parametrize("cap", ["FLOOR_LINES", "FLOOR_CHARS"])
def test_the_caps_stop_at_the_same_line(tmp_path: Path, cap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "many.log.gz", b"row\n" * 50000 + b"".join(b"row %d\n" % i for i in range(99)))
    errors = []
    for floor in (0, 1, 777, 20000, 2 * CHUNK):
        monkeypatch.setattr(_io, cap, floor)
        monkeypatch.setattr(_io, "MAX_RATIO" if cap == "FLOOR_CHARS" else "MAX_LINES_PER_BYTE", 1)
        errors.append(same(path)[1])
    assert all(e is not None and "decompression bomb" in e for e in errors[:4])
