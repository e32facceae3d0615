"""Close the loop with the execution bound: one recommendation per gap kind, applied natively in
PyTorch, its realized saving against the saving the analyzer predicted.

Why: a gap is only a recommendation if taking it saves about what it says. For each gap kind
this profiles a zoo model with ``benanza profile --framework torch`` (docs/PROFILES.md), reads
the predicted saving from ``benanza``'s analysis of that bundle against the database, applies
the change in PyTorch itself and times the model before and after with ``bench/validate.py``'s
own timing (median per-iteration union of CUPTI kernel intervals, device-resident inputs; none
of benanza's profile readers or mapping), or, for framework overhead, with this file's own
host timing of the end-to-end latency:

=================  ===========================  ===============================================
gap kind           change applied (PyTorch)      predicted saving (from the analysis)
=================  ===========================  ===============================================
framework          eager -> the whole model      ``framework overhead`` of the eager fp32 run,
overhead           captured in one CUDA graph    less the unmapped kernels it counts (a graph
                   (fp32, benchmark on, both     still runs those; none in the shipped bundle):
                   sides); realized is the       its GPU idle time, end-to-end - GPU busy.
                   END-TO-END latency saving,    The run's inputs are device-resident (the
                   host-timed as the bundle's    profile copies them to the GPU once, before its
                   latency child times it        timed loop), so no input copy lies in that
                   (``host_latency``)            idle time and none is left to move; its copies
                                                 are onnx2torch's Reshape reading its shape
                                                 tensor (device to host, then a sync), which the
                                                 graph wrapper removes with the change itself
                                                 (integer buffers on the host)
parallel branches  Inception's branches on       ``parallelism gap`` (LBL_seq - LBL_par of the
                   4 CUDA streams, before and    gap baseline); both sides are CUDA graph
                   after captured in one CUDA    replays, so launches leave the critical path
                   graph                         and only the streams differ
fusion             BN folded, conv+ReLU and      per conv+BN(+Add)+ReLU fused-call group of the
                   conv+Add+ReLU as one cuDNN    bound's execution: the run's measured kernels
                   call each                     of its layers less the fused row charged
folding            BatchNormalization folded     the BN layers' as-executed rows, less the bias
                   into the conv weights         add each conv then needs (PyTorch adds a conv's
                                                 bias in a kernel of its own): their DB rows;
                                                 timed over 10x the profiled iterations, since
                                                 it is ~0.5 % of the run
layout             fp16 model and input in       ``layout gap`` of the fp16 NCHW run, among
                   ``channels_last`` (NHWC);     graph-API engines (``--apis graph``: PyTorch
                   both sides benchmark on with  calls cuDNN convolutions through the graph API
                   ``benchmark_limit = 0`` (the  only): per conv, the best engine in one layout
                   gap is best against best)     against the best in the other; the input's
                   and onnx2torch's Sum as       NCHW -> NHWC transpose runs inside the timed
                   ``torch.add`` (its own Sum    call, as the gap charges it. Layers without a
                   writes NCHW, which would add  layout cost the same in both, as the gap
                   a transpose before each conv  assumes, hence the same Sum on both sides
                   after it)
algorithm choice   ``cudnn.benchmark`` on with   ``algorithm-selection gap`` of the run with it
                   ``benchmark_limit = 0``       off, among graph-API engines (as above)
                   (every engine config, not
                   the heuristics' first 10)
Tensor Cores       TF32 allowed (benchmark on,   ``what-if tf32`` saving of the strict-fp32 run,
                   ``benchmark_limit = 0`` on    graph-API engines on both sides: the fp32 bound
                   both sides)                   may not use legacy FFT/Winograd rows PyTorch
                                                 cannot reach, for the same reason as above
=================  ===========================  ===============================================

Each cuDNN setting (tf32, fp16, benchmark, benchmark_limit) is timed on a thread of its own:
PyTorch's cuDNN plan caches are thread-local and keyed without ``benchmark``, so in one thread a
benchmark-on run reuses the plans a benchmark-off run chose for the same convolutions.

``realized = kernel_ms(before) - kernel_ms(after)`` (framework overhead: ``e2e_ms(before) -
e2e_ms(after)``), ± the medians' combined standard error, ``within = |realized / predicted - 1|
<= 0.15``. Everything runs in one process, in order, within ``--budget-s`` (an experiment not
started by then is recorded as skipped); results go to ``OUT/close_loop.json`` and a Markdown
table to stdout.

Run order and wall time on the GPU machine (estimates: session 8 ran the five older experiments
in 171.5 s; a profile takes 27-55 s, its first analysis parses the cuDNN log for 10-25 s):
framework overhead first (Inception-v1 b1 profile and analysis, eager and CUDA-graph timings,
~40 s; first, so that its host timing runs before any CUPTI session of this process), parallel
branches (same bundle, the CUDA-graph timing reused, ~10 s), fusion (ResNet-50 b64 fp32 profile,
~60 s), folding (same bundle, ~15 s), then the searches over every engine config, the slowest
timing: algorithm choice (its heuristic-search profile, ~40 s), Tensor Cores (the fp32 bundle,
~20 s) and layout last (ResNet-50 b64 fp16 profile, two fp16 searches over every engine config,
~60-120 s: fp16 has the most engine configs). Layout starts at about 185 s, well inside
``--budget-s 330``; about 250-310 s in all.

    python bench/close_loop.py --out "$OUT"          # on the GPU: about 4-5 min on an H100
    python bench/close_loop.py --dry-run             # anywhere: the plan, and the predictions
                                                     # from the shipped bundles that match
    python bench/close_loop.py --self-check          # anywhere: the changes keep the outputs (torch
                                                     # on the CPU) and the tables isolate each change

The predictions are the library's (``benanza.analyze.predictions``, ``benanza.workflows.close_loop``,
tested in tests/test_predictions.py); this script applies the changes and times them.

Needs torch (with CUDA for a real run) and onnx2torch; no ONNX Runtime.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import operator
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benanza.analyze.predictions import READINGS, TOLERANCE, holds, realized_ratio, spread
from benanza.workflows import close_loop

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))  # validate.py: the independent timing; natives.py: the native modules

N_STREAMS = 4
FOLD_REPEATS = 10  # folding saves ~0.5 % of ResNet-50 b64: 100 profiled iterations resolve it


@dataclass(frozen=True)
class Variant:
    """One way of running the model natively: the validate.py setting plus a graph change."""

    name: str
    tf32: bool = False
    fp16: bool = False  # the model and its input cast to half (validate.py's fp16 setting)
    benchmark: bool = True
    benchmark_limit: int | None = None  # torch.backends.cudnn.benchmark_limit; None: PyTorch's default (10)
    change: str = ""  # "", "fold-bn", "fuse" or "streams"
    sum_as_add: bool = False  # onnx2torch's Sum modules as torch.add of their inputs (keeps the memory format)
    channels_last: bool = False  # the model's 4-D weights and its input in NHWC (torch.channels_last)
    cuda_graph: bool = False  # captured once, timed as graph replays
    attention: str = ""  # a Hugging Face module's attn_implementation ("eager", "sdpa"); "": as built
    ort: bool = False  # an ONNX Runtime CUDA EP session on the module's export instead of PyTorch
    search: str = "EXHAUSTIVE"  # ONNX Runtime's cudnn_conv_algo_search
    cuda_options: tuple[tuple[str, str], ...] = ()  # further CUDA EP options (enable_cuda_graph, prefer_nhwc)

    def setting(self) -> dict[str, Any]:
        if self.ort:  # bench/validate.py's ORT setting
            return {"search": self.search, "use_tf32": int(self.tf32), "cuda_options": dict(self.cuda_options)}
        return {"tf32": self.tf32, "fp16": self.fp16, "benchmark": self.benchmark}

    @property
    def plan_cache(self) -> tuple[bool, bool, bool, bool, int | None]:
        """The cuDNN settings whose variants share one plan cache (one timing thread): PyTorch keys
        its cuDNN plan cache without ``benchmark``, so a plan chosen by the heuristics would be
        reused by a later benchmark-on run of the same convolutions in the same thread. A layout is
        no setting: NCHW and NHWC convolutions are different keys of the cache anyway."""
        return self.ort, self.tf32, self.fp16, self.benchmark, self.benchmark_limit


FP32 = Variant("fp32, cudnn.benchmark off", benchmark=False)
FP32_BENCH = Variant("fp32, cudnn.benchmark on")
FP32_ALL = Variant("fp32, cudnn.benchmark on, every engine config (benchmark_limit 0)", benchmark_limit=0)
TF32_ALL = Variant("tf32, cudnn.benchmark on, every engine config (benchmark_limit 0)", tf32=True,
                   benchmark_limit=0)
FOLDED = Variant("fp32, cudnn.benchmark on, BN folded", change="fold-bn")
FUSED = Variant("fp32, cudnn.benchmark on, BN folded, conv+bias(+add)+ReLU as one cuDNN call", change="fuse")
GRAPHED = Variant("fp32, cudnn.benchmark on, one CUDA graph", cuda_graph=True)
STREAMS = Variant(f"fp32, cudnn.benchmark on, one CUDA graph, branches on {N_STREAMS} streams", change="streams",
                  cuda_graph=True)
# The layout pair: only the memory format differs. The layout gap is the best engine in one layout
# against the best in the other, so both sides search every engine config (as Tensor Cores does).
# onnx2torch's Sum writes into a new NCHW tensor whatever its inputs' format, so in channels_last
# each conv after a residual Sum would read NCHW and PyTorch would transpose its input first; both
# sides run Sum as torch.add instead.
FP16_NCHW = Variant("fp16, cudnn.benchmark on, every engine config (benchmark_limit 0), Sum as torch.add",
                    fp16=True, benchmark_limit=0, sum_as_add=True)
FP16_NHWC = Variant("fp16, cudnn.benchmark on, every engine config (benchmark_limit 0), Sum as torch.add, "
                    "model and input channels_last (NHWC)", fp16=True, benchmark_limit=0, sum_as_add=True,
                    channels_last=True)

KERNEL, END_TO_END = "kernel-only", "end-to-end"  # Experiment.measure
# Experiment.source: what runs. ZOO: a zoo ONNX file through onnx2torch (the first closed loop);
# MODULE: a native PyTorch module of bench/natives.py, profiled with ``benanza profile --torch-module``;
# ORT: an ONNX Runtime CUDA EP session on that module's export, profiled with ``--framework onnxruntime``.
ZOO, MODULE, ORT = "zoo", "module", "onnxruntime"


@dataclass(frozen=True)
class Experiment:
    gap: str  # the gap kind
    model: str  # zoo model stem
    batch: int
    algo_search: str  # benanza profile --algo-search: exhaustive = cudnn.benchmark on
    apis: str  # the analysis' API families (pipeline.FAMILIES)
    before: Variant
    after: Variant
    predicted_by: str  # how the prediction is read (predict)
    repeats: int = 1  # CUPTI-profiled iterations: this many times --profiled (a saving near the run's noise)
    dtype: str = "fp32"  # benanza profile --dtype of the run before the change (fp32: TF32 off; fp16: cast to half)
    measure: str = KERNEL  # what ``realized`` compares: validate.py's kernel-only time, or host_latency's end-to-end
    source: str = ZOO  # ZOO, MODULE or ORT (above); ``model`` is a zoo stem, or a bench/natives.py factory

    @property
    def bundle(self) -> str:
        """Named as the shipped bundles are, so that a dry run finds them in perfdb/bundles; the native
        runs' bundles start with ``native_`` (no shipped bundle has their models)."""
        framework = "ort" if self.source == ORT else "torch"
        return (("" if self.source == ZOO else "native_") + f"{self.model}_b{self.batch}_{framework}_{self.dtype}"
                + ("_heuristic" if self.algo_search == "heuristic" else ""))

    @property
    def export(self) -> str:
        """The harness's export of a native run's module at its batch (``export_native``)."""
        return f"{self.model}_b{self.batch}.onnx"


