"""Independent check of benanza's lower bound against framework runs timed by separate code.

Why: a lower bound is only trustworthy if something that does not share its code agrees with
it. ``measure`` runs each model in ONNX Runtime's CUDA EP and in PyTorch eager on the GPU and
times it with its own code: it imports nothing from benanza (its own weight filling, its own
batch setting, its own trace reading), so an error in benanza's profile readers, mapping or
bundles cannot hide here. ``report`` then asks benanza for the bound of each measured cell and
prints ``BR = LBL / kernel-only GPU time``; a sound bound has ``BR <= 1`` in every cell.

Per cell (model, batch, framework, setting):
- ``kernel_ms``: median over profiled iterations of the union of the GPU kernel intervals of
  one inference (CUPTI through ``torch.profiler``; ONNX Runtime's kernels are recorded too, as
  they run in the same process), memcpy/memset excluded and reported as ``memcpy_ms``;
- ``latency_ms``: median host wall time of one inference with device-resident inputs.

Usage (``measure`` on the GPU machine, ``report`` anywhere)::

    python bench/validate.py measure models/zoo --batches 1,64,256 --out cells.json
    python bench/validate.py measure --torchvision resnet18,mobilenet_v2 --export-dir tv --out tv.json
    python bench/validate.py report cells.json --models models/zoo [--db perfdb/h100.db.xz] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ITER_RANGE = "validate.iter"
# (framework, setting) -> what the setting allows: tf32 for fp32 data, fp16 data, search mode.
ORT_SETTINGS = {
    "exhaustive-fp32": {"search": "EXHAUSTIVE", "use_tf32": 0},
    "exhaustive-tf32": {"search": "EXHAUSTIVE", "use_tf32": 1},
    "heuristic-fp32": {"search": "HEURISTIC", "use_tf32": 0},
    "heuristic-tf32": {"search": "HEURISTIC", "use_tf32": 1},
}
TORCH_SETTINGS = {
    "fp32-benchmark": {"tf32": False, "fp16": False, "benchmark": True},
    "fp32": {"tf32": False, "fp16": False, "benchmark": False},
    "tf32-benchmark": {"tf32": True, "fp16": False, "benchmark": True},
    "tf32": {"tf32": True, "fp16": False, "benchmark": False},
    "fp16-benchmark": {"tf32": False, "fp16": True, "benchmark": True},
    "fp16": {"tf32": False, "fp16": True, "benchmark": False},
}


# ---------------------------------------------------------------- model preparation (no benanza)
def prepare_onnx(path: Path, batch: int, seed: int = 0):
    """The model with every run-time-computed weight (ConstantOfShape of a constant shape) as a
    random initializer, and the batch set on the inputs and on Reshape constants that carry it."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    # IR >= 4: initializers need not be graph inputs, and shape inference then sees the new weights
    model.ir_version = max(model.ir_version, 4)
    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[tuple[Any, int]]] = {}
    for node in graph.node:
        for pos, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, pos))
    keep, alias = [], {}
    for node in graph.node:
        if node.op_type == "Dropout":  # the identity at inference (onnx2torch has no Dropout-7)
            alias[node.output[0]] = node.input[0]
        elif node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
            value = rng.standard_normal(shape).astype(np.float32) * 0.05
            roles = {(c.op_type, pos) for c, pos in consumers.get(node.output[0], [])}
            if ("BatchNormalization", 4) in roles or ("BatchNormalization", 1) in roles:
                value = np.abs(value) + 0.5  # variance and scale: positive, near 1
            graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        else:
            keep.append(node)
    for node in keep:
        for pos, name in enumerate(node.input):
            while name in alias:
                name = alias[name]
            node.input[pos] = name
    for out in graph.output:
        while out.name in alias:
            out.name = alias[out.name]
    del graph.node[:]
    graph.node.extend(keep)
    used = {name for node in graph.node for name in node.input}
    unused = [t for t in graph.initializer if t.name not in used]
    for t in unused:
        graph.initializer.remove(t)
    gone = {t.name for t in unused}
    for inp in [i for i in graph.input if i.name in gone]:
        graph.input.remove(inp)
    init_names = {t.name for t in graph.initializer}
    old_batch = None
    for inp in graph.input:
        if inp.name in init_names:
            continue
        dim0 = inp.type.tensor_type.shape.dim[0]
        old_batch = dim0.dim_value or 1
        dim0.ClearField("dim_param")
        dim0.dim_value = batch
    for out in graph.output:
        dims = out.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "batch"
    del graph.value_info[:]
    by_name = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Reshape" and node.input[1] in by_name:
            shape = numpy_helper.to_array(by_name[node.input[1]]).copy()
            if shape.size and shape[0] == old_batch:
                shape[0] = batch
                by_name[node.input[1]].CopyFrom(numpy_helper.from_array(shape, node.input[1]))
    return model


