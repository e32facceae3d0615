"""The CHILD side of ``benanza profile`` (``python -m benanza.profile.capture_child``): runs the
materialized model in one framework, inside the profiler and the library API logs or alone for
latency, and prints one JSON report as its last stdout line.

Why a module of its own: it is the only code that imports a framework (torch, onnxruntime),
and it runs in a process of its own; the parent side (``capture.py``) never imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.phases import Phases
from benanza.profile.capture_protocol import (
    ALLOW_TF32,
    CAPTURE_PRECISIONS,
    CHILD_TIMEOUT_S,
    LAUNCHED_ENV,
    NO_GPU_EXIT,
    OPTIMIZED,
    ORT_ALGO_SEARCH,
    SEED,
    AlgoSearch,
    Framework,
)
from benanza.profile.ranges import NODE_RANGE, RUN_RANGE


class NoGpu(Exception):
    """Raised in a child that finds no usable CUDA device."""


class Refused(Exception):
    """Raised in a child when the framework cannot run the model; the message is the whole one-line report."""


def _random_feeds(specs: Sequence[tuple[str, Sequence[Any], str]], rng: np.random.Generator) -> dict[str, Any]:
    """Random inputs for (name, shape, numpy dtype) specs: never zeros."""
    feeds = {}
    for name, shape, dtype in specs:
        dims = [int(d) if isinstance(d, int) and d > 0 else 1 for d in shape]
        if np.issubdtype(np.dtype(dtype), np.floating):
            feeds[name] = rng.uniform(-1.0, 1.0, size=dims).astype(dtype)
        else:
            feeds[name] = rng.integers(0, 2, size=dims).astype(dtype)
    return feeds


ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(bool)": "bool"}


def _timed(run: Callable[[], Any], sync: Callable[[], None], warmup: int, runs: int,
           profiler: Any = None, phases: Phases | None = None) -> tuple[list[float], list[int]]:
    """Warm up, then time ``runs`` runs (host wall ms; each ends synchronized); run starts in monotonic ns."""
    for _ in range(warmup):
        run()
    sync()
    if phases is not None:
        phases.lap("warm-up (the first run's autotuning)")
    latencies, starts = [], []
    ctx = profiler if profiler is not None else contextlib.nullcontext()
    with ctx:
        for _ in range(runs):
            rf = _record_function(RUN_RANGE) if profiler is not None else contextlib.nullcontext()
            t0 = time.perf_counter_ns()
            starts.append(time.monotonic_ns())
            with rf:
                run()
                sync()
            latencies.append((time.perf_counter_ns() - t0) / 1e6)
    if phases is not None:
        phases.lap("timed runs" + (" (profiler on)" if profiler is not None else ""))
    return latencies, starts


GATE_POLL_S = 0.002  # how often a gated child looks for its gate file


def wait_for_gate(args: argparse.Namespace) -> None:
    """Before it first touches the GPU (its CUDA context, weights, runs), a gated child waits until the parent
    opens the gate (the other run has ended): the two children's start-ups overlap, their GPU work never does."""
    if not args.gate:
        return
    gate, parent, deadline = Path(args.gate), os.getppid(), time.monotonic() + CHILD_TIMEOUT_S
    while not gate.exists():
        if os.getppid() != parent or time.monotonic() > deadline:
            raise Refused("the parent process ended (or never opened the gate) before this run's turn")
        time.sleep(GATE_POLL_S)
    args.phases.lap("waiting for the latency run to end")


def _record_function(name: str) -> Any:
    from torch.profiler import record_function
    return record_function(name)


def _torch_profiler() -> Any:
    from torch.profiler import ProfilerActivity, profile
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)


