"""Job tables (benanza/apis/job_table.py writes them, csrc/benanza/job_table.h reads them): any text round-trips,
and a malformed table is refused in one line naming its file and line, before any job runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import host_tool

from benanza.apis import job_table
from benanza.apis.job_table import ENGINES, KEY, PRECISION, Column, Kind, Vocabulary, choice, ints
from benanza.errors import BenanzaError

MODES = Vocabulary("Mode", ("RELU", "TANH"))
COLUMNS = (KEY, PRECISION, ints("dims", 3), Column("alpha", Kind.REAL32), Column("coef", Kind.REAL),
           Column("bias", Kind.FLAG), choice("mode", MODES), Column("steps", Kind.CHOICES, 1, 4, MODES),
           ints("extra", at_most=2), Column("slopes", Kind.REALS, 0, 3), ENGINES)

# A reader over the harness's job_table.h with the columns above, printing each job as JSON
# (bz::Json quotes what it prints), or the reader's one-line error and exit 2 (as bz::main does).
TOOL = r"""
#include <cstdio>
#include <iterator>

#include "benanza/job_table.h"
#include "benanza/json.h"

const char* const kModes[] = {"RELU", "TANH"};
const bz::Column kColumns[] = {
    {"key", bz::Cell::Text}, {"precision", bz::Cell::Int}, {"dims", bz::Cell::Ints, 3, 3},
    {"alpha", bz::Cell::Real32}, {"coef", bz::Cell::Real}, {"bias", bz::Cell::Flag},
    {"mode", bz::Cell::Choice, 1, 1, kModes, 2}, {"steps", bz::Cell::Choices, 1, 4, kModes, 2},
    {"extra", bz::Cell::Ints, 0, 2}, {"slopes", bz::Cell::Reals, 0, 3}, {"engines", bz::Cell::Texts, 0, 65536}};
struct Dims { int a; long long b; unsigned c; };

