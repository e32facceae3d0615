"""Compare the cuDNN graph API with the legacy API, per conv layer of one model, from a database.

    python bench/graph_vs_legacy.py perf.db models/zoo/resnet50.onnx --batch 1 [--dtype fp32,tf32,fp16]

Prints, as Markdown: per conv layer and precision, the best legacy algorithm, the best
graph-API engine config, and the engine the heuristic (mode A) ranks first; how many
layers the graph API wins and by how much in total; and for each fused conv pattern the
best runtime-fused graph plan against the sum of its unfused parts (each part's best).
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from benanza.library import Api
from benanza.model.onnx_import import load_model

LEGACY_CONV = Api.CONV_FWD.value
GRAPH_CONV = Api.GRAPH_CONV.value


def best(con: sqlite3.Connection, key: str, dtype: str, apis: tuple[str, ...], fusion: str = "none",
         rank0: bool = False) -> tuple[float, str] | None:
    sql = (f"SELECT median_ms, algorithm FROM benchmarks WHERE layer_key = ? AND dtype = ? AND fusion = ? "
           f"AND status = 'ok' AND l2 = 'warm' AND api IN ({', '.join('?' * len(apis))})")
    if rank0:
        sql += " AND heuristic_rank = 0"
    row = con.execute(sql + " ORDER BY median_ms LIMIT 1", (key, dtype, fusion, *apis)).fetchone()
    return (row[0], row[1]) if row else None


def short(algorithm: str) -> str:
    return algorithm.removeprefix("CUDNN_CONVOLUTION_FWD_ALGO_")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("model", type=Path)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="fp32,tf32,fp16")
    args = ap.parse_args()
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    model = load_model(args.model, args.batch)
    convs = list({layer.key: layer for layer in model.layers if layer.op == "Conv"}.values())
    for dtype in args.dtype.split(","):
        print(f"\n### {model.name}, batch {args.batch}, {dtype}: {len(convs)} unique conv layers\n")
        print("| layer | best legacy (ms) | best graph (ms) | graph engine | heuristic A #1 (ms) | graph/legacy |")
        print("|---|---|---|---|---|---|")
        wins, saved, both = 0, 0.0, 0
        for layer in convs:
            legacy = best(con, layer.key, dtype, (LEGACY_CONV,))
            graph = best(con, layer.key, dtype, (GRAPH_CONV,))
            first = best(con, layer.key, dtype, (GRAPH_CONV,), rank0=True)
            x, w = layer.inputs[0].shape, layer.inputs[1].shape
            name = f"{w[1] * layer.attrs['group']}→{w[0]} {w[2]}x{w[3]} s{layer.attrs['strides'][0]} {x[2]}x{x[3]}"
            if legacy and graph:
                both += 1
                if graph[0] < legacy[0]:
                    wins += 1
                    saved += legacy[0] - graph[0]
            print(f"| {name} | {f'{legacy[0]:.4f} {short(legacy[1])}' if legacy else '-'} | "
                  f"{f'{graph[0]:.4f}' if graph else '-'} | {graph[1] if graph else '-'} | "
                  f"{f'{first[0]:.4f} {first[1].split(chr(95))[0]}' if first else '-'} | "
                  f"{f'{graph[0] / legacy[0]:.2f}' if legacy and graph else '-'} |")
        print(f"\ngraph API faster on {wins} of {both} layers; sum of (legacy best - graph best) "
              f"over those: {saved:.4f} ms")
        print("\n| fused pattern | fused graph plan (ms) | sum of unfused parts (ms) | parts |")
        print("|---|---|---|---|")
        seen = set()
        for fusion in model.fusions:
            if fusion.key in seen or not fusion.pattern.startswith("conv"):
                continue
            seen.add(fusion.key)
            fused = best(con, fusion.key, dtype, (GRAPH_CONV,), fusion=fusion.pattern)
            parts = []
            for index in fusion.layers:
                member = model.layers[index]
                apis = tuple(a.value for a in member.apis)
                # non-TC ops were measured in fp32 for tf32 (the planner drops tf32 for them)
                part = best(con, member.key, dtype, apis) or best(con, member.key, "fp32", apis)
                parts.append((member.op, part))
            if fused is None or any(p is None for _, p in parts):
                continue
            total = sum(p[0] for _, p in parts)
            print(f"| {fusion.pattern} ({'→'.join(op for op, _ in parts)}) | {fused[0]:.4f} | {total:.4f} | "
                  f"{' + '.join(f'{op} {p[0]:.4f}' for op, p in parts)} |")
            if len(seen) >= 6:
                break


if __name__ == "__main__":
    main()
