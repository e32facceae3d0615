"""Close the loop: a recommendation's predicted gain against the gain realized in the framework.

    python bench/loop.py perf.db models/zoo BEFORE AFTER --gap "algorithm-selection gap (ms)" [--precisions ...]

BEFORE is the bundle the analyzer made the recommendation from, AFTER the same model run
with the recommendation applied (docs/RESULTS.md at 83e8fcb, §5). Prints one Markdown row: the gap
the analyzer predicted from BEFORE, the as-executed LBL of both runs, and the realized
change of GPU busy and end-to-end time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benanza.analyze import Report
from benanza.library import Precision
from benanza.profile.bundle import read_bundle
from benanza.profile.catalog import bundle_model
from benanza.workflows.analysis import analyze_model

COLUMNS = ("model", "batch", "change", "predicted (ms)", "as-executed LBL before → after (ms)",
           "realized GPU busy (ms)", "realized end-to-end (ms)")


def as_executed_lbl(report: Report) -> float | None:
    rows = {r["policy"]: r for r in report.tables["policies"].rows}
    return rows["as-executed"]["LBL_seq (ms)"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db", type=Path)
    p.add_argument("models", type=Path, help="directory with the bundles' models (benanza models zoo DIR)")
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--gap", required=True,
                   help="the summary entry that predicts the gain, e.g. 'algorithm-selection gap (ms)'")
    p.add_argument("--precisions", help="precisions the analysis of BEFORE may use (default: the analyzer's)")
    p.add_argument("--change", default="", help="what was applied, for the table")
    args = p.parse_args()
    precisions = frozenset(Precision(x) for x in args.precisions.split(",")) if args.precisions else None
    recorded = read_bundle(args.before)
    meta, meta_after = recorded.meta, read_bundle(args.after).meta
    model = bundle_model(args.models, recorded)
    before, _ = analyze_model(model, args.db, args.before, precisions=precisions)
    after, _ = analyze_model(model, args.db, args.after)
    b, a = before.summary.labelled(), after.summary.labelled()  # --gap names a label
    busy = (b["GPU busy (ms)"], a["GPU busy (ms)"])
    e2e = (b["measured end-to-end (ms)"], a["measured end-to-end (ms)"])
    lbl = (as_executed_lbl(before), as_executed_lbl(after))
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    print(f"| {model.stem} | {meta.batch} | {args.change or f'{meta.dtype} -> {meta_after.dtype}'} "
          f"| {b[args.gap]:.2f} | {lbl[0]:.2f} → {lbl[1]:.2f} | {busy[0]:.2f} → {busy[1]:.2f} "
          f"(−{busy[0] - busy[1]:.2f}) | {e2e[0]:.2f} → {e2e[1]:.2f} (−{e2e[0] - e2e[1]:.2f}, "
          f"{e2e[0] / e2e[1]:.2f}×) |")


if __name__ == "__main__":
    main()
