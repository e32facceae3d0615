"""Issue 36's acceptance matrix: how much of each ``benanza profile --torch-module`` profile maps onto
the module's export, on the GPU.

Why: a user's own ``nn.Module`` is profiled natively and mapped onto its ONNX export through the
module ranges and the ATen ops in them (benanza/profile/module_spans.py); whether that holds is a
question about many architectures, so this runs the real path (the ``benanza profile`` CLI in a
subprocess, factories from bench/natives.py) over the matrix and reports per cell: layers mapped
(%), kernel time mapped (%) and the causes of the unmapped kernel runs. Cells run a few at a time
on the one GPU in processes of their own (the mapping, not the latency, is measured: concurrent
cells only slow each other).

    PYTHONPATH=$PWD:$PWD/bench python3 bench/torch_mapping.py --out DIR [--jobs 6] [--only 'swin_t*']
    python3 bench/torch_mapping.py --table DIR1/summary.json DIR2/summary.json   # no GPU: one table

Each cell leaves DIR/<cell>/ (the bundle) and DIR/<cell>.json; a cell whose JSON exists is not run
again, so a second call with the same DIR finishes an interrupted matrix. The table is printed and
DIR/summary.json written at the end (of the cells present).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from natives import TORCHVISION

BATCHES = (1, 32)
FP16 = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "swin_t")
HF = ("bert_base", "gpt2_small", "hf_vit_b16", "t5_small_encoder")
TARGET = 0.95  # the bar for layers and kernel time


def cells() -> list[tuple[str, int, str]]:
    """(factory, batch, dtype) of the matrix: torchvision fp32 x 2 batches, five in fp16 too, HF fp32."""
    out = [(m, b, "fp32") for m in TORCHVISION for b in BATCHES]
    out += [(m, b, "fp16") for m in FP16 for b in BATCHES]
    out += [(m, b, "fp32") for m in HF for b in BATCHES]
    return out


def cell_id(model: str, batch: int, dtype: str) -> str:
    return f"{model}_b{batch}_{dtype}"


def measure(bundle: Path) -> dict[str, Any]:
    """The mapping figures of one bundle (the library's own mapping, as `benanza analyze` reads it)."""
    from benanza.model.onnx_import import load_model
    from benanza.profile.bundle import read_bundle
    from benanza.profile.capture import EXPORTED
    from benanza.profile.mapping import kernel_time_mapped, map_bundle_report

    b = read_bundle(bundle)
    model = load_model(bundle / EXPORTED, b.meta.batch)
    m = map_bundle_report(model, b)
    share, copy_ms = kernel_time_mapped(m.profile)
    n = len(model.layers)
    return {"layers": n, "layers_mapped": n - len(m.unmapped_layers), "layers_with_node": len(m.nodes),
            "layers_mapped_pct": 100.0 * (n - len(m.unmapped_layers)) / n if n else None,
            "kernel_time_mapped_pct": None if share is None else 100.0 * share, "copy_ms": copy_ms,
            "gpu_busy_ms": m.profile.gpu_busy_ms, "e2e_ms": m.profile.e2e_ms,
            "unmapped_layers": [why for _, why in m.unmapped_layers][:20],
            "unmapped_causes": [{"cause": c, "runs": r, "ms": ms} for c, r, ms in m.unmapped_causes]}


def run_cell(out: Path, model: str, batch: int, dtype: str, args: argparse.Namespace) -> dict[str, Any]:
    """Profile one cell through the CLI, map it, write DIR/<cell>.json; failures are a record, not a crash."""
    cid = cell_id(model, batch, dtype)
    bundle = out / cid
    shutil.rmtree(bundle, ignore_errors=True)
    cmd = [sys.executable, "-m", "benanza", "profile", "--torch-module", f"natives:{model}", "--batch", str(batch),
           "--dtype", dtype, "--runs", str(args.runs), "--warmup", str(args.warmup),
           "--profiled-runs", str(args.profiled_runs), "--out", str(bundle)]
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"cell": cid, "model": model, "batch": batch, "dtype": dtype,
                           "command": " ".join(cmd[1:])}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.cell_timeout_s, check=False)
        rec["profile_s"] = round(time.perf_counter() - t0, 1)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()
            rec["error"] = f"benanza profile exited {done.returncode}: {tail[-1] if tail else ''}"[:400]
        else:
            rec.update(measure(bundle))
    except subprocess.TimeoutExpired:
        rec["error"] = f"benanza profile ran past {args.cell_timeout_s} s"
    except Exception as exc:  # a mapping failure is this cell's result
        rec["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:400]
    rec["wall_s"] = round(time.perf_counter() - t0, 1)
    if not args.keep_bundles:
        for big in ("cudnn_api.log", "cublas_api.log", "cublaslt_api.log"):
            (bundle / big).unlink(missing_ok=True)
    (out / f"{cid}.json").write_text(json.dumps(rec, indent=1) + "\n")
    return rec


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def table(records: list[dict[str, Any]]) -> str:
    """A Markdown table, one row per cell, with the top unmapped cause."""
    lines = ["| model | batch | dtype | layers | layers mapped (%) | kernel time mapped (%) | top unmapped cause |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | - | - | - | error: {r['error'][:120]} |")
            continue
        cause = r["unmapped_causes"][0] if r["unmapped_causes"] else None
        top = f"{cause['runs']} runs, {cause['ms']:.3f} ms: {cause['cause'][:110]}" if cause else ""
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['layers']} | {_pct(r['layers_mapped_pct'])}"
                     f" | {_pct(r['kernel_time_mapped_pct'])} | {top.replace('|', '/')} |")
    ok = [r for r in records if "error" not in r and (r["layers_mapped_pct"] or 0) >= 100 * TARGET
          and (r["kernel_time_mapped_pct"] or 0) >= 100 * TARGET]
    lines.append(f"\n{len(ok)} of {len(records)} cells map >= {TARGET:.0%} of layers and of kernel time")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="output directory (bundles, one JSON per cell)")
    p.add_argument("--table", type=Path, nargs="+", metavar="SUMMARY",
                   help="no GPU: print the table of these summary.json files (two calls' halves) together")
    p.add_argument("--only", default="*", help="glob(s) on cell ids (model_bBATCH_DTYPE), comma-separated")
    p.add_argument("--jobs", type=int, default=6, help="cells profiled at once on the one GPU")
    p.add_argument("--runs", type=int, default=3, help="latency runs per profile")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--profiled-runs", type=int, default=2)
    p.add_argument("--cell-timeout-s", type=int, default=150)
    p.add_argument("--budget-s", type=float, default=380.0,
                   help="start no cell after this many seconds (a cell in flight may run --cell-timeout-s more)")
    p.add_argument("--keep-bundles", action="store_true", help="keep the cuDNN/cuBLAS logs (large)")
    p.add_argument("--list", action="store_true", help="print the cells and exit")
    args = p.parse_args(argv)
    if args.table:
        merged = {r["cell"]: r for path in args.table for r in json.loads(path.read_text())["cells"]}
        order = [cell_id(*c) for c in cells()]
        print(table(sorted(merged.values(), key=lambda r: order.index(r["cell"]) if r["cell"] in order else 1 << 20)))
        return 0
    if args.out is None:
        p.error("--out is required (or --table SUMMARY...)")
    globs = [g.strip() for g in args.only.split(",") if g.strip()]
    todo = [c for c in cells() if any(fnmatch.fnmatch(cell_id(*c), g) for g in globs)]
    if args.list:
        print("\n".join(cell_id(*c) for c in todo))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    bench = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(x for x in (bench, os.environ.get("PYTHONPATH", "")) if x)
    pending = [c for c in todo if not (args.out / f"{cell_id(*c)}.json").is_file()]
    print(f"{len(todo)} cells, {len(todo) - len(pending)} already done, {len(pending)} to run, "
          f"{args.jobs} at a time", flush=True)
    start = time.perf_counter()
    # the slowest first: big batches of big models, so that the pool's tail is short
    pending.sort(key=lambda c: (-c[1], c[0] not in ("maxvit_t", "swin_t", "vit_b_16", "densenet121")))
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = {}
        for c in pending:
            futures[pool.submit(_gated, start, args, c)] = c
        for fut in concurrent.futures.as_completed(futures):
            rec = fut.result()
            if rec is None:
                continue
            head = rec.get("error") or (f"layers {_pct(rec['layers_mapped_pct'])} %, kernel time "
                                        f"{_pct(rec['kernel_time_mapped_pct'])} %")
            print(f"[{time.perf_counter() - start:6.0f} s] {rec['cell']}: {head} ({rec['wall_s']} s)", flush=True)
    records = [json.loads((args.out / f"{cell_id(*c)}.json").read_text()) for c in todo
               if (args.out / f"{cell_id(*c)}.json").is_file()]
    missing = [cell_id(*c) for c in todo if not (args.out / f"{cell_id(*c)}.json").is_file()]
    print(table(records))
    if missing:
        print(f"not run (budget): {len(missing)} cells; run again with the same --out to finish: {', '.join(missing)}")
    (args.out / "summary.json").write_text(json.dumps({"cells": records, "not_run": missing}, indent=1) + "\n")
    return 0


def _gated(start: float, args: argparse.Namespace, c: tuple[str, int, str]) -> dict[str, Any] | None:
    if time.perf_counter() - start > args.budget_s:
        return None
    return run_cell(args.out, *c, args)


if __name__ == "__main__":
    sys.exit(main())
