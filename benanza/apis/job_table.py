"""Job tables: an executable's jobs as a data file it reads at run time (csrc/benanza/job_table.h).

A generated source used to compile its jobs in, so two projects with different layers had
different sources and missed the build cache (issue 32, "build once"). Now the source depends
only on its template, and ``benanza generate`` writes each executable's jobs beside it as
``src/bench_<api>.jobs``; the build puts a copy beside the executable, where it looks by default.

Each API's columns are plain data (``ApiDef.columns``): a name (the builder's row field), a
``Kind`` and, for enum spellings, a ``Vocabulary``. The same columns are rendered into the
template (the C++ reader checks the table's column line against them, and a choice's names map
to the enum values compiled in), so a table and an executable from different versions are
refused in one line instead of misread. Text is percent-encoded (every byte outside
``[A-Za-z0-9_.:+=,*/-]``), so no layer key or name can break a line or reach C++ as code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from benanza.errors import BenanzaError

MAGIC = "benanza-job-table"
FORMAT = 1  # csrc/benanza/job_table.h kTableFormat
SUFFIX = ".jobs"
_PLAIN = re.compile(r"[A-Za-z0-9_.:+=,*/-]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT64 = (-(2**63), 2**63 - 1)


class Kind(StrEnum):
    """What a column holds (csrc/benanza/job_table.h ``bz::Cell``, same order)."""

    TEXT = "Text"  # percent-encoded bytes
    INT = "Int"
    REAL = "Real"  # a double: decimal, inf or -inf
    REAL32 = "Real32"  # a float, rounded once from the decimal as a C++ literal 1.5f is
    FLAG = "Flag"  # 0 or 1
    INTS = "Ints"  # space-separated integers
    CHOICE = "Choice"  # one name of the column's vocabulary
    CHOICES = "Choices"  # space-separated names of it
    TEXTS = "Texts"  # space-separated percent-encoded texts
    REALS = "Reals"  # space-separated doubles (decimal, inf or -inf)


@dataclass(frozen=True)
class Vocabulary:
    """The names a choice column may hold and the C++ enum they spell: ``{scope}{name}`` is the value."""

    ctype: str  # e.g. cudnnActivationMode_t
    names: tuple[str, ...]
    scope: str = ""  # e.g. fe::PointwiseMode_t:: for scoped enums


@dataclass(frozen=True)
class Column:
    """One column of an API's job table: its row field, what it holds and, for lists, how many items."""

    name: str
    kind: Kind
    min_count: int = 1
    max_count: int = 1
    vocabulary: Vocabulary | None = None

    def context(self) -> dict[str, Any]:
        """The plain dict a template renders its column table and enum values from."""
        vocab = self.vocabulary
        return {"name": self.name, "kind": self.kind.value, "min_count": self.min_count, "max_count": self.max_count,
                "ctype": vocab.ctype if vocab else "", "words": list(vocab.names) if vocab else [],
                "enum_values": [f"{vocab.scope}{n}" for n in vocab.names] if vocab else []}


def ints(name: str, count: int | None = None, at_most: int | None = None, at_least: int = 0) -> Column:
    """A list of integers: exactly ``count``, or ``at_least`` to ``at_most``."""
    return Column(name, Kind.INTS, count if count is not None else at_least,
                  count if count is not None else at_most or 0)


def choice(name: str, vocabulary: Vocabulary) -> Column:
    return Column(name, Kind.CHOICE, vocabulary=vocabulary)


# Every table starts with these: the layer or fusion key, the index into the template's precisions.
KEY = Column("key", Kind.TEXT)
PRECISION = Column("precision", Kind.INT)
FUSION = Column("fusion", Kind.TEXT)
# Graph-API jobs: the engine configs the job names (none: every config the heuristics offer),
# each "id" or "id,KNOB=value,..." (csrc/benanza/cudnn_graph.h named_configs).
ENGINES = Column("engines", Kind.TEXTS, 0, 1 << 16)


def encode_text(text: str) -> str:
    """Percent-encode every byte outside the plain set (UTF-8), as the C++ reader decodes it."""
    return "".join(ch if _PLAIN.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
                   for ch in text)


