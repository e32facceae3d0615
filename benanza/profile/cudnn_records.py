"""The generic record layer of the cuDNN API log: records of nested ``name: type=T; val=V;``
fields, read as a stream (``RecordReader``); what the fields mean is ``cudnn_log``'s job.

Format (cuDNN 9): a record starts with ``I! CuDNN (v91900 56) function NAME() called:``
(``W!``/``E!`` for warnings and errors), then ``i!`` lines nested by indentation (4 spaces
a level), then ``i! Time: ...`` and ``i! Process=...; Thread=...; ...``, which ends it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from benanza.errors import BenanzaError
from benanza.profile._io import iter_text

_HEADER = re.compile(r"^([IWE])! CuDNN \(v(\d+)(?: (\d+))?\) function (\w+)\(\) called:\s*$")
_HEADER_MARKS = ("I!", "W!", "E!")  # a record's header line starts with one of these
_BODY_MARKS = ("i!", "w!", "e!")  # ... and each of its field lines with one of these
_HEADER_SIGN = "! CuDNN (v"  # what follows the mark of every header line
_SNIFF_LINES = 200  # non-blank lines read before deciding a file is not a cuDNN log
_TIME_LINE = re.compile(r"[iwe]! *Time: ")
_PROCESS_LINE = re.compile(r"[iwe]! *Process=")
_STATUS_LINE = re.compile(r"[iwe]! *status")  # a line whose field may be a return record's status
_FIRST_BODY_LINE = re.compile(r"\n[iwe]!")
_MEMO = 1 << 14  # distinct header, field and Process lines whose parse is kept (a log has a few thousand)


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

    It holds its lines as logged; what is read from them (its ``text`` and ``time``, ``context``, the
    ``lines`` and the field tree, ``root``) is read on first use: most records of a real log (descriptor
    creation and destruction, ``cudnnBackendGetAttribute`` dumps) are never read, and building every
    tree was most of a parse (CI time, docs/RESULTS.md §16). ``top``, ``value`` and ``is_return`` read
    top-level fields without building the tree.
    """

    severity: str  # "I", "W" or "E"
    version: int
    function: str
    line: int  # 1-based line of the header in the file
    body: str = field(repr=False)  # the lines between its header and its Process line as logged, joined by "\n"
    trailer: str = field(repr=False)  # its Process line from "Process=" on

    def __init__(self, severity: str, version: int, function: str, line: int, body: str, trailer: str) -> None:
        # one update of its dict: a frozen dataclass's own __init__ sets each field through object.__setattr__,
        # a fifth of reading a log's few hundred thousand records
        self.__dict__.update(severity=severity, version=version, function=function, line=line, body=body,
                             trailer=trailer)

    @cached_property
    def _text_time(self) -> tuple[str, str]:
        return _text_and_time(self.body)

    @property
    def text(self) -> str:
        """Its field and continuation lines joined by "\\n" (its blank and Time lines left out)."""
        return self._text_time[0]

    @property
    def time(self) -> str:
        """ISO time as logged (local clock, microseconds): its (last) Time line's; "" without one."""
        return self._text_time[1]

    @cached_property
    def context(self) -> dict[str, str]:
        """Process, Thread, GPU, Handle, StreamId (a dict of its own)."""
        return dict(_context(self.trailer))

    @cached_property
    def lines(self) -> list[str]:
        """Its field and continuation lines as logged (Time and Process lines out)."""
        return self.text.split("\n") if self.text else []

    @cached_property
    def root(self) -> Field:
        """The argument tree (built once, on first use)."""
        return _tree(self.lines)

    @property
    def is_return(self) -> bool:
        """A graph-API call's second record, logged on return, holding only its status."""
        if "root" in self.__dict__:
            return len(self.root.children) == 1 and self.root.children[0].name == "status"
        body = self.body
        if body.startswith(_BODY_MARKS) and _STATUS_LINE.match(body) is None and _TIME_LINE.match(body) is None:
            return False  # its first line is its first direct field, and no status
        children = _direct_children(self.text)
        first = next(children, "")
        return first.startswith("status") and _parse_field(first).name == "status" and next(children, None) is None

    def top(self, name: str) -> Field | None:
        """``root.get(name)`` as its own line gives it (name, type, val), read without building the tree:
        the fields nested under it are left out, and so is its continuation text, unless the tree is built."""
        if "root" in self.__dict__:
            return self.root.get(name)
        for text in _direct_children(self.text):
            if text.startswith(name) and (node := _parse_field(text)).name == name:
                return node
        return None

    def subtree_text(self, name: str) -> str | None:
        """The lines of ``root.find(name)`` and of the lines nested under it, joined, found without building the
        tree: ``tree(text)`` builds that field as its one child. A record's subtree repeats where the record
        does not (an execute's engine, without the addresses beside it): its text can key a memo."""
        text = "\n" + self.text
        for m in _named_line(name).finditer(text):
            start = m.start() + 1
            eol = text.find("\n", start)
            line = text[start:eol] if eol >= 0 else text[start:]
            field_text = line[2:].lstrip(" ")
            if _field_parts(field_text)[0] != name:
                continue
            if eol < 0:
                return line
            level = max(len(line) - 3 - len(field_text), 0) // 4
            after = _nested_less(level).search(text, eol)
            return text[start:after.start() if after is not None else len(text)]
        return None

    def value(self, name: str) -> str | None:
        """``root.get(name).val``: the value of its first direct field called ``name`` (None when there is
        none), read without building the tree."""
        node = self.top(name)
        return node.val if node is not None else None


