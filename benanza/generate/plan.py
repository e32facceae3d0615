"""The benchmark planner: the one place that decides what gets benchmarked.

Candidates are every (layer or fusion candidate) x (API it maps to) x (precision)
of the given models.  The planner dedupes them by key across models and batches,
drops those that make no sense or are already measured (logging why), and turns
the rest into jobs through each API's builder (``benanza.apis``: one small function per
API that turns a layer or fusion into the plain numbers its template needs; adding an
API is one module there plus one template, see docs/GENERATOR.md); generation
(``benanza.generate.codegen``) never filters on the side.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace

from benanza.apis import NAMED_CONFIG_APIS, REGISTRY
from benanza.apis.base import JobBuilder, JobFields, Unsupported
from benanza.apis.ceilings import CEILING_KEY, ceiling_jobs
from benanza.apis.graph import with_named_configs
from benanza.library import PRECISIONS, Api, Fusion, Precision
from benanza.model.layer import FusionCandidate, Layer, Model, bias_add, separate_bias
from benanza.records import ExecutedCall

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
        return self.fields.math or PRECISIONS[self.precision].math.value

    def benchmarks(self) -> list[Benchmark]:
        return [Benchmark(self.key, self.api.value, a, self.precision.value, self.math, self.fusion.value,
                          self.layout) for a in self.fields.algorithms]


ALREADY_MEASURED = "already in the database"  # Dropped.reason of a benchmark the database holds


@dataclass(frozen=True)
class Dropped:
    """A candidate the planner did not turn into a job, and why."""

    key: str
    what: str  # the op, or the fusion pattern
    api: str
    dtype: str
    reason: str
    layout: str = ""  # a job the database holds in one of the layouts its API is measured in


Drops = dict[tuple[str, str, str, str, str], Dropped]


def _record(dropped: Drops, d: Dropped) -> None:
    """Keep one drop per (key, api, dtype, reason, layout); the first candidate's ``what`` names it."""
    dropped.setdefault((d.key, d.api, d.dtype, d.reason, d.layout), d)


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


# ---------------------------------------------------------------- tables

# One executable per API: bench_<slug> (ApiDef.executable).
EXECUTABLES: dict[Api, str] = {api: d.executable for api, d in REGISTRY.items()}

# Fusion pattern -> fused calls that can replace the chain (ApiDef.fusions).
FUSION_APIS: dict[Fusion, tuple[Api, ...]] = {
    fusion: apis for fusion in Fusion if (apis := tuple(api for api, d in REGISTRY.items() if fusion in d.fusions))}

# API -> job builder (ApiDef.builder).  An API without one is dropped with "no benchmark template".
JOB_BUILDERS: dict[Api, JobBuilder] = {api: d.builder for api, d in REGISTRY.items() if d.builder is not None}


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
            if separate_bias(layer):
                bias = bias_add(layer)
                for api in bias.apis:
                    yield _Candidate(bias.key, f"{layer.op} bias", api, Fusion.NONE, bias, model)
        for f in model.fusions:
            fusion = Fusion(f.pattern)
            key = getattr(f, "key", "") or f"{fusion.value}:{'-'.join(model.layers[i].key for i in f.layers)}"
            for api in FUSION_APIS.get(fusion, ()):
                yield _Candidate(key, fusion.value, api, fusion, f, model)


def _precision_problem(api: Api, precision: Precision) -> str | None:
    """Why a precision makes no sense for an API (None when it does)."""
    if precision is Precision.TF32 and not REGISTRY[api].tensor_core:
        return "tf32 is fp32 for a non-Tensor-Core op"
    return None


def layouts(api: Api, fields: JobFields) -> list[JobFields]:
    """The job in its precision's preferred layout and, for an API measured in both layouts
    (``ApiDef.both_layouts``: convolutions), in the other one too."""
    other = {"NHWC": "NCHW", "NCHW": "NHWC"}.get(fields.layout)
    if REGISTRY[api].both_layouts and other:
        return [fields, replace(fields, layout=other)]
    return [fields]


def _in_layout(api: Api, fields: JobFields, layout: str) -> JobFields:
    """``fields`` in the layout a framework's call used (its preferred one when unknown or not measured)."""
    return next((f for f in layouts(api, fields) if f.layout == layout), fields)


Skip = Callable[[Benchmark], bool] | Collection[str] | None


def _measured(skip: Skip) -> Callable[[Benchmark], bool]:
    if skip is None:
        return lambda _b: False
    if callable(skip):
        return skip
    names = set(skip)
    return lambda b: b.name() in names


_Pending = tuple[Api, int, int, _Candidate, Precision, JobFields]  # api, precision order, candidate order, ...


def _numbered(pending: list[_Pending]) -> tuple[list[Job], dict[str, int]]:
    """Jobs in API, precision, candidate order, numbered per executable (and the next free numbers)."""
    api_order = {a: i for i, a in enumerate(Api)}
    jobs: list[Job] = []
    counters: dict[str, int] = {}
    for api, _p, _o, c, precision, fields in sorted(pending, key=lambda t: (api_order[t[0]], t[1], t[2])):
        exe = EXECUTABLES[api]
        index = counters.get(exe, 0)
        counters[exe] = index + 1
        jobs.append(Job(exe, index, c.key, api, precision, c.fusion, fields))
    return jobs, counters


