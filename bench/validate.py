r"""Independent check of benanza's lower bound against framework runs timed by separate code.

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

Transformers (``--transformers bert_base,gpt2_small,vit_b_16``): each is built with random
weights, offline, by ``bench/exports.py`` (the configs and exporters the transformer campaign
analyzes: BERT-base and GPT-2 small with the dynamo exporter, ViT-B/16 with TorchScript; that
file imports benanza only in its own ``main``), run natively in PyTorch eager in the settings
``fp32``, ``tf32``, ``fp16`` of ``TORCH_SETTINGS`` with the framework's own attention (HF
``attn_implementation="sdpa"``, torchvision's ``nn.MultiheadAttention`` fast path: fused
flash / memory-efficient kernels where PyTorch picks them) or, with ``--attn eager``, the
unfused path (HF eager; ViT with the fast path off and SDPA's math backend), and run from the
export (int64 ``input_ids`` and an all-ones ``attention_mask`` where the export has one, at
``--seq-len``) in ONNX Runtime's CUDA EP in fp32, tf32 and fp16 (``bench/onnx_fp16.py`` casts the
export; it shares no code with benanza's own fp16 capture). Each cell records the attention
implementation and the kernels that look like fused attention (``fused_attention_kernels``);
``report`` analyzes the export at the cell's batch and sequence length and says which cells ran
fused attention. ``--dry-run`` needs no GPU: it exports, casts and type-checks the fp16 copies,
builds the feeds, runs batch 1 on the CPU in PyTorch and (when installed) ONNX Runtime as a
check that the export and the native model agree, and prints the planned cells.

Usage (``measure`` on the GPU machine, ``report`` anywhere)::

    python bench/validate.py measure models/zoo --batches 1,64,256 --out cells.json
    python bench/validate.py measure --torchvision resnet18,mobilenet_v2 --export-dir tv --out tv.json
    python bench/validate.py measure --transformers bert_base,gpt2_small,vit_b_16 --seq-len 128 \
        --batches 1,32 --export-dir tx --out tx.json [--attn eager] [--dry-run]
    python bench/validate.py report cells.json --models models/zoo [--db perfdb/h100.columns.xz] [--json OUT]
    python bench/validate.py report tx.json --models tx --db perf.db.gz   # the transformer database
    python bench/validate.py self-check     # anywhere: the fp16 copy, feeds and trace reading on the CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/exports.py, bench/onnx_fp16.py (no benanza)

ITER_RANGE = "validate.iter"
SEED = 0  # torch's seed before building a model: the native module and its export get the same weights
# (framework, setting) -> what the setting allows: tf32 for fp32 data, fp16 data, search mode.
ORT_SETTINGS = {
    "exhaustive-fp32": {"search": "EXHAUSTIVE", "use_tf32": 0},
    "exhaustive-tf32": {"search": "EXHAUSTIVE", "use_tf32": 1},
    "heuristic-fp32": {"search": "HEURISTIC", "use_tf32": 0},
    "heuristic-tf32": {"search": "HEURISTIC", "use_tf32": 1},
    "exhaustive-fp16": {"search": "EXHAUSTIVE", "use_tf32": 0, "fp16": True},  # runs bench/onnx_fp16.py's copy
}
CNN_ORT = ("exhaustive-fp32", "exhaustive-tf32", "heuristic-fp32", "heuristic-tf32")
TORCH_SETTINGS = {
    "fp32-benchmark": {"tf32": False, "fp16": False, "benchmark": True},
    "fp32": {"tf32": False, "fp16": False, "benchmark": False},
    "tf32-benchmark": {"tf32": True, "fp16": False, "benchmark": True},
    "tf32": {"tf32": True, "fp16": False, "benchmark": False},
    "fp16-benchmark": {"tf32": False, "fp16": True, "benchmark": True},
    "fp16": {"tf32": False, "fp16": True, "benchmark": False},
}
# The transformers' settings: cudnn.benchmark only concerns ViT's one patch convolution.
TRANSFORMER_ORT = ("exhaustive-fp32", "exhaustive-tf32", "exhaustive-fp16")
TRANSFORMER_TORCH = ("fp32", "tf32", "fp16")
# bench/exports.py name -> the exporter whose file the transformer campaign analyzes (its --models default)
TRANSFORMER_EXPORTER = {"bert_base": "dynamo", "gpt2_small": "dynamo", "vit_b_16": "ts"}
# Lower-case pieces of the kernel names of fused attention (PyTorch flash / memory-efficient / cuDNN
# SDPA, ONNX Runtime's contrib attention); the transformer campaign's list plus "mha".
FUSED_ATTENTION_MARKERS = ("flash", "fmha", "attention", "sdpa", "mha")


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


def kernel_times(trace_path: Path) -> tuple[list[float], list[float], list[int], dict[str, float]]:
    """Per profiled iteration: kernel-union ms, memcpy/memset-union ms, kernel count; and each
    kernel name's launches per iteration."""
    events = json.loads(trace_path.read_text())["traceEvents"]
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("cat") == "user_annotation" and e.get("name") == ITER_RANGE)
    kern: list[list[tuple[float, float]]] = [[] for _ in windows]
    copy: list[list[tuple[float, float]]] = [[] for _ in windows]
    names: dict[str, float] = {}
    for e in events:
        cat = e.get("cat")
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        s, d = float(e["ts"]), float(e.get("dur", 0))
        for i, (ws, we) in enumerate(windows):
            if ws <= s <= we:
                (kern if cat == "kernel" else copy)[i].append((s, s + d))
                if cat == "kernel":
                    names[e.get("name", "")] = names.get(e.get("name", ""), 0) + 1 / len(windows)
                break
    return [union_ms(k) for k in kern], [union_ms(c) for c in copy], [len(k) for k in kern], names


