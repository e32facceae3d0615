"""Benanza ratio and as-executed check for profile bundles, as one Markdown table (docs/RESULTS.md at 83e8fcb, §4).

    python bench/bundles.py perf.db models/zoo BUNDLE... [--precisions fp32,tf32]

One row per bundle: the measured end-to-end and GPU-busy (kernels only) times, the headline
LBL (the best equivalent execution) and the paper's layer-wise LBL_seq, BR against both (a
sound lower bound has BR <= 1; rows where it is not are flagged), and the as-executed
benchmarks against the measured GPU time of the layers
that have both, all their kernels and the library kernels alone; then the same check
with cold-L2 benchmarks over the mapped layers that have them ("-" without cold rows),
and with cold-weights benchmarks (weights cold, activations warm; "-" without such rows;
docs/METRICS.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benanza.library import Precision
from benanza.profile.bundle import read_bundle
from benanza.profile.catalog import bundle_model
from benanza.workflows.analysis import analyze_model

COLUMNS = ("bundle", "framework", "batch", "dtype", "end-to-end (ms)", "GPU busy (ms)", "memcpy/memset (ms)",
           "LBL_seq (ms)", "LBL_par (ms)", "BR_seq vs busy", "BR_par vs e2e", "BR_par vs busy",
           "LBL_seq layer-wise (ms)", "BR_seq layer-wise vs busy", "mapped layers", "measured (ms)",
           "library kernels (ms)", "as-executed (ms)", "as-exec / measured", "as-exec / library", "cold-L2 layers",
           "as-exec cold / measured", "cold-weights layers", "as-exec cold-w / measured", "analysis (s)")


def fmt(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def row(db: Path, models: Path, bundle: Path, precisions: frozenset[Precision] | None) -> list[str]:
    recorded = read_bundle(bundle)
    meta, model = recorded.meta, bundle_model(models, recorded)
    t0 = time.perf_counter()
    report, _ = analyze_model(model, db, bundle, precisions=precisions)
    s = report.summary.labelled()
    mapped = s["mapped layers (measured and as-executed)"]
    cold = s["cold-L2 layers (of the mapped)"]  # None without cold rows
    cold_w = s["cold-weights layers (of the mapped)"]  # None without cold-weights rows
    flags = [name for name in ("BR_seq vs GPU busy", "BR_par vs end-to-end", "BR_par vs GPU busy")
             if (s.get(name) or 0) > 1]
    return [f"`{bundle.name}`", meta.framework, str(meta.batch), meta.dtype, fmt(s["measured end-to-end (ms)"]),
            fmt(s["GPU busy (ms)"]), fmt(s["GPU memcpy/memset (ms)"]), fmt(s["LBL_seq (ms)"]), fmt(s["LBL_par (ms)"]),
            fmt(s["BR_seq vs GPU busy"]) + (" **>1**" if "BR_seq vs GPU busy" in flags else ""),
            fmt(s["BR_par vs end-to-end"]) + (" **>1**" if "BR_par vs end-to-end" in flags else ""),
            fmt(s["BR_par vs GPU busy"]) + (" **>1**" if "BR_par vs GPU busy" in flags else ""),
            fmt(s["LBL_seq layer-wise (ms)"]), fmt(s["BR_seq layer-wise vs GPU busy"]),
            f"{mapped}/{s['layers']}",
            fmt(s["measured GPU time, mapped layers (ms)"]), fmt(s["library kernels, mapped layers (ms)"]),
            fmt(s["as-executed LBL, mapped layers (ms)"]), fmt(s["as-executed / measured, mapped layers"]),
            fmt(s["as-executed / library kernels, mapped layers"]),
            fmt(None if cold is None else f"{cold}/{mapped}"), fmt(s["as-executed cold L2 / measured"]),
            fmt(None if cold_w is None else f"{cold_w}/{mapped}"), fmt(s["as-executed cold weights / measured"]),
            f"{time.perf_counter() - t0:.1f}"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db", type=Path)
    p.add_argument("models", type=Path, help="directory with the bundles' models (benanza models zoo DIR)")
    p.add_argument("bundles", type=Path, nargs="+")
    p.add_argument("--precisions", help="precisions the bound may use (default: each run's recorded settings)")
    args = p.parse_args()
    precisions = frozenset(Precision(x) for x in args.precisions.split(",")) if args.precisions else None
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for bundle in args.bundles:
        print("| " + " | ".join(row(args.db, args.models, bundle, precisions)) + " |", flush=True)


if __name__ == "__main__":
    main()
