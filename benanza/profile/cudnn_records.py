"""The generic record layer of the cuDNN API log: records of nested ``name: type=T; val=V;``
fields, read as a stream (``RecordReader``); what the fields mean is ``cudnn_log``'s job.

Format (cuDNN 9): a record starts with ``I! CuDNN (v91900 56) function NAME() called:``
(``W!``/``E!`` for warnings and errors), then ``i!`` lines nested by indentation (4 spaces
a level), then ``i! Time: ...`` and ``i! Process=...; Thread=...; ...``, which ends it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from benanza.errors import BenanzaError
from benanza.profile._io import iter_lines

_HEADER = re.compile(r"^([IWE])! CuDNN \(v(\d+)(?: (\d+))?\) function (\w+)\(\) called:\s*$")
_HEADER_MARKS = ("I!", "W!", "E!")  # a record's header line starts with one of these
_BODY_MARKS = ("i!", "w!", "e!")  # ... and each of its field lines with one of these
_SNIFF_LINES = 200  # non-blank lines read before deciding a file is not a cuDNN log


@dataclass
class Field:
    """One ``name: type=...; val=...;`` line of a record with the lines nested under it."""

    name: str
    type: str | None = None
    val: str | None = None
    raw: str = ""
    children: list[Field] = field(default_factory=list)

    def get(self, name: str) -> Field | None:
        """First direct child called ``name``."""
        return next((c for c in self.children if c.name == name), None)

    def all(self, name: str) -> list[Field]:
        return [c for c in self.children if c.name == name]

    def find(self, name: str) -> Field | None:
        """First field called ``name`` anywhere below (depth first)."""
        for c in self.children:
            if c.name == name:
                return c
            hit = c.find(name)
            if hit is not None:
                return hit
        return None


@dataclass(frozen=True)
class Record:
    """One complete log record: header, argument tree and the Time/Process trailer.

    Its field tree is built on first use of ``root``: most records of a real log (descriptor
    creation and destruction, ``cudnnBackendGetAttribute`` dumps) are never read, and building
    every tree was most of a parse (CI time, docs/RESULTS.md §16). ``value`` reads one top-level
    field without building the tree.
    """

    severity: str  # "I", "W" or "E"
    version: int
    function: str
    line: int  # 1-based line of the header in the file
    lines: list[str] = field(repr=False)  # its field and continuation lines as logged (Time and Process lines out)
    time: str  # ISO time as logged (local clock, microseconds)
    context: dict[str, str]  # Process, Thread, GPU, Handle, StreamId

    @cached_property
    def root(self) -> Field:
        """The argument tree (built once, on first use)."""
        return _tree(self.lines)

    @property
    def is_return(self) -> bool:
        """A graph-API call's second record, logged on return, holding only its status."""
        if "root" in self.__dict__:
            return len(self.root.children) == 1 and self.root.children[0].name == "status"
        children = _direct_children(self.lines)
        first = next(children, "")
        return first.startswith("status") and _parse_field(first).name == "status" and next(children, None) is None

    def value(self, name: str) -> str | None:
        """``root.get(name).val``: the value of its first direct field called ``name`` (None when there is
        none), read without building the tree."""
        if "root" in self.__dict__:
            hit = self.root.get(name)
            return hit.val if hit is not None else None
        for text in _direct_children(self.lines):
            if text.startswith(name) and (node := _parse_field(text)).name == name:
                return node.val
        return None


def _direct_children(lines: list[str]) -> Iterator[str]:
    """The text of each of a record's lines that ``_tree`` hangs on the root, in order, lazily."""
    deeper = None  # "i!" and this many spaces: a line nested under the root's latest direct child
    for line in lines:
        if not line.startswith(_BODY_MARKS):  # a continuation changes a field's raw text only
            continue
        if deeper is not None and line.startswith(deeper, 2):
            continue
        text = line[2:].lstrip(" ")
        level = max(len(line) - 3 - len(text), 0) // 4
        deeper = " " * (4 * level + 5)  # indentation of level + 1 (_tree's levels: (indent - 1) // 4)
        yield text