def plan(models: Iterable[Model], precisions: Iterable[Precision | str],
         apis: Iterable[Api | str] | None = None, skip: Skip = None, ceilings: bool = False) -> Plan:
    """Jobs for every layer and fusion of ``models`` in each precision, deduped by key.

    ``apis`` restricts the APIs (None: all); ``skip`` is a predicate on a Benchmark
    (e.g. ``benanza.store.db.measured(db, system)``) or a set of benchmark names already
    measured: a job whose benchmarks are all measured is dropped.  ``ceilings`` (or
    ``Api.CEILING`` among ``apis``) adds the system-peak jobs (``bench_ceilings``).
    """
    models = list(models)
    precs = [Precision(p) for p in precisions]
    wanted = None if apis is None else {Api(a) for a in apis}
    measured = _measured(skip)
    seen: set[tuple[str, Api, Precision]] = set()
    dropped: Drops = {}
    pending: list[_Pending] = []

    def drop(c: _Candidate, precision: Precision | None, reason: str, layout: str = "") -> None:
        _record(dropped, Dropped(c.key, c.what, c.api.value, precision.value if precision else "*", reason, layout))

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
            for variant, layout_fields in enumerate(layouts(c.api, fields)):
                job = Job("", 0, c.key, c.api, precision, c.fusion, layout_fields)
                if layout_fields.algorithms and all(measured(b) for b in job.benchmarks()):
                    drop(c, precision, ALREADY_MEASURED, layout_fields.layout)
                    continue
                # a second layout's jobs come after every precision's first: the numbering of the others is kept
                pending.append((c.api, p_order + variant * len(precs), order, c, precision, layout_fields))

    jobs, counters = _numbered(pending)
    if ceilings or (wanted is not None and Api.CEILING in wanted):
        for precision, fields in ceiling_jobs():
            job = Job(EXECUTABLES[Api.CEILING], counters.get(EXECUTABLES[Api.CEILING], 0), CEILING_KEY, Api.CEILING,
                      precision, Fusion.NONE, fields)
            if all(measured(b) for b in job.benchmarks()):
                _record(dropped, Dropped(CEILING_KEY, CEILING_KEY, Api.CEILING.value, precision.value,
                                         ALREADY_MEASURED))
                continue
            counters[job.executable] = job.index + 1
            jobs.append(job)
    return Plan(jobs, list(dropped.values()), models)


# ---------------------------------------------------------------- the calls a framework made

# Dropped.reason of a measured job whose algorithms its API enumerates at run time (cuBLASLt):
# the framework's own configuration may not be among them, and cannot be named yet.
UNNAMED = "already measured; the framework's own configuration cannot be named for this API"


def plan_executed(calls: Iterable[tuple[Model, str, ExecutedCall]], skip: Skip = None) -> Plan:
    """Jobs for exactly the library calls a framework made (``benanza generate --from-profile``).

    ``calls`` are (model, layer key, call) as a profile's mapping gives them.  A graph-API
    call becomes a job of its named engine configs; any other call its layer's usual job,
    which measures every algorithm.  What the database holds is dropped as in :func:`plan`.
    """
    calls = list(calls)
    models = list({id(model): model for model, _, _ in calls}.values())  # Model is not hashable
    found: dict[tuple[str, Api], _Candidate] = {}
    for c in _candidates(models):
        found.setdefault((c.key, c.api), c)
    wanted: dict[tuple[str, Api, Precision, Fusion, str], set[str]] = {}
    dropped: Drops = {}
    for _model, layer_key, call in calls:
        key, api = call.key or layer_key, Api(call.api)
        if (key, api) not in found:
            _record(dropped, Dropped(key, call.api, call.api, call.precision,
                                     "the models have no such layer or fusion for this API"))
            continue
        precision = Precision(call.precision)
        # TF32 allowed: an FMA engine config computes in fp32, and its fp32 row is the one the
        # analyzer compares (analyze.choose.executed_row); a Tensor Core one is refused in fp32
        for p in (precision, Precision.FP32) if precision is Precision.TF32 and api in NAMED_CONFIG_APIS \
                else (precision,):
            wanted.setdefault((key, api, p, Fusion(call.fusion), call.layout), set()).add(call.algorithm)
    measured = _measured(skip)
    pending: list[_Pending] = []
    for order, ((key, api, precision, _fusion, layout), algorithms) in enumerate(sorted(wanted.items())):
        c = found[(key, api)]
        builder = JOB_BUILDERS.get(api)
        try:
            if builder is None:
                raise Unsupported(f"no benchmark template for {api.value} yet")
            fields = _in_layout(api, builder(c.item, c.model, precision), layout)
        except Unsupported as exc:
            _record(dropped, Dropped(key, c.what, api.value, precision.value, str(exc)))
            continue
        if api in NAMED_CONFIG_APIS:  # only the configs the database lacks (all of them: dropped below)
            named = Job("", 0, key, api, precision, c.fusion, with_named_configs(fields, algorithms))
            fields = with_named_configs(fields, [b.algorithm for b in named.benchmarks() if not measured(b)]
                                        or algorithms)
        if all(measured(b) for b in Job("", 0, key, api, precision, c.fusion, fields).benchmarks()):
            reason = UNNAMED if fields.algorithms == ("*",) else ALREADY_MEASURED
            _record(dropped, Dropped(key, c.what, api.value, precision.value, reason))
            continue
        pending.append((api, 0, order, c, precision, fields))
    return Plan(_numbered(pending)[0], list(dropped.values()), models)
