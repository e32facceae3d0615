"""Print, as Markdown, every algorithm's median latency per layer for one API of a database.

    python bench/algorithms.py perf.db [--api cudnnConvolutionForward] [--dtype fp32] [--limit 8]

One row per (layer, precision): each algorithm's median (ms) or its status, the
algorithm the library heuristic ranked first, and the fastest one.  For the
legacy convolution the columns are the 8 forward algorithms.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import defaultdict


def short(algorithm: str) -> str:
    return algorithm.removeprefix("CUDNN_CONVOLUTION_FWD_ALGO_").removeprefix("CUBLAS_GEMM_")


def layer_text(shapes: str | None) -> str:
    if not shapes:
        return "?"
    data = json.loads(shapes)
    ins, outs = data.get("inputs", []), data.get("outputs", [])
    if len(ins) >= 2 and len(ins[1]) == 4:  # conv: x and weights
        n, c, h, w = ins[0]
        k, _, r, s = ins[1]
        return f"n{n} {c}→{k} {r}x{s} {h}x{w}→{outs[0][2]}x{outs[0][3]}"
    return " ".join("x".join(map(str, t)) for t in ins[:2]) + " → " + "x".join(map(str, outs[0] if outs else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("--api", default="cudnnConvolutionForward")
    ap.add_argument("--dtype", default=None, help="only this precision")
    ap.add_argument("--fusion", default="none")
    ap.add_argument("--limit", type=int, default=8, help="layers to print (largest FLOPs first)")
    args = ap.parse_args()
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    sql = ("SELECT b.layer_key, b.dtype, b.algorithm, b.status, b.median_ms, b.heuristic_rank, l.shapes, l.flops "
           "FROM benchmarks b LEFT JOIN layers l ON l.key = b.layer_key "
           "WHERE b.api = ? AND b.fusion = ? AND b.l2 = 'warm'")
    params: list[str] = [args.api, args.fusion]
    if args.dtype:
        sql += " AND b.dtype = ?"
        params.append(args.dtype)
    jobs: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    meta: dict[str, tuple[str | None, int]] = {}
    for key, dtype, algo, status, ms, rank, shapes, flops in con.execute(sql, params):
        jobs[(key, dtype)].append((algo, status, ms, rank))
        meta[key] = (shapes, flops or 0)
    algos = sorted({a for rows in jobs.values() for a, *_ in rows})
    keys = sorted(meta, key=lambda k: -meta[k][1])[: args.limit]
    print(f"| layer | dtype | {' | '.join(short(a) for a in algos)} | heuristic #1 | fastest |")
    print("|---|---|" + "---|" * len(algos) + "---|---|")
    for key in keys:
        for dtype in sorted({d for k, d in jobs if k == key}):
            rows = {a: (s, ms, r) for a, s, ms, r in jobs[(key, dtype)]}
            cells = []
            for a in algos:
                s, ms, _ = rows.get(a, ("-", None, None))
                cells.append(f"{ms:.4f}" if s == "ok" else ("n/s" if s == "not_supported" else s))
            ok = {a: ms for a, (s, ms, _) in rows.items() if s == "ok"}
            first = next((a for a, (_, _, r) in rows.items() if r == 0), None)
            best = min(ok, key=ok.get) if ok else None
            print(f"| {layer_text(meta[key][0])} | {dtype} | {' | '.join(cells)} | "
                  f"{short(first) if first else '-'} | {short(best) + f' ({ok[best]:.4f})' if best else '-'} |")


if __name__ == "__main__":
    main()