@lru_cache(maxsize=64)
def _named_line(name: str) -> re.Pattern[str]:
    """A line (after its line end) that may hold the field called ``name``: ``name: ...``, ``name:`` or ``name``."""
    return re.compile(rf"\n[iwe]! *{re.escape(name)}(?=: |:?(?:\n|\Z))")


@lru_cache(maxsize=64)
def _nested_less(level: int) -> re.Pattern[str]:
    """A field line (after its line end) with fewer spaces than the 4 * level + 5 of one nested under this level."""
    return re.compile(rf"\n[iwe]! {{0,{4 * level + 4}}}(?! )")


def tree(text: str) -> Field:
    """The field tree of a record's lines joined (``Record.text``, ``Record.subtree_text``)."""
    return _tree(text.split("\n") if text else [])


def _direct_children(text: str) -> Iterator[str]:
    """The text of each of a record's lines (``text``: joined by "\\n") that ``_tree`` hangs on the root, in
    order, lazily. A regex goes from one to the next over the lines nested under it (a descriptor's dump)."""
    if text.startswith(_BODY_MARKS):
        start = 0
    else:  # a continuation changes a field's raw text only
        m = _FIRST_BODY_LINE.search(text)
        if m is None:
            return
        start = m.start() + 1
    while True:
        end = text.find("\n", start)
        line = text[start:end] if end >= 0 else text[start:]
        field_text = line[2:].lstrip(" ")
        level = max(len(line) - 3 - len(field_text), 0) // 4  # _tree's levels: (indent - 1) // 4
        yield field_text
        if end < 0:
            return
        m = _nested_less(level).search(text, end)  # the next line not nested under this one
        if m is None:
            return
        start = m.start() + 1


def _parse_field(text: str) -> Field:
    """The field of a line's text (after its mark and indentation)."""
    return Field(*_field_parts(text))


@lru_cache(maxsize=_MEMO)
def _field_parts(text: str) -> tuple[str, str | None, str | None, str]:
    """Name, type, val and raw of a field line's text, parsed once per distinct text (a log repeats a few
    thousand: a tree is built of them twice as fast)."""
    # str methods, not a regex: a batch-64 log has about 2 million of these lines (CI time, docs/RESULTS.md §16)
    name, sep, rest = text.partition(": ")
    if not sep:
        return (text[:-1], None, None, "") if text.endswith(":") else (text, None, None, text)
    if not rest.startswith("type="):
        return name, None, None, rest
    semi, colon = rest.find(";", 5), rest.find(":", 5)
    end = semi if colon < 0 or 0 <= semi < colon else colon
    if end < 0 or (end == colon and rest[end + 1:].strip()):  # "type=T:" must end its line
        return name, None, None, rest
    type_ = rest[5:end]
    if end == colon:  # "type=T:" opens a nested descriptor
        return name, type_, None, ""
    tail = rest[end + 1:].lstrip()
    if tail.startswith("val="):
        val = tail[4:]
        return name, type_, val[:-1] if val.endswith(";") else val, rest
    return name, type_, None, rest