# In run order (the module docstring's estimates): framework overhead first, so that its host
# timing runs before any CUPTI session of this process (a profiler session may leave CUPTI
# attached and slow later launches), with parallel branches after it on the same bundle; the
# three searches over every engine config (the slowest timing: cuDNN builds and times each config
# of each conv) last, so that a run past --budget-s still has the others; layout, new and with the
# largest engine lists (fp16), last of all. Fusion, folding and Tensor Cores share a bundle.
EXPERIMENTS = (
    Experiment("framework overhead", "inception_v1", 1, "exhaustive", "both", FP32_BENCH, GRAPHED,
               "framework overhead, CUDA-graph part", measure=END_TO_END),
    Experiment("parallel branches", "inception_v1", 1, "exhaustive", "both", GRAPHED, STREAMS,
               "parallelism gap (ms)"),
    Experiment("fusion", "resnet50", 64, "exhaustive", "both", FP32_BENCH, FUSED, "fused groups"),
    Experiment("folding", "resnet50", 64, "exhaustive", "both", FP32_BENCH, FOLDED, "folded BN", repeats=FOLD_REPEATS),
    Experiment("algorithm choice", "resnet50", 64, "heuristic", "graph", FP32, FP32_ALL,
               "algorithm-selection gap (ms)"),
    Experiment("Tensor Cores", "resnet50", 64, "exhaustive", "graph", FP32_ALL, TF32_ALL, "what-if tf32 saving"),
    Experiment("layout", "resnet50", 64, "exhaustive", "graph", FP16_NCHW, FP16_NHWC, "layout gap (ms)",
               dtype="fp16"),
)
# Native runs. PyTorch: torchvision's ResNet-50 v1.5 and GoogLeNet, Hugging Face's BERT-base, the
# modules themselves (bench/natives.py). ONNX Runtime: sessions on the same modules' exports. Where a
# change has no switch in the framework, the kind is closed on the other one (ONNX Runtime folds BN
# and fuses conv+ReLU by default and runs one stream: fusion, folding and branches are PyTorch's).
TF32_BENCH = Variant("tf32, cudnn.benchmark on", tf32=True)
FP16_NCHW_ALL = Variant("fp16, cudnn.benchmark on, every engine config (benchmark_limit 0)", fp16=True,
                        benchmark_limit=0)
FP16_NHWC_ALL = Variant("fp16, cudnn.benchmark on, every engine config (benchmark_limit 0), model and input "
                        "channels_last (NHWC)", fp16=True, benchmark_limit=0, channels_last=True)
# fp16: cuDNN's fused attention (the bound's fused row) and PyTorch's flash kernels take half only
EAGER_ATTENTION = Variant("fp16, Hugging Face eager attention (MatMul, Softmax, MatMul)", fp16=True,
                          attention="eager")
