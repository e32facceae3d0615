"""The benchmark planner: the one place that decides what gets benchmarked.

Candidates are every (layer or fusion candidate) x (API it maps to) x (precision)
of the given models.  The planner dedupes them by key across models and batches,
drops those that make no sense or are already measured (logging why), and turns
the rest into jobs through ``JOB_BUILDERS``: one small function per API that turns
a layer or fusion into the plain numbers its template needs.  Adding an API is
one builder here plus one template (see docs/GENERATOR.md); generation
(``benanza.codegen``) never filters on the side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benanza.library import (
    APIS,
    PRECISIONS,
    Activation,
    Api,
    ConvFwdAlgo,
    Fusion,
    Precision,
)
from benanza.model.layer import FusionCandidate, Layer, Model

# ---------------------------------------------------------------- descriptions


@dataclass(frozen=True)
class Benchmark:
    """One measurable call; ``name()`` is its identity (dedupe key, database key)."""

    layer_key: str  # a layer key, or a fusion key for fused benchmarks
    api: str  # a benanza.library.Api value
    algorithm: str  # legacy enum spelling, "*" when enumerated at run time
    dtype: str  # a benanza.library.Precision value
    math: str  # a benanza.library.Math value
    fusion: str  # a benanza.library.Fusion value
    layout: str  # "NCHW", "NHWC", or "" where the API has no layout

    def name(self) -> str:
        return "/".join((self.api, self.algorithm, self.dtype, self.math, self.fusion, self.layout or "-",
                         self.layer_key))


@dataclass(frozen=True)
class JobFields:
    """What a job builder returns: the template's numbers plus the manifest's description."""

    row: dict[str, Any]  # fields of one row of the generated job table: numbers, hex keys, enum spellings
    shapes: dict[str, Any]  # human-readable shapes/attributes for manifest.json
    algorithms: tuple[str, ...]  # algorithms measured per job; ("*",) when enumerated at run time
    layout: str = ""


@dataclass(frozen=True)
class Job:
    """One row of one executable's job table: every algorithm of one API for one key."""

    executable: str  # bench_<slug>
    index: int  # position in the executable's job table (the binary's --jobs value)
    key: str  # layer key, or fusion key
    api: Api
    precision: Precision
    fusion: Fusion
    fields: JobFields = field(compare=False)

    @property
    def layout(self) -> str:
        return self.fields.layout

    @property
    def math(self) -> str:
        return PRECISIONS[self.precision].math.value

    def benchmarks(self) -> list[Benchmark]:
        return [Benchmark(self.key, self.api.value, a, self.precision.value, self.math, self.fusion.value,
                          self.layout) for a in self.fields.algorithms]


@dataclass(frozen=True)
class Dropped:
    """A candidate the planner did not turn into a job, and why."""

    key: str
    what: str  # the op, or the fusion pattern
    api: str
    dtype: str
    reason: str


@dataclass
class Plan:
    jobs: list[Job]
    dropped: list[Dropped]
    models: list[Model] = field(default_factory=list)

    @property
    def benchmarks(self) -> list[Benchmark]:
        return [b for job in self.jobs for b in job.benchmarks()]

    def executables(self) -> dict[str, list[Job]]:
        """Jobs per executable, in job-index order."""
        out: dict[str, list[Job]] = {}
        for job in self.jobs:
            out.setdefault(job.executable, []).append(job)
        return out

    def drop_reasons(self) -> dict[str, int]:
        """How many candidates each reason dropped (for the CLI summary)."""
        counts: dict[str, int] = {}
        for d in self.dropped:
            counts[d.reason] = counts.get(d.reason, 0) + 1
        return counts


class Unsupported(Exception):
    """Raised by a job builder: this layer cannot be benchmarked with this API (the message says why)."""


# ---------------------------------------------------------------- tables

# One executable per API: bench_<slug>.
EXECUTABLES: dict[Api, str] = {
    Api.CONV_FWD: "bench_conv_fwd",
    Api.CONV_BIAS_ACT: "bench_conv_bias_act",
    Api.GRAPH_CONV: "bench_graph_conv",
    Api.GRAPH_MATMUL: "bench_graph_matmul",
    Api.BATCHNORM_INF: "bench_batchnorm",
    Api.ACTIVATION: "bench_activation",
    Api.POOLING: "bench_pooling",
    Api.SOFTMAX: "bench_softmax",
    Api.LRN: "bench_lrn",
    Api.ADD_TENSOR: "bench_add_tensor",
    Api.OP_TENSOR: "bench_op_tensor",
    Api.GEMM_EX: "bench_gemm_ex",
    Api.LT_MATMUL: "bench_lt_matmul",
    Api.SGEMV: "bench_sgemv",
    Api.COPY: "bench_copy",
}

