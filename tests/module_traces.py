"""Record a ``--torch-module`` bundle on the CPU: the module's export, and a Kineto trace of its run under
benanza's module ranges (the capture child's own ``module_ranges``, ``record_function("model_run")``
and profiler settings) with one stand-in kernel per leaf ATen op.

Why: the mapping of a ``--torch-module`` profile (module ranges and ATen ops -> layers, launches ->
ranges) is decided on the host side, which a CPU run records exactly as a GPU run does; only the
kernels are missing. Each leaf op (an op with no op inside it) gets a ``cuda_runtime`` launch in
its middle and a ``kernel`` named ``cpu:<op>`` that lasts as long as the op, so the whole mapping
runs on a real trace of the real module; tests/data/modules keeps a few such bundles (gzipped,
small) for machines without torch. ``python tests/module_traces.py OUT_DIR SPEC [BATCH]`` writes one.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import torch

from benanza.profile.bundle import write_meta
from benanza.profile.capture import EXPORTED, export_torch_module
from benanza.profile.ranges import RUN_RANGE, TORCH_MODULE_FORMAT
from benanza.profile.torch_module import build, module_ranges, parse_spec

RUNS = 2


def _with_kernels(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace plus a launch and a stand-in kernel for every leaf cpu_op inside a model_run range."""
    events = trace["traceEvents"]
    runs = [e for e in events if e.get("name") == RUN_RANGE and e.get("cat") == "user_annotation"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    leaves = [a for a, b in zip(ops, [*ops[1:], None], strict=True)
              if not (b is not None and b["tid"] == a["tid"] and b["ts"] < a["ts"] + a["dur"])]
    added: list[dict[str, Any]] = []
    for corr, op in enumerate(leaves, start=1_000_000):
        mid = op["ts"] + op["dur"] / 2
        if not any(r["ts"] <= mid <= r["ts"] + r["dur"] for r in runs):
            continue
        added.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": op["pid"],
                      "tid": op["tid"], "ts": mid, "dur": 0.001, "args": {"correlation": corr}})
        ext = (op.get("args") or {}).get("External id")
        added.append({"ph": "X", "cat": "kernel", "name": f"cpu:{op['name']}", "pid": 0, "tid": 7,
                      "ts": op["ts"], "dur": max(op["dur"], 0.001),
                      "args": {"correlation": corr, "device": 0, "stream": 7, "External id": ext}})
    return {**trace, "traceEvents": [*events, *added]}


def record(out: Path, spec: str, batch: int = 1) -> Path:
    """A bundle directory ``out`` (meta.json, exported.onnx, torch_trace.json.gz) for ``spec`` at ``batch``."""
    out.mkdir(parents=True, exist_ok=False)
    export_torch_module(spec, out / EXPORTED, batch)
    torch.manual_seed(0)
    module, inputs = build(parse_spec(spec), batch)
    module_ranges(module)
    with torch.no_grad():
        module(*inputs)  # warm-up, as the capture's
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(RUNS):
                with torch.profiler.record_function(RUN_RANGE):
                    module(*inputs)
    raw = out / "raw.json"
    prof.export_chrome_trace(str(raw))
    trace = _with_kernels(json.loads(raw.read_text()))
    raw.unlink()
    keep = {"cpu_op", "user_annotation", "cuda_runtime", "kernel"}
    fields = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
    trace["traceEvents"] = [{k: v for k, v in e.items() if k in fields}
                            for e in trace["traceEvents"] if e.get("cat") in keep]
    for e in trace["traceEvents"]:  # only what the reader uses: the trace stays small
        args = e.get("args") or {}
        e["args"] = {k: v for k, v in args.items() if k in ("External id", "correlation", "Input Dims", "device",
                                                            "stream")}
    with gzip.open(out / "torch_trace.json.gz", "wt") as f:
        json.dump(trace, f, separators=(",", ":"))
    write_meta(out, framework="pytorch", framework_version=torch.__version__, model=EXPORTED, batch=batch,
               dtype="fp32", latencies_ms=[1.0], system={"gpu": "cpu (stand-in kernels)"},
               extra={"torch_module": spec, "capture_format": TORCH_MODULE_FORMAT, "runs_profiled": RUNS})
    return out


if __name__ == "__main__":
    where = record(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    print(where)