SDPA_ATTENTION = Variant("fp16, PyTorch SDPA attention (attn_implementation='sdpa')", fp16=True, attention="sdpa")
ORT_HEURISTIC = Variant("ORT fp32, cudnn_conv_algo_search HEURISTIC", ort=True, search="HEURISTIC")
ORT_EXHAUSTIVE = Variant("ORT fp32, cudnn_conv_algo_search EXHAUSTIVE", ort=True)
ORT_TF32 = Variant("ORT fp32 data with use_tf32=1, EXHAUSTIVE", ort=True, tf32=True)
ORT_GRAPH = Variant("ORT fp32, EXHAUSTIVE, enable_cuda_graph=1", ort=True, cuda_options=(("enable_cuda_graph", "1"),))
ORT_NHWC = Variant("ORT fp32, EXHAUSTIVE, prefer_nhwc=1", ort=True, cuda_options=(("prefer_nhwc", "1"),))
NATIVE_EXPERIMENTS = (
    Experiment("framework overhead", "googlenet", 1, "exhaustive", "both", FP32_BENCH, GRAPHED,
               "framework overhead, CUDA-graph part", measure=END_TO_END, source=MODULE),
    Experiment("framework overhead", "bert_base", 1, "exhaustive", "both", FP32_BENCH, GRAPHED,
               "framework overhead, CUDA-graph part", measure=END_TO_END, source=MODULE),
    Experiment("framework overhead", "googlenet", 1, "exhaustive", "legacy", ORT_EXHAUSTIVE, ORT_GRAPH,
               "framework overhead, CUDA-graph part", measure=END_TO_END, source=ORT),
    Experiment("parallel branches", "googlenet", 1, "exhaustive", "both", GRAPHED, STREAMS, "parallelism gap (ms)",
               source=MODULE),
    Experiment("fusion", "resnet50", 64, "exhaustive", "both", FP32_BENCH, FUSED, "fusion gap (ms)", source=MODULE),
    Experiment("fusion", "bert_base_eager", 32, "exhaustive", "both", EAGER_ATTENTION, SDPA_ATTENTION,
               "fused attention", dtype="fp16", source=MODULE),
    Experiment("folding", "resnet50", 64, "exhaustive", "both", FP32_BENCH, FOLDED, "folded BN",
               repeats=FOLD_REPEATS, source=MODULE),
    Experiment("algorithm choice", "resnet50", 64, "heuristic", "graph", FP32, FP32_ALL,
               "algorithm-selection gap (ms)", source=MODULE),
    Experiment("algorithm choice", "resnet50", 64, "heuristic", "both", ORT_HEURISTIC, ORT_EXHAUSTIVE,
               "algorithm-selection gap (ms)", source=ORT),  # ORT 1.31 runs cuDNN frontend engines: both APIs
    Experiment("Tensor Cores", "resnet50", 64, "exhaustive", "graph", FP32_ALL, TF32_ALL, "what-if tf32 saving",
               source=MODULE),
    Experiment("Tensor Cores", "bert_base", 32, "exhaustive", "legacy", FP32_BENCH, TF32_BENCH,
               "what-if tf32 saving", source=MODULE),
    Experiment("Tensor Cores", "resnet50", 64, "exhaustive", "legacy", ORT_EXHAUSTIVE, ORT_TF32,
               "what-if tf32 saving", source=ORT),
    Experiment("Tensor Cores", "bert_base", 32, "exhaustive", "legacy", ORT_EXHAUSTIVE, ORT_TF32,
               "what-if tf32 saving", source=ORT),
    Experiment("layout", "resnet50", 64, "exhaustive", "graph", FP16_NCHW_ALL, FP16_NHWC_ALL, "layout gap (ms)",
               dtype="fp16", source=MODULE),
    Experiment("layout", "resnet50", 64, "exhaustive", "legacy", ORT_EXHAUSTIVE, ORT_NHWC, "layout gap (ms)",
               source=ORT),
)
SETS = {"zoo": EXPERIMENTS, "native": NATIVE_EXPERIMENTS}
PROFILE_TIMEOUT_S = 240
E2E_RUNS = 200  # host_latency's timed runs (an eager Inception-v1 b1 run is ~7 ms)


@dataclass
class Outcome:
    experiment: Experiment
    predicted_ms: float | None = None
    prediction: dict[str, Any] = field(default_factory=dict)  # the analysis' figures behind it
    before: dict[str, Any] = field(default_factory=dict)  # validate.py's timing of each variant
    after: dict[str, Any] = field(default_factory=dict)
    realized_ms: float | None = None
    error: str = ""

    @property
    def ratio(self) -> float | None:
        return realized_ratio(self.realized_ms, self.predicted_ms)

    @property
    def within(self) -> bool | None:
        return holds(self.ratio)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "within_15_percent": self.within}


# ---------------------------------------------------------------- the predictions (benanza's analysis)
def predict(exp: Experiment, model_path: Path, bundle: Path, db_path: Path) -> dict[str, Any]:
    """The analysis of the bundle (the run before the change) and the saving it predicts
    (``benanza.workflows.close_loop.predict``, read as ``exp.predicted_by`` says)."""
    return close_loop.predict(model_path, bundle, db_path, exp.predicted_by, exp.apis, exp.batch)


# ---------------------------------------------------------------- the changes, natively in PyTorch
def _rebuilt(gm: Any) -> Any:
    """``gm`` after its graph was rewritten: checked, recompiled, its dropped submodules removed."""
    gm.graph.lint()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return gm


def fold_bn(gm: Any) -> tuple[Any, int]:
    """Every BatchNorm module that is the only reader of a Conv2d module folded into its weights
    and bias (torch.nn.utils.fusion.fuse_conv_bn_eval); returns the module and how many."""
    import torch.fx as fx
    from torch import nn
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    modules = dict(gm.named_modules())
    folded = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.modules.batchnorm._BatchNorm):
            continue
        conv = node.args[0] if node.args else None
        if not (isinstance(conv, fx.Node) and conv.op == "call_module" and isinstance(modules.get(conv.target),
                                                                                      nn.Conv2d)
                and len(conv.users) == 1):
            continue
        fused = fuse_conv_bn_eval(modules[conv.target].eval(), modules[node.target].eval())
        parent, _, name = conv.target.rpartition(".")
        setattr(gm.get_submodule(parent) if parent else gm, name, fused)
        modules[conv.target] = fused
        node.replace_all_uses_with(conv)
        gm.graph.erase_node(node)
        folded += 1
    return _rebuilt(gm), folded


