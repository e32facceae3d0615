"""Per library-call layer of profile bundles: the framework's kernels against the same calls'
benchmarks in each L2 state, and whether the benchmark ran the framework's kernel.

    python bench/library_call_states.py --db perf.db --models DIR BUNDLE [BUNDLE ...] [--json out.json]

For each bundle (its model ``DIR/<model>.onnx``), over the layers of the library-call check
(``analyze.core.library_call_layers``: exact logged cuDNN/cuBLAS calls, the framework's own kernels
and copies left out): the framework's library-kernel time and its longest kernel; each call's
warm, cold-weights and cold-L2 rows (``choose.executed_ms``); the cold-L2 row's own longest
kernel (CUPTI, ``notes["kernel"]``) and whether it is the framework's. Prints one summary line
per bundle (sums and ratios per state, the share of layers whose kernel matched) and, with
``--layers``, the layers. Needs no GPU: it reads the bundles and the database.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benanza.analyze.choose import Policy, choose, executed_ms, executed_row
from benanza.analyze.core import library_call_layers, mapped_rows
from benanza.library import L2
from benanza.profile.bundle import read_bundle
from benanza.profile.catalog import bundle_model
from benanza.records import Result
from benanza.workflows.prepare import prepare

STATES = (L2.WARM, L2.COLD_WEIGHTS, L2.COLD)


def _stem(name: str) -> str:
    """A kernel's name without its template arguments and parameters, for comparing two launches."""
    return name.split("(")[0].split("<")[0].strip()


def _same(a: str, b: str) -> bool:
    """Two demangled kernel names alike but for spacing (CUPTI's and a profiler's demanglers differ there)."""
    return "".join(a.split()) == "".join(b.split())


def bundle_rows(model_path: Path, db_path: Path, bundle: Path) -> list[dict[str, Any]]:
    inputs, _ = prepare(model_path, db_path, bundle, None, None, None, "both", None)
    executed = {layer.index: choose(layer, inputs, Policy.AS_EXECUTED) for layer in inputs.model.layers}
    rows = []
    for layer, measured, calls, _ in library_call_layers(mapped_rows(inputs.model, inputs, executed), executed):
        kernels = [k for k in inputs.profile.layers[layer.index].kernels if not k.copy]
        longest = max(kernels, key=lambda k: k.dur_us).name if kernels else ""
        row: dict[str, Any] = {"layer": layer.name, "op": layer.op, "measured (ms)": measured,
                               "framework kernel": longest}
        for l2 in STATES:
            row[l2.value] = executed_ms(layer.key, calls, inputs, l2)
        cold = [executed_row(c, layer.key, inputs, L2.COLD) for c in calls]
        names = [r.notes.get("kernel", "") for r in cold if isinstance(r, Result)]
        row["benchmark kernel (cold L2)"] = names[0] if names else ""
        row["same kernel"] = _same(names[0], longest) if names and names[0] else None
        rows.append(row)
    return rows


def summary(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"bundle": name, "layers": len(rows)}
    for l2 in STATES:
        both = [(r["measured (ms)"], r[l2.value]) for r in rows if r[l2.value] is not None]
        out[f"{l2.value}: layers"] = len(both)
        out[f"{l2.value}: benchmark / measured"] = (sum(b for _, b in both) / sum(m for m, _ in both)) if both else None
    known = [r["same kernel"] for r in rows if r["same kernel"] is not None]
    out["same kernel (of layers with a cold-L2 kernel name)"] = f"{sum(known)}/{len(known)}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundles", nargs="+", type=Path)
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--models", type=Path, required=True, help="directory of the bundles' models")
    ap.add_argument("--layers", action="store_true", help="print every layer too")
    ap.add_argument("--json", type=Path, help="write the summaries and layers here")
    args = ap.parse_args()
    record = []
    head = ["bundle", "layers"] + [f"{s.value}: benchmark / measured" for s in STATES] + \
        ["same kernel (of layers with a cold-L2 kernel name)"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for bundle in args.bundles:
        rows = bundle_rows(bundle_model(args.models, read_bundle(bundle)), args.db, bundle)
        s = summary(bundle.name, rows)
        record.append({**s, "rows": rows})
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in (s[h] for h in head)]
        print("| " + " | ".join(cells) + " |", flush=True)
        if args.layers:
            for r in rows:
                print("   ", r["layer"][:40], f"{1e3 * r['measured (ms)']:.2f} us |",
                      " ".join(f"{s.value} {1e3 * r[s.value]:.2f}" if r[s.value] is not None else f"{s.value} -"
                               for s in STATES), "|", _stem(r["framework kernel"])[:60], "vs",
                      _stem(r["benchmark kernel (cold L2)"])[:60])
    if args.json:
        args.json.write_text(json.dumps(record, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
