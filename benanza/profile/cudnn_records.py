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
from pathlib import Path

from benanza.errors import BenanzaError
from benanza.profile._io import iter_lines

_HEADER = re.compile(r"^([IWE])! CuDNN \(v(\d+)(?: (\d+))?\) function (\w+)\(\) called:\s*$")
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
    """One complete log record: header, argument tree and the Time/Process trailer."""

    severity: str  # "I", "W" or "E"
    version: int
    function: str
    line: int  # 1-based line of the header in the file
    root: Field
    time: str  # ISO time as logged (local clock, microseconds)
    context: dict[str, str]  # Process, Thread, GPU, Handle, StreamId

    @property
    def is_return(self) -> bool:
        """A graph-API call's second record, logged on return, holding only its status."""
        return len(self.root.children) == 1 and self.root.children[0].name == "status"


def _parse_field(text: str) -> Field:
    # str methods, not a regex: a batch-64 log has about 2 million of these lines (CI time, docs/RESULTS.md §CI)
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
        head: tuple[str, int, str, int] | None = None  # severity, version, function, line
        root = Field(name="")
        stack: list[tuple[int, Field]] = []
        time = ""
        seen_lines = 0
        for lineno, line in enumerate(iter_lines(self.path), start=1):
            if not line.strip():
                continue
            seen_lines += 1
            # a header starts "I! " (W!, E!), a body line "i!" (w!, e!): the header regex runs on headers only
            m = _HEADER.match(line) if line[1:2] == "!" and line[0] in "IWE" else None
            if m:
                if head is not None:
                    self.dropped.append(head[3])
                head = (m.group(1), int(m.group(2)), m.group(4), lineno)
                root, stack, time = Field(name=""), [], ""
                continue
            if head is None:
                if self.records == 0 and seen_lines >= _SNIFF_LINES:
                    break
                continue
            if line[1:2] != "!" or line[0] not in "iwe":  # continuation of a multi-line value (" at: 0 == newResults")
                target = stack[-1][1] if stack else root
                target.raw += "\n" + line
                continue
            text = line[2:].lstrip(" ")
            indent = len(line) - 2 - len(text)
            if text.startswith("Time: "):
                time = text[6:].split(" ", 1)[0]
                continue
            if text.startswith("Process="):
                yield Record(head[0], head[1], head[2], head[3], root, time, _parse_context(text))
                self.records += 1
                head = None
                continue
            level = max(indent - 1, 0) // 4
            node = _parse_field(text)
            while stack and stack[-1][0] >= level:
                stack.pop()
            (stack[-1][1] if stack else root).children.append(node)
            stack.append((level, node))
        if head is not None:
            self.truncated = True
        if self.records == 0:
            if head is not None or self.dropped:
                raise BenanzaError(f"{self.path}: cuDNN API log holds no complete record (file cut short?)")
            raise BenanzaError(f"{self.path}: not a cuDNN API log (no 'I! CuDNN (v...) function ...() called:' "
                               "record; was it written with CUDNN_LOGLEVEL_DBG=3?)")