# Fusion pattern -> fused calls that can replace the chain.
FUSION_APIS: dict[Fusion, tuple[Api, ...]] = {
    Fusion.CONV_BIAS: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.CONV_BIAS_ACT: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.CONV_BIAS_ADD_ACT: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.CONV_BN: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),  # inference BN folds into weights and bias
    Fusion.CONV_BN_ACT: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.GEMM_BIAS: (Api.LT_MATMUL, Api.GRAPH_MATMUL),
    Fusion.GEMM_BIAS_ACT: (Api.LT_MATMUL, Api.GRAPH_MATMUL),
}

# Fusions whose chain adds a second tensor (the residual) before the activation.
RESIDUAL_FUSIONS = frozenset({Fusion.CONV_BIAS_ADD_ACT})

# Activation coefficient (cudnnSetActivationDescriptor's coef) from the ONNX op's attributes.
ACTIVATION_COEF: dict[str, Callable[[dict[str, Any]], float]] = {
    "Clip": lambda attrs: float(attrs.get("max", math.inf)),
    "Elu": lambda attrs: float(attrs.get("alpha", 1.0)),
}

FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})


# ---------------------------------------------------------------- job builders


def _layout(precision: Precision) -> str:
    return PRECISIONS[precision].cudnn_layout.removeprefix("CUDNN_TENSOR_")


def _conv_dims(layer: Layer) -> tuple[list[int], dict[str, Any]]:
    """The 18 numbers of a bz::ConvDims row, and the manifest's shapes, for one Conv layer."""
    if len(layer.inputs) < 2 or not layer.outputs:
        raise Unsupported("Conv without weights or output")
    x, w, y = layer.inputs[0], layer.inputs[1], layer.outputs[0]
    if x.dtype not in FLOAT_DTYPES:
        raise Unsupported(f"input dtype {x.dtype} is not a floating-point type")
    rank = len(x.shape)
    if rank not in (3, 4) or len(w.shape) != rank or len(y.shape) != rank:
        raise Unsupported(f"{rank - 2}-D convolution (only 1-D and 2-D are generated)")
    a = layer.attrs
    pads, strides, dil = list(a["pads"]), list(a["strides"]), list(a["dilations"])
    if rank == 3:  # 1-D: an H of 1
        x_s, w_s, y_s = (*x.shape[:2], 1, x.shape[2]), (*w.shape[:2], 1, w.shape[2]), (*y.shape[:2], 1, y.shape[2])
        pads, strides, dil = [0, pads[0], 0, pads[1]], [1, *strides], [1, *dil]
    else:
        x_s, w_s, y_s = tuple(x.shape), tuple(w.shape), tuple(y.shape)
    n, c, h, wd = x_s
    k, cg, r, s = w_s
    g = int(a.get("group", 1))
    if g < 1 or c % g or k % g or cg * g != c:
        raise Unsupported(f"inconsistent groups: C={c}, K={k}, filter channels={cg}, group={g}")
    dims = [n, c, h, wd, k, r, s, pads[0], pads[1], pads[2], pads[3], *strides, *dil, g, y_s[2], y_s[3]]
    shapes = {"x": list(x.shape), "w": list(w.shape), "y": list(y.shape), "pads": list(a["pads"]),
              "strides": list(a["strides"]), "dilations": list(a["dilations"]), "group": g}
    return [int(v) for v in dims], shapes


CONV_FWD_ALGORITHMS = tuple(a.value for a in ConvFwdAlgo)


def conv_fwd_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnConvolutionForward: one Conv layer, all 8 forward algorithms."""
    if not isinstance(item, Layer) or item.op != "Conv":
        raise Unsupported("cudnnConvolutionForward takes a single Conv layer")
    dims, shapes = _conv_dims(item)
    return JobFields({"dims": dims}, shapes, CONV_FWD_ALGORITHMS, _layout(precision))


def conv_bias_act_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnConvolutionBiasActivationForward: a conv fusion chain, act(conv + bias [+ z])."""
    if not isinstance(item, FusionCandidate):
        raise Unsupported("cudnnConvolutionBiasActivationForward takes a fusion candidate")
    fusion = Fusion(item.pattern)
    conv, last = model.layers[item.layers[0]], model.layers[item.layers[-1]]
    if conv.op != "Conv":
        raise Unsupported(f"fusion {fusion.value} does not start with a Conv")
    dims, shapes = _conv_dims(conv)
    act = Activation(item.activation) if item.activation else Activation.IDENTITY
    coef = ACTIVATION_COEF.get(last.op, lambda _: 0.0)(last.attrs) if item.activation else 0.0
    if last.op == "Clip" and float(last.attrs.get("min", 0.0)) != 0.0:
        raise Unsupported("Clip with min != 0 is not a clipped ReLU")
    residual = fusion in RESIDUAL_FUSIONS
    shapes = {**shapes, "bias": [dims[4]], "activation": act.value, "coef": coef}
    if residual:
        shapes["z"] = shapes["y"]
    row = {"dims": dims, "act": act.value, "coef": coef, "alpha2": 1.0 if residual else 0.0}
    return JobFields(row, shapes, CONV_FWD_ALGORITHMS, _layout(precision))


