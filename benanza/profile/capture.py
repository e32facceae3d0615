"""``benanza profile``: run a model in a framework on the GPU and write a profile bundle.

Why: the analyzer compares the layer-by-layer lower bound with what a framework
really does. A bundle (docs/PROFILES.md) holds that evidence: the framework's own
profile, the GPU kernels (PyTorch's Kineto, which records every CUDA kernel of the
process, ONNX Runtime's too), the cuDNN/cuBLAS API logs and ``meta.json``.

The parent process never imports a framework. It materializes the model (weights
folded into random initializers, batch set) and starts two CHILD processes of
this module (argument lists, never a shell):

1. **profiled child**: API logging switched on through the environment, the timed
   runs inside ``torch.profiler`` with each run in ``record_function("model_run")``;
2. **latency child**: the same runs with no logging and no profiler, whose per-run
   host wall times become ``meta.json``'s ``latency_ms`` (logging and tracing slow
   a run down, so the two are measured apart).

Each child prints one JSON object as its last stdout line; a child that finds no
usable GPU says so in it, and the parent raises ``no usable CUDA GPU: ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from benanza import system
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.profile.bundle import Framework, model_digest, write_meta
from benanza.profile.materialize import SEED, materialize, strip_weights, to_fp16
from benanza.profile.ranges import NODE_RANGE, RUN_RANGE

MODEL = "model.onnx"  # the materialized fp32 model (kept outside the bundle: it holds every weight)
MODEL_FP16 = "model_fp16.onnx"  # what ONNX Runtime runs for --dtype fp16
OPTIMIZED = "optimized_model.onnx"  # ORT's optimized graph; the bundle keeps it without weights
NO_GPU_EXIT = 3  # a child's exit status when it finds no usable GPU
CHILD_TIMEOUT_S = 1800
PROFILED_RUNS = 10  # runs inside the profiler and API logs: enough for per-kernel medians, small bundles


class AlgoSearch(StrEnum):
    """ONNX Runtime's ``cudnn_conv_algo_search`` (PyTorch: exhaustive = ``cudnn.benchmark``)."""

    EXHAUSTIVE = "exhaustive"
    HEURISTIC = "heuristic"
    DEFAULT = "default"


# ONNX Runtime's spelling of each setting.
ORT_ALGO_SEARCH: dict[AlgoSearch, str] = {
    AlgoSearch.EXHAUSTIVE: "EXHAUSTIVE", AlgoSearch.HEURISTIC: "HEURISTIC", AlgoSearch.DEFAULT: "DEFAULT"}
# Whether TF32 math is allowed for fp32 data (ORT ``use_tf32``, torch ``allow_tf32``), per precision.
ALLOW_TF32: dict[Precision, bool] = {
    Precision.FP32: False, Precision.TF32: True, Precision.FP16: False, Precision.BF16: False}
CAPTURE_PRECISIONS = (Precision.FP32, Precision.TF32, Precision.FP16)

# Library API logs of the profiled child: environment variable -> value ({bundle} is the bundle path).
# cuBLASLt level 2 ("trace") logs every call that launches a kernel, cublasLtMatmul included.
LOG_ENV: dict[str, str] = {
    "CUDNN_LOGLEVEL_DBG": "3",
    "CUDNN_LOGDEST_DBG": "{bundle}/cudnn_api.log",
    "CUBLAS_LOGINFO_DBG": "1",
    "CUBLAS_LOGDEST_DBG": "{bundle}/cublas_api.log",
    "CUBLASLT_LOG_LEVEL": "2",
    "CUBLASLT_LOG_FILE": "{bundle}/cublaslt_api.log",
}
# The same variables switched off for the latency child (a parent shell may have set them).
QUIET_ENV: dict[str, str] = {"CUDNN_LOGLEVEL_DBG": "0", "CUBLAS_LOGINFO_DBG": "0", "CUBLASLT_LOG_LEVEL": "0"}


# ---------------------------------------------------------------- the parent side


@dataclass(frozen=True)
class ChildRun:
    """One child invocation: its argument list and environment additions."""

    argv: tuple[str, ...]
    env: dict[str, str]