def _conv_relu_module(conv: Any) -> Any:
    """relu(conv(x) [+ z]) as one cuDNN call on the GPU (torch.cudnn_convolution_relu /
    cudnn_convolution_add_relu: conv + bias + [z] + ReLU in one fused operation graph); the same
    arithmetic unfused elsewhere (the CPU check)."""
    import torch
    from torch import nn

    class ConvReLU(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = conv

        def forward(self, x: Any, z: Any = None) -> Any:
            c = self.conv
            if x.is_cuda:
                if z is None:
                    return torch.cudnn_convolution_relu(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)
                return torch.cudnn_convolution_add_relu(x, c.weight, z, 1.0, c.bias, c.stride, c.padding, c.dilation,
                                                        c.groups)
            y = c(x)
            return torch.relu(y if z is None else y + z)

    return ConvReLU()


NATIVE_ADDS = (operator.add, operator.iadd)  # a native module's residual ``out += identity``, as torch.fx records it


def fuse_conv_relu(gm: Any) -> tuple[Any, int]:
    """After ``fold_bn``: every ReLU module reading a Conv2d (its only reader), or reading a
    two-input Sum/Add of such a conv and another tensor, becomes one fused conv(+add)+ReLU call."""
    import torch
    import torch.fx as fx
    from torch import nn

    modules = dict(gm.named_modules())

    def lone_conv(node: Any) -> bool:
        return (isinstance(node, fx.Node) and node.op == "call_module" and len(node.users) == 1
                and isinstance(modules.get(node.target), nn.Conv2d) and modules[node.target].padding_mode == "zeros"
                and not isinstance(modules[node.target].padding, str))

    fused = 0
    for relu in list(gm.graph.nodes):
        if relu.op != "call_module" or not isinstance(modules.get(relu.target), nn.ReLU) or not relu.args:
            continue
        src = relu.args[0]
        if lone_conv(src):
            parent, _, name = src.target.rpartition(".")
            setattr(gm.get_submodule(parent) if parent else gm, name, _conv_relu_module(modules[src.target]))
            relu.replace_all_uses_with(src)
            gm.graph.erase_node(relu)
            fused += 1
            continue
        kind = type(modules.get(src.target)).__name__ if isinstance(src, fx.Node) and src.op == "call_module" else ""
        is_add = (len(src.users) == 1 and len(src.args) == 2 and
                  (kind == "OnnxSum" or (kind == "OnnxBinaryMathOperation"
                   and getattr(modules[src.target], "math_op_function", None) is torch.add))) if kind else False
        is_add = is_add or (isinstance(src, fx.Node) and src.op == "call_function" and src.target in NATIVE_ADDS
                            and len(src.users) == 1 and len(src.args) == 2 and not src.kwargs)
        if not is_add:
            continue
        conv = next((a for a in src.args if lone_conv(a)), None)
        if conv is None:
            continue
        z = src.args[1] if src.args[0] is conv else src.args[0]
        parent, _, name = conv.target.rpartition(".")
        setattr(gm.get_submodule(parent) if parent else gm, name, _conv_relu_module(modules[conv.target]))
        with gm.graph.inserting_before(src):
            call = gm.graph.call_module(conv.target, (conv.args[0], z))
        relu.replace_all_uses_with(call)
        for dead in (relu, src, conv):
            gm.graph.erase_node(dead)
        fused += 1
    return _rebuilt(gm), fused


COMPUTE = ("call_module", "call_function", "call_method")


def stream_plan(graph: Any, n_streams: int = N_STREAMS) -> dict[Any, int]:
    """Stream of each compute node: at a fork (a node read by several compute nodes) its k-th
    reader starts a branch on stream (parent's + k) mod n; a node with one compute input stays on
    its stream; a join (Concat, Add) continues on its first input's stream."""
    stream: dict[Any, int] = {}
    for node in graph.nodes:
        if node.op not in COMPUTE:
            continue
        inputs = [i for i in node.all_input_nodes if i.op in COMPUTE]
        if not inputs:
            stream[node] = 0
            continue
        parent = inputs[0]
        readers = [u for u in parent.users if u.op in COMPUTE]
        if len(inputs) == 1 and len(readers) > 1:
            stream[node] = (stream[parent] + readers.index(node)) % n_streams
        else:
            stream[node] = stream[parent]
    return stream


def streamed(gm: Any, n_streams: int = N_STREAMS) -> Any:
    """An nn.Module that runs ``gm``'s fx graph node by node with the branches of ``stream_plan``
    on their own CUDA streams (events order the cross-stream reads; ``record_stream`` keeps the
    caching allocator from reusing a tensor another stream still reads). Without CUDA the streams
    are not used (a CPU check of the plan and the interpreter)."""
    import torch
    from torch import nn
    from torch.fx.node import map_arg

    plan = stream_plan(gm.graph, n_streams)
    crossing = {i for n in plan for i in n.all_input_nodes if i in plan and plan[i] != plan[n]}
    for node in gm.graph.nodes:
        if node.op == "output":
            crossing |= {i for i in node.all_input_nodes if i in plan and plan[i] != 0}

    class Streamed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gm = gm
            self.streams: list[Any] = []
            self.branches = len(set(plan.values()))

        def forward(self, *args: Any) -> Any:
            cuda = args and isinstance(args[0], torch.Tensor) and args[0].is_cuda
            if cuda and not self.streams:
                self.streams = [None] + [torch.cuda.Stream() for _ in range(n_streams - 1)]
            main = torch.cuda.current_stream() if cuda else None
            env: dict[Any, Any] = {}
            events: dict[Any, Any] = {}
            it = iter(args)
            for node in self.gm.graph.nodes:
                if node.op == "placeholder":
                    env[node] = next(it)
                    continue
                if node.op == "get_attr":
                    obj = self.gm
                    for part in node.target.split("."):
                        obj = getattr(obj, part)
                    env[node] = obj
                    continue
                if node.op == "output":
                    if cuda:
                        for i in node.all_input_nodes:
                            if i in events:
                                main.wait_event(events[i])
                        for side in self.streams[1:]:  # every branch joins: a CUDA graph capture needs it
                            main.wait_stream(side)
                    return map_arg(node.args[0], lambda n: env[n])
                s = (self.streams[plan[node]] or main) if cuda else None
                if cuda:
                    for i in node.all_input_nodes:
                        if i in events and plan[i] != plan[node]:
                            s.wait_event(events[i])
                            value = env[i]
                            for t in (value if isinstance(value, (tuple, list)) else (value,)):
                                if isinstance(t, torch.Tensor):
                                    t.record_stream(s)
                a = map_arg(node.args, lambda n: env[n])
                kw = map_arg(node.kwargs, lambda n: env[n])
                with torch.cuda.stream(s) if cuda else contextlib.nullcontext():
                    if node.op == "call_module":
                        env[node] = self.gm.get_submodule(node.target)(*a, **kw)
                    elif node.op == "call_function":
                        env[node] = node.target(*a, **kw)
                    else:
                        env[node] = getattr(a[0], node.target)(*a[1:], **kw)
                if cuda and node in crossing:
                    events[node] = torch.cuda.Event()
                    events[node].record(s)
            raise RuntimeError("the graph has no output node")

    return Streamed()


def graph_replayed(module: Any, host_int_buffers: bool = True) -> Any:
    """``module`` captured once in a CUDA graph (torch.cuda.graph) on its first CUDA call and replayed
    after that, so that its launches leave the critical path: kernels of different streams can then
    overlap even at batch 1. Before the capture it runs three times on a side stream (PyTorch's
    rule: cuDNN's benchmark and lazy initialisation may not happen inside a capture), and with
    ``host_int_buffers`` integer buffers (onnx2torch's Reshape shapes) move to the host, where
    reading them needs no sync (a native module's integer buffers, such as BERT's position ids,
    are indices the GPU reads and stay). The first call's inputs are the graph's static inputs;
    other tensors are copied into them."""
    import torch
    from torch import nn

    class GraphReplay(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module
            self.graph: Any = None
            self.static_in: list[Any] = []
            self.static_out: Any = None

        def _capture(self, args: tuple[Any, ...]) -> None:
            for sub in self.inner.modules() if host_int_buffers else ():
                for name, buf in list(sub._buffers.items()):
                    if buf is not None and not buf.is_floating_point():
                        sub._buffers[name] = buf.cpu()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.inner(*args)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_out = self.inner(*args)
            self.static_in = list(args)

        def forward(self, *args: Any) -> Any:
            if not (args and isinstance(args[0], torch.Tensor) and args[0].is_cuda):
                return self.inner(*args)
            if self.graph is None:
                self._capture(args)
            for static, given in zip(self.static_in, args, strict=True):
                if given.data_ptr() != static.data_ptr():
                    static.copy_(given)
            self.graph.replay()
            return self.static_out

    return GraphReplay()


def native_module(model_path: Path, batch: int, work: Path) -> tuple[Any, dict[str, Any]]:
    """The model as the profile ran it (benanza's materialize: same seed, same weights; onnx2torch with
    benanza's fixes), and random device-independent inputs for validate.py."""
    import numpy as np
    import onnx
    from validate import input_specs

    from benanza.profile.materialize import materialize
    from benanza.profile.onnx_torch import convert

    out = work / f"{model_path.stem}_b{batch}.onnx"
    if not out.exists():
        materialize(model_path, batch, out)
    gm = convert(str(out))
    specs = input_specs(onnx.load(str(out), load_external_data=False))
    rng = np.random.default_rng(1)
    return gm, {name: rng.standard_normal(shape).astype(np.float32) for name, shape in specs}


FX_TRACED = ("resnet50", "googlenet")  # natives whose changes rewrite the module's graph (torch.fx)


def export_native(exp: Experiment, exports: Path) -> Path:
    """A native module's ONNX export at the experiment's batch, made by ``benanza profile
    --torch-module``'s own exporter (``torch_module.export``), so that the database rows ``benanza run``
    measures from it and the profile's layers share keys by construction: ONNX Runtime's model. Only
    the file comes from benanza; what runs and how it is timed stay this harness's."""
    import natives

    from benanza.profile import torch_module

    path = exports / exp.export
    if not path.exists():
        exports.mkdir(parents=True, exist_ok=True)
        module, inputs = natives.FACTORIES[exp.model](batch=exp.batch)
        torch_module.export(module, inputs, path, f"natives:{exp.model}")
    return path


def native_run(exp: Experiment, export: Path | None) -> tuple[Any, dict[str, Any]]:
    """What a native experiment changes, and its inputs (as numpy, ``input_<i>``): the module of
    bench/natives.py (fx-traced where a change rewrites its graph), or for ONNX Runtime the export."""
    import natives
    from torch import fx

    module, inputs = natives.FACTORIES[exp.model](batch=exp.batch)
    feeds = {f"input_{i}": t.numpy() for i, t in enumerate(inputs)}
    if exp.source == ORT:
        return export, feeds
    return (fx.symbolic_trace(module) if exp.model in FX_TRACED else module), feeds


def sum_as_add(gm: Any) -> tuple[Any, int]:
    """Every onnx2torch ``OnnxSum`` module of ``gm`` replaced by the sum of its inputs with ``+``
    (torch.add, broadcasting as ONNX's Sum does), whose output keeps its inputs' memory format:
    ``OnnxSum`` adds them into a new zero tensor, which is NCHW whatever they are. Returns the
    module and how many."""
    from torch import nn

    class Add(nn.Module):
        def forward(self, *xs: Any) -> Any:
            out = xs[0]
            for x in xs[1:]:
                out = out + x
            return out

    replaced = 0
    for name, mod in list(gm.named_modules()):
        if type(mod).__name__ == "OnnxSum":
            parent, _, child = name.rpartition(".")
            setattr(gm.get_submodule(parent) if parent else gm, child, Add())
            replaced += 1
    return gm, replaced


def channels_last(module: Any) -> Any:
    """``module`` with its 4-D weights in NHWC (``Module.to(memory_format=torch.channels_last)``;
    validate.py's ``.to("cuda", dtype)`` keeps that format) and each 4-D input turned NHWC at the
    start of the call: that transpose runs inside the timed run, as the layout gap charges it (the
    model's 4-D inputs and outputs read and written once)."""
    import torch
    from torch import nn

    class ChannelsLast(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module.to(memory_format=torch.channels_last)

        def forward(self, *args: Any) -> Any:
            return self.inner(*(a.contiguous(memory_format=torch.channels_last)
                                if isinstance(a, torch.Tensor) and a.dim() == 4 else a for a in args))

    return ChannelsLast()


def apply(gm: Any, variant: Variant, source: str = ZOO) -> tuple[Any, dict[str, Any]]:
    """The variant's module: ``gm`` copied and changed (ONNX Runtime: the export's path, unchanged;
    its change is a session option)."""
    if variant.ort:
        return gm, {"cuda_options": dict(variant.cuda_options)}
    module = copy.deepcopy(gm)
    notes: dict[str, Any] = {}
    if variant.attention:
        import natives

        module, notes["attention"] = natives.set_attention(module, variant.attention), variant.attention
    if variant.change == "fold-bn":
        module, folded = fold_bn(module)
        if not folded:
            raise RuntimeError("no Conv2d -> BatchNorm pair to fold in the converted module")
        notes["BN folded"] = folded
    if variant.change == "fuse":
        module, folded = fold_bn(module)
        module, fused = fuse_conv_relu(module)
        if not fused:
            raise RuntimeError("no conv(+add)+ReLU to fuse in the converted module")
        notes.update({"BN folded": folded, "conv(+add)+ReLU fused": fused})
    if variant.sum_as_add:
        module, notes["Sum as torch.add"] = sum_as_add(module)
    if variant.channels_last:
        module, notes["channels_last"] = channels_last(module), True
    if variant.change == "streams":
        module = streamed(module)
        if module.branches < 2:
            raise RuntimeError("the graph has no parallel branches")
        notes["streams used"] = module.branches
    if variant.cuda_graph:
        module, notes["CUDA graph"] = graph_replayed(module, host_int_buffers=source == ZOO), True
    return module, notes


def host_latency(module: Any, variant: Variant, feeds: dict[str, Any], warmup: int, runs: int) -> dict[str, Any]:
    """End-to-end latency the way ``benanza profile``'s latency child times a PyTorch run (no
    profiler, no logging), with this file's own code: the module on the GPU in the variant's
    precision, the inputs copied to the GPU once before the loop (device-resident, as the profile
    has them), ``warmup`` untimed runs, then per run the host wall time of one call under
    ``torch.no_grad()`` followed by ``torch.cuda.synchronize()``; the median of ``runs``. A CUDA
    graph variant is captured in the warm-up (``graph_replayed``'s first call), so the timed runs are
    replays of it. The outputs stay on the GPU on both sides, as in the profile."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = variant.tf32
    torch.backends.cudnn.allow_tf32 = variant.tf32
    torch.backends.cudnn.benchmark = variant.benchmark
    dtype = torch.float16 if variant.fp16 else torch.float32
    net = module.to("cuda", dtype).eval()
    inputs = [torch.from_numpy(v).to("cuda", dtype if v.dtype.kind == "f" else None) for v in feeds.values()]

    def run() -> None:
        with torch.no_grad():
            net(*inputs)

    return host_times(run, warmup, runs)


def host_times(run: Any, warmup: int, runs: int) -> dict[str, Any]:
    """``warmup`` untimed calls of ``run``, then per call the host wall time of ``run()`` and a device
    sync: the median of ``runs`` (``host_latency``'s and ``ort_host_latency``'s one loop)."""
    import torch

    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    latencies = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        run()
        torch.cuda.synchronize()
        latencies.append((time.perf_counter_ns() - t0) / 1e6)
    return {"e2e_ms": statistics.median(latencies), "e2e_ms_min": min(latencies), "e2e_ms_iters": latencies,
            "e2e_warmup": warmup, "e2e_runs": runs}


def ort_host_latency(model: Path, variant: Variant, feeds: dict[str, Any], warmup: int, runs: int) -> dict[str, Any]:
    """``host_latency`` for an ONNX Runtime session (validate.py's I/O binding: device-resident
    inputs and outputs): per run the host wall time of ``run_with_iobinding`` and a device sync.
    With ``enable_cuda_graph`` the first warm-up run captures the graph, the rest replay it."""
    from validate import ort_session

    sess, binding, _keep = ort_session(model, variant.setting(), feeds)
    return host_times(lambda: sess.run_with_iobinding(binding), warmup, runs)


class PlanCacheThreads:
    """One timing thread per cuDNN setting (``Variant.plan_cache``). PyTorch's cuDNN plan caches are
    thread-local and keyed without ``benchmark``: in one thread a benchmark-on run would reuse the
    plans a benchmark-off run chose for the same convolutions (session 7 measured the two 0.006 ms
    apart). Variants of one setting share a thread, so a graph change (folding) runs the same conv
    plans as its baseline."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._new = lambda: ThreadPoolExecutor(max_workers=1)
        self.pools: dict[tuple[Any, ...], Any] = {}

    def submit(self, variant: Variant, job: Any) -> Any:
        """``job()`` run on the thread of ``variant``'s cuDNN setting; its result (or its exception)."""
        return self.pools.setdefault(variant.plan_cache, self._new()).submit(job).result()

    def time(self, module: Any, variant: Variant, feeds: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
        from validate import run_ort, run_torch

        def job() -> dict[str, Any]:
            import torch

            if variant.ort:
                return run_ort(module, variant.setting(), feeds, args)
            torch.backends.cudnn.benchmark_limit = 10 if variant.benchmark_limit is None else variant.benchmark_limit
            return run_torch(module, variant.setting(), feeds, args)

        return self.submit(variant, job)

    def latency(self, module: Any, variant: Variant, feeds: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
        """``host_latency`` of ``module`` on the thread of ``variant``'s cuDNN setting."""

        def job() -> dict[str, Any]:
            import torch

            if variant.ort:
                return ort_host_latency(module, variant, feeds, args.warmup, args.e2e_runs)
            torch.backends.cudnn.benchmark_limit = 10 if variant.benchmark_limit is None else variant.benchmark_limit
            return host_latency(module, variant, feeds, args.warmup, args.e2e_runs)

        return self.submit(variant, job)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.shutdown()


# ---------------------------------------------------------------- driver
def model_for(exp: Experiment, args: argparse.Namespace, out: Path) -> Path:
    """The ONNX file the experiment's layers come from: the zoo file, the module bundle's own export
    (``--torch-module``), or the harness's export that ONNX Runtime runs."""
    if exp.source == ZOO:
        return zoo_model(Path(args.models), exp.model)
    if exp.source == MODULE:
        return out / "bundles" / exp.bundle / "exported.onnx"
    return export_native(exp, out / "exports")


def profile_all(exps: list[Experiment], args: argparse.Namespace, out: Path) -> dict[str, str]:
    """Each experiment's bundle (the run before the change), profiled where missing; the one-line
    errors of those that failed, by bundle."""
    failed: dict[str, str] = {}
    for exp in exps:
        bundle = out / "bundles" / exp.bundle
        if (bundle / "meta.json").exists() or exp.bundle in failed:
            continue
        t0 = time.perf_counter()
        try:
            model = None if exp.source == MODULE else model_for(exp, args, out)
            profile(model or Path(), exp, bundle, args)
        except Exception as exc:  # recorded; the experiments of other bundles still run
            failed[exp.bundle] = f"{type(exc).__name__}: {exc}"[:400]
            shutil.rmtree(bundle, ignore_errors=True)
        print(f"profile {exp.bundle}: {time.perf_counter() - t0:.1f} s {failed.get(exp.bundle, '')}", flush=True)
    return failed


def measure_db(exps: list[Experiment], args: argparse.Namespace, out: Path, db_path: Path) -> None:
    """The rows the native models' analyses need: ``benanza run`` on their exports (each at its own
    batch) into ``db_path``, a copy of the shipped database, so only the layers the zoo lacks are
    measured (the runner skips what the database holds for this system)."""
    exports = sorted({str(export_native(e, out / "exports")) for e in exps if e.source != ZOO})
    if not exports:
        return
    if not db_path.exists():
        from benanza.store.shipped import shipped_db

        shutil.copyfile(shipped_db(), db_path)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benanza", "run", *exports, "--dtype", "fp32,tf32,fp16",
                           "--db", str(db_path), "--project-dir", str(out / "project"),
                           "-j", str(os.cpu_count() or 4)], capture_output=True, text=True)
    tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
    print(f"benanza run on {len(exports)} exports: exit {done.returncode}, {time.perf_counter() - t0:.0f} s\n"
          + "\n".join(tail), flush=True)
    if done.returncode:
        raise SystemExit("close_loop.py: benanza run failed (above)")


def _predicted(exp: Experiment, model: Path, bundle: Path, db_path: Path) -> dict[str, Any]:
    """``predict``, or its one-line error (a tf32 what-if from the model alone where the bundle's
    analysis is refused: ``close_loop.predict_or_model_alone``)."""
    return close_loop.predict_or_model_alone(model, bundle, db_path, exp.predicted_by, exp.apis, exp.batch)


def predict_all(exps: list[Experiment], args: argparse.Namespace, out: Path, db_path: Path) -> dict[int, dict]:
    """Every experiment's prediction, analyses in parallel processes (each parses its bundle's
    cuDNN log: 10-25 s, on the CPU while nothing else runs)."""
    from concurrent.futures import ProcessPoolExecutor

    jobs = {i: (e, model_for(e, args, out), out / "bundles" / e.bundle) for i, e in enumerate(exps)
            if (out / "bundles" / e.bundle / "meta.json").exists()}
    with ProcessPoolExecutor(max_workers=max(1, min(8, len(jobs)))) as pool:
        futures = {i: pool.submit(_predicted, e, m, b, db_path) for i, (e, m, b) in jobs.items()}
        return {i: f.result() for i, f in futures.items()}


def run_experiments(args: argparse.Namespace) -> list[Outcome]:
    import torch

    from benanza.store.shipped import shipped_db

    if not torch.cuda.is_available():
        sys.exit("close_loop.py: no usable CUDA GPU (use --dry-run for the plan)")
    self_check()  # the changes keep the outputs before anything is timed
    start = time.perf_counter()
    out = Path(args.out)
    (out / "bundles").mkdir(parents=True, exist_ok=True)
    exps = selected(args)
    native = any(e.source != ZOO for e in exps)
    db_path = Path(args.db) if args.db else (out / "close.db" if native else shipped_db())
    failed = profile_all(exps, args, out)
    if native:
        measure_db(exps, args, out, db_path)
    if args.stage == "prepare":
        print(f"prepared in {time.perf_counter() - start:.0f} s", flush=True)
        return []
    predictions = predict_all(exps, args, out, db_path)
    print(f"predictions: {time.perf_counter() - start:.0f} s", flush=True)
    timings: dict[tuple[Any, ...], dict[str, Any]] = {}
    natives: dict[tuple[str, str, int], tuple[Any, dict[str, Any]]] = {}
    outcomes = []
    threads = PlanCacheThreads()
    work = Path(tempfile.mkdtemp(prefix="close_loop_"))
    for i, exp in enumerate(exps):
        o = Outcome(exp)
        outcomes.append(o)
        if time.perf_counter() - start > args.budget_s:
            o.error = f"skipped: past the {args.budget_s:.0f} s budget"
            continue
        try:
            if exp.bundle in failed:
                raise RuntimeError(f"benanza profile failed: {failed[exp.bundle]}")
            o.prediction = dict(predictions.get(i, {}))
            o.predicted_ms = o.prediction.pop("predicted_ms", None)
            if o.prediction.get("error"):
                raise RuntimeError(f"prediction: {o.prediction['error']}")
            ident = (exp.source, exp.model, exp.batch)
            if ident not in natives:
                natives[ident] = (native_module(model_for(exp, args, out), exp.batch, work) if exp.source == ZOO
                                  else native_run(exp, model_for(exp, args, out) if exp.source == ORT else None))
            gm, feeds = natives[ident]
            timing = argparse.Namespace(**{**vars(args), "profiled": args.profiled * exp.repeats})
            sides = ((exp.before, "before"), (exp.after, "after"))
            e2e: dict[str, dict[str, Any]] = {}
            if exp.measure == END_TO_END:  # both host timings before either side's CUPTI session
                for variant, slot in sides:
                    key = ("end-to-end", *ident, variant.name)
                    if key not in timings:
                        module, _ = apply(gm, variant, exp.source)  # a module (and a capture) of its own
                        timings[key] = threads.latency(module, variant, feeds, args)
                        del module
                        torch.cuda.empty_cache()
                    e2e[slot] = timings[key]
            for variant, slot in sides:
                key = (*ident, variant.name, exp.repeats)
                if key not in timings:
                    module, notes = apply(gm, variant, exp.source)
                    timings[key] = {"variant": variant.name, **notes, **threads.time(module, variant, feeds, timing)}
                    del module
                    torch.cuda.empty_cache()
                setattr(o, slot, {**timings[key], **e2e.get(slot, {})})
            measured = "e2e_ms" if exp.measure == END_TO_END else "kernel_ms"
            o.realized_ms = o.before[measured] - o.after[measured]
            o.prediction["realized spread (ms)"] = spread(o.before, o.after, measured + "_iters")
        except Exception as exc:  # one failed experiment is recorded, the others still run
            o.error = f"{type(exc).__name__}: {exc}"[:400]
        print_row(o)
        save(out, outcomes, start)
    threads.close()
    return outcomes


def selected(args: argparse.Namespace) -> list[Experiment]:
    """The set's experiments of the gap kinds ``--only`` names, run by the frameworks ``--source`` names,
    on the models ``--model`` names."""
    wanted = {w.strip().lower() for w in args.only.split(",")} if args.only else None
    sources = {w.strip() for w in args.source.split(",")} if args.source else None
    models = {w.strip() for w in args.model.split(",")} if args.model else None
    return [e for e in SETS[args.set] if (wanted is None or e.gap.lower() in wanted)
            and (sources is None or e.source in sources) and (models is None or e.model in models)]


def zoo_model(models: Path, stem: str) -> Path:
    path = models / f"{stem}.onnx"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "benanza", "models", "zoo", str(models)], check=True)
    return path


def profile_command(model_path: Path, exp: Experiment, bundle: Path, args: argparse.Namespace) -> list[str]:
    """``benanza profile`` of the run before the change: a zoo file through onnx2torch, a native module
    (``--torch-module natives:<factory>``, bench/ on PYTHONPATH) or ONNX Runtime on its export."""
    what = {ZOO: [str(model_path), "--framework", "torch"],
            MODULE: ["--torch-module", f"natives:{exp.model}"],
            ORT: [str(model_path), "--framework", "onnxruntime"]}[exp.source]
    return [sys.executable, "-m", "benanza", "profile", *what, "--batch", str(exp.batch), "--dtype", exp.dtype,
            "--algo-search", exp.algo_search, "--out", str(bundle), "--runs", str(args.profile_runs),
            "--profiled-runs", str(args.profiled_runs), "--warmup", "5"]


def profile(model_path: Path, exp: Experiment, bundle: Path, args: argparse.Namespace) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(BENCH), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(profile_command(model_path, exp, bundle, args), capture_output=True, text=True,
                          timeout=PROFILE_TIMEOUT_S, env=env)
    if done.returncode:
        raise RuntimeError(f"benanza profile failed: {(done.stderr or done.stdout).strip()[-300:]}")


def save(out: Path, outcomes: list[Outcome], start: float) -> None:
    import torch

    meta = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "tolerance": TOLERANCE,
            "wall_s": round(time.perf_counter() - start, 1),
            "method": "realized = kernel_ms(before) - kernel_ms(after), kernel_ms from bench/validate.py (median "
                      "per-iteration union of CUPTI kernel intervals, device-resident inputs); framework overhead: "
                      "e2e_ms(before) - e2e_ms(after), e2e_ms from close_loop.host_latency (median host wall time "
                      "of one call + torch.cuda.synchronize(), device-resident inputs, no profiler, timed before "
                      "either side's CUPTI session)"}
    (out / "close_loop.json").write_text(json.dumps({"meta": meta, "outcomes": [o.to_json() for o in outcomes]},
                                                    indent=1, default=str))