def input_specs(model) -> list[tuple[str, tuple[int, ...]]]:
    init_names = {t.name for t in model.graph.initializer}
    return [(i.name, tuple(d.dim_value for d in i.type.tensor_type.shape.dim))
            for i in model.graph.input if i.name not in init_names]


# ---------------------------------------------------------------- timing (no benanza)
def union_ms(spans: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals in microseconds, returned in ms."""
    total, end = 0.0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total / 1000.0


def kernel_times(trace_path: Path) -> tuple[list[float], list[float], list[int]]:
    """Per profiled iteration: kernel-union ms, memcpy/memset-union ms, kernel count."""
    events = json.loads(trace_path.read_text())["traceEvents"]
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("cat") == "user_annotation" and e.get("name") == ITER_RANGE)
    kern: list[list[tuple[float, float]]] = [[] for _ in windows]
    copy: list[list[tuple[float, float]]] = [[] for _ in windows]
    for e in events:
        cat = e.get("cat")
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        s, d = float(e["ts"]), float(e.get("dur", 0))
        for i, (ws, we) in enumerate(windows):
            if ws <= s <= we:
                (kern if cat == "kernel" else copy)[i].append((s, s + d))
                break
    return [union_ms(k) for k in kern], [union_ms(c) for c in copy], [len(k) for k in kern]


def timed(run, sync, warmup: int, iters: int, profiled: int) -> dict[str, Any]:
    """Warm up, time ``iters`` runs on the host, then profile ``profiled`` runs with CUPTI."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(warmup):
        run()
    sync()
    lat = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run()
        sync()
        lat.append((time.perf_counter() - t0) * 1e3)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(profiled):
            with record_function(ITER_RANGE):
                run()
                sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        kern, copy, count = kernel_times(path)
    del torch
    if not kern or not any(count):
        raise RuntimeError("the profiler recorded no GPU kernels")
    return {"kernel_ms": statistics.median(kern), "kernel_ms_min": min(kern), "kernel_ms_iters": kern,
            "memcpy_ms": statistics.median(copy),
            "kernels_per_iter": statistics.median(count), "latency_ms": statistics.median(lat),
            "latency_ms_min": min(lat), "iters": iters, "profiled_iters": profiled}


def run_ort(model, setting: dict[str, Any], feeds: dict[str, np.ndarray], args) -> dict[str, Any]:
    import onnxruntime as ort
    import torch

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    cuda = {"device_id": 0, "cudnn_conv_algo_search": setting["search"], "use_tf32": setting["use_tf32"]}
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=[("CUDAExecutionProvider", cuda), "CPUExecutionProvider"])
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"ONNX Runtime has no CUDA EP here ({sess.get_providers()})")
    binding = sess.io_binding()
    keep = []
    for name, value in feeds.items():
        dev = ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0)
        keep.append(dev)
        binding.bind_ortvalue_input(name, dev)
    for out in sess.get_outputs():
        binding.bind_output(out.name, "cuda", 0)
    stats = timed(lambda: sess.run_with_iobinding(binding), torch.cuda.synchronize,
                  args.warmup, args.iters, args.profiled)
    outs = binding.copy_outputs_to_cpu()
    stats["finite_output"] = bool(all(np.isfinite(o).all() for o in outs))
    stats["framework_version"] = ort.__version__
    return stats


def run_torch(module, setting: dict[str, Any], feeds: dict[str, np.ndarray], args) -> dict[str, Any]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = setting["tf32"]
    torch.backends.cudnn.allow_tf32 = setting["tf32"]
    torch.backends.cudnn.benchmark = setting["benchmark"]
    dtype = torch.float16 if setting["fp16"] else torch.float32
    net = module.to("cuda", dtype).eval()
    inputs = [torch.from_numpy(v).to("cuda", dtype) for v in feeds.values()]
    out: list[Any] = []

    def run() -> None:
        with torch.inference_mode():
            out[:] = [net(*inputs)]

    stats = timed(run, torch.cuda.synchronize, args.warmup, args.iters, args.profiled)
    first = out[0][0] if isinstance(out[0], (tuple, list)) else out[0]
    stats["finite_output"] = bool(torch.isfinite(first.float()).all().item())
    stats["framework_version"] = torch.__version__
    return stats


def _cell(model_name: str, path: Path | None, batch: int, framework: str, setting: str,
          allowed: list[str]) -> dict[str, Any]:
    return {"model": model_name, "model_file": path.name if path else None, "batch": batch,
            "framework": framework, "setting": setting, "precisions": allowed}


def _allowed(framework: str, setting: str) -> list[str]:
    if framework == "onnxruntime":
        return ["fp32", "tf32"] if ORT_SETTINGS[setting]["use_tf32"] else ["fp32"]
    s = TORCH_SETTINGS[setting]
    return ["fp16"] if s["fp16"] else (["fp32", "tf32"] if s["tf32"] else ["fp32"])


