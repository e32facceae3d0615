"""The headline lower bound: the cheapest execution of the model's DAG from measured implementations.

Frameworks do not run the ONNX graph layer by layer: they fold BatchNormalization into the
convolution's weights, fuse a conv's bias and activation into one call and run chains of
elementwise ops as one kernel. A bound that charges every ONNX layer as its own library call
(the paper's layer-wise figure, ``Policy.BEST``) can therefore exceed what a framework ran.
This module charges an *equivalent execution* instead (docs/METRICS.md, "Execution bound"):

- aliases (Reshape, Flatten, Identity, Dropout, ...) cost 0, and so do views (a Transpose, Slice,
  Split or a Gather by one constant index) whose outputs other layers read: they read them through
  strides, or the producer writes them so (``is_view``);
- BatchNormalization and Mul/Add by a per-channel constant directly after a Conv/Gemm/MatMul
  (the only consumer of its output) fold into its weights and bias at zero cost;
- a Conv is charged its best measured call over every algorithm/engine of every allowed API,
  plus its bias add when it has a bias (its own or a folded one's) -- or a measured fused call
  (conv+bias(+add)+act, gemm+bias+act) that covers it and its followers, whichever is cheaper;
- memory-bound layers, and trees of elementwise layers whose intermediate outputs feed only the
  next member, are charged the bytes they must move at the peak bandwidth (a chain reads its
  inputs once and writes its output once), or their best measured call when that is cheaper;
- an attention core or an RMSNorm chain is charged its measured fused call (cuDNN's SDPA, the
  graph API's norm forward) when that beats its members one by one; a pointwise chain (GELU's
  Erf and tanh forms, SiLU, bias + GELU) is one pass at the copy roofline, never less;
- a layer with no measured implementation is charged its roofline at the measured peaks, never 0,
  and is listed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

from benanza.analyze.choose import fastest, usable
from benanza.analyze.dag import contract, critical_path
from benanza.analyze.folding import COMPUTE_OPS, FOLDABLE_OPS, _sole_consumer, folds, tensor_consumers  # noqa: F401 (FOLDABLE_OPS: importable here as before)
from benanza.analyze.inputs import WHAT_IFS, Ceilings, Constraints, Inputs, WhatIf
from benanza.analyze.peaks import tensor_bytes
from benanza.analyze.roofline import layer_bytes, speed_of_light
from benanza.apis import whole_call
from benanza.library import NO_COPY_OPS, VIEW_OPS, Fusion, Precision
from benanza.model.layer import Layer, Model, bias_add
from benanza.records import Result

# Layers a framework runs as one elementwise kernel with their neighbours.
ELEMENTWISE_OPS = frozenset({"Relu", "Sigmoid", "Tanh", "Clip", "Elu", "LeakyRelu", "Add", "Mul", "Sum",
                             "BatchNormalization"})
# Followers that give the folded conv a bias (a Mul only rescales the weights).
BIAS_GIVING = frozenset({"BatchNormalization", "Add"})
BIAS_OPS = frozenset({"Conv"})  # whose benchmarks leave the bias out: it is charged as a bias add


NO_IMPLEMENTATION = "no measured implementation"
NO_BIAS_BENCHMARK = "its bias add has no benchmark (the bias add is charged its bytes)"


class GroupKind:
    """How a group of layers is charged (values appear in the report's execution table)."""

    ALIAS = "alias"
    CALL = "library call"
    FUSED = "fused call"
    MEMORY = "memory roofline"
    CHAIN = "elementwise chain"
    MEASURED = "measured call"  # a memory-bound layer whose measured call beats its roofline
    UNMEASURED = "roofline (no measured implementation)"
    FAILED = "roofline (every benchmark failed)"



@dataclass(frozen=True)
class Group:
    layers: tuple[int, ...]  # the first is the head (the node of the contracted graph)
    kind: str
    ms: float
    call: str = ""  # what is charged: "api / algorithm / dtype [+ bias add]" or a byte count
    folded: tuple[int, ...] = ()  # members folded into the head's weights at zero cost
    fusion: str = ""  # a fused call's pattern (Fusion value)
    saving: float = 0.0  # a fused call's saving over its members unfused, as ranked (what the fix follows)
    # The measured rows charged, in call order (the call, then a conv's bias add): what ``benanza replay``
    # runs. Empty for an alias and for a roofline charge. Not part of equality (a Result holds a dict).
    rows: tuple[Result, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Execution:
    """One equivalent execution of the model and its cost."""

    seq_ms: float
    par_ms: float
    groups: tuple[Group, ...]
    graph: nx.DiGraph  # contracted: one node per group, named by its head
    unmeasured: tuple[tuple[int, str], ...]  # (layer, what of it) charged a roofline for want of a benchmark
    uncharged: tuple[tuple[int, str], ...] = ()  # layers that could not be charged at all, and why
    precisions: frozenset[Precision] = field(default_factory=frozenset)

    @property
    def weights(self) -> dict[int, float]:
        return {g.layers[0]: g.ms for g in self.groups}


def _allowed(rows: Iterable[Result], constraints: Constraints, fusion: str) -> list[Result]:
    # a call into a pre-filled output (ORT's beta = 1 bias GEMM) is no whole execution: never charged alone
    return [r for r in usable(rows) if r.fusion == fusion and constraints.allows(r) and whole_call(r.api, r.fusion)]


def describe_row(r: Result) -> str:
    """A measured row as a group's ``call`` names it (API / algorithm / precision [fusion])."""
    fusion = "" if r.fusion == Fusion.NONE.value else f" [{r.fusion}]"
    return f"{r.api} / {r.algorithm} / {r.dtype}{fusion}"


def bias_add_row(layer: Layer, inputs: Inputs, store: Precision) -> Result | None:
    """The fastest ok benchmark of the bias add after ``layer`` in the run's storage type."""
    add = bias_add(layer)
    return fastest(r for r in usable(inputs.measurements.get(add.key, ())) if r.dtype == store.value)


def bias_roofline_ms(layer: Layer, store: Precision, ceil: Ceilings) -> float | None:
    """A bias add reads the output and the bias and writes the output once."""
    add = bias_add(layer)
    return ceil.memory_ms(sum(tensor_bytes(t, store) for t in (*add.inputs, *add.outputs)))


def conv_bias_ms(layer: Layer, inputs: Inputs, store: Precision, ceil: Ceilings) -> float | None:
    """What adding a conv's bias after the conv costs at least: its benchmark, else its roofline."""
    best = bias_add_row(layer, inputs, store)
    return best.median_ms if best is not None else bias_roofline_ms(layer, store, ceil)


class Coster:
    """Costs of single layers and groups under one set of allowed precisions (the bound's executions, and
    the as-executed replay's groups in ``replay_executed``)."""

    def __init__(self, model: Model, inputs: Inputs, constraints: Constraints, ceil: Ceilings) -> None:
        self.model, self.inputs, self.constraints, self.ceil = model, inputs, constraints, ceil
        self.store = constraints.store
        self.unmeasured: dict[int, str] = {}
        self.uncharged: dict[int, str] = {}

    def bytes_ms(self, moved: float) -> float | None:
        return self.ceil.memory_ms(moved)

    def roofline(self, layer: Layer) -> float | None:
        """max(FLOPs / best allowed peak, bytes / bandwidth): the speed of light of the layer."""
        return speed_of_light(layer, self.constraints, self.ceil)

    def charge_roofline(self, layer: Layer) -> tuple[float, str] | None:
        bound = self.roofline(layer)
        if bound is None:
            self.uncharged[layer.index] = "no measured implementation and no measured peak to bound it"
            return None
        kind, self.unmeasured[layer.index] = _no_row(self.inputs.measurements.get(layer.key, ()))
        return bound, kind

    def bias_ms(self, layer: Layer) -> tuple[float, str, Result | None]:
        """The bias add after a conv: its best measured add of the run's storage type (and that row),
        else its roofline."""
        best = bias_add_row(layer, self.inputs, self.store)
        if best is not None:
            return best.median_ms or 0.0, f" + bias {best.api}", best
        self.unmeasured.setdefault(layer.index, NO_BIAS_BENCHMARK)
        return bias_roofline_ms(layer, self.store, self.ceil) or 0.0, " + bias (roofline)", None

    def compute(self, layer: Layer, with_bias: bool) -> tuple[float, str, str, tuple[Result, ...]] | None:
        """(ms, call, group kind, rows charged) of a conv/GEMM: its best allowed row (kind library
        call), else its roofline (kind says why), plus its bias add when it has one."""
        best = fastest(_allowed(self.inputs.measurements.get(layer.key, ()), self.constraints, Fusion.NONE.value))
        rows: tuple[Result, ...] = ()
        if best is None:
            got = self.charge_roofline(layer)
            if got is None:
                return None
            (ms, kind), call = got, "roofline"
        else:
            ms, call, kind, rows = best.median_ms or 0.0, describe_row(best), GroupKind.CALL, (best,)
        if with_bias and layer.op in BIAS_OPS:
            extra, what, bias_row = self.bias_ms(layer)
            ms, call = ms + extra, call + what
            rows += (bias_row,) if bias_row is not None and rows else ()
        return ms, call, kind, rows

    def memory(self, layer: Layer) -> Group | None:
        """A memory-bound layer: its bytes at the peak bandwidth, or a measured call when cheaper."""
        rows = self.inputs.measurements.get(layer.key, ())
        measured = fastest(_allowed(rows, self.constraints, Fusion.NONE.value))
        bound = self.roofline(layer)
        if measured is not None and (bound is None or (measured.median_ms or 0.0) < bound):
            return Group((layer.index,), GroupKind.MEASURED, measured.median_ms or 0.0, describe_row(measured),
                         rows=(measured,))
        if bound is None:
            self.uncharged[layer.index] = "memory-bound layer and no measured peak"
            return None
        kind = GroupKind.MEMORY
        if measured is None:  # charged its roofline for want of a row: listed, with why
            kind, self.unmeasured[layer.index] = _no_row(rows)
        return Group((layer.index,), kind, bound, f"{layer_bytes(layer, self.store):.4g} B")


def _no_row(rows: Sequence[Result]) -> tuple[str, str]:
    """(group kind, why) of a layer charged its roofline because no allowed row measures it."""
    if not rows:
        return GroupKind.UNMEASURED, NO_IMPLEMENTATION
    if not usable(rows):
        statuses = ", ".join(f"{k} x{n}" for k, n in sorted(Counter(r.status for r in rows).items()))
        return GroupKind.FAILED, f"every benchmark failed ({statuses})"
    return GroupKind.UNMEASURED, "no benchmark in the run's precisions"


def _has_bias(layer: Layer) -> bool:
    return len(layer.inputs) > 2 and bool(layer.inputs[2].name)


def _pass_bytes(model: Model, members: Iterable[int], consumers: Mapping[str, list[int]], store: Precision) -> float:
    """Bytes one kernel over ``members`` moves: each input from outside the group read once, each
    output read outside it (or by the model's caller) written once; what flows between members
    never leaves the chip."""
    group = set(members)
    inside = {t.name for i in group for t in model.layers[i].outputs}
    read = {t.name: t for i in group for t in model.layers[i].inputs if t.name not in inside and t.name}
    written = {t.name: t for i in group for t in model.layers[i].outputs
               if any(c not in group for c in consumers.get(t.name, ())) or not consumers.get(t.name)}
    return sum(tensor_bytes(t, store) for t in (*read.values(), *written.values()))


def _chains(model: Model, free: set[int], coster: Coster, consumers: Mapping[str, list[int]],
            seeds: Iterable[tuple[int, ...]] = ()) -> list[Group]:
    """Elementwise layers of ``free`` grouped into trees whose inner outputs feed only the next member,
    each charged its external inputs and its output once at the peak bandwidth (``_chain_group``).

    ``seeds`` (pointwise chains, every member in ``free``) start as one group each and grow like any
    other: a BatchNormalization before DenseNet's scale-shift-ReLU chain is the same one pass."""
    parent = {i: i for i in free}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for seed in seeds:
        for i in seed[1:]:
            parent[root(i)] = root(seed[0])
    for i in sorted(free):
        nxt = _sole_consumer(model.layers[i], consumers)
        if nxt is not None and nxt in free:
            parent[root(i)] = root(nxt)
    members: dict[int, list[int]] = defaultdict(list)
    for i in free:
        members[root(i)].append(i)
    groups = []
    for group in members.values():
        g = coster.memory(model.layers[group[0]]) if len(group) == 1 \
            else _chain_group(model, tuple(sorted(group)), coster, consumers)
        if g is not None:
            groups.append(g)
        elif len(group) > 1:
            for i in group:
                coster.uncharged[i] = "elementwise layer and no measured bandwidth"
    return groups


def _fused_choice(model: Model, inputs: Inputs, constraints: Constraints) -> list[tuple[tuple[int, ...], Result]]:
    """Fusion candidates with an allowed measured fused call: (members, fastest fused row)."""
    out = []
    for cand in model.fusions:
        rows = _allowed(inputs.measurements.get(cand.key, ()), constraints, cand.pattern) if cand.key else []
        best = fastest(rows)
        if best is not None:
            out.append((tuple(cand.layers), best))
    return out


def is_view(layer: Layer, consumers: Mapping[str, list[int]]) -> bool:
    """A permutation, slice, split or select (Gather by one constant index) whose every output another
    layer reads: an equivalent execution reads it through strides, so it moves no bytes of its own.
    One that writes a model output (nobody reads it) still materializes it."""
    select = (layer.op == "Gather" and len(layer.inputs) > 1 and layer.inputs[1].constant
              and layer.inputs[1].shape == ())
    return (layer.op in VIEW_OPS or select) and all(consumers.get(t.name) for t in layer.outputs)


def is_alias(layer: Layer, consumers: Mapping[str, list[int]]) -> bool:
    """Charged nothing in an equivalent execution: an alias of its input, or a view another layer reads."""
    return layer.op in NO_COPY_OPS or is_view(layer, consumers)


# Fusion candidates whose head is no conv/GEMM: the fused call replaces every member's own cost.
CHAIN_FUSIONS = frozenset({Fusion.ATTENTION.value, Fusion.RMSNORM.value})


def _chain_option(model: Model, members: tuple[int, ...], row: Result, coster: Coster,
                  unfused: Callable[[int], float | None], folded_into: Mapping[int, int],
                  consumers: Mapping[str, list[int]]) -> tuple[float, tuple[int, ...], Result] | None:
    """(saving, members, row) of a measured attention / RMSNorm fused call against its members
    charged one by one (GEMMs their best call, the rest their bytes); None when it saves nothing."""
    if row.fusion not in CHAIN_FUSIONS or any(folded_into.get(m, m) not in members for m in members):
        return None
    alone = 0.0
    for m in members:
        layer = model.layers[m]
        if is_alias(layer, consumers) or m in folded_into:
            continue
        cost = unfused(m) if layer.op in COMPUTE_OPS else coster.bytes_ms(layer_bytes(layer, coster.store))
        if cost is None:
            return None
        alone += cost
    saving = alone - (row.median_ms or 0.0)
    return (saving, members, row) if saving > 0 else None


def _chain_group(model: Model, members: tuple[int, ...], coster: Coster,
                 consumers: Mapping[str, list[int]]) -> Group | None:
    """Elementwise layers run as one pass: their external inputs read and their outputs written once
    at the peak bandwidth (the copy roofline is the floor a fused chain benchmark cannot beat); the
    measured fused call of a pointwise chain (GELU, SiLU, bias+GELU) of exactly these members only
    when cheaper than that."""
    moved = _pass_bytes(model, members, consumers, coster.store)
    bound = coster.bytes_ms(moved)
    cand = next((f for f in model.fusions if f.pattern == Fusion.POINTWISE.value
                 and tuple(sorted(f.layers)) == members), None)
    rows = _allowed(coster.inputs.measurements.get(cand.key, ()), coster.constraints, cand.pattern) \
        if cand is not None and cand.key else []
    best = fastest(rows)
    if best is not None and (bound is None or (best.median_ms or 0.0) < bound):
        return Group(members, GroupKind.FUSED, best.median_ms or 0.0, describe_row(best), rows=(best,))
    if bound is None:
        return None
    return Group(members, GroupKind.CHAIN, bound, f"{moved:.4g} B")


def execution_bound(model: Model, inputs: Inputs, constraints: Constraints, graph: nx.DiGraph,
                    ceil: Ceilings | None = None, fused_calls: bool = True) -> Execution:
    """The cost of the cheapest equivalent execution this module knows (see the module doc)."""
    ceil = ceil or inputs.ceilings
    coster = Coster(model, inputs, constraints, ceil)
    consumers = tensor_consumers(model)
    folded = folds(model)
    folded_into = {f: head for head, fs in folded.items() for f in fs}
    groups: list[Group] = []
    taken: set[int] = set()

    def unfused(index: int) -> float | None:
        """A conv/GEMM's cost on its own (with the bias its folds give it), for ranking fusions."""
        layer = model.layers[index]
        bias = _has_bias(layer) or any(model.layers[f].op in BIAS_GIVING for f in folded.get(index, ()))
        got = coster.compute(layer, bias)
        return None if got is None else got[0]

    if fused_calls:
        options = []
        for members, row in _fused_choice(model, inputs, constraints):
            head = members[0]
            # an attention core's head is a GEMM, but its unfused path is two GEMMs and the passes
            # between them: priced member by member, never as the head's call plus one elementwise pass
            if row.fusion in CHAIN_FUSIONS or model.layers[head].op not in COMPUTE_OPS:
                option = _chain_option(model, members, row, coster, unfused, folded_into, consumers)
                if option is not None:
                    options.append(option)
                continue
            alone = unfused(head)
            if alone is None:
                continue
            # the unfused path of the same layers: the head's call, its unfolded followers one pass
            rest = {m for m in members[1:] if m not in folded_into}
            others = sum(g.ms for g in _chains(model, rest, coster, consumers))
            saving = alone + others - (row.median_ms or 0.0)
            if saving > 0:
                options.append((saving, members, row))
        for saving, members, row in sorted(options, key=lambda o: (-o[0], o[1])):
            covered = set(members) | set(folded.get(members[0], ()))
            if covered & taken:
                continue
            taken |= covered
            extra = tuple(f for f in folded.get(members[0], ()) if f not in members)
            groups.append(Group(tuple(sorted(covered)), GroupKind.FUSED, row.median_ms or 0.0, describe_row(row),
                                folded=extra, fusion=row.fusion, saving=saving, rows=(row,)))
    # pointwise chains: one pass at the copy roofline, whatever was measured; grown in _chains below
    blocked = taken | set(folded_into)
    seeds = [tuple(sorted(cand.layers)) for cand in model.fusions
             if cand.pattern == Fusion.POINTWISE.value and not blocked.intersection(cand.layers)]
    seeded = {i for seed in seeds for i in seed}
    coster.unmeasured.clear()  # ranking charged rooflines it may not keep
    coster.uncharged.clear()
    for layer in model.layers:
        i = layer.index
        if i in taken or i in folded_into:
            continue
        if is_alias(layer, consumers):
            groups.append(Group((i,), GroupKind.ALIAS, 0.0))
            taken.add(i)
        elif layer.op in COMPUTE_OPS:
            fs = folded.get(i, ())
            got = coster.compute(layer, _has_bias(layer) or any(model.layers[f].op in BIAS_GIVING for f in fs))
            taken |= {i, *fs}
            if got is not None:
                ms, call, kind, rows = got
                groups.append(Group((i, *fs), kind, ms, call, folded=fs, rows=rows))
    for i, head in folded_into.items():  # folded into a conv that a fused call took: already covered
        if head in taken:
            taken.add(i)
    free_ew = {layer.index for layer in model.layers if layer.index not in taken and layer.op in ELEMENTWISE_OPS}
    free_ew |= seeded
    groups += _chains(model, free_ew, coster, consumers, seeds)
    taken |= free_ew
    for layer in model.layers:  # the rest: pools, softmax, LRN, copies, unknown ops
        if layer.index in taken:
            continue
        g = coster.memory(layer)
        if g is not None:
            groups.append(g)
    groups.sort(key=lambda g: g.layers[0])
    contracted = contract(graph, [g.layers for g in groups if len(g.layers) > 1])
    weights = {g.layers[0]: g.ms for g in groups}
    if contracted is None:  # a group that would make a cycle: its cost sits on its head in the layer graph
        contracted = graph
    par, _ = critical_path(contracted, weights)
    unmeasured = tuple(sorted(coster.unmeasured.items()))
    return Execution(seq_ms=sum(weights.values()), par_ms=par, groups=tuple(groups), graph=contracted,
                     unmeasured=unmeasured, uncharged=tuple(sorted(coster.uncharged.items())),
                     precisions=frozenset(constraints.precisions))


@dataclass(frozen=True)
class Bounds:
    """The headline bound and the executions the gaps compare, all under the run's own numerics.

    ``baseline``: the run's precisions, no measured fused call (folding, chains and aliases still
    apply); ``headline``: the cheaper of that and the execution with fused calls. The joint estimate
    is the headline's critical path: every fix the run's numerics allow applied at once, so it is
    never below the bound. A change of numerics is a what-if (``what_ifs``), never in these.
    """

    headline: Execution  # run's numerics, the cheaper of with / without fused calls
    baseline: Execution  # run's numerics, no fused calls
    what_ifs: dict[WhatIf, Execution]  # each what-if's cheapest execution (only those that change the run)

    @property
    def joint(self) -> Execution:
        return self.headline

    @property
    def fusion_gap(self) -> float:
        return self.baseline.seq_ms - self.headline.seq_ms

    @property
    def parallelism_gap(self) -> float:
        return self.baseline.seq_ms - self.baseline.par_ms

    @classmethod
    def of(cls, model: Model, inputs: Inputs, graph: nx.DiGraph) -> Bounds:
        def cheapest(c: Constraints) -> tuple[Execution, Execution]:
            fused, plain = (execution_bound(model, inputs, c, graph, fused_calls=f) for f in (True, False))
            return min((fused, plain), key=lambda e: e.seq_ms), plain

        headline, baseline = cheapest(inputs.constraints)
        what_ifs = {}
        for w in inputs.what_if:
            changed = WHAT_IFS[w](inputs.constraints)
            if changed is not None:
                what_ifs[w] = cheapest(changed)[0]
        return cls(headline=headline, baseline=baseline, what_ifs=what_ifs)
