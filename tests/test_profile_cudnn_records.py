"""RecordReader takes a whole record at once from a block of text: it must yield exactly the records,
and raise exactly the errors, of its earlier line-by-line loop (kept here as the reference), on shipped
logs and on the edge cases that taking a record whole could break: a record cut by a block's end, a
blank, header-like, Time or "Process=" line inside a record, CR line ends, a log cut short."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest

from benanza.errors import BenanzaError
from benanza.profile import _io
from benanza.profile.cudnn_records import (
    _BODY_MARKS,
    _HEADER,
    _HEADER_MARKS,
    _SNIFF_LINES,
    Field,
    RecordReader,
    Wanted,
    _field_parts,
    _parse_context,
)
from benanza.profile.cudnn_records import tree as subtree

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"


def reference_tree(lines: list[str]) -> Field:
    """The field tree as it was built before, one ``_parse_field`` per line, no memo."""
    root = Field(name="")
    stack: list[tuple[int, Field]] = []
    for line in lines:
        if line[1:2] != "!" or line[0] not in "iwe":
            target = stack[-1][1] if stack else root
            target.raw += "\n" + line
            continue
        text = line[2:].lstrip(" ")
        level = max(len(line) - 3 - len(text), 0) // 4
        node = Field(*_field_parts.__wrapped__(text))  # type: ignore[attr-defined]
        while stack and stack[-1][0] >= level:
            stack.pop()
        (stack[-1][1] if stack else root).children.append(node)
        stack.append((level, node))
    return root


def reference_records(path: Path) -> Iterator[tuple]:
    """The reference: RecordReader as it was, one line at a time; ends with (truncated, dropped, records)."""
    head = None
    lines: list[str] = []
    time = ""
    seen = records = 0
    dropped: list[int] = []
    for lineno, line in enumerate(_io.iter_lines(path), start=1):
        if not line or line.isspace():
            continue
        seen += 1
        m = _HEADER.match(line) if line.startswith(_HEADER_MARKS) else None
        if m:
            if head is not None:
                dropped.append(head[3])
            head = (m.group(1), int(m.group(2)), m.group(4), lineno)
            lines, time = [], ""
            continue
        if head is None:
            if records == 0 and seen >= _SNIFF_LINES:
                break
            continue
        if ("Time: " in line or "Process=" in line) and line.startswith(_BODY_MARKS):
            text = line[2:].lstrip(" ")
            if text.startswith("Time: "):
                time = text[6:].split(" ", 1)[0]
                continue
            if text.startswith("Process="):
                yield (*head, lines, time, _parse_context(text))
                records += 1
                head = None
                continue
        lines.append(line)
    if records == 0:
        raise BenanzaError("cut short" if head is not None or dropped else "not a cuDNN API log")
    yield head is not None, dropped, records


def tree(node: Field) -> tuple:
    return node.name, node.type, node.val, node.raw, tuple(tree(c) for c in node.children)


def outcome(records: Iterator[tuple]) -> tuple[list[tuple], str | None]:
    got: list[tuple] = []
    try:
        got.extend(records)
    except BenanzaError as exc:
        return got, "cut short" if "cut short" in str(exc) else "not a cuDNN API log" if "not a cuDNN" in str(exc) \
            else str(exc)
    return got, None


def new_records(path: Path) -> Iterator[tuple]:
    reader = RecordReader(path)
    for r in reader:
        yield r.severity, r.version, r.function, r.line, r.lines, r.time, r.context
        # what a record reads without its tree (first) must be what its tree says
        root = reference_tree(r.lines)
        assert r.is_return == (len(root.children) == 1 and root.children[0].name == "status"), r.line
        for name in {c.name for c in root.children} | {"status", "attributeName", "nothing"}:
            first = root.get(name)
            assert r.value(name) == (first.val if first else None), (r.line, name)
            top = r.top(name)
            assert (top.name, top.type, top.val) == (first.name, first.type, first.val) if first else top is None
        for name in ("engine", "opGraph", "deviceProp", "xDesc", "status", "nothing"):
            first, text = root.find(name), r.subtree_text(name)
            assert (tree(subtree(text).children[0]) if text is not None else None) == (tree(first) if first else None)
        assert "root" not in r.__dict__ and tree(r.root) == tree(root), r.line
    yield reader.truncated, reader.dropped, reader.records


def same(path: Path) -> tuple[list[tuple], str | None]:
    new = outcome(new_records(path))
    assert new == outcome(reference_records(path)), path
    return new


BLOCKS = {"lines": (7, 1), "8KiB": (_io._CHUNK, 1), "1MiB": (_io._CHUNK, _io._BLOCK)}


@pytest.fixture(params=sorted(BLOCKS))
def block(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Blocks of about a line each (reads of 7 bytes), of one 8 KiB read each, and as read: the first two
    cut every record, or many, by a block's end."""
    chunk, size = BLOCKS[request.param]
    monkeypatch.setattr(_io, "_CHUNK", chunk)
    monkeypatch.setattr(_io, "_BLOCK", size)
    return request.param


