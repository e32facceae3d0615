"""``benanza profile``: run a model in a framework on the GPU and write a profile bundle.

Why: the analyzer compares the layer-by-layer lower bound with what a framework
really does. A bundle (docs/PROFILES.md) holds that evidence: the framework's own
profile, the GPU kernels (PyTorch's Kineto, which records every CUDA kernel of the
process, ONNX Runtime's too), the cuDNN/cuBLAS API logs and ``meta.json``.

The parent process never imports a framework. It materializes the model (weights
folded into random initializers, batch set) and starts two CHILD processes of
``benanza.profile.capture_child`` (argument lists, never a shell):

1. **latency child**: the runs with no logging and no profiler, whose per-run
   host wall times become ``meta.json``'s ``latency_ms`` (logging and tracing slow
   a run down, so the two are measured apart);
2. **profiled child**: API logging switched on through the environment, the timed
   runs inside ``torch.profiler`` with each run in ``record_function("model_run")``.

Both start at once, so their start-up (interpreter, framework import, model build: most
of a profile's time) overlaps; the profiled child waits at a gate before it first
touches the GPU (CUDA context, weights, runs), which the latency child opens once its report
is ready (the parent too, when it has ended): the GPU work of the two never overlaps. A ``--torch-module`` capture
exports the module in a third child, on the CPU, beside both.

Each child prints one JSON object as its last stdout line; a child that finds no
usable GPU says so in it, and the parent raises ``no usable CUDA GPU: ...``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benanza import __version__
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.measure import system
from benanza.phases import Phases
from benanza.profile.capture_protocol import (  # noqa: F401 -- the names importers of this module use too
    ALLOW_TF32,
    CAPTURE_PRECISIONS,
    CHILD_TIMEOUT_S,
    EXPORTED,
    LAUNCHED_ENV,
    MODEL,
    MODEL_FP16,
    NO_GPU_EXIT,
    OPTIMIZED,
    ORT_ALGO_SEARCH,
    AlgoSearch,
    Framework,
)
from benanza.profile.ranges import TORCH_MODULE_FORMAT

PROFILED_RUNS = 10  # runs inside the profiler and API logs: enough for per-kernel medians, small bundles

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
                  batch: int | None = None, gate: Path | None = None, opens_gate: Path | None = None) -> ChildRun:
    """The child's argument list (never a shell string: paths and model text stay data) and environment.
    With ``gate``, the child waits for that file to exist before it first touches the GPU; with
    ``opens_gate``, it creates that file once its report is ready (before its exit)."""
    argv = (python, "-m", "benanza.profile.capture_child", "--framework", framework.value, "--model", str(model),
            "--bundle", str(bundle), "--dtype", precision.value, "--runs", str(runs), "--warmup", str(warmup),
            "--algo-search", algo_search.value, "--mode", "profile" if profiled else "latency")
    if torch_module:
        argv += ("--torch-module", torch_module, *(("--batch", str(batch)) if batch is not None else ()))
    if gate is not None:
        argv += ("--gate", str(gate))
    if opens_gate is not None:
        argv += ("--opens-gate", str(opens_gate))
    env = {k: v.format(bundle=str(bundle)) for k, v in LOG_ENV.items()} if profiled else dict(QUIET_ENV)
    return ChildRun(argv, env)


def export_command(spec: str, path: Path, batch: int | None, python: str = sys.executable) -> ChildRun:
    """The child that builds the ``--torch-module`` module on the CPU and exports it to ``path``."""
    argv = (python, "-m", "benanza.profile.capture_child", "--framework", Framework.PYTORCH.value, "--model",
            str(path), "--bundle", str(path.parent), "--dtype", Precision.FP32.value, "--runs", "1", "--warmup", "0",
            "--algo-search", AlgoSearch.DEFAULT.value, "--mode", "export", "--torch-module", spec,
            *(("--batch", str(batch)) if batch is not None else ()))
    return ChildRun(argv, dict(QUIET_ENV))


def _child_phases(report: dict[str, Any]) -> dict[str, float]:
    return dict(report.get("phases_s") or {})


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


def start_child(child: ChildRun) -> subprocess.Popen[str]:
    """Start one child; ``finish_child`` collects its report."""
    env = _child_env(child.env)
    env[LAUNCHED_ENV] = repr(time.time())
    return subprocess.Popen(list(child.argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop_child(proc: subprocess.Popen[str]) -> None:
    """Kill a child that is no longer wanted (another one failed) and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def finish_child(proc: subprocess.Popen[str], label: str, timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Wait for a started child and return its report; its failures become one-line BenanzaErrors."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_child(proc)
        raise BenanzaError(f"{label}: the framework run did not finish within {timeout_s:.0f} s") from None
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return _child_report(done, label)


def run_child(child: ChildRun, label: str, timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Run one child and return its report; its failures become one-line BenanzaErrors."""
    return finish_child(start_child(child), label, timeout_s)


def run_gated(first: ChildRun, first_label: str, second: ChildRun, second_label: str,
              gate: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run two children whose start-up overlaps but whose GPU work does not: ``second`` was made with
    ``gate`` and waits for it; the gate opens when ``first`` has ended, or earlier when ``first`` was made
    to open it once its report is ready (``opens_gate``: its exit, the interpreter's and CUDA's teardown,
    took about 1.5 s of the capture's critical path). Returns both reports."""
    later = start_child(second)
    try:
        report = run_child(first, first_label)
    except BaseException:
        stop_child(later)
        raise
    gate.touch()
    return report, finish_child(later, second_label)


def _child_report(proc: subprocess.CompletedProcess[str], label: str) -> dict[str, Any]:
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


def drop_empty_logs(bundle: Path) -> None:
    """An empty API log means the library was not called: the bundle says "absent", not "unreadable"."""
    for name in ("cudnn_api.log", "cublas_api.log", "cublaslt_api.log"):
        log = bundle / name
        if log.is_file() and log.stat().st_size == 0:
            log.unlink()


def check_gpu() -> dict[str, Any]:
    """This machine's GPU (benanza.measure.system's fingerprint), or the one-line 'no usable CUDA GPU' error."""
    info = system.fingerprint()
    if not info.get("usable"):
        raise BenanzaError(f"no usable CUDA GPU: {info.get('reason', 'unknown reason')}")
    return info


def capture(model_path: str | Path, framework: str, batch: int, precision: str, out_dir: str | Path,
            runs: int = 50, warmup: int = 10, algo_search: str = AlgoSearch.EXHAUSTIVE.value,
            python: str = sys.executable, profiled_runs: int = PROFILED_RUNS, seq_len: int | None = None) -> Path:
    """Profile one model in one framework and write the bundle ``out_dir``; returns its path.

    ``seq_len`` sets the model's symbolic non-batch input dims (meta.json's extra.seq_len)."""
    # onnx and numpy (about 0.8 s): imported here, not by `benanza profile --torch-module`, whose children start first
    from benanza.profile.materialize import materialize, strip_weights, to_fp16

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
    phases = Phases()
    sys_info = check_gpu()
    phases.lap("GPU check")
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
        phases.lap("materialize")
        gate = Path(work) / "latency-run-done"
        try:
            timed, profiled = run_gated(
                child_command(fw, runnable, bundle, prec, runs, warmup, search, False, python, opens_gate=gate),
                f"{src} ({fw.value}, latency run)",
                child_command(fw, runnable, bundle, prec, profiled_runs, warmup, search, True, python, gate=gate),
                f"{src} ({fw.value}, profiled run)", gate)
        except BaseException:
            shutil.rmtree(bundle, ignore_errors=True)  # a bundle without both runs is no bundle
            raise
        phases.lap("both children (their start-ups overlap; their GPU work does not)")
    if (bundle / OPTIMIZED).is_file():
        strip_weights(bundle / OPTIMIZED)
    drop_empty_logs(bundle)
    extra = {**profiled.get("settings", {}), "runs_profiled": profiled_runs, "warmup": warmup,
             "randomized_weights": len(mat.randomized), "latency_without": "API logs and profiler",
             "clock": profiled.get("clock", {}), **({"seq_len": seq_len} if seq_len is not None else {}),
             "capture_s": {**phases.times, "profiled child, inside": _child_phases(profiled),
                           "latency child, inside": _child_phases(timed)}}
    from benanza.profile.bundle import model_digest, write_meta  # the parsers it imports: after the children

    write_meta(bundle, framework=fw.value, framework_version=str(timed.get("framework_version", "")),
               model=src.name, batch=batch, dtype=prec.value, latencies_ms=timed["latencies_ms"],
               system={**{k: v for k, v in sys_info.items() if k not in ("usable", "reason")},
                       **timed.get("system", {})},
               extra=extra, model_sha256=model_digest(src))
    return bundle


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
    from benanza.profile import torch_module

    torch_module.parse_spec(spec)  # a malformed spec is refused before anything starts
    phases = Phases()
    sys_info = check_gpu()
    phases.lap("GPU check")
    model = bundle / EXPORTED
    label = f"--torch-module {spec}"
    fw = Framework.PYTORCH
    # Three children at once, each importing torch and building the module itself (most of the time):
    # the export on the CPU, and the latency and profiled runs, whose GPU work the gate keeps apart.
    bundle.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="benanza-module-") as work:
        gate = Path(work) / "latency-run-done"
        exporter = start_child(export_command(spec, Path(work) / EXPORTED, batch, python))
        try:
            timed, profiled = run_gated(
                child_command(fw, model, bundle, prec, runs, warmup, search, False, python, torch_module=spec,
                              batch=batch, opens_gate=gate), f"{label} (latency run)",
                child_command(fw, model, bundle, prec, profiled_runs, warmup, search, True, python,
                              torch_module=spec, batch=batch, gate=gate), f"{label} (profiled run)", gate)
            phases.lap("latency and profiled children (beside the export)")
            exported = finish_child(exporter, f"{label} (export)")
            phases.lap("export, after both runs")
            shutil.copyfile(Path(work) / EXPORTED, model)
        except BaseException:
            stop_child(exporter)
            shutil.rmtree(bundle, ignore_errors=True)  # a bundle without its runs or its export is no bundle
            raise
    batch_run = int(exported["batch"])
    drop_empty_logs(bundle)
    extra = {**profiled.get("settings", {}), "runs_profiled": profiled_runs, "warmup": warmup,
             "torch_module": spec, "latency_without": "API logs and profiler", "clock": profiled.get("clock", {}),
             "capture_format": TORCH_MODULE_FORMAT, "benanza_version": __version__,
             "capture_s": {**phases.times, "profiled child, inside": _child_phases(profiled),
                           "latency child, inside": _child_phases(timed),
                           "export child, inside": _child_phases(exported)}}
    from benanza.profile.bundle import model_digest, write_meta  # the parsers it imports: after the children

    write_meta(bundle, framework=fw.value, framework_version=str(timed.get("framework_version", "")),
               model=EXPORTED, batch=batch_run, dtype=prec.value, latencies_ms=timed["latencies_ms"],
               system={**{k: v for k, v in sys_info.items() if k not in ("usable", "reason")},
                       **timed.get("system", {})},
               extra=extra, model_sha256=model_digest(model))
    return bundle