def _parse_context(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.rstrip(".").split("; "):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


@lru_cache(maxsize=_MEMO)
def _context(trailer: str) -> dict[str, str]:
    """``_parse_context``, once per distinct Process line: never hand this dict out, only copies of it."""
    return _parse_context(trailer)


@lru_cache(maxsize=_MEMO)
def _header(line: str) -> tuple[str, int, str] | None:
    """Severity, version and function of a header line; None when it is none."""
    m = _HEADER.match(line)
    return (m.group(1), int(m.group(2)), m.group(4)) if m else None


def _text_and_time(body: str) -> tuple[str, str]:
    """The lines of a record's body (between header and Process line) that are neither blank nor a Time line,
    joined, and the time of its last Time line, as ``RecordReader`` read them line by line."""
    last = body.rfind("\n") + 1
    t = _TIME_LINE.match(body, last)
    if t is not None and body.find("Time: ", 0, last) < 0 and (last == 0 or (  # no Time line but the last ...
            body.startswith(_BODY_MARKS) and body.count("\n", 0, last - 1) == body.count("\ni!", 0, last - 1))):
        return body[:max(last - 1, 0)], body[t.end():].split(" ", 1)[0]  # ... and every other line an i! line
    kept: list[str] = []
    time = ""
    for line in body.split("\n"):
        if not line or line.isspace():
            continue
        if "Time: " in line and line.startswith(_BODY_MARKS):
            text = line[2:].lstrip(" ")
            if text.startswith("Time: "):
                time = text[6:].split(" ", 1)[0]
                continue
        kept.append(line)  # a field, or the continuation of a multi-line value (" at: 0 == newResults")
    return "\n".join(kept), time


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
        node = Field(*_field_parts(text))
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

    It reads the text a block of lines at a time (``iter_text``). Between records it takes a whole
    record at once (``_whole``: a few ``str.find`` calls and two slices; a per-line Python loop was most
    of a parse, CI time, docs/RESULTS.md §16); everything before the first record, a record with a line
    inside that may be a header, and one that a block's end cuts go line by line (``_line``). Both give
    the same records.

    ``wanted``, once set, says which of the records taken whole a reader hands over (``Wanted``); the others
    are counted in ``records`` and their versions in ``versions``, but no Record is made of them: most of a
    log is records no reader reads (descriptor creation and destruction, attribute dumps), and making and
    handing over each was half of ``read_cudnn_log`` (CI time, docs/RESULTS.md §16). A reader that sees
    ``records`` grow by more than one between two records knows that records came between them.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.truncated = False
        self.dropped: list[int] = []
        self.records = 0
        self.versions: list[int] = []  # of the complete records, handed over or not, in the order they came
        self.wanted = None

    @property
    def wanted(self) -> Wanted | None:
        """Which records taken whole are handed over: None (every one) or a ``Wanted``."""
        return self._wanted

    @wanted.setter
    def wanted(self, wanted: Wanted | None) -> None:
        self._wanted = wanted
        self._kept: dict[tuple[str, int, str], bool | str] = {}  # header -> hand it over, or the word it must hold

    def __iter__(self) -> Iterator[Record]:
        self._head: tuple[str, int, str, int] | None = None  # severity, version, function, line of the open record
        self._body: list[str] = []  # the lines of the open record after its header
        self._seen = 0  # non-blank lines so far (for the sniff, until the first record)
        self._following = 0  # set by _whole
        yield from self._read()
        if self._head is not None:
            self.truncated = True
        if self.records == 0:
            if self._head is not None or self.dropped:
                raise BenanzaError(f"{self.path}: cuDNN API log holds no complete record (file cut short?)")
            raise BenanzaError(f"{self.path}: not a cuDNN API log (no 'I! CuDNN (v...) function ...() called:' "
                               "record; was it written with CUDNN_LOGLEVEL_DBG=3?)")

    def _read(self) -> Iterator[Record]:
        lineno = 0  # the lines before position ``counted`` of the block
        known = self._known = set(self.versions)
        for block in iter_text(self.path):
            pos = counted = 0
            end = len(block)
            following = 0  # the first header sign after the last record _whole read (-1: none)
            while pos < end:
                if self._head is None and self.records:
                    # Between records: the next line that may be a header (the lines before it are read by nobody).
                    sign = following if following < 0 or following > pos else block.find(_HEADER_SIGN, pos + 1)
                    while sign >= 0 and not (block[sign - 1] in "IWE" and (sign == 1 or block[sign - 2] == "\n")):
                        sign = block.find(_HEADER_SIGN, sign + 1)
                    if sign < 0:
                        break
                    pos = sign - 1
                    whole = self._whole(block, pos)
                    if whole is not None:
                        head, nl, last, process, after = whole
                        self.records += 1
                        if head[1] not in known:
                            self._new_version(head[1])
                        if self._wanted is None or self._hands_over(head, block, nl, last):
                            lineno += block.count("\n", counted, pos)
                            counted = pos
                            yield Record(*head, lineno + 1, block[nl + 1:last - 1], block[process:after - 1])
                        pos, following = after, self._following
                        continue
                following = 0
                nl = block.find("\n", pos)  # every block ends in a line end
                lineno += block.count("\n", counted, pos) + 1
                record = self._line(block[pos:nl], lineno)
                pos = counted = nl + 1
                if record is not None:
                    self.records += 1
                    yield record
                elif self._head is None and self.records == 0 and self._seen >= _SNIFF_LINES:
                    return  # no header in the first lines: not a cuDNN log
            lineno += block.count("\n", counted)

    def _line(self, line: str, lineno: int) -> Record | None:
        """Read one line (``lineno``, 1-based); the record it completes, if it is a Process line."""
        if line and not line.isspace():
            self._seen += 1
            # a header starts "I! " (W!, E!), a body line "i!" (w!, e!): the header regex runs on headers only
            head = _header(line) if line.startswith(_HEADER_MARKS) else None
            if head is not None:
                if self._head is not None:
                    self.dropped.append(self._head[3])
                self._head = (*head, lineno)
                self._body = []
                return None
            if self._head is not None and "Process=" in line and line.startswith(_BODY_MARKS):
                trailer = line[2:].lstrip(" ")
                if trailer.startswith("Process="):
                    head, self._head = self._head, None
                    if head[1] not in self._known:
                        self._new_version(head[1])
                    return Record(*head, "\n".join(self._body), trailer)
        if self._head is not None:
            self._body.append(line)  # blank and Time lines too: Record reads its body as this method read it
        return None

    def _new_version(self, version: int) -> None:
        """A version no complete record had before (``versions``, in the order they came)."""
        self._known.add(version)
        self.versions.append(version)

    def _whole(self, block: str, start: int) -> tuple[tuple[str, int, str], int, int, int, int] | None:
        """The record whose header line starts at ``start``, read at once: (its header, where its header line
        ends, where its Process line starts, where "Process=" is, where the block goes on after it), and the
        first header sign after its header (``_following``, -1 if none: where the next record may start); None
        when it must be read line by line (``_line``) instead: when the header line is none, no Process line
        follows, or a line before it may be a header."""
        nl = block.find("\n", start)
        head = _header(block[start:nl])
        process = block.find("Process=", nl)  # the first Process line is the first line with "Process=" ...
        if head is None or process < 0:
            return None
        last = block.rfind("\n", nl, process) + 1
        usual = process - last == 3 and block.startswith(_BODY_MARKS, last)  # "i! Process="
        if not usual and _PROCESS_LINE.match(block, last) is None:
            return None  # ... unless that is inside a field
        self._following = block.find(_HEADER_SIGN, nl)
        if 0 <= self._following < last:
            return None
        return head, nl, last, process, block.find("\n", process) + 1

    def _hands_over(self, head: tuple[str, int, str], block: str, nl: int, last: int) -> bool:
        """Whether ``wanted`` takes the record of this header whose body is ``block[nl + 1:last - 1]``."""
        kept = self._kept.get(head)
        if kept is None:
            kept = self._kept[head] = self._wanted.of(head[2])  # type: ignore[union-attr]
        return kept if kept.__class__ is bool else block.find(kept, nl + 1, last - 1) >= 0  # type: ignore[arg-type]


@dataclass(frozen=True)
class Wanted:
    """The records a reader of the log reads, by function (any severity): ``functions`` maps each to None (any of
    its records) or a word its record's body must hold; a function ending in one of ``suffixes`` is read too."""

    functions: Mapping[str, str | None]
    suffixes: tuple[str, ...] = ()

    def of(self, function: str) -> bool | str:
        """False: no record of this function is read; True: every one; a word: those whose body holds it."""
        if function in self.functions:
            word = self.functions[function]
            return True if word is None else word
        return function.endswith(self.suffixes) if self.suffixes else False