@pytest.mark.parametrize("log", ["torch2.11_conv3x3_cudnn_api.log.gz", "ort1.31_zfnet512_cudnn_api.log.gz"])
def test_a_shipped_log_reads_the_same(log: str, block: str) -> None:
    if block == "lines":
        pytest.skip("reads of 7 bytes are for the small cases below")
    records, error = same(SAMPLES / log)
    assert error is None and len(records) > 100


HEAD = "I! CuDNN (v91900 56) function cudnnBackendGetAttribute() called:"
FIELDS = ["i!     descriptor: type=CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:",
          "i!         mode: type=int; val=1;",
          "i!     attributeName: type=cudnnBackendAttributeName_t; val=CUDNN_ATTR_ENGINEHEUR_RESULTS (202);"]
TIME = "i! Time: 2026-11-23T14:46:28.983288 (0d+0h+0m+0s since start)"
PROCESS = "i! Process=1260; Thread=1261; GPU=NULL; Handle=NULL; StreamId=NULL."
RETURN = [HEAD, "i!     status: type=cudnnStatus_t; val=CUDNN_STATUS_SUCCESS (0);", TIME, PROCESS]


def record(*body: str, head: str = HEAD, time: str = TIME, process: str = PROCESS) -> list[str]:
    return [head, *body, time, process, "", ""]


# Each case: the lines of a log; a plain record before and after each, so that the case is read between records.
EDGES: dict[str, list[str]] = {
    "a plain record": record(*FIELDS),
    "no field line": record(),
    "no Time line": [HEAD, *FIELDS, PROCESS],
    "only a Time line": [HEAD, TIME, PROCESS],
    "a blank line inside": record(FIELDS[0], "", FIELDS[1]),
    "a line of spaces inside": record(FIELDS[0], "   ", FIELDS[1]),
    "a line of other white space inside": record(FIELDS[0], "\x0c\u00a0\u2003", FIELDS[1]),
    "a blank line before the Time line": record(*FIELDS, ""),
    "a blank line before the Process line": [HEAD, *FIELDS, TIME, "", PROCESS],
    "a Time line in the middle": record(FIELDS[0], TIME.replace("28.98", "11.11"), FIELDS[1]),
    "two Time lines at the end": record(*FIELDS, TIME.replace("28.98", "11.11")),
    "a Time line indented": record(*FIELDS, time="i!      Time: 2026-11-23T00:00:00.000001 (since)"),
    "a Time line without a space after its time": record(*FIELDS, time="i! Time: 2026-11-23T00:00:00.000001"),
    "a field holding 'Time: '": record("i!     note: type=string; val=Time: 12;", *FIELDS),
    "a field holding 'Process='": record("i!     note: type=string; val=Process=12;", *FIELDS),
    "a continuation holding 'Process='": record(FIELDS[0], " at: Process=12", *FIELDS[1:]),
    "a continuation line": record(FIELDS[0], " at: 0 == newResults", *FIELDS[1:]),
    "a Process line indented": record(*FIELDS, process="i!     Process=1; Thread=2; GPU=NULL."),
    "a Process line of another mark": record(*FIELDS, process="e! Process=1; Thread=3."),
    "a warning record": record("w!     Info: Traceback contains 1 message(s)", "w!         Warning: X",
                               head=HEAD.replace("I!", "W!"), time=TIME.replace("i!", "w!"),
                               process=PROCESS.replace("i!", "w!")),
    "a header line inside (the record is cut short)": [HEAD, FIELDS[0], *record(*FIELDS)],
    "a header-like line inside": record(FIELDS[0], "I! CuDNN (v91900 56) function broken( called:", FIELDS[1]),
    "a header sign inside a field": record("i!     note: type=string; val=I! CuDNN (v1) x;", *FIELDS),
    "a header with white space after it": record(*FIELDS, head=HEAD + " \t"),
    "a header of no record": ["I! CuDNN (v91900) something else", "i!     x: type=int; val=1;", "", *RETURN],
    "a header sign at a line's start": ["! CuDNN (v91900 56) function f() called:", *RETURN],
    "the sign after another mark": ["X! CuDNN (v91900 56) function f() called:", *RETURN],
    "an engine in an engine": record("i!     engine: type=E:", "i!         engine: type=F:",
                                     "i!             knob: type=int; val=1;", " continued",
                                     "i!         after: type=int;", "i! engine: type=G;", "i!     under: type=int;"),
    "a field nested back out": record("i!             deep: type=int; val=1;", "i!     status: type=int; val=2;",
                                      "i! top: type=int; val=3;", "i!         under: type=int; val=4;",
                                      "i!     status: type=int; val=5;"),
    "a return record with a blank line first": [RETURN[0], "", *RETURN[1:]],
    "a return record with its Time line first": [RETURN[0], RETURN[2], RETURN[1], RETURN[3]],
    "a return record with a continuation first": [RETURN[0], " at: 1", *RETURN[1:]],
    "lines between records": ["garbage", "i! Process=7; Thread=8.", "i! Time: x", *RETURN],
}
BEFORE = record(*FIELDS[:2], head=HEAD.replace("GetAttribute", "SetAttribute"))
AFTER = RETURN