def fused_attention(names: dict[str, float]) -> dict[str, float]:
    """The kernels (name -> launches per iteration) whose names look like fused attention."""
    return {n: c for n, c in sorted(names.items()) if any(m in n.lower() for m in FUSED_ATTENTION_MARKERS)}


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
        kern, copy, count, names = kernel_times(path)
    del torch
    if not kern or not any(count):
        raise RuntimeError("the profiler recorded no GPU kernels")
    return {"kernel_ms": statistics.median(kern), "kernel_ms_min": min(kern), "kernel_ms_iters": kern,
            "memcpy_ms": statistics.median(copy), "fused_attention_kernels": fused_attention(names),
            "kernels_per_iter": statistics.median(count), "latency_ms": statistics.median(lat),
            "latency_ms_min": min(lat), "iters": iters, "profiled_iters": profiled}


def ort_session(model, setting: dict[str, Any], feeds: dict[str, np.ndarray]) -> tuple[Any, Any, list[Any]]:
    """A CUDA EP session on ``model`` (a ModelProto or an ONNX file's path, the setting's precision
    already in it) and its I/O binding: the inputs copied to the GPU once, outputs on the GPU
    (preallocated where the export's output shapes are static: a CUDA graph replays into fixed
    addresses). ``setting["cuda_options"]``: further CUDA EP options. Returns (session, binding,
    the device values to keep alive)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    cuda = {"device_id": 0, "cudnn_conv_algo_search": setting["search"], "use_tf32": setting["use_tf32"],
            **setting.get("cuda_options", {})}
    source = str(model) if isinstance(model, (str, Path)) else model.SerializeToString()
    sess = ort.InferenceSession(source, opts, providers=[("CUDAExecutionProvider", cuda), "CPUExecutionProvider"])
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"ONNX Runtime has no CUDA EP here ({sess.get_providers()})")
    binding = sess.io_binding()
    keep = []
    for name, value in feeds.items():
        dev = ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0)
        keep.append(dev)
        binding.bind_ortvalue_input(name, dev)
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
    for out in sess.get_outputs():
        if all(isinstance(d, int) for d in out.shape) and out.type in types:
            dev = ort.OrtValue.ortvalue_from_shape_and_type(out.shape, types[out.type], "cuda", 0)
            keep.append(dev)
            binding.bind_ortvalue_output(out.name, dev)
        else:
            binding.bind_output(out.name, "cuda", 0)
    return sess, binding, keep


def run_ort(model, setting: dict[str, Any], feeds: dict[str, np.ndarray], args) -> dict[str, Any]:
    """``model``: a ModelProto or the path of an ONNX file (the setting's precision already in it)."""
    import onnxruntime as ort
    import torch

    sess, binding, _keep = ort_session(model, setting, feeds)
    stats = timed(lambda: sess.run_with_iobinding(binding), torch.cuda.synchronize,
                  args.warmup, args.iters, args.profiled)
    outs = binding.copy_outputs_to_cpu()
    stats["finite_output"] = bool(all(np.isfinite(o).all() for o in outs))
    stats["output_mean_abs"] = float(np.abs(outs[0].astype(np.float64)).mean())
    stats["framework_version"] = ort.__version__
    return stats


@contextlib.contextmanager
def attention_scope(math_attention: bool) -> Iterator[None]:
    """With ``math_attention``: nn.MultiheadAttention's fast path off and SDPA's math backend only
    (the unfused attention, ``--attn eager``); else PyTorch's own choice."""
    if not math_attention:
        yield
        return
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def run_torch(module, setting: dict[str, Any], feeds: dict[str, np.ndarray], args,
              math_attention: bool = False) -> dict[str, Any]:
    """``math_attention``: see :func:`attention_scope` (integer feeds such as token ids keep their type)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = setting["tf32"]
    torch.backends.cudnn.allow_tf32 = setting["tf32"]
    torch.backends.cudnn.benchmark = setting["benchmark"]
    dtype = torch.float16 if setting["fp16"] else torch.float32
    net = module.to("cuda", dtype).eval()
    inputs = [torch.from_numpy(v).to("cuda", dtype if v.dtype.kind == "f" else None) for v in feeds.values()]
    out: list[Any] = []

    def run() -> None:
        with torch.inference_mode():
            out[:] = [net(*inputs)]

    with attention_scope(math_attention):
        stats = timed(run, torch.cuda.synchronize, args.warmup, args.iters, args.profiled)
    first = out[0][0] if isinstance(out[0], (tuple, list)) else out[0]
    stats["finite_output"] = bool(torch.isfinite(first.float()).all().item())
    stats["output_mean_abs"] = float(first.double().abs().mean().item())
    stats["framework_version"] = torch.__version__
    return stats


def _cell(model_name: str, path: Path | None, batch: int, framework: str, setting: str,
          allowed: list[str]) -> dict[str, Any]:
    return {"model": model_name, "model_file": path.name if path else None, "batch": batch,
            "framework": framework, "setting": setting, "precisions": allowed}


def _allowed(framework: str, setting: str) -> list[str]:
    if framework == "onnxruntime":
        conf = ORT_SETTINGS[setting]
        return ["fp16"] if conf.get("fp16") else ["fp32", "tf32"] if conf["use_tf32"] else ["fp32"]
    s = TORCH_SETTINGS[setting]
    return ["fp16"] if s["fp16"] else (["fp32", "tf32"] if s["tf32"] else ["fp32"])


def measure_onnx(path: Path, batch: int, frameworks: list[str], args, cells: list[dict[str, Any]]) -> None:
    import onnx

    name = path.name.removesuffix(".onnx").removeprefix("light_")
    model = prepare_onnx(path, batch)
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in input_specs(model)}
    if "onnxruntime" in frameworks:
        for setting in CNN_ORT:
            cells.append(_measured(_cell(name, path, batch, "onnxruntime", setting, _allowed("onnxruntime", setting)),
                                   lambda conf=ORT_SETTINGS[setting]: run_ort(model, conf, feeds, args)))
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
        for setting in CNN_ORT:
            cells.append(_measured(_cell(arch, export, batch, "onnxruntime", setting, _allowed("onnxruntime", setting)),
                                   lambda conf=ORT_SETTINGS[setting]: run_ort(model, conf, feeds, args)))


# ---------------------------------------------------------------- transformers (no benanza)
def transformer_feeds(names: list[str], batch: int, seq: int, vocab: int | None) -> dict[str, np.ndarray]:
    """The inputs of one inference, in ``names``' order: random token ids below ``vocab`` and an
    all-ones attention mask at ``batch`` x ``seq``, or (``vocab`` None) a batch of 224 x 224 images."""
    rng = np.random.default_rng(1)
    known = {"input_ids", "attention_mask"} if vocab is not None else {"input"}
    if unknown := [n for n in names if n not in known]:
        raise ValueError(f"no feed for model input(s) {unknown}")
    if vocab is None:
        return {names[0]: rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}
    return {n: rng.integers(0, vocab, (batch, seq), dtype=np.int64) if n == "input_ids"
            else np.ones((batch, seq), np.int64) for n in names}


def half_feeds(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {n: v.astype(np.float16) if v.dtype.kind == "f" else v for n, v in feeds.items()}


def onnx_inputs(path: Path) -> list[str]:
    """The data inputs of an ONNX file (its graph inputs that are no initializer)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


class Transformer:
    """One of bench/exports.py's transformers, built once: the native module (attention as asked),
    its export (the file benanza analyzes) and the fp16 copy of the export for ONNX Runtime."""

    def __init__(self, name: str, attn: str, export_dir: Path) -> None:
        import exports  # bench/exports.py: the configs and exporters; benanza only in its main()
        import onnx
        import onnx_fp16
        import torch

        self.name, self.exporter, self.attn = name, TRANSFORMER_EXPORTER[name], attn
        self.path = export_dir / f"{name}_{self.exporter}.onnx"
        self.fp16_path = export_dir / f"{name}_{self.exporter}_fp16.onnx"
        export_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        if not self.path.exists():
            torch.manual_seed(SEED)
            exports.export(name, self.exporter, export_dir)
        if not self.fp16_path.exists():
            half = onnx_fp16.to_fp16(onnx.load(str(self.path)), str(self.path))
            onnx.save(half, str(self.fp16_path))
        self.prepare_s = time.perf_counter() - t0
        torch.manual_seed(SEED)  # the weights of the export (exports.export builds its model the same way)
        if name in exports.TEXT:
            self.module, _, self.names = exports._text_model(name)
            self.module.inner.set_attn_implementation("eager" if attn == "eager" else "sdpa")
            self.vocab: int | None = self.module.inner.config.vocab_size
            implementation = self.module.inner.config._attn_implementation
            self.attn_implementation = f"transformers attn_implementation={implementation}"
        else:
            import torchvision

            self.module = getattr(torchvision.models, name)(weights=None).eval()
            self.names, self.vocab = ["input"], None
            self.attn_implementation = ("nn.MultiheadAttention, fast path off, SDPA math backend" if attn == "eager"
                                        else "nn.MultiheadAttention (fast path and SDPA backends as PyTorch picks)")
        if (found := onnx_inputs(self.path)) != self.names:
            raise SystemExit(f"validate.py: {self.path}: inputs {found}, expected {self.names}")

    def feeds(self, batch: int, seq: int) -> dict[str, np.ndarray]:
        return transformer_feeds(self.names, batch, seq, self.vocab)

    def cell(self, batch: int, seq: int, framework: str, setting: str) -> dict[str, Any]:
        c = {**_cell(self.name, self.path, batch, framework, setting, _allowed(framework, setting)),
             "export": self.exporter, "seq_len": seq if self.vocab is not None else None}
        if framework == "torch":
            return {**c, "attention": self.attn, "attn_implementation": self.attn_implementation}
        ort_model = self.fp16_path.name if ORT_SETTINGS[setting].get("fp16") else self.path.name
        return {**c, "ort_model_file": ort_model,
                "attn_implementation": "the export's ops, as ONNX Runtime's graph optimizer leaves them"}


def measure_transformer(model: Transformer, batch: int, seq: int, frameworks: list[str], args,
                        cells: list[dict[str, Any]], done: set[tuple[Any, ...]]) -> None:
    """The cells of one model at one batch that ``done`` (keys of measured cells) lacks."""
    import copy

    feeds = model.feeds(batch, seq)
    if "torch" in frameworks:
        for setting in args.torch_settings:
            if _key(model.cell(batch, seq, "torch", setting)) in done:
                continue
            cells.append(_measured(model.cell(batch, seq, "torch", setting),
                                   lambda conf=TORCH_SETTINGS[setting]: run_torch(
                                       copy.deepcopy(model.module), conf, feeds, args,
                                       math_attention=model.attn == "eager")))
    if "onnxruntime" in frameworks:
        for setting in TRANSFORMER_ORT:
            if _key(model.cell(batch, seq, "onnxruntime", setting)) in done:
                continue
            conf = ORT_SETTINGS[setting]
            path, fed = (model.fp16_path, half_feeds(feeds)) if conf.get("fp16") else (model.path, feeds)
            cells.append(_measured(model.cell(batch, seq, "onnxruntime", setting),
                                   lambda conf=conf, path=path, fed=fed: run_ort(path, conf, fed, args)))


def cpu_output(ort: Any, path: Path, feeds: dict[str, np.ndarray], head_input: bool) -> np.ndarray:
    """The first output of one ONNX Runtime CPU run of ``path`` (``head_input``: the last Gemm's input)."""
    import onnx

    proto = onnx.load(str(path))
    name = None
    if head_input:
        name = [n for n in proto.graph.node if n.op_type == "Gemm"][-1].input[0]
        elem = proto.graph.input[0].type.tensor_type.elem_type  # float or float16, as the whole copy
        proto.graph.output.append(onnx.helper.make_tensor_value_info(name, elem, None))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # level 3's CPU-only NCHWc layout pass crashes ORT 1.32 on fp16 convolutions; the CUDA EP has none
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run([name] if name else None, feeds)[0].astype(np.float64)


def dry_run(names: list[str], batches: list[int], frameworks: list[str], args) -> None:
    """Everything ``measure --transformers`` prepares, on the CPU: exports, fp16 copies (type-checked),
    feeds; batch 1 in PyTorch and (when installed) ONNX Runtime on the CPU, compared; the planned cells."""
    import torch

    planned = 0
    for name in names:
        model = Transformer(name, args.attn, Path(args.export_dir))
        print(f"{name}: export {model.path} ({model.path.stat().st_size / 2**20:.0f} MB), fp16 copy "
              f"{model.fp16_path.name} (type-checked), inputs {model.names}, {model.attn_implementation}; "
              f"prepared in {model.prepare_s:.1f} s", flush=True)
        for batch in batches:
            shapes = {n: f"{v.dtype}{list(v.shape)}" for n, v in model.feeds(batch, args.seq_len).items()}
            print(f"  batch {batch}: feeds {shapes}", flush=True)
        feeds = model.feeds(1, args.seq_len)
        captured: list[Any] = []
        # ViT's head is zero-initialized (its output is 0 whatever ran): compare the head's input instead
        hook = model.module.heads.register_forward_hook(lambda m, i, o, into=captured: into.append(i[0])) \
            if model.vocab is None else None
        with torch.inference_mode(), attention_scope(model.attn == "eager"):
            out = model.module.eval()(*[torch.from_numpy(v) for v in feeds.values()])
        if hook is not None:
            hook.remove()
        native = (captured[0] if captured else out[0] if isinstance(out, (tuple, list)) else out).double().numpy()
        try:
            import onnxruntime as ort
        except ImportError:
            print("  (onnxruntime not installed: the export is not run on the CPU)")
        else:
            for path, fed in ((model.path, feeds), (model.fp16_path, half_feeds(feeds))):
                got = cpu_output(ort, path, fed, head_input=model.vocab is None)
                print(f"  batch 1 on the CPU: {path.name} in ONNX Runtime vs native PyTorch fp32"
                      f"{' (input of the head)' if captured else ''}: max |diff| "
                      f"{float(np.abs(got - native).max()):.3g}, max |value| {float(np.abs(native).max()):.3g}",
                      flush=True)
        for batch in batches:
            for fw in frameworks:
                settings = args.torch_settings if fw == "torch" else TRANSFORMER_ORT
                planned += len(settings)
                print(f"  planned b{batch} {fw}: {', '.join(settings)}")
    print(f"planned cells: {planned}")


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


def _key(cell: dict[str, Any]) -> tuple[Any, ...]:
    return cell["model"], cell["batch"], cell["framework"], cell["setting"], cell.get("attention")


def check_independent() -> None:
    """``measure`` must time with code that shares nothing with benanza: refuse if it got imported."""
    if found := sorted(m for m in sys.modules if m.split(".")[0] == "benanza"):
        sys.exit(f"validate.py measure: benanza was imported ({', '.join(found[:3])}): the timing is not independent")


def cmd_measure(args) -> None:
    import torch

    frameworks = args.frameworks.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    transformers = [n for n in args.transformers.split(",") if n]
    if unknown := [n for n in transformers if n not in TRANSFORMER_EXPORTER]:
        sys.exit(f"validate.py measure: --transformers: no model {unknown} (known: {', '.join(TRANSFORMER_EXPORTER)})")
    if unknown := [s for s in args.torch_settings if s not in TORCH_SETTINGS]:
        sys.exit(f"validate.py measure: --torch-settings: no setting {unknown} (known: {', '.join(TORCH_SETTINGS)})")
    if args.dry_run:
        if not transformers:
            sys.exit("validate.py measure: --dry-run prepares --transformers only")
        dry_run(transformers, batches, frameworks, args)
        check_independent()
        print("benanza not imported: the preparation shares no code with it")
        return
    if not torch.cuda.is_available():
        sys.exit("validate.py measure: no usable CUDA GPU")
    paths: list[Path] = []
    for item in args.models:
        p = Path(item)
        paths += sorted(p.glob("*.onnx")) if p.is_dir() else [p]
    out = Path(args.out)
    cells: list[dict[str, Any]] = json.loads(out.read_text())["cells"] if out.exists() else []
    done = {_key(c) for c in cells if "error" not in c}
    cells = [c for c in cells if _key(c) in done]
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "method": "kernel_ms = median per-iteration union of CUPTI kernel intervals (torch.profiler), "
                      "memcpy/memset excluded; latency_ms = median host wall time, device-resident inputs",
            "imports_benanza": False}  # checked before each write (_write)
    if transformers:
        import transformers as hf

        meta["transformers"] = hf.__version__
    if "onnxruntime" in frameworks:
        with contextlib.suppress(ImportError):
            import onnxruntime as ort

            meta["onnxruntime"] = ort.__version__
    todo: list[tuple[str, Any]] = [(b, p) for b in batches for p in paths]
    todo += [(b, a) for b in batches for a in (args.torchvision.split(",") if args.torchvision else [])]
    for batch, item in todo:
        name = item.name.removesuffix(".onnx").removeprefix("light_") if isinstance(item, Path) else item
        if all((name, batch, f, s, None) in done for f in frameworks
               for s in (CNN_ORT if f == "onnxruntime" else TORCH_SETTINGS)):
            continue
        new: list[dict[str, Any]] = []
        if isinstance(item, Path):
            measure_onnx(item, batch, frameworks, args, new)
        else:
            measure_torchvision(item, batch, frameworks, args, new)
        cells += [c for c in new if _key(c) not in done]
        _write(out, meta, cells)
        torch.cuda.empty_cache()
    for name in transformers:
        model = None
        for batch in batches:
            wanted = [(name, batch, "torch", s, args.attn) for s in args.torch_settings if "torch" in frameworks]
            wanted += [(name, batch, "onnxruntime", s, None) for s in TRANSFORMER_ORT if "onnxruntime" in frameworks]
            if all(k in done for k in wanted):
                continue
            model = model or Transformer(name, args.attn, Path(args.export_dir))
            new = []
            measure_transformer(model, batch, args.seq_len, frameworks, args, new, done)
            cells += [c for c in new if _key(c) not in done]
            _write(out, meta, cells)
            torch.cuda.empty_cache()
        del model
    check_independent()