int main(int argc, char** argv) {
  if (argc != 3) return 1;
  try {
    bz::read_job_table(argv[1], argv[2], kColumns, std::size(kColumns), [](const bz::JobRow& r) {
      const Dims d = bz::aggregate_of<Dims, 3>(r, 2);
      std::string steps, engines;
      for (long long s : r.choices(7)) steps += kModes[s] + std::string(" ");
      for (const std::string& e : r.texts(10)) engines += e + "|";
      double slopes = 0;
      for (double v : r.reals(9)) slopes = slopes * 10 + v;
      bz::Json j;
      j.add("key", r.text(0)).add("precision", r.index(1, 4)).add("a", d.a).add("b", d.b).add("c", (long long)d.c);
      j.add("alpha", double(r.real32(3))).add("coef", r.real(4)).add("bias", r.flag(5));
      j.add("mode", r.choice_name(6)).add("steps", steps).add("extra", (long long)r.integers(8).size());
      j.add("engines", engines).add("slopes", slopes);
      bz::emit(j);
    });
  } catch (const bz::TableError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
"""

EVIL = 'a"b\\c\nd{e}\t%f é \'; system("id"); //\r\n}}'


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_tool(tmp_path_factory, "job_table_reader", TOOL)


def row(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {"key": "0123abcd", "precision": 1, "dims": [1, 2**40, 3], "alpha": 0.1,
                               "coef": float("inf"), "bias": True, "mode": "TANH", "steps": ["RELU", "TANH"],
                               "extra": [], "slopes": [0.5, -2, 0.25], "engines": ["12,SPLIT_K=3,TILE=-1", "7"]}
    return {**base, **changes}


def read(reader: Path, path: Path, api: str = "api") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(reader), str(path), api], capture_output=True, text=True, timeout=60)


def test_any_key_round_trips_through_the_table(reader: Path, tmp_path: Path) -> None:
    rows = [row(key=EVIL), row(key=""), row(key="fusion:conv_relu:0a-1b", engines=[], extra=[5, -6], slopes=[])]
    text = job_table.render("api", COLUMNS, rows, "benanza generate x\n// evil \\")
    assert EVIL not in text and '"' not in text and "\\" not in text.split("\n", 1)[1]
    assert text.count("\n") == 3 + len(rows)  # comment, header, columns, one line per job: no newline leaks
    (tmp_path / "t.jobs").write_text(text)
    done = read(reader, tmp_path / "t.jobs")
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert [g["key"] for g in got] == [EVIL, "", "fusion:conv_relu:0a-1b"]
    assert got[0] == {"key": EVIL, "precision": 1, "a": 1, "b": 2**40, "c": 3, "alpha": 0.100000001,
                      "coef": None, "bias": True, "mode": "TANH", "steps": "RELU TANH ", "extra": 0,
                      "engines": "12,SPLIT_K=3,TILE=-1|7|", "slopes": (0.5 * 10 - 2) * 10 + 0.25}
    assert got[2]["extra"] == 2 and got[2]["engines"] == "" and got[2]["slopes"] == 0
    api, columns, cells = job_table.read(text)  # the Python side reads what it wrote
    assert api == "api" and columns == [c.name for c in COLUMNS]
    assert [job_table.decode_text(c[0]) for c in cells] == [EVIL, "", "fusion:conv_relu:0a-1b"]


def test_the_writer_refuses_what_a_column_cannot_hold() -> None:
    for bad, why in ((row(precision=1.5), "not a 64-bit integer"), (row(dims=[1, 2]), "2 items"),
                     (row(alpha=float("inf")), "cannot go into a job table"), (row(coef=float("nan")), "cannot"),
                     (row(bias=2), "not a flag"), (row(mode="SIGMOID"), "not a Mode"), (row(steps=[]), "0 items"),
                     (row(key=b"bytes"), "not text"), (row(engines=[""]), "non-empty texts"),
                     (row(slopes=[1.0, float("nan")]), "cannot go into"), (row(slopes=[1, 2, 3, 4]), "4 items")):
        with pytest.raises(BenanzaError, match=why):
            job_table.render("api", COLUMNS, [bad])
    with pytest.raises(BenanzaError, match="no such field"):
        job_table.render("api", COLUMNS, [{k: v for k, v in row().items() if k != "mode"}])


def _good() -> str:
    return job_table.render("api", COLUMNS, [row(), row(key="second")], "cmd")


@pytest.mark.parametrize("name, edit, line, why", [
    ("cells", lambda t: t.replace("\t12,SPLIT_K=3,TILE=-1 7\n", "\n", 1), 4, "10 cells, expected 11"),
    ("int", lambda t: t.replace("0123abcd\t1\t", "0123abcd\t1x\t", 1), 4, "column 'precision': expected an integer"),
    ("range", lambda t: t.replace("0123abcd\t1\t", "0123abcd\t7\t", 1), 4, "column 'precision': 7 is not below 4"),
    ("narrow", lambda t: t.replace("\t1 1099511627776 3\t", "\t4294967296 1 3\t", 1), 4,
     "column 'dims': 4294967296 does not fit"),
    ("quote", lambda t: t.replace("0123abcd", 'a"b', 1), 4, "column 'key': not percent-encoded text"),
    ("escape", lambda t: t.replace("0123abcd", "ab%4", 1), 4, "column 'key': not percent-encoded"),
    ("choice", lambda t: t.replace("\tTANH\t", "\tSIGMOID\t", 1), 4, "column 'mode': unknown name 'SIGMOID'"),
    ("count", lambda t: t.replace("\t1 1099511627776 3\t", "\t1 2\t", 1), 4, "column 'dims': expected 3 items, got 2"),
    ("spaces", lambda t: t.replace("\t1 1099511627776 3\t", "\t1  2 3\t", 1), 4, "single spaces"),
    ("nan", lambda t: t.replace("\tinf\t", "\tnan\t", 1), 4, "column 'coef': expected a number"),
    ("reals", lambda t: t.replace("\t0.5 -2.0 0.25\t", "\t0.5 x 0.25\t", 1), 4, "column 'slopes': expected a number"),
    ("flag", lambda t: t.replace("\tinf\t1\t", "\tinf\t2\t", 1), 4, "column 'bias': expected 0 or 1"),
    ("float", lambda t: t.replace("\t0.1\t", "\t1e39\t", 1), 4, "column 'alpha': expected a finite number"),
    ("control", lambda t: t.replace("0123abcd", "01\r23", 1), 4, "a control character"),
    ("empty", lambda t: t.replace("\n0123abcd", "\n\n0123abcd", 1), 4, "an empty line"),
    ("columns", lambda t: t.replace("\tengines\n", "\tengine\n", 1), 3, "columns 'key precision"),
    ("format", lambda t: t.replace("benanza-job-table\t1\t", "benanza-job-table\t2\t", 1), 2, "format 2"),
    ("api", lambda t: t.replace("\tapi\t2", "\tother\t2", 1), 2, "a job table of other, this executable measures api"),
    ("magic", lambda t: t.replace("benanza-job-table", "something-else", 1), 2, "not a benanza job table"),
    ("more", lambda t: t.replace("\tapi\t2", "\tapi\t1", 1), 5, "more jobs than the header's 1"),
])
def test_a_malformed_table_is_refused_in_one_line_naming_file_and_line(
        reader: Path, tmp_path: Path, name: str, edit: object, line: int, why: str) -> None:
    text = _good()
    bad = edit(text)  # type: ignore[operator]
    assert bad != text, name
    path = tmp_path / f"{name}.jobs"
    path.write_text(bad)
    done = read(reader, path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {path}:{line}: "), done.stderr
    assert why in done.stderr, done.stderr


def test_a_cut_short_or_missing_table_is_refused(reader: Path, tmp_path: Path) -> None:
    text = _good()
    for name, bad, why in (("no_newline", text[:-1], "the job table does not end in a newline"),
                           ("fewer", text[:text.index("second")], "1 jobs, the header declares 2")):
        path = tmp_path / f"{name}.jobs"
        path.write_text(bad)
        done = read(reader, path)
        assert done.returncode == 2 and done.stderr == f"error: {path}: {why} (cut short?)\n", done.stderr
    done = read(reader, tmp_path / "absent.jobs")
    assert done.returncode == 2 and f"{tmp_path / 'absent.jobs'}: cannot read the job table" in done.stderr