def write(path: Path, lines: list[str], end: str = "\n", last_end: bool = True) -> Path:
    text = end.join(lines) + (end if last_end else "")
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("case", sorted(EDGES))
def test_an_edge_case_reads_the_same(tmp_path: Path, case: str, block: str) -> None:
    records, error = same(write(tmp_path / "edge.log", [*BEFORE, *EDGES[case], *AFTER]))
    assert error is None and len(records) >= 3


@pytest.mark.parametrize("end", ["\r\n", "\r"], ids=["CRLF", "CR"])
def test_other_line_ends_read_the_same(tmp_path: Path, end: str, block: str) -> None:
    lines = [line for case in ("a plain record", "a blank line inside", "a Time line in the middle")
             for line in EDGES[case]]
    records, error = same(write(tmp_path / "crlf.log", [*BEFORE, *lines, *AFTER], end=end))
    assert error is None and [r[4] for r in records[:-1]] == [r[4] for r in same(
        write(tmp_path / "lf.log", [*BEFORE, *lines, *AFTER]))[0][:-1]]


@pytest.mark.parametrize("cut", ["inside the header", "inside a field", "before the Process line",
                                 "inside the Process line"])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_log_cut_short_reads_the_same(tmp_path: Path, cut: str, suffix: str, block: str) -> None:
    lines = [*BEFORE, *AFTER, *record(*FIELDS)]
    text = "\n".join(lines)
    at = {"inside the header": text.rindex("function") + 3, "inside a field": text.rindex("attributeName") + 5,
          "before the Process line": text.rindex("\ni! Process="),
          "inside the Process line": text.rindex("Thread=") + 3}[cut]
    path = tmp_path / f"cut.log{suffix}"
    data = text[:at].encode()
    path.write_bytes(gzip.compress(data)[:-9] if suffix else data)  # a gzip stream cut short too
    records, error = same(path)
    assert error is None and len(records) >= 2
    if not suffix:  # truncated: a header was read, and no Process line (a last line needs no line end)
        assert records[-1][0] is (cut in ("inside a field", "before the Process line"))


def test_bytes_that_are_no_utf8_read_the_same(tmp_path: Path, block: str) -> None:
    path = tmp_path / "bytes.log"
    body = "\n".join([*BEFORE, *record(*FIELDS), *AFTER]).encode()
    path.write_bytes(body.replace(b"ENGINEHEUR_DESCRIPTOR", b"ENGINE\xff\xfeHEUR") + b"\n\xe2\x82")
    assert same(path)[1] is None


def test_no_record_in_the_first_lines_is_no_cudnn_log(tmp_path: Path, block: str) -> None:
    assert same(write(tmp_path / "late.log", ["noise"] * (_SNIFF_LINES - 1) + RETURN))[1] is None
    assert same(write(tmp_path / "none.log", ["noise"] * _SNIFF_LINES + RETURN))[1] == "not a cuDNN API log"
    assert same(write(tmp_path / "cut.log", ["", *BEFORE[:3]]))[1] == "cut short"
    assert same(write(tmp_path / "empty.log", []))[1] == "not a cuDNN API log"