COLUMNS = ("gap kind", "model, batch", "change", "predicted (ms)", "realized (ms)", "realized / predicted",
           "within ±15 %", "kernel-only (or end-to-end) before → after (ms)")


def _f(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def print_row(o: Outcome, header: list[bool] = [True]) -> None:  # noqa: B006 (prints the header once)
    if header[0]:
        print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS), flush=True)
        header[0] = False
    e = o.experiment
    within = "–" if o.within is None else ("yes" if o.within else "no")
    times = (f"{_f(o.before.get('kernel_ms'))} → {_f(o.after.get('kernel_ms'))}" if o.after else o.error or "–")
    if o.after and e.measure == END_TO_END:
        times = f"end-to-end {_f(o.before.get('e2e_ms'))} → {_f(o.after.get('e2e_ms'))} (kernel-only {times})"
    noise = o.prediction.get("realized spread (ms)")
    realized = _f(o.realized_ms) + ("" if noise is None else f" ± {noise:.3f}")
    print(f"| {e.gap} | {e.model}, {e.batch} | {e.before.name} → {e.after.name} | {_f(o.predicted_ms)} | "
          f"{realized} | {_f(o.ratio, 2)} | {within} | {times} |", flush=True)


def dry_run(args: argparse.Namespace) -> None:
    """The plan, and the predictions from shipped bundles of the same name where there are some."""
    from benanza.store.shipped import shipped_db

    db_path = Path(args.db) if args.db else shipped_db()
    out = Path(args.out or "OUT")
    shipped = Path(args.bundles)
    for exp in selected(args):
        model_path = (Path(args.models) / f"{exp.model}.onnx" if exp.source == ZOO
                      else out / "bundles" / exp.bundle / "exported.onnx" if exp.source == MODULE
                      else out / "exports" / exp.export)
        print(f"\n## {exp.gap}: {exp.model}, batch {exp.batch} ({exp.source})")
        print("profile: " + " ".join(profile_command(model_path, exp, out / "bundles" / exp.bundle, args)))
        print(f"predict: analysis of the bundle against {db_path} (--apis {exp.apis}): {exp.predicted_by}")
        if exp.measure == END_TO_END:
            print(f"time:    close_loop host_latency (end-to-end, {args.e2e_runs} runs, no profiler), then "
                  f"bench/validate.py run_torch (kernel-only), {exp.before.name} → {exp.after.name}")
        else:
            runner = "run_ort" if exp.before.ort else "run_torch"
            print(f"time:    bench/validate.py {runner}, {exp.before.name} → {exp.after.name}"
                  + (f", {exp.repeats}x --profiled iterations" if exp.repeats > 1 else ""))
        bundle = shipped / exp.bundle
        if (bundle / "meta.json").exists() and model_path.exists():
            try:
                prediction = predict(exp, model_path, bundle, db_path)
            except Exception as exc:
                print(f"prediction from {bundle}: failed: {type(exc).__name__}: {exc}")
                continue
            print(f"prediction from the shipped bundle {bundle.name}: {_f(prediction.pop('predicted_ms'))} ms")
            print("  " + json.dumps(prediction, default=str))
        else:
            print(f"(no bundle {bundle} or no {model_path} here: prediction made on the GPU)")