def child_command(framework: Framework, model: Path, bundle: Path, precision: Precision, runs: int, warmup: int,
                  algo_search: AlgoSearch, profiled: bool, python: str = sys.executable, torch_module: str = "",
                  batch: int | None = None) -> ChildRun:
    """The child's argument list (never a shell string: paths and model text stay data) and environment."""
    argv = (python, "-m", "benanza.profile.capture", "--framework", framework.value, "--model", str(model),
            "--bundle", str(bundle), "--dtype", precision.value, "--runs", str(runs), "--warmup", str(warmup),
            "--algo-search", algo_search.value, "--mode", "profile" if profiled else "latency")
    if torch_module:
        argv += ("--torch-module", torch_module, *(("--batch", str(batch)) if batch is not None else ()))
    env = {k: v.format(bundle=str(bundle)) for k, v in LOG_ENV.items()} if profiled else dict(QUIET_ENV)
    return ChildRun(argv, env)


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOG_ENV}
    root = str(Path(__file__).resolve().parents[2])  # the child must import this same benanza
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def run_child(child: ChildRun, label: str, timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Run one child and return its report; its failures become one-line BenanzaErrors."""
    try:
        proc = subprocess.run(list(child.argv), env=_child_env(child.env), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise BenanzaError(f"{label}: the framework run did not finish within {timeout_s:.0f} s") from None
    report = _last_json(proc.stdout)
    if proc.returncode == NO_GPU_EXIT:
        why = (report or {}).get("error") or "the framework found no CUDA device"
        raise BenanzaError(f"no usable CUDA GPU: {why}")
    if proc.returncode != 0 or report is None or "error" in report:
        why = (report or {}).get("error")
        if not why:
            tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
            why = tail[-1] if tail else f"exit status {proc.returncode}"
        raise BenanzaError(f"{label}: framework run failed: {why}")
    return report


def check_gpu() -> dict[str, Any]:
    """This machine's GPU (benanza.system's fingerprint), or the one-line 'no usable CUDA GPU' error."""
    info = system.fingerprint()
    if not info.get("usable"):
        raise BenanzaError(f"no usable CUDA GPU: {info.get('reason', 'unknown reason')}")
    return info


def capture(model_path: str | Path, framework: str, batch: int, precision: str, out_dir: str | Path,
            runs: int = 50, warmup: int = 10, algo_search: str = AlgoSearch.EXHAUSTIVE.value,
            python: str = sys.executable, profiled_runs: int = PROFILED_RUNS, seq_len: int | None = None) -> Path:
    """Profile one model in one framework and write the bundle ``out_dir``; returns its path.

    ``seq_len`` sets the model's symbolic non-batch input dims (meta.json's extra.seq_len)."""
    fw = Framework(framework)
    try:
        prec = Precision(precision)
    except ValueError:
        raise BenanzaError(f"unknown dtype {precision!r} (one of {', '.join(p.value for p in Precision)})") from None
    if prec not in CAPTURE_PRECISIONS:
        raise BenanzaError(f"dtype {prec.value} cannot be captured yet (one of "
                           f"{', '.join(p.value for p in CAPTURE_PRECISIONS)})")
    if runs < 1 or profiled_runs < 1 or warmup < 0:
        raise BenanzaError(f"runs and profiled runs must be >= 1 and warmup >= 0 "
                           f"(got runs={runs}, profiled_runs={profiled_runs}, warmup={warmup})")
    search = AlgoSearch(algo_search)
    sys_info = check_gpu()
    bundle = Path(out_dir)
    if bundle.exists() and (not bundle.is_dir() or any(bundle.iterdir())):
        raise BenanzaError(f"{bundle}: bundle directory exists and is not empty (choose a new --out)")
    bundle.mkdir(parents=True, exist_ok=True)
    src = Path(model_path)
    with tempfile.TemporaryDirectory(prefix="benanza-profile-") as work:
        mat = materialize(src, batch, Path(work) / MODEL, seq_len=seq_len)
        runnable = mat.path
        if prec is Precision.FP16 and fw is Framework.ONNXRUNTIME:
            runnable = to_fp16(mat.path, Path(work) / MODEL_FP16)
        profiled = run_child(child_command(fw, runnable, bundle, prec, profiled_runs, warmup, search, True, python),
                             f"{src} ({fw.value}, profiled run)")
        timed = run_child(child_command(fw, runnable, bundle, prec, runs, warmup, search, False, python),
                          f"{src} ({fw.value}, latency run)")
    if (bundle / OPTIMIZED).is_file():
        strip_weights(bundle / OPTIMIZED)
    for name in ("cudnn_api.log", "cublas_api.log", "cublaslt_api.log"):
        log = bundle / name
        if log.is_file() and log.stat().st_size == 0:
            log.unlink()  # an empty log means the library was not called: say "absent", not "unreadable"
    extra = {**profiled.get("settings", {}), "runs_profiled": profiled_runs, "warmup": warmup,
             "randomized_weights": len(mat.randomized), "latency_without": "API logs and profiler",
             "clock": profiled.get("clock", {}), **({"seq_len": seq_len} if seq_len is not None else {})}
    write_meta(bundle, framework=fw.value, framework_version=str(timed.get("framework_version", "")),
               model=src.name, batch=batch, dtype=prec.value, latencies_ms=timed["latencies_ms"],
               system={**{k: v for k, v in sys_info.items() if k not in ("usable", "reason")},
                       **timed.get("system", {})},
               extra=extra, model_sha256=model_digest(src))
    return bundle


EXPORTED = "exported.onnx"  # a --torch-module bundle's ONNX export of the module (the model its layers come from)


def export_torch_module(spec: str, path: str | Path, batch: int | None = None) -> tuple[Path, int]:
    """Build the module of ``pkg.module:factory`` (random weights, eval) and export it to ``path``
    with module-path node names; returns (path, the example inputs' batch). One-line errors."""
    from benanza.profile import torch_module

    parsed = torch_module.parse_spec(spec)
    module, inputs = torch_module.build(parsed, batch)
    out = torch_module.export(module, inputs, Path(path), parsed)
    return out, int(inputs[0].shape[0]) if inputs[0].dim() else 1


def capture_torch_module(spec: str, precision: str, out_dir: str | Path, batch: int | None = None, runs: int = 50,
                         warmup: int = 10, algo_search: str = AlgoSearch.EXHAUSTIVE.value,
                         python: str = sys.executable, profiled_runs: int = PROFILED_RUNS) -> Path:
    """Profile a PyTorch user's own module natively (``benanza profile --torch-module``) into the bundle
    ``out_dir``, with its ONNX export beside the profile (``EXPORTED``, the model to map onto)."""
    prec = Precision(precision)
    if prec not in CAPTURE_PRECISIONS:
        raise BenanzaError(f"dtype {prec.value} cannot be captured yet (one of "
                           f"{', '.join(p.value for p in CAPTURE_PRECISIONS)})")
    search = AlgoSearch(algo_search)
    bundle = Path(out_dir)
    if bundle.exists() and (not bundle.is_dir() or any(bundle.iterdir())):
        raise BenanzaError(f"{bundle}: bundle directory exists and is not empty (choose a new --out)")
    with tempfile.TemporaryDirectory(prefix="benanza-module-") as work:
        exported, batch_run = export_torch_module(spec, Path(work) / EXPORTED, batch)
        sys_info = check_gpu()
        bundle.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(exported, bundle / EXPORTED)
    model = bundle / EXPORTED
    label = f"--torch-module {spec}"
    fw = Framework.PYTORCH
    profiled = run_child(child_command(fw, model, bundle, prec, profiled_runs, warmup, search, True, python,
                                       torch_module=spec, batch=batch), f"{label} (profiled run)")
    timed = run_child(child_command(fw, model, bundle, prec, runs, warmup, search, False, python,
                                    torch_module=spec, batch=batch), f"{label} (latency run)")
    for name in ("cudnn_api.log", "cublas_api.log", "cublaslt_api.log"):
        log = bundle / name
        if log.is_file() and log.stat().st_size == 0:
            log.unlink()
    extra = {**profiled.get("settings", {}), "runs_profiled": profiled_runs, "warmup": warmup,
             "torch_module": spec, "latency_without": "API logs and profiler", "clock": profiled.get("clock", {})}
    write_meta(bundle, framework=fw.value, framework_version=str(timed.get("framework_version", "")),
               model=EXPORTED, batch=batch_run, dtype=prec.value, latencies_ms=timed["latencies_ms"],
               system={**{k: v for k, v in sys_info.items() if k not in ("usable", "reason")},
                       **timed.get("system", {})},
               extra=extra, model_sha256=model_digest(model))
    return bundle


# ---------------------------------------------------------------- the child side


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
           profiler: Any = None) -> tuple[list[float], list[int]]:
    """Warm up, then time ``runs`` runs (host wall ms; each ends synchronized); run starts in monotonic ns."""
    for _ in range(warmup):
        run()
    sync()
    latencies, starts = [], []
    ctx = profiler if profiler is not None else _Null()
    with ctx:
        for _ in range(runs):
            rf = _record_function(RUN_RANGE) if profiler is not None else _Null()
            t0 = time.perf_counter_ns()
            starts.append(time.monotonic_ns())
            with rf:
                run()
                sync()
            latencies.append((time.perf_counter_ns() - t0) / 1e6)
    return latencies, starts


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


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

    def run() -> None:
        sess.run(None, feeds)  # outputs come back to the host: Run() synchronizes

    profiler = _torch_profiler() if profiled else None
    latencies, starts = _timed(run, lambda: None, args.warmup, args.runs, profiler)
    report: dict[str, Any] = {"latencies_ms": latencies, "framework_version": ort.__version__,
                              "settings": {**cuda_options, "providers": sess.get_providers()}}
    if profiled:
        profiler.export_chrome_trace(str(bundle / "torch_trace.json"))
        written = Path(sess.end_profiling())
        shutil.move(str(written), str(bundle / "ort_profile.json"))
        report["clock"] = {**_clock(bundle, starts),
                           "ort_profiling_start_ns": int(sess.get_profiling_start_time_ns())}
    return report


