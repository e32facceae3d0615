"""Does a database measured today agree with a reference one (by default the shipped H100 database)?

    python bench/db_agreement.py NEW.db [--reference REF.db|.columns.xz] [--json FILE]

The analyzer's bound takes, per layer, the fastest ok median among a group's algorithms. So a change of
the harness (issue 32's speed work) keeps the validation cells of docs/RESULTS.md §1–§3 only if a campaign
measured with it reproduces those minima. Over the rows both databases hold (same layer, API, algorithm,
dtype, fusion, L2 state and layout) this prints:
- how many statuses differ;
- per group (the key less the algorithm), the fastest ok median new / reference: its quantiles and the
  share within 5 %;
- what only the new database holds, per API, layout and dtype.
Each database must hold one system (a GPU): the comparison is of one machine's measurements.
No GPU needed. Results: docs/RESULTS.md §7.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.store import db as perfdb
from benanza.store.shipped import readable_db, shipped_db

KEY = ("layer_key", "api", "algorithm", "dtype", "fusion", "l2", "layout")
GROUP = tuple(k for k in KEY if k != "algorithm")
WITHIN = 0.05


def _one_system(path: Path) -> None:
    """Refuse a file that is no benanza database, or one of several systems, in one line."""
    with contextlib.closing(perfdb.open_db(path, readonly=True)) as db:
        systems = perfdb.systems(db)
    if len(systems) != 1:
        raise BenanzaError(f"{path}: holds {len(systems)} systems; compare databases of one system each")


def _read_only(path: Path) -> str:
    """A read-only SQLite URI of ``path`` (escaped: a name with '?' or '#' stays one file)."""
    return Path(path).resolve().as_uri() + "?mode=ro"


def _quantile(values: list[float], q: float) -> float:
    return values[round(q * (len(values) - 1))]


def agreement(new: Path, reference: Path) -> dict[str, Any]:
    """The comparison of ``new`` against ``reference`` (plain SQLite files), as printed by :func:`main`."""
    for path in (new, reference):
        _one_system(path)
    conn = sqlite3.connect(_read_only(new), uri=True)
    try:
        conn.execute("ATTACH DATABASE ? AS ref", (_read_only(reference),))
        on = " AND ".join(f"n.{k} = r.{k}" for k in KEY)
        rows = conn.execute(f"SELECT {', '.join('n.' + k for k in GROUP)}, n.status, r.status, n.median_ms, "
                            f"r.median_ms FROM benchmarks n JOIN ref.benchmarks r ON {on}").fetchall()
        new_only = conn.execute(
            f"SELECT api, layout, dtype, COUNT(*) FROM benchmarks n WHERE NOT EXISTS "
            f"(SELECT 1 FROM ref.benchmarks r WHERE {on}) GROUP BY api, layout, dtype ORDER BY 4 DESC").fetchall()
    finally:
        conn.close()
    statuses: dict[str, int] = {}
    fastest: dict[tuple[Any, ...], list[float | None]] = {}
    for row in rows:
        group, (s_new, s_ref, m_new, m_ref) = row[:len(GROUP)], row[len(GROUP):]
        pair = s_new if s_new == s_ref else f"{s_ref} -> {s_new}"
        statuses[pair] = statuses.get(pair, 0) + 1
        best = fastest.setdefault(group, [None, None])
        for i, (status, median) in enumerate(((s_new, m_new), (s_ref, m_ref))):
            if status == "ok" and median is not None and (best[i] is None or median < best[i]):
                best[i] = median
    ratios = sorted(a / b for a, b in fastest.values() if a and b)
    quantiles = {name: round(_quantile(ratios, q), 3) for name, q in
                 (("min", 0), ("p1", .01), ("p10", .1), ("median", .5), ("p90", .9), ("p99", .99), ("max", 1))} \
        if ratios else {}
    return {"new": str(new), "reference": str(reference), "rows_both": len(rows), "statuses": statuses,
            "status_changed": sum(n for pair, n in statuses.items() if "->" in pair), "groups": len(ratios),
            "ratio_new_over_reference": quantiles,
            "within_5pct": round(sum(abs(r - 1) <= WITHIN for r in ratios) / len(ratios), 3) if ratios else None,
            "new_only": [{"api": a, "layout": lay, "dtype": d, "rows": n} for a, lay, d, n in new_only]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("new", type=Path, help="the database measured today (.db)")
    p.add_argument("--reference", type=Path, help="default: the shipped H100 database (perfdb/h100.columns.xz)")
    p.add_argument("--json", type=Path, help="write the comparison here")
    args = p.parse_args()
    try:
        reference = readable_db(args.reference) if args.reference else shipped_db()
        data = agreement(readable_db(args.new), reference)
    except (BenanzaError, FileNotFoundError, sqlite3.Error) as exc:
        print(f"db_agreement: {exc}", file=sys.stderr)
        return 2
    q = data["ratio_new_over_reference"]
    print(f"{data['rows_both']} rows in both; statuses: " + ", ".join(f"{k} {v}" for k, v in data["statuses"].items()))
    print(f"fastest ok median per group, new / reference, over {data['groups']} groups: "
          + ", ".join(f"{k} {v}" for k, v in q.items()) + f"; within 5 %: {data['within_5pct']}")
    for row in data["new_only"][:10]:
        print(f"  only in the new database: {row['rows']} rows of {row['api']} {row['layout']} {row['dtype']}")
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