# ---------------------------------------------------------------- the harness's own checks
def self_check() -> list[str]:
    """The harness's changes keep a model's outputs, and its tables isolate what each prediction
    assumes: what ``--self-check`` runs (and a GPU run, before it times anything). The torch parts
    need torch (CPU is enough). Returns what it checked."""
    import threading

    checked = []
    assert {e.gap for e in EXPERIMENTS} == {"algorithm choice", "Tensor Cores", "folding", "fusion",
                                            "parallel branches", "layout", "framework overhead"}
    kinds = {e.gap for e in EXPERIMENTS}
    assert {e.gap for e in NATIVE_EXPERIMENTS if e.source == MODULE} == kinds
    assert {e.source for e in NATIVE_EXPERIMENTS} == {MODULE, ORT}
    assert all(e.bundle.startswith("native_") for e in NATIVE_EXPERIMENTS)
    assert all(e.before.ort == e.after.ort == (e.source == ORT) for e in NATIVE_EXPERIMENTS)
    assert all(e.predicted_by in READINGS for e in (*EXPERIMENTS, *NATIVE_EXPERIMENTS))
    by_gap = {e.gap: e for e in EXPERIMENTS}
    algo, tc, par = by_gap["algorithm choice"], by_gap["Tensor Cores"], by_gap["parallel branches"]
    # the bound takes the best graph-API engine: every engine config is tried, on both sides of the TC change
    assert algo.apis == tc.apis == "graph" and algo.after.benchmark_limit == 0
    assert tc.before.benchmark_limit == tc.after.benchmark_limit == 0 and tc.after.tf32 and not tc.before.tf32
    # only the streams differ: both sides are one CUDA graph, launched off the critical path
    assert par.before.cuda_graph and par.after.cuda_graph and (par.before.change, par.after.change) == ("", "streams")
    checked.append("the experiment tables")
    threads = PlanCacheThreads()  # PyTorch's cuDNN plan cache is thread-local and keyed without ``benchmark``
    try:
        ident = {v.name: threads.submit(v, threading.get_ident)
                 for v in (FP32, FP32_BENCH, FP32_ALL, TF32_ALL, FOLDED, FUSED, GRAPHED)}
    finally:
        threads.close()
    assert len({ident[v.name] for v in (FP32, FP32_BENCH, FP32_ALL, TF32_ALL)}) == 4
    assert ident[FOLDED.name] == ident[FUSED.name] == ident[GRAPHED.name] == ident[FP32_BENCH.name]
    assert threading.get_ident() not in ident.values()
    checked.append("one timing thread per cuDNN setting")
    try:
        import torch
        from torch import fx, nn
    except ImportError:
        return checked

    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.a = nn.Conv2d(8, 4, 1)
            self.b = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.ReLU())
            self.c = nn.MaxPool2d(3, 1, 1)

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn(self.stem(x)))
            return torch.cat([self.a(y), self.b(y), self.c(y)], 1)

    class Fork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.a, self.b = nn.Conv2d(3, 3, 1), nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x: Any) -> Any:
            y = self.stem(x)  # a fork is a compute node read by several: the two convs after it
            return torch.cat([self.a(y), self.b(y)], 1)

    class Residual(nn.Module):  # torchvision's ``out += identity``: an fx call_function (operator.iadd)
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()

        def forward(self, x: Any) -> Any:
            out = self.bn(self.conv(x))
            out += x
            return self.relu(out)

    torch.manual_seed(0)
    net = Branchy().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    gm = fx.symbolic_trace(net)
    with torch.inference_mode():
        ref = gm(x)
        folded, n = fold_bn(copy.deepcopy(gm))
        assert n == 1 and not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
        assert torch.allclose(folded(x), ref, atol=1e-5)
        fused, n = fuse_conv_relu(fold_bn(copy.deepcopy(gm))[0])
        assert n == 1 and torch.allclose(fused(x), ref, atol=1e-5)  # branch b's conv + ReLU
        assert len(set(stream_plan(gm.graph).values())) == 3  # three branches after the ReLU
        assert torch.equal(streamed(copy.deepcopy(gm))(x), ref)
        fork = fx.symbolic_trace(Fork().eval())  # off the GPU the CUDA-graph wrapper runs its module directly
        z = torch.randn(1, 3, 8, 8)
        for variant, streams in ((GRAPHED, None), (STREAMS, 2)):
            module, notes = apply(fork, variant)
            assert notes.get("CUDA graph") is True and notes.get("streams used") == streams
            assert torch.equal(module(z), fork(z))
        res = Residual().eval()
        y = torch.randn(2, 4, 8, 8)
        fused, n = fuse_conv_relu(fold_bn(fx.symbolic_trace(res))[0])
        assert n == 1 and torch.allclose(fused(y), res(y), atol=1e-5)
    checked.append("BN folding, conv+ReLU fusion, streams and the CUDA-graph wrapper keep the outputs")
    return checked


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="directory for close_loop.json and the bundles (required unless --dry-run)")
    p.add_argument("--db", help="performance database (default: the shipped H100 database)")
    p.add_argument("--models", default=str(ROOT / "models" / "zoo"), help="zoo models (filled if missing)")
    p.add_argument("--set", choices=sorted(SETS), default="zoo",
                   help="zoo: zoo models through onnx2torch; native: torchvision/transformers modules and ONNX "
                        "Runtime sessions on their exports (bench/natives.py)")
    p.add_argument("--only", default="", help="comma-separated gap kinds to run (default: all)")
    p.add_argument("--model", default="", help="comma-separated models to keep (zoo stems or bench/natives.py "
                                               "factories; default: all)")
    p.add_argument("--source", default="", help=f"comma-separated runs to keep ({ZOO}, {MODULE}, {ORT}; default: all)")
    p.add_argument("--stage", choices=("prepare", "all"), default="all",
                   help="prepare: profile the bundles (and measure the native models' rows) and stop")
    p.add_argument("--budget-s", type=float, default=360.0, help="start no experiment after this many seconds")
    p.add_argument("--profile-runs", type=int, default=20, help="benanza profile --runs")
    p.add_argument("--profiled-runs", type=int, default=3, help="benanza profile --profiled-runs")
    p.add_argument("--warmup", type=int, default=5, help="validate.py timing: untimed runs")
    p.add_argument("--iters", type=int, default=20, help="validate.py timing: host-timed runs")
    p.add_argument("--profiled", type=int, default=10, help="validate.py timing: CUPTI-profiled runs")
    p.add_argument("--e2e-runs", type=int, default=E2E_RUNS,
                   help="framework overhead: host-timed end-to-end runs of each side (host_latency)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the predictions; run nothing")
    p.add_argument("--self-check", action="store_true",
                   help="check the harness's own changes and tables (anywhere; torch for the changes), then stop")
    p.add_argument("--bundles", default=str(ROOT / "perfdb" / "bundles"), help="--dry-run: bundles to predict from")
    args = p.parse_args()
    if args.self_check:
        print("\n".join(f"ok: {what}" for what in self_check()))
        return
    if (args.only or args.source or args.model) and not selected(args):
        p.error(f"--only/--source/--model: no experiment of {args.only or args.source or args.model!r} in "
                f"--set {args.set} (kinds: {', '.join(sorted({e.gap for e in SETS[args.set]}))})")
    if args.dry_run:
        dry_run(args)
        return
    if not args.out:
        p.error("--out is required (unless --dry-run)")
    outcomes = run_experiments(args)
    ok = [o for o in outcomes if o.within is not None]
    print(f"\n{sum(bool(o.within) for o in ok)} of {len(outcomes)} within ±{TOLERANCE:.0%}; "
          f"median |realized/predicted - 1|: "
          f"{_f(statistics.median(abs(o.ratio - 1) for o in ok) if ok else None, 2)}; "
          f"results in {Path(args.out) / 'close_loop.json'}")


if __name__ == "__main__":
    main()