JobBuilder = Callable[[Layer | FusionCandidate, Model, Precision], JobFields]

# API -> job builder.  An API without an entry is dropped with "no benchmark template".
JOB_BUILDERS: dict[Api, JobBuilder] = {
    Api.CONV_FWD: conv_fwd_job,
    Api.CONV_BIAS_ACT: conv_bias_act_job,
}


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class _Candidate:
    key: str
    what: str
    api: Api
    fusion: Fusion
    item: Layer | FusionCandidate
    model: Model


def _candidates(models: Iterable[Model]) -> Iterator[_Candidate]:
    for model in models:
        for layer in model.layers:
            for api in layer.apis:
                yield _Candidate(layer.key, layer.op, api, Fusion.NONE, layer, model)
        for f in model.fusions:
            fusion = Fusion(f.pattern)
            key = getattr(f, "key", "") or f"{fusion.value}:{'-'.join(model.layers[i].key for i in f.layers)}"
            for api in FUSION_APIS.get(fusion, ()):
                yield _Candidate(key, fusion.value, api, fusion, f, model)


def _precision_problem(api: Api, precision: Precision) -> str | None:
    """Why a precision makes no sense for an API (None when it does)."""
    if precision is Precision.TF32 and not APIS[api].tensor_core:
        return "tf32 is fp32 for a non-Tensor-Core op"
    return None


Skip = Callable[[Benchmark], bool] | Collection[str] | None


def _measured(skip: Skip) -> Callable[[Benchmark], bool]:
    if skip is None:
        return lambda _b: False
    if callable(skip):
        return skip
    names = set(skip)
    return lambda b: b.name() in names


def plan(models: Iterable[Model], precisions: Iterable[Precision | str],
         apis: Iterable[Api | str] | None = None, skip: Skip = None) -> Plan:
    """Jobs for every layer and fusion of ``models`` in each precision, deduped by key.

    ``apis`` restricts the APIs (None: all); ``skip`` is a predicate on a Benchmark
    (e.g. ``benanza.db.measured(db, system)``) or a set of benchmark names already
    measured: a job whose benchmarks are all measured is dropped.
    """
    models = list(models)
    precs = [Precision(p) for p in precisions]
    wanted = None if apis is None else {Api(a) for a in apis}
    measured = _measured(skip)
    seen: set[tuple[str, Api, Precision]] = set()
    dropped: dict[tuple[str, str, str, str], Dropped] = {}
    pending: list[tuple[Api, int, int, _Candidate, Precision, JobFields]] = []

    def drop(c: _Candidate, precision: Precision | None, reason: str) -> None:
        d = Dropped(c.key, c.what, c.api.value, precision.value if precision else "*", reason)
        dropped.setdefault((d.key, d.api, d.dtype, d.reason), d)

    for order, c in enumerate(_candidates(models)):
        if wanted is not None and c.api not in wanted:
            drop(c, None, "API not requested")
            continue
        builder = JOB_BUILDERS.get(c.api)
        if builder is None:
            drop(c, None, f"no benchmark template for {c.api.value} yet")
            continue
        for p_order, precision in enumerate(precs):
            if (c.key, c.api, precision) in seen:
                continue
            seen.add((c.key, c.api, precision))
            problem = _precision_problem(c.api, precision)
            if problem:
                drop(c, precision, problem)
                continue
            try:
                fields = builder(c.item, c.model, precision)
            except Unsupported as exc:
                drop(c, precision, str(exc))
                continue
            job = Job("", 0, c.key, c.api, precision, c.fusion, fields)
            if fields.algorithms and all(measured(b) for b in job.benchmarks()):
                drop(c, precision, "already in the database")
                continue
            pending.append((c.api, p_order, order, c, precision, fields))

    api_order = {a: i for i, a in enumerate(Api)}
    pending.sort(key=lambda t: (api_order[t[0]], t[1], t[2]))
    jobs: list[Job] = []
    counters: dict[str, int] = {}
    for api, _p, _o, c, precision, fields in pending:
        exe = EXECUTABLES[api]
        index = counters.get(exe, 0)
        counters[exe] = index + 1
        jobs.append(Job(exe, index, c.key, api, precision, c.fusion, fields))
    return Plan(jobs, list(dropped.values()), models)