def measure_onnx(path: Path, batch: int, frameworks: list[str], args, cells: list[dict[str, Any]]) -> None:
    import onnx

    name = path.name.removesuffix(".onnx").removeprefix("light_")
    model = prepare_onnx(path, batch)
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in input_specs(model)}
    if "onnxruntime" in frameworks:
        for setting, conf in ORT_SETTINGS.items():
            cells.append(_measured(_cell(name, path, batch, "onnxruntime", setting, _allowed("onnxruntime", setting)),
                                   lambda conf=conf: run_ort(model, conf, feeds, args)))
    if "torch" in frameworks:
        import copy

        from onnx2torch import convert

        try:
            # onnx2torch needs every tensor's rank: infer the shapes of the prepared model first
            base = convert(onnx.shape_inference.infer_shapes(onnx.ModelProto.FromString(model.SerializeToString())))
        except Exception as exc:  # recorded per cell, the campaign goes on
            for setting in TORCH_SETTINGS:
                cells.append({**_cell(name, path, batch, "torch", setting, _allowed("torch", setting)),
                              "error": f"onnx2torch: {type(exc).__name__}: {exc}"[:300]})
            return
        for setting, conf in TORCH_SETTINGS.items():
            cells.append(_measured(_cell(name, path, batch, "torch", setting, _allowed("torch", setting)),
                                   lambda conf=conf: run_torch(copy.deepcopy(base), conf, feeds, args)))


def measure_torchvision(arch: str, batch: int, frameworks: list[str], args, cells: list[dict[str, Any]]) -> None:
    """A torchvision model with random weights, run natively in PyTorch and exported (dynamo off) for ORT."""
    import torch
    import torchvision

    module = torchvision.models.get_model(arch, weights=None).eval()
    size = 299 if arch.startswith("inception") else 224
    feeds = {"input": np.random.default_rng(1).standard_normal((batch, 3, size, size)).astype(np.float32)}
    export = Path(args.export_dir) / f"{arch}_b{batch}.onnx"
    export.parent.mkdir(parents=True, exist_ok=True)
    if not export.exists():
        torch.onnx.export(module, (torch.from_numpy(feeds["input"]),), str(export), input_names=["input"],
                          opset_version=17, dynamo=False)
    if "torch" in frameworks:
        import copy
        for setting, conf in TORCH_SETTINGS.items():
            cells.append(_measured(_cell(arch, export, batch, "torch", setting, _allowed("torch", setting)),
                                   lambda conf=conf: run_torch(copy.deepcopy(module), conf, feeds, args)))
    if "onnxruntime" in frameworks:
        import onnx
        model = onnx.load(str(export))
        for setting, conf in ORT_SETTINGS.items():
            cells.append(_measured(_cell(arch, export, batch, "onnxruntime", setting, _allowed("onnxruntime", setting)),
                                   lambda conf=conf: run_ort(model, conf, feeds, args)))


def _measured(cell: dict[str, Any], work) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        cell.update(work())
    except Exception as exc:  # one failed cell is recorded, the others still run
        cell["error"] = f"{type(exc).__name__}: {exc}"[:300]
    cell["wall_s"] = round(time.perf_counter() - t0, 2)
    shown = f"{cell.get('kernel_ms', float('nan')):9.3f} ms" if "kernel_ms" in cell else cell.get("error", "")[:80]
    print(f"{cell['model']:>16} b{cell['batch']:<4} {cell['framework']:>11} {cell['setting']:>16} {shown}",
          flush=True)
    return cell