def _parse_field(text: str) -> Field:
    # str methods, not a regex: a batch-64 log has about 2 million of these lines (CI time, docs/RESULTS.md §16)
    name, sep, rest = text.partition(": ")
    if not sep:
        return Field(name=text[:-1]) if text.endswith(":") else Field(name=text, raw=text)
    if not rest.startswith("type="):
        return Field(name=name, raw=rest)
    semi, colon = rest.find(";", 5), rest.find(":", 5)
    end = semi if colon < 0 or 0 <= semi < colon else colon
    if end < 0 or (end == colon and rest[end + 1:].strip()):  # "type=T:" must end its line
        return Field(name=name, raw=rest)
    type_ = rest[5:end]
    if end == colon:  # "type=T:" opens a nested descriptor
        return Field(name=name, type=type_)
    tail = rest[end + 1:].lstrip()
    if tail.startswith("val="):
        val = tail[4:]
        return Field(name=name, type=type_, val=val[:-1] if val.endswith(";") else val, raw=rest)
    return Field(name=name, type=type_, raw=rest)


def _parse_context(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.rstrip(".").split("; "):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


def _tree(lines: list[str]) -> Field:
    """The field tree of a record's lines: nested by indentation (4 spaces a level); a line that is no
    ``i!`` (``w!``, ``e!``) line continues the raw text of the field before it."""
    root = Field(name="")
    stack: list[tuple[int, Field]] = []
    for line in lines:
        if line[1:2] != "!" or line[0] not in "iwe":  # continuation of a multi-line value
            target = stack[-1][1] if stack else root
            target.raw += "\n" + line
            continue
        text = line[2:].lstrip(" ")
        level = max(len(line) - 3 - len(text), 0) // 4
        node = _parse_field(text)
        while stack and stack[-1][0] >= level:
            stack.pop()
        (stack[-1][1] if stack else root).children.append(node)
        stack.append((level, node))
    return root


class RecordReader:
    """Iterate over the complete records of a cuDNN API log, streaming.

    After iteration, ``truncated`` says whether the file ended inside a record (that
    record is not yielded) and ``dropped`` lists header lines of records that were cut
    short mid-file. A file with no record header in its first lines is not a cuDNN log.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.truncated = False
        self.dropped: list[int] = []
        self.records = 0

    def __iter__(self) -> Iterator[Record]:
        # Per line only what finds the records' edges: str tests, no regex on body lines and no fields
        # (a batch-64 log has over 2 million lines; Record builds its fields when they are read).
        head: tuple[str, int, str, int] | None = None  # severity, version, function, line
        lines: list[str] = []
        time = ""
        seen_lines = 0
        for lineno, line in enumerate(iter_lines(self.path), start=1):
            if not line or line.isspace():
                continue
            seen_lines += 1
            # a header starts "I! " (W!, E!), a body line "i!" (w!, e!): the header regex runs on headers only
            m = _HEADER.match(line) if line.startswith(_HEADER_MARKS) else None
            if m:
                if head is not None:
                    self.dropped.append(head[3])
                head = (m.group(1), int(m.group(2)), m.group(4), lineno)
                lines, time = [], ""
                continue
            if head is None:
                if self.records == 0 and seen_lines >= _SNIFF_LINES:
                    break
                continue
            if ("Time: " in line or "Process=" in line) and line.startswith(_BODY_MARKS):
                text = line[2:].lstrip(" ")
                if text.startswith("Time: "):
                    time = text[6:].split(" ", 1)[0]
                    continue
                if text.startswith("Process="):
                    yield Record(head[0], head[1], head[2], head[3], lines, time, _parse_context(text))
                    self.records += 1
                    head = None
                    continue
            lines.append(line)  # a field, or the continuation of a multi-line value (" at: 0 == newResults")
        if head is not None:
            self.truncated = True
        if self.records == 0:
            if head is not None or self.dropped:
                raise BenanzaError(f"{self.path}: cuDNN API log holds no complete record (file cut short?)")
            raise BenanzaError(f"{self.path}: not a cuDNN API log (no 'I! CuDNN (v...) function ...() called:' "
                               "record; was it written with CUDNN_LOGLEVEL_DBG=3?)")