# What read_cudnn_log reads of a log, roughly: executes, and attribute records that hold one word.
SOME = Wanted({"cudnnBackendExecute": None, "cudnnBackendGetAttribute": "ENGINEHEUR_RESULTS"}, ("Internal",))


def taken(wanted: Wanted, r) -> bool:
    word = wanted.of(r.function)
    return word is True or (isinstance(word, str) and word in r.body)


def with_and_without(path: Path, wanted: Wanted) -> tuple[list, list, tuple, tuple]:
    """The records of a reader that hands over every record and of one that has ``wanted`` (each as what a
    record reads), and what each counted (truncated, dropped, records, versions)."""
    every, some = RecordReader(path), RecordReader(path)
    some.wanted = wanted
    read = [(r.severity, r.version, r.function, r.line, r.body, r.trailer, taken(wanted, r)) for r in every]
    kept = [(r.severity, r.version, r.function, r.line, r.body, r.trailer, taken(wanted, r)) for r in some]
    return read, kept, (every.truncated, every.dropped, every.records, every.versions), \
        (some.truncated, some.dropped, some.records, some.versions)


def check_wanted(path: Path, wanted: Wanted) -> tuple[list, list]:
    """A reader with ``wanted`` hands over every record it takes, in order, each as the reader without it does, and
    counts what that one counts; it may hand over others too (those read line by line), never make one up."""
    read, kept, counted, counted_too = with_and_without(path, wanted)
    assert counted_too == counted
    assert [r for r in read if r[-1]] == [r for r in kept if r[-1]]
    rest = iter(read)
    assert all(any(r == other for other in rest) for r in kept)  # kept is read, less some records, in order
    return read, kept


@pytest.mark.parametrize("log", ["torch2.11_conv3x3_cudnn_api.log.gz", "ort1.31_zfnet512_cudnn_api.log.gz"])
def test_a_reader_hands_over_the_wanted_records_of_a_shipped_log(log: str, block: str) -> None:
    if block == "lines":
        pytest.skip("reads of 7 bytes are for the small cases below")
    read, kept = check_wanted(SAMPLES / log, SOME)
    taken_ = sum(r[-1] for r in read)
    assert 0 < taken_ <= len(kept) < len(read) // 4  # the rest are not made (a few read line by line are)


@pytest.mark.parametrize("case", sorted(EDGES))
def test_a_reader_hands_over_the_wanted_records_of_an_edge_case(tmp_path: Path, case: str, block: str) -> None:
    for wanted in (SOME, Wanted({}), Wanted({}, ("",))):
        check_wanted(write(tmp_path / "edge.log", [*BEFORE, *EDGES[case], *AFTER, *BEFORE, *AFTER]), wanted)


def test_a_skipped_record_of_another_version_is_counted_in_its_place(tmp_path: Path, block: str) -> None:
    other = [line.replace("(v91900 56)", "(v90100)") for line in BEFORE]
    path = write(tmp_path / "versions.log", [*BEFORE, *other, *AFTER, *other])
    read, kept = check_wanted(path, SOME)  # the versions counted are the same too
    assert [r[1] for r in read] == [91900, 90100, 91900, 90100]
    if block != "lines":  # the first record is read line by line, the others taken whole: none of them wanted
        assert [r[1] for r in kept] == [91900]
        reader = RecordReader(path)
        reader.wanted = SOME
        assert len(list(reader)) == 1 and reader.versions == [91900, 90100]


def test_a_word_counts_in_the_body_only(tmp_path: Path, block: str) -> None:
    """The word a record must hold is looked for between its header line and its Process line: the last
    characters before the Process line count, the Process line and the header do not."""
    ends = record(FIELDS[0], time="i! Time: x ENGINEHEUR_RESULTS")
    after = record(FIELDS[0], process=PROCESS + " ENGINEHEUR_RESULTS")
    read, kept = check_wanted(write(tmp_path / "word.log", [*BEFORE, *ends, *after, *AFTER]), SOME)
    assert [r[-1] for r in read] == [False, True, False, False]
    assert [r[3] for r in kept if r[-1]] == [read[1][3]]