def cmd_measure(args) -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit("validate.py measure: no usable CUDA GPU")
    frameworks = args.frameworks.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    paths: list[Path] = []
    for item in args.models:
        p = Path(item)
        paths += sorted(p.glob("*.onnx")) if p.is_dir() else [p]
    out = Path(args.out)
    cells: list[dict[str, Any]] = json.loads(out.read_text())["cells"] if out.exists() else []
    done = {(c["model"], c["batch"], c["framework"], c["setting"]) for c in cells if "error" not in c}
    cells = [c for c in cells if (c["model"], c["batch"], c["framework"], c["setting"]) in done]
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "method": "kernel_ms = median per-iteration union of CUPTI kernel intervals (torch.profiler), "
                      "memcpy/memset excluded; latency_ms = median host wall time, device-resident inputs"}
    todo: list[tuple[str, Any]] = [(b, p) for b in batches for p in paths]
    todo += [(b, a) for b in batches for a in (args.torchvision.split(",") if args.torchvision else [])]
    for batch, item in todo:
        name = item.name.removesuffix(".onnx").removeprefix("light_") if isinstance(item, Path) else item
        if all((name, batch, f, s) in done for f in frameworks
               for s in (ORT_SETTINGS if f == "onnxruntime" else TORCH_SETTINGS)):
            continue
        new: list[dict[str, Any]] = []
        if isinstance(item, Path):
            measure_onnx(item, batch, frameworks, args, new)
        else:
            measure_torchvision(item, batch, frameworks, args, new)
        cells += [c for c in new if (c["model"], c["batch"], c["framework"], c["setting"]) not in done]
        tmp = out.with_suffix(".partial")
        tmp.write_text(json.dumps({"meta": meta, "cells": cells}, indent=1))
        os.replace(tmp, out)
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- report (asks benanza for the bound)
def cmd_report(args) -> None:
    from benanza.errors import BenanzaError
    from benanza.library import Precision
    from benanza.paths import shipped_db
    from benanza.pipeline import analyze_model

    data = json.loads(Path(args.cells).read_text())
    db = Path(args.db) if args.db else shipped_db()
    models = Path(args.models)
    cache: dict[tuple[str, int, tuple[str, ...]], dict[str, Any] | str] = {}
    rows = []
    for c in data["cells"]:
        if "kernel_ms" not in c:
            rows.append({**c, "status": c.get("error", "not measured")})
            continue
        path = models / f"{c['model']}.onnx"
        if not path.exists():
            path = models / c["model_file"] if c.get("model_file") else path
        key = (str(path), c["batch"], tuple(c["precisions"]))
        if key not in cache:
            try:
                report, _ = analyze_model(path, db, batch=c["batch"],
                                          precisions=frozenset(Precision(p) for p in c["precisions"]))
                cache[key] = report.summary
            except (BenanzaError, FileNotFoundError) as exc:
                cache[key] = str(exc)
        summary = cache[key]
        if isinstance(summary, str):
            rows.append({**c, "status": summary})
            continue
        seq, par = summary.get("LBL_seq (ms)"), summary.get("LBL_par (ms)")
        rows.append({**c, "status": "ok", "LBL_seq (ms)": seq, "LBL_par (ms)": par,
                     "BR_seq": seq / c["kernel_ms"] if seq is not None else None,
                     "BR_par": par / c["kernel_ms"] if par is not None else None,
                     "layer-wise LBL_seq (ms)": next((v for k, v in summary.items()
                                                      if "layer-wise" in k and "seq" in k), None)})
    ok = [r for r in rows if r["status"] == "ok" and r["BR_seq"] is not None]
    print("| model | batch | framework | setting | kernel-only (ms) | latency (ms) | LBL_seq (ms) | BR_seq | BR_par |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] != "ok":
            print(f"| {r['model']} | {r['batch']} | {r['framework']} | {r['setting']} | – | – | – | "
                  f"{r['status'][:60]} | |")
            continue
        flag = " **>1**" if r["BR_seq"] > 1 else ""
        print(f"| {r['model']} | {r['batch']} | {r['framework']} | {r['setting']} | {r['kernel_ms']:.3f} | "
              f"{r['latency_ms']:.3f} | {r['LBL_seq (ms)']:.3f} | {r['BR_seq']:.3f}{flag} | {r['BR_par']:.3f} |")
    above = [r for r in ok if r["BR_seq"] > 1]
    big = [r["BR_seq"] for r in ok if r["batch"] >= 64]
    print(f"\ncells: {len(rows)}, analyzed: {len(ok)}, BR_seq > 1: {len(above)}"
          + (f", median BR_seq at batch >= 64: {statistics.median(big):.3f}" if big else "")
          + f", below 0.5: {sum(r['BR_seq'] < 0.5 for r in ok)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": data.get("meta", {}), "rows": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="time framework runs on the GPU (no benanza code)")
    m.add_argument("models", nargs="*", help="ONNX files or directories of them")
    m.add_argument("--torchvision", default="", help="comma-separated torchvision architectures (random weights)")
    m.add_argument("--export-dir", default="validate_exports", help="where torchvision exports are written")
    m.add_argument("--batches", default="1,64,256")
    m.add_argument("--frameworks", default="onnxruntime,torch")
    m.add_argument("--warmup", type=int, default=5)
    m.add_argument("--iters", type=int, default=10)
    m.add_argument("--profiled", type=int, default=5)
    m.add_argument("--out", required=True, help="cells JSON (resumed if present)")
    r = sub.add_parser("report", help="BR per cell from benanza's bound (CPU)")
    r.add_argument("cells")
    r.add_argument("--models", required=True, help="directory of the ONNX files the cells name")
    r.add_argument("--db", help="performance database (default: the shipped H100 database)")
    r.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    (cmd_measure if args.cmd == "measure" else cmd_report)(args)


if __name__ == "__main__":
    main()