def _clock(bundle: Path, starts: list[int]) -> dict[str, Any]:
    """Offset of the Kineto clock against time.monotonic_ns, from the run ranges (for the mapping)."""
    from benanza.profile.kineto import read_kineto_trace
    trace = read_kineto_trace(bundle / "torch_trace.json")
    ranges = [a for a in trace.annotations if a.name == RUN_RANGE and not a.gpu]
    if len(ranges) != len(starts):
        return {}
    offsets = sorted(a.start_us - s / 1e3 for a, s in zip(ranges, starts, strict=True))
    return {"kineto_minus_monotonic_us": offsets[len(offsets) // 2]}


def _child_onnxruntime(args: argparse.Namespace) -> dict[str, Any]:
    try:  # first, in both children: ORT then uses the CUDA/cuDNN libraries torch loaded (one copy of each)
        import torch  # noqa: F401
    except ImportError:
        if args.mode == "profile":
            raise  # the kernel trace comes from torch.profiler
    import onnxruntime as ort

    phases = args.phases
    phases.lap("import torch and onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise NoGpu(f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (install onnxruntime-gpu)")
    prec = Precision(args.dtype)
    bundle = Path(args.bundle)
    profiled = args.mode == "profile"
    so = ort.SessionOptions()
    if profiled:
        so.enable_profiling = True
        so.profile_file_prefix = str(bundle / "ort_profile")
        so.optimized_model_filepath = str(bundle / OPTIMIZED)
    cuda_options = {"device_id": 0, "cudnn_conv_algo_search": ORT_ALGO_SEARCH[AlgoSearch(args.algo_search)],
                    "use_tf32": int(ALLOW_TF32[prec])}
    wait_for_gate(args)  # the session makes the CUDA context and uploads the weights: GPU work
    try:
        sess = ort.InferenceSession(args.model, so, providers=[("CUDAExecutionProvider", cuda_options),
                                                               "CPUExecutionProvider"])
    except Exception as exc:
        if "CUDA" in str(exc) or "cuda" in str(exc):
            raise NoGpu(str(exc).strip().splitlines()[0]) from None
        raise
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        raise NoGpu(f"onnxruntime did not enable the CUDA provider (got {sess.get_providers()})")
    rng = np.random.default_rng(SEED)
    feeds = _random_feeds([(i.name, i.shape, ORT_TYPES.get(i.type, "float32")) for i in sess.get_inputs()], rng)
    phases.lap("session")

    def run() -> None:
        sess.run(None, feeds)  # outputs come back to the host: Run() synchronizes

    profiler = _torch_profiler() if profiled else None
    latencies, starts = _timed(run, lambda: None, args.warmup, args.runs, profiler, phases)
    report: dict[str, Any] = {"latencies_ms": latencies, "framework_version": ort.__version__,
                              "settings": {**cuda_options, "providers": sess.get_providers()}}
    if profiled:
        profiler.export_chrome_trace(str(bundle / "torch_trace.json"))
        written = Path(sess.end_profiling())
        shutil.move(str(written), str(bundle / "ort_profile.json"))
        report["clock"] = {**_clock(bundle, starts),
                           "ort_profiling_start_ns": int(sess.get_profiling_start_time_ns())}
        phases.lap("write the traces")
    return report


def node_ranges(module: Any, node_names: dict[str, str]) -> None:
    """Wrap every converted ONNX node (a child module of onnx2torch's GraphModule) in a range named
    after the ONNX node itself (``node_names``: module name -> node name), never onnx2torch's mangling."""
    import torch

    stack: list[Any] = []

    def pre(mod: Any, inputs: Any, name: str) -> None:
        rf = torch.profiler.record_function(NODE_RANGE + name)
        rf.__enter__()
        stack.append(rf)

    def post(mod: Any, inputs: Any, output: Any) -> None:
        if stack:
            stack.pop().__exit__(None, None, None)

    for name, child in module.named_children():
        if name not in node_names:
            continue  # onnx2torch's initializer container: no node
        child.register_forward_pre_hook(lambda m, i, n=node_names[name]: pre(m, i, n))
        child.register_forward_hook(post)


def _child_torch(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        raise NoGpu(f"torch {torch.__version__}: torch.cuda.is_available() is False")
    phases = args.phases
    phases.lap("import torch, CUDA check")

    prec = Precision(args.dtype)
    bundle = Path(args.bundle)
    profiled = args.mode == "profile"
    torch.backends.cudnn.benchmark = AlgoSearch(args.algo_search) is AlgoSearch.EXHAUSTIVE
    torch.backends.cudnn.allow_tf32 = ALLOW_TF32[prec]
    torch.backends.cuda.matmul.allow_tf32 = ALLOW_TF32[prec]
    dtype = torch.float16 if prec is Precision.FP16 else torch.float32
    if args.torch_module:  # the user's own module, run natively; ranges per module (profile.torch_module)
        from benanza.profile import torch_module

        torch.manual_seed(SEED)
        try:
            module, host_inputs = torch_module.build(torch_module.parse_spec(args.torch_module), args.batch)
        except BenanzaError as exc:
            raise Refused(str(exc)) from None
        add_ranges: Callable[[Any], Any] = torch_module.module_ranges
    else:
        import onnx
        import onnx2torch  # noqa: F401 -- an ImportError here is the child's "needs it installed" line

        from benanza.profile.onnx_torch import ConversionError, convert_named  # onnx2torch plus fixes

        try:
            module, node_names = convert_named(args.model)
        except ConversionError as exc:
            raise Refused(str(exc)) from None
        add_ranges = functools.partial(node_ranges, node_names=node_names)
        proto = onnx.load(args.model, load_external_data=False)
        init = {t.name for t in proto.graph.initializer}
        rng = np.random.default_rng(SEED)
        specs = [(v.name, [d.dim_value for d in v.type.tensor_type.shape.dim],
                  onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name)
                 for v in proto.graph.input if v.name not in init]
        host_inputs = [torch.from_numpy(a) for a in _random_feeds(specs, rng).values()]
    phases.lap("build the module")
    wait_for_gate(args)  # everything from here touches the GPU (context, weights, runs)
    module = module.cuda().eval()
    if prec is Precision.FP16:
        module = module.half()
    if profiled:
        add_ranges(module)
    # float inputs in the run's precision; token ids and masks keep their integer type
    inputs = [t.to("cuda", dtype) if t.is_floating_point() else t.to("cuda") for t in host_inputs]
    phases.lap("to the GPU")

    def run() -> None:
        with torch.no_grad():
            module(*inputs)

    profiler = _torch_profiler() if profiled else None
    latencies, starts = _timed(run, torch.cuda.synchronize, args.warmup, args.runs, profiler, phases)
    report: dict[str, Any] = {
        "latencies_ms": latencies, "framework_version": torch.__version__,
        "settings": {"cudnn.benchmark": torch.backends.cudnn.benchmark, "allow_tf32": ALLOW_TF32[prec],
                     **_attention_setting(module),
                     **({"torch_module": args.torch_module} if args.torch_module else
                        {"onnx2torch": getattr(sys.modules.get("onnx2torch"), "__version__", "")})},
        "system": {"gpu": torch.cuda.get_device_name(0), "cudnn": str(torch.backends.cudnn.version())}}
    if profiled:
        profiler.export_chrome_trace(str(bundle / "torch_trace.json"))
        report["clock"] = _clock(bundle, starts)
        phases.lap("write the trace")
    return report


def _attention_setting(module: Any) -> dict[str, str]:
    """A Hugging Face module's attention implementation ("eager", "sdpa", ...), recorded so that the
    analysis never names as the fix a fused attention the run already had."""
    for sub in module.modules():
        impl = getattr(getattr(sub, "config", None), "_attn_implementation", None)
        if isinstance(impl, str):
            return {"attn_implementation": impl}
    return {}


def _child_export(args: argparse.Namespace) -> dict[str, Any]:
    """``--torch-module``'s export, on the CPU in a child of its own, beside the two runs: the module's
    ONNX form written to ``--model`` (the parent never imports torch)."""
    import torch

    from benanza.profile.capture import export_torch_module  # the parent's side: only this child needs it

    args.phases.lap("import torch")
    torch.manual_seed(SEED)
    try:
        _, batch = export_torch_module(args.torch_module, Path(args.model), args.batch)
    except BenanzaError as exc:
        raise Refused(str(exc)) from None
    args.phases.lap("build and export the module")
    return {"batch": batch, "framework_version": torch.__version__}


CHILDREN: dict[Framework, Callable[[argparse.Namespace], dict[str, Any]]] = {
    Framework.ONNXRUNTIME: _child_onnxruntime,
    Framework.PYTORCH: _child_torch,
}


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benanza.profile.capture_child",
                                description="benanza profile's child process (started by `benanza profile`)")
    p.add_argument("--framework", required=True, choices=[f.value for f in Framework])
    p.add_argument("--model", required=True)
    p.add_argument("--bundle", required=True)
    p.add_argument("--dtype", required=True, choices=[x.value for x in CAPTURE_PRECISIONS])
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--algo-search", required=True, choices=[a.value for a in AlgoSearch])
    p.add_argument("--mode", required=True, choices=["profile", "latency", "export"])
    p.add_argument("--torch-module", default="", help="pkg.module:factory: run this module natively (torch only)")
    p.add_argument("--batch", type=int, default=None, help="the factory's batch= argument, when it takes one")
    p.add_argument("--gate", default="", help="wait for this file to exist before the first GPU work")
    p.add_argument("--opens-gate", default="", help="create this file once this child's report is ready: the gated "
                                                    "child goes on then, not after this one's exit")
    return p.parse_args(list(argv))


def child_main(argv: Sequence[str]) -> int:
    """Entry point of a child: one JSON report on the last stdout line, exit 0 / NO_GPU_EXIT / 1."""
    args = _parse(argv)
    args.phases = Phases()
    launched = os.environ.get(LAUNCHED_ENV)
    try:
        start_up = time.time() - float(launched) - (time.perf_counter() - args.phases.mark) if launched else None
    except ValueError:
        start_up = None
    try:
        if args.mode == "export" and not args.torch_module:
            raise Refused("--mode export exports a --torch-module")
        report = (_child_export if args.mode == "export" else CHILDREN[Framework(args.framework)])(args)
        report["phases_s"] = {**({"interpreter and benanza import": round(start_up, 3)} if start_up else {}),
                              **args.phases.times}
        code = 0
    except NoGpu as exc:
        report, code = {"error": str(exc)}, NO_GPU_EXIT
    except Refused as exc:
        report, code = {"error": str(exc)}, 1
    except ImportError as exc:
        report, code = {"error": f"{exc} (the {args.framework} capture needs it installed)"}, 1
    except Exception as exc:  # report any framework failure as one line; details on stderr
        traceback.print_exc()
        first = str(exc).strip().splitlines()
        report, code = {"error": f"{type(exc).__name__}: {first[0] if first else ''}"}, 1
    print(json.dumps(report), flush=True)
    if args.opens_gate and code == 0:  # its GPU work is over; the interpreter's and CUDA's teardown (about
        Path(args.opens_gate).touch()  # 1.5 s with torch) need not hold up the gated child
    return code


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