def _node_ranges(module: Any, node_names: dict[str, str]) -> None:
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
            module, example = torch_module.build(torch_module.parse_spec(args.torch_module), args.batch)
        except BenanzaError as exc:
            raise Refused(str(exc)) from None
        module = module.cuda().eval()
        if prec is Precision.FP16:
            module = module.half()
        if profiled:
            torch_module.module_ranges(module)
        inputs = [t.to("cuda", dtype) if t.is_floating_point() else t.to("cuda") for t in example]
    else:
        import onnx2torch  # noqa: F401 -- an ImportError here is the child's "needs it installed" line

        from benanza.profile.onnx_torch import ConversionError, convert_named  # onnx2torch plus fixes

        try:
            module, node_names = convert_named(args.model)
        except ConversionError as exc:
            raise Refused(str(exc)) from None
        module = module.cuda().eval()
        if prec is Precision.FP16:
            module = module.half()
        if profiled:
            _node_ranges(module, node_names)
        proto = onnx.load(args.model, load_external_data=False)
        init = {t.name for t in proto.graph.initializer}
        rng = np.random.default_rng(SEED)
        specs = [(v.name, [d.dim_value for d in v.type.tensor_type.shape.dim],
                  onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name)
                 for v in proto.graph.input if v.name not in init]
        # float inputs in the run's precision; token ids and masks keep their integer type
        inputs = [torch.from_numpy(a).to("cuda", dtype) if a.dtype.kind == "f" else torch.from_numpy(a).to("cuda")
                  for a in _random_feeds(specs, rng).values()]

    def run() -> None:
        with torch.no_grad():
            module(*inputs)

    profiler = _torch_profiler() if profiled else None
    latencies, starts = _timed(run, torch.cuda.synchronize, args.warmup, args.runs, profiler)
    report: dict[str, Any] = {
        "latencies_ms": latencies, "framework_version": torch.__version__,
        "settings": {"cudnn.benchmark": torch.backends.cudnn.benchmark, "allow_tf32": ALLOW_TF32[prec],
                     **({"torch_module": args.torch_module} if args.torch_module else
                        {"onnx2torch": getattr(sys.modules.get("onnx2torch"), "__version__", "")})},
        "system": {"gpu": torch.cuda.get_device_name(0), "cudnn": str(torch.backends.cudnn.version())}}
    if profiled:
        profiler.export_chrome_trace(str(bundle / "torch_trace.json"))
        report["clock"] = _clock(bundle, starts)
    return report


CHILDREN: dict[Framework, Callable[[argparse.Namespace], dict[str, Any]]] = {
    Framework.ONNXRUNTIME: _child_onnxruntime,
    Framework.PYTORCH: _child_torch,
}


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benanza.profile.capture",
                                description="benanza profile's child process (started by `benanza profile`)")
    p.add_argument("--framework", required=True, choices=[f.value for f in Framework])
    p.add_argument("--model", required=True)
    p.add_argument("--bundle", required=True)
    p.add_argument("--dtype", required=True, choices=[x.value for x in CAPTURE_PRECISIONS])
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--algo-search", required=True, choices=[a.value for a in AlgoSearch])
    p.add_argument("--mode", required=True, choices=["profile", "latency"])
    p.add_argument("--torch-module", default="", help="pkg.module:factory: run this module natively (torch only)")
    p.add_argument("--batch", type=int, default=None, help="the factory's batch= argument, when it takes one")
    return p.parse_args(list(argv))


def child_main(argv: Sequence[str]) -> int:
    """Entry point of a child: one JSON report on the last stdout line, exit 0 / NO_GPU_EXIT / 1."""
    args = _parse(argv)
    try:
        report = CHILDREN[Framework(args.framework)](args)
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
    return code


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
