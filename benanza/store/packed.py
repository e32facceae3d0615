"""The shipped form of a performance database: every table's columns as JSON lists, xz-compressed.

Why: an xz-compressed SQLite file of a whole zoo campaign (367 743 results) is 25 MB, since pages
interleave the columns and carry the key index twice; column by column the same data is 7.4 MB,
which fits ``perfdb/``. It is exact: JSON writes each double as its shortest round-trip repr,
so ``unpack(pack(db))`` holds the same rows, value for value (tests/test_packed_db.py).

SQLite (``store.db``) is imported by the functions that read or write it: reading commands name
``PACKED_SUFFIX`` and unpack the shipped file at most once (``store.shipped``).
"""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import sqlite3
from pathlib import Path
from typing import Any

from benanza import SCHEMA_VERSION
from benanza.errors import BenanzaError

FORMAT = "benanza-columns/1"
PACKED_SUFFIX = ".columns.xz"  # the file name of this form, the one perfdb/ ships


def packed_tables() -> tuple[str, ...]:
    """The tables a packed database holds, the schema's version (meta) first."""
    from benanza.store.db import TABLES

    return ("meta", *TABLES)


def pack(db_path: str | Path, out: str | Path, preset: int = 9) -> dict[str, int]:
    """Write ``db_path`` (a benanza SQLite database) as ``out`` (``*.columns.xz``); returns rows per table.

    Rows go in the order they were stored: a job's rows stay together, which compresses 12 % better
    than key order, and one database file always packs to the same bytes.
    """
    from benanza.store.db import LATER_TABLES, open_db, schema_columns, table_names

    out = Path(out)
    if not out.name.endswith(PACKED_SUFFIX):
        raise BenanzaError(f"{out}: a packed database's name ends in {PACKED_SUFFIX}")
    db = open_db(db_path, readonly=True)
    tables: dict[str, Any] = {}
    counts: dict[str, int] = {}
    try:
        have = table_names(db)
        for table in packed_tables():
            if table in LATER_TABLES and table not in have:  # written before the table was added: no rows
                columns = schema_columns(table)
                counts[table] = 0
                tables[table] = {"columns": columns, "values": [[] for _ in columns]}
                continue
            cursor = db.execute(f"SELECT * FROM {table} ORDER BY rowid")
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
            counts[table] = len(rows)
            values = [list(c) for c in zip(*rows, strict=True)] or [[] for _ in columns]
            tables[table] = {"columns": columns, "values": values}
    finally:
        db.close()
    text = json.dumps({"format": FORMAT, "schema_version": SCHEMA_VERSION, "tables": tables},
                      separators=(",", ":"))
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with lzma.open(partial, "wt", preset=preset, encoding="utf-8") as handle:
            handle.write(text)
        partial.replace(out)
    except OSError as exc:
        raise BenanzaError(f"{out}: cannot write the packed database ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return counts


def _read(packed: Path) -> dict[str, Any]:
    try:
        with lzma.open(packed, "rt", encoding="utf-8") as handle:
            doc = json.load(handle)
    except (lzma.LZMAError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenanzaError(f"{packed}: not a packed benanza database ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("tables"), dict):
        raise BenanzaError(f"{packed}: not a packed benanza database (format is not {FORMAT})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise BenanzaError(f"{packed}: database schema version {doc.get('schema_version')}, "
                           f"this benanza reads {SCHEMA_VERSION}")
    return doc


def unpack(packed: str | Path, target: str | Path) -> dict[str, int]:
    """Rebuild the SQLite database of ``packed`` as ``target`` (replaced whole, never half-written);
    returns rows per table."""
    from benanza.store.db import open_db

    packed, target = Path(packed), Path(target)
    doc = _read(packed)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")  # two processes may unpack at once
    counts: dict[str, int] = {}
    tables = packed_tables()
    try:
        db = open_db(partial)
        try:
            db.execute("PRAGMA journal_mode = DELETE")  # one plain file, like any copied database
            with db.conn:
                for table, data in doc["tables"].items():
                    columns, values = data["columns"], data["values"]
                    known = db[table].columns_dict if table in tables else {}
                    unknown = [str(c)[:40] for c in columns if c not in known] if known else [str(table)[:40]]
                    if unknown:
                        raise BenanzaError(f"{packed}: not a packed benanza database of this schema "
                                           f"(unknown table or column {unknown[0]!r})")
                    verb = "INSERT OR REPLACE" if table == "meta" else "INSERT"  # the new file has its own meta
                    db.conn.executemany(f"{verb} INTO {table} ({', '.join(columns)}) "
                                        f"VALUES ({', '.join('?' * len(columns))})", zip(*values, strict=True))
                    counts[table] = len(values[0]) if values else 0
        finally:
            db.close()
        partial.replace(target)
    except sqlite3.Error as exc:
        raise BenanzaError(f"{packed}: cannot unpack into {target} ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise BenanzaError(f"{packed}: not a packed benanza database (bad table data: {exc})") from None
    except OSError as exc:
        raise BenanzaError(f"{target}: cannot write the database ({exc.strerror or exc})") from None
    finally:
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm"), Path(f"{partial}-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return counts