def _number(value: Any, where: str, finite: bool) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenanzaError(f"{where}: {value!r} is not a number")
    v = float(value)
    if math.isnan(v) or (finite and math.isinf(v)):
        raise BenanzaError(f"{where}: {value!r} cannot go into a job table")
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def _integer(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not _INT64[0] <= value <= _INT64[1]:
        raise BenanzaError(f"{where}: {value!r} is not a 64-bit integer")
    return str(value)


def _items(value: Any, column: Column, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise BenanzaError(f"{where}: {value!r} is not a list")
    if not column.min_count <= len(value) <= column.max_count:
        raise BenanzaError(f"{where}: {len(value)} items, the column takes {column.min_count} to {column.max_count}")
    return list(value)


def _word(value: Any, column: Column, where: str) -> str:
    assert column.vocabulary is not None
    if value not in column.vocabulary.names:
        raise BenanzaError(f"{where}: {value!r} is not a {column.vocabulary.ctype} the template knows")
    return str(value)


def cell(value: Any, column: Column, where: str) -> str:
    """One cell's text; refuses what the column cannot hold (codegen's check of the builder's row)."""
    kind = column.kind
    if kind is Kind.TEXT:
        if not isinstance(value, str):
            raise BenanzaError(f"{where}: {value!r} is not text")
        return encode_text(value)
    if kind is Kind.INT:
        return _integer(value, where)
    if kind in (Kind.REAL, Kind.REAL32):
        return _number(value, where, finite=kind is Kind.REAL32)
    if kind is Kind.FLAG:
        if value not in (True, False):  # 0 and 1 compare equal to False and True
            raise BenanzaError(f"{where}: {value!r} is not a flag")
        return "1" if value else "0"
    if kind is Kind.INTS:
        return " ".join(_integer(v, where) for v in _items(value, column, where))
    if kind is Kind.CHOICE:
        return _word(value, column, where)
    if kind is Kind.CHOICES:
        return " ".join(_word(v, column, where) for v in _items(value, column, where))
    if kind is Kind.REALS:
        return " ".join(_number(v, where, finite=False) for v in _items(value, column, where))
    texts = _items(value, column, where)
    if not all(isinstance(t, str) and t for t in texts):
        raise BenanzaError(f"{where}: {value!r} is not a list of non-empty texts")
    return " ".join(encode_text(t) for t in texts)


def check_columns(columns: Sequence[Column], where: str) -> None:
    """Column names are C++ identifiers (the template names them c_<name>), each once."""
    names = [c.name for c in columns]
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad or len(set(names)) != len(names):
        raise BenanzaError(f"{where}: bad or repeated column names {bad or names}")


def render(api: str, columns: Sequence[Column], rows: Iterable[Mapping[str, Any]], comment: str = "") -> str:
    """The job table of one executable: header, column line, one line per row (in job order)."""
    check_columns(columns, api)
    lines = []
    for n, row in enumerate(rows):
        cells = []
        for column in columns:
            where = f"{api} job {n}, column {column.name!r}"
            if column.name not in row:
                raise BenanzaError(f"{where}: the job's row has no such field")
            cells.append(cell(row[column.name], column, where))
        lines.append("\t".join(cells))
    head = [f"# {comment_line(comment)}"] if comment else []
    head.append("\t".join((MAGIC, str(FORMAT), encode_text(api), str(len(lines)))))
    head.append("\t".join(c.name for c in columns))
    return "\n".join([*head, *lines]) + "\n"


def comment_line(text: Any) -> str:
    """Text safe on one comment line: printable ASCII without backslashes (no line splice in C++);
    the tables' first line and the generated sources' (codegen.c_comment) alike."""
    return re.sub(r"[^ -\[\]-~]", "?", str(text))


def decode_text(cell: str) -> str:
    """Inverse of :func:`encode_text` (tests and tools; the executables decode in C++)."""
    out = bytearray()
    i = 0
    while i < len(cell):
        if cell[i] == "%":
            out += bytes.fromhex(cell[i + 1:i + 3])
            i += 3
        else:
            out += cell[i].encode("ascii")
            i += 1
    return out.decode("utf-8")


def read(text: str) -> tuple[str, list[str], list[list[str]]]:
    """(api, column names, each job's raw cells) of a job table (tests and tools; no checks of the cells)."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    magic, _fmt, api, _count = lines[0].split("\t")
    if magic != MAGIC:
        raise ValueError(f"not a job table: {lines[0][:40]!r}")
    return decode_text(api), lines[1].split("\t"), [line.split("\t") for line in lines[2:]]