def _write(out: Path, meta: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    check_independent()  # before every write: the file's "imports_benanza": false stays true
    tmp = out.with_suffix(".partial")
    tmp.write_text(json.dumps({"meta": meta, "cells": cells}, indent=1))
    os.replace(tmp, out)


# ---------------------------------------------------------------- report (asks benanza for the bound)
def cmd_report(args) -> None:
    from benanza.store.shipped import shipped_db

    try:
        data = json.loads(Path(args.cells).read_text())
        data["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"validate.py report: {args.cells}: not a cells JSON of validate.py measure ({type(exc).__name__}: "
                 f"{str(exc)[:120]})")
    with contextlib.ExitStack() as stack:
        db = Path(args.db) if args.db else shipped_db()
        if db.suffix == ".gz":  # the transformer campaign's perf.db.gz: read from a private copy
            import gzip
            import shutil

            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory())) / db.name.removesuffix(".gz")
            try:
                with gzip.open(db, "rb") as src, open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            except (OSError, EOFError) as exc:
                sys.exit(f"validate.py report: {db}: cannot unpack: {exc}")
            db = tmp
        rows = _report_rows(data, db, Path(args.models))
    _print_report(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": data.get("meta", {}), "rows": rows}, indent=1))


def _report_rows(data: dict[str, Any], db: Path, models: Path) -> list[dict[str, Any]]:
    """One row per cell: the bound of the cell's model, batch, sequence length and precisions, and BR."""
    from benanza.errors import BenanzaError
    from benanza.library import Precision
    from benanza.workflows.analysis import analyze_model

    cache: dict[tuple[str, int, tuple[str, ...], int | None], dict[str, Any] | str] = {}
    rows = []
    for c in data["cells"]:
        if "kernel_ms" not in c:
            rows.append({**c, "status": c.get("error", "not measured")})
            continue
        path = models / f"{c['model']}.onnx"
        if not path.exists():
            path = models / c["model_file"] if c.get("model_file") else path
        key = (str(path), c["batch"], tuple(c["precisions"]), c.get("seq_len"))
        if key not in cache:
            try:
                report, _ = analyze_model(path, db, batch=c["batch"], seq_len=c.get("seq_len"),
                                          precisions=frozenset(Precision(p) for p in c["precisions"]))
                cache[key] = report.summary
            except (BenanzaError, FileNotFoundError) as exc:
                cache[key] = str(exc)
        summary = cache[key]
        if isinstance(summary, str):
            rows.append({**c, "status": summary})
            continue
        seq, par = summary.lbl_seq_ms, summary.lbl_par_ms
        rows.append({**c, "status": "ok", "LBL_seq (ms)": seq, "LBL_par (ms)": par,
                     "BR_seq": seq / c["kernel_ms"] if seq is not None else None,
                     "BR_par": par / c["kernel_ms"] if par is not None else None,
                     "layer-wise LBL_seq (ms)": summary.layerwise_seq_ms})
    return rows


def fused_column(cell: dict[str, Any]) -> str:
    """"yes (kernel x launches per iteration)" / "no" for a transformer cell, "–" where not recorded."""
    if "fused_attention_kernels" not in cell or "seq_len" not in cell:
        return "–"
    found = cell["fused_attention_kernels"]
    if not found:
        return "no"
    name, count = max(found.items(), key=lambda kv: kv[1])
    short = name.split("(")[0].split("<")[0].strip()[:48].replace("|", "/")
    more = f" +{len(found) - 1} more" if len(found) > 1 else ""
    return f"yes ({short} x{count:g}{more})"


def _print_report(rows: list[dict[str, Any]]) -> None:
    ok = [r for r in rows if r["status"] == "ok" and r["BR_seq"] is not None]
    print("| model | batch | framework | setting | kernel-only (ms) | latency (ms) | LBL_seq (ms) | BR_seq | BR_par | "
          "framework ran fused attention |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        setting = r["setting"] + (f" ({r['attention']} attn)" if r.get("attention") else "")
        if r["status"] != "ok":
            print(f"| {r['model']} | {r['batch']} | {r['framework']} | {setting} | – | – | – | "
                  f"{r['status'][:60]} | | {fused_column(r)} |")
            continue
        flag = " **>1**" if r["BR_seq"] > 1 else ""
        print(f"| {r['model']} | {r['batch']} | {r['framework']} | {setting} | {r['kernel_ms']:.3f} | "
              f"{r['latency_ms']:.3f} | {r['LBL_seq (ms)']:.3f} | {r['BR_seq']:.3f}{flag} | {r['BR_par']:.3f} | "
              f"{fused_column(r)} |")
    above = [r for r in ok if r["BR_seq"] > 1]
    big = [r["BR_seq"] for r in ok if r["batch"] >= 64]
    fused = [r for r in ok if fused_column(r).startswith("yes")]
    print(f"\ncells: {len(rows)}, analyzed: {len(ok)}, BR_seq > 1: {len(above)}"
          + (f", median BR_seq at batch >= 64: {statistics.median(big):.3f}" if big else "")
          + f", below 0.5: {sum(r['BR_seq'] < 0.5 for r in ok)}"
          + (f", ran fused attention: {len(fused)} (max BR_seq {max(r['BR_seq'] for r in fused):.3f})"
             if fused else ""))
    for r in above:
        print(f"BR_seq > 1: {r['model']} b{r['batch']} {r['framework']} {r['setting']}: {r['BR_seq']:.3f}")


# ---------------------------------------------------------------- the measuring side's own checks
CHECK_EXPORTS = Path(__file__).resolve().parent.parent / "tests" / "data" / "exports"  # tiny real exports


def _cpu_run(model: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED  # see cpu_output
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _mask_graph() -> Any:
    """HF's additive mask, (1 - mask) * float32.min + scores, with the constants as exporters write them."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32))),
             helper.make_node("Sub", ["one", "m"], ["keep"]),
             helper.make_node("Mul", ["keep", "fmin"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["out"])]
    graph = helper.make_graph(
        nodes, "mask", [helper.make_tensor_value_info("mask", TensorProto.INT64, [2]),
                        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "fmin")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def self_check() -> list[str]:
    """The measuring side's own pieces on the CPU (onnx and ONNX Runtime): the fp16 copy ONNX Runtime
    runs (bench/onnx_fp16.py) on the checked-in tiny exports, the feeds, the reading of a trace and its
    fused-attention kernels, and that nothing here imports benanza. Returns what it checked."""
    import subprocess

    import onnx
    import onnx_fp16
    from onnx import TensorProto, helper, numpy_helper

    checked = []
    for stem in ("tinybert_dynamo18", "tinygpt2_dynamo18", "tinyvit_ts17"):
        model = onnx.load(str(CHECK_EXPORTS / f"{stem}.onnx"))
        half = onnx_fp16.to_fp16(model, stem)
        assert all(t.data_type != TensorProto.FLOAT for t in half.graph.initializer), stem
        assert all(o.type.tensor_type.elem_type == TensorProto.FLOAT16 for o in half.graph.output), stem
        if "vit" in stem:
            feeds = {"pixel_values": np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)}
        else:  # token ids; BERT's mask hides the last 4 tokens (the mask's float32 minimum, clipped, in use)
            feeds = transformer_feeds([i.name for i in model.graph.input], 2, 16, 64)
            if "attention_mask" in feeds:
                feeds["attention_mask"][:, -4:] = 0
        full, cast = _cpu_run(model, feeds), _cpu_run(half, half_feeds(feeds))
        assert cast.dtype == np.float16 and np.isfinite(cast).all(), stem
        assert np.abs(full - cast.astype(np.float32)).max() < 0.01 * np.abs(full).max(), stem
    checked.append("the fp16 copies of three real exports run and agree with fp32")
    half = onnx_fp16.to_fp16(_mask_graph(), "mask")
    fmin = numpy_helper.to_array(next(t for t in half.graph.initializer if t.name == "fmin"))
    assert fmin.dtype == np.float16 and float(fmin) == -65504.0  # a plain astype gives -inf: 0 * -inf = NaN
    cast_to = next(a.i for n in half.graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to")
    assert cast_to == TensorProto.FLOAT16
    out = _cpu_run(half, {"mask": np.array([1, 0], np.int64), "scores": np.array([0.5, 0.25], np.float16)})
    assert out.tolist() == [0.5, -65504.0]
    checked.append("the fp16 copy clips the mask's float32 minimum instead of making NaN")
    model = _mask_graph()
    model.graph.node.append(helper.make_node("RandomNormal", [], ["noise"], name="drop<me>", shape=[2]))
    try:
        onnx_fp16.to_fp16(model, "m.onnx")
        raise AssertionError("a RandomNormal node was cast")
    except onnx_fp16.Fp16Error as exc:
        assert str(exc) == "m.onnx: RandomNormal node 'drop<me>': not covered by the fp16 cast", exc
    model = _mask_graph()
    model.graph.node[1].CopyFrom(helper.make_node("Constant", [], ["one"], value_float=1.0))
    try:
        onnx_fp16.to_fp16(model, "m.onnx")
        raise AssertionError("a value_float Constant was cast")
    except onnx_fp16.Fp16Error as exc:
        assert str(exc).startswith("m.onnx: Constant node 'one': value_float attribute"), exc
    checked.append("the fp16 copy refuses what it does not cover in one line")
    feeds = transformer_feeds(["input_ids", "attention_mask"], 3, 128, 30522)
    assert list(feeds) == ["input_ids", "attention_mask"]
    assert feeds["input_ids"].dtype == np.int64 and feeds["input_ids"].shape == (3, 128)
    assert 0 <= feeds["input_ids"].min() and feeds["input_ids"].max() < 30522 and (feeds["attention_mask"] == 1).all()
    image = transformer_feeds(["input"], 2, 128, None)["input"]
    assert image.shape == (2, 3, 224, 224) and image.dtype == np.float32
    assert half_feeds({"input": image})["input"].dtype == np.float16
    try:
        transformer_feeds(["input_ids", "token_type_ids"], 1, 8, 10)
        raise AssertionError("a feed was made up")
    except ValueError as exc:
        assert "no feed for model input" in str(exc), exc
    checked.append("the feeds follow the export's inputs")
    flash = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4> >(Flash_fwd_params)"
    events = [{"cat": "user_annotation", "name": ITER_RANGE, "ts": 0, "dur": 100},
              {"cat": "user_annotation", "name": ITER_RANGE, "ts": 200, "dur": 100}]
    for start in (0, 200):
        events += [{"cat": "kernel", "name": "sm90_xmma_gemm_f16f16", "ts": start + 1, "dur": 10},
                   {"cat": "kernel", "name": "sm90_xmma_gemm_f16f16", "ts": start + 5, "dur": 10},  # overlaps
                   {"cat": "kernel", "name": flash, "ts": start + 20, "dur": 30},
                   {"cat": "kernel", "name": "cunn_SoftMaxForward", "ts": start + 60, "dur": 5},
                   {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": start + 70, "dur": 4}]
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        trace.write_text(json.dumps({"traceEvents": events}))
        kern, copy, count, names = kernel_times(trace)
    assert kern == [0.049, 0.049] and copy == [0.004, 0.004] and count == [4, 4], (kern, copy, count)
    assert names == {"sm90_xmma_gemm_f16f16": 2, flash: 1, "cunn_SoftMaxForward": 1}
    assert fused_attention(names) == {flash: 1}
    cell = {"seq_len": 128, "fused_attention_kernels": fused_attention(names)}
    assert fused_column(cell) == "yes (void pytorch_flash::flash_fwd_kernel x1)"
    assert fused_column({**cell, "fused_attention_kernels": {}}) == "no"
    assert fused_column({"fused_attention_kernels": {}}) == "–"  # a CNN cell
    checked.append("a trace's kernel time per iteration and its fused-attention kernels")
    here = Path(__file__).resolve().parent
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import validate, exports, onnx_fp16; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'benanza'))")
    done = subprocess.run([sys.executable, "-c", code, str(here)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
    checked.append("the measuring side imports nothing from benanza")
    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Usage" + __doc__.split("Usage")[-1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="time framework runs on the GPU (no benanza code)")
    m.add_argument("models", nargs="*", help="ONNX files or directories of them")
    m.add_argument("--torchvision", default="", help="comma-separated torchvision architectures (random weights)")
    m.add_argument("--transformers", default="",
                   help=f"comma-separated bench/exports.py transformers ({', '.join(TRANSFORMER_EXPORTER)}): "
                        "native PyTorch and their exports in ONNX Runtime fp32/tf32/fp16")
    m.add_argument("--seq-len", type=int, default=128, help="sequence length of the text models (ViT's is fixed)")
    m.add_argument("--attn", choices=("native", "eager"), default="native",
                   help="PyTorch attention of the transformers: native (HF sdpa, MHA fast path: fused kernels "
                        "where PyTorch picks them) or eager (unfused)")
    m.add_argument("--torch-settings", type=lambda t: [s for s in t.split(",") if s],
                   default=list(TRANSFORMER_TORCH), help="TORCH_SETTINGS names the transformers run in")
    m.add_argument("--dry-run", action="store_true",
                   help="transformers: export, cast, build the feeds, run batch 1 on the CPU, print the cells")
    m.add_argument("--export-dir", default="validate_exports", help="where torchvision and transformer exports go")
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
    sub.add_parser("self-check", help="check the measuring side's own pieces on the CPU (onnx, ONNX Runtime)")
    args = parser.parse_args()
    if args.cmd == "self-check":
        print("\n".join(f"ok: {what}" for what in self_check()))
        return
    (cmd_measure if args.cmd == "measure" else cmd_report)(args)


if __name__ == "__main__":
    main()
