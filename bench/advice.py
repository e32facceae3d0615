"""The advice per shipped profile bundle: bound, Benanza ratio, predicted speedup, overhead and the
largest gap with its fix, as JSON and (with --before) a before -> after Markdown table
(docs/RESULTS.md at 83e8fcb, §5.2).

    python bench/advice.py --json after.json                       # in this checkout
    python bench/advice.py --json after.json --before before.json  # before.json: the same, run in an older checkout

Reads only summary labels and the gaps table that every benanza since session 8 writes, so the same
script gives the "before" column in an older checkout (its own install) and the "after" one here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benanza.paths import perfdb_dir
from benanza.profile.bundle import read_bundle
from benanza.profile.catalog import bundle_model
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model


def advice(bundle: Path, models: Path) -> dict[str, object]:
    report, _ = analyze_model(bundle_model(models, read_bundle(bundle)), shipped_db(), bundle)
    s = report.summary
    s = s.labelled() if hasattr(s, "labelled") else s  # a Summary; a dict of labels before i34's typed record
    gaps = sorted((r for r in report.tables["gaps"].rows if r["kind"] == "gap"), key=lambda r: -r["ms"])
    return {"LBL_seq (ms)": s["LBL_seq (ms)"], "GPU busy (ms)": s["GPU busy (ms)"],
            "predicted speedup (x)": s["predicted speedup vs end-to-end (x)"],
            "framework overhead (ms)": s["framework overhead (ms)"],
            "largest gap": f"{gaps[0]['step']} {gaps[0]['ms']:.3f}" if gaps else "-",
            "its fix": gaps[0].get("fix", "") if gaps else ""}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=Path("models/zoo"), help="the zoo (benanza models zoo DIR)")
    p.add_argument("--json", type=Path, required=True, help="write this checkout's figures here")
    p.add_argument("--before", type=Path, help="figures written by an older checkout: print before -> after")
    args = p.parse_args()
    bundles = sorted(b for b in (perfdb_dir() / "bundles").iterdir() if b.is_dir())
    now = {b.name: advice(b, args.models) for b in bundles}
    args.json.write_text(json.dumps(now, indent=1))
    if args.before is None:
        return
    was = json.loads(args.before.read_text())
    print("| bundle | LBL_seq (ms) | BR (LBL_seq / kernel time) | predicted speedup (x) | framework overhead (ms) "
          "| largest gap |\n|---|---|---|---|---|---|")
    for name, b in now.items():
        a = was[name]
        print(f"| {name} | {a['LBL_seq (ms)']:.3f} → {b['LBL_seq (ms)']:.3f} "
              f"| {a['LBL_seq (ms)'] / a['GPU busy (ms)']:.3f} → {b['LBL_seq (ms)'] / b['GPU busy (ms)']:.3f} "
              f"| {a['predicted speedup (x)']:.2f} → {b['predicted speedup (x)']:.2f} "
              f"| {a['framework overhead (ms)']:.3f} → {b['framework overhead (ms)']:.3f} "
              f"| {a['largest gap']} → {b['largest gap']} |")


if __name__ == "__main__":
    main()
