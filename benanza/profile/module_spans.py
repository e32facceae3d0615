"""A ``--torch-module`` run's host spans -> layers (link 2 for a user's own ``nn.Module``).

Why: the capture wraps every module call in a ``benanza.node:<module path>`` range, and the export
names each layer by the module scope it was traced in, so a range holds the layers of its module.
A module's range alone is too coarse: Swin's attention module runs some thirty layers of its own
(MatMul, Softmax, Add, Reshape...), ResNet's block calls one ReLU module three times. So within
each call of a module:

1. the k-th range of a module in a run is the k-th scope the exporter traced it in (``relu``,
   ``relu_1``, ``relu_2``), which holds that call's layers;
2. the call's own top-level ATen ops (those in no child module's range) are aligned with the
   call's layers, order kept, by op kind and input shape (``MODULE_OPS``, ``_align``), so a kernel
   launched under ``aten::softmax`` reaches the Softmax layer;
3. a layer no op aligns with ran inside the op before it (ATen's ``linear`` is the export's MatMul
   and bias Add; ``gelu`` the Div-Erf-Add-Mul-Mul chain) and is fused into that op's layer; an op
   that aligns with no layer charges its kernels there too; a call with no aligned op gives all its
   kernels to its first layer and fuses the others into it.

A kernel whose launch lies in no span, or in the range of a module with no layer, stays unmapped
with the reason (``NodeLayers.why``), which the mapping aggregates for the user.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from benanza.model.layer import Model
from benanza.profile.kineto import Annotation, CpuEvent
from benanza.profile.node_layers import TORCH_OPS, NodeLayers
from benanza.profile.ranges import NODE_RANGE
from benanza.profile.torch_module import module_of_node, scope_of_node

# ONNX op -> the top-level ATen ops eager PyTorch runs it as inside a module's forward: the
# onnx2torch table plus what the TorchScript exporter decomposes (LayerNorm, pads, gathers...).
_DECOMPOSED: dict[str, tuple[str, ...]] = {
    "LayerNormalization": ("aten::layer_norm",),
    "Pad": ("aten::pad", "aten::constant_pad_nd", "aten::reflection_pad2d", "aten::replication_pad2d"),
    "Div": ("aten::div", "aten::div_"),
    "Sub": ("aten::sub", "aten::rsub", "aten::sub_"),
    "Pow": ("aten::pow",),
    "Sqrt": ("aten::sqrt", "aten::rsqrt"),
    "Erf": ("aten::erf",),
    "Gather": ("aten::index", "aten::index_select", "aten::embedding", "aten::select"),
    "Slice": ("aten::slice", "aten::narrow", "aten::chunk", "aten::split"),
    "Split": ("aten::split", "aten::chunk", "aten::unbind", "aten::split_with_sizes"),
    "Squeeze": ("aten::squeeze",),
    "Unsqueeze": ("aten::unsqueeze",),
    "Expand": ("aten::expand",),
    "Where": ("aten::where", "aten::masked_fill"),
    "HardSigmoid": ("aten::hardsigmoid", "aten::hardsigmoid_"),
    "HardSwish": ("aten::hardswish", "aten::hardswish_"),
    "Mul": ("aten::mul", "aten::mul_"),
    "Sigmoid": ("aten::sigmoid", "aten::sigmoid_", "aten::silu", "aten::silu_"),
    "Relu": ("aten::relu", "aten::relu_", "aten::threshold"),
    "Clip": ("aten::clamp", "aten::clamp_", "aten::hardtanh", "aten::hardtanh_", "aten::relu6"),
    "Transpose": ("aten::permute", "aten::transpose", "aten::t", "aten::contiguous"),
    "Reshape": ("aten::reshape", "aten::view", "aten::flatten", "aten::unflatten"),
    "Tanh": ("aten::tanh", "aten::tanh_"),
    "ReduceMean": ("aten::mean",),
    "Cast": ("aten::to",),
    "Einsum": ("aten::einsum",),
    "Range": ("aten::arange",),
    "Softmax": ("aten::softmax", "aten::_softmax"),
    # fused attention: the first MatMul of the export's chain; the rest ran inside it (fused into it)
    "MatMul": ("aten::scaled_dot_product_attention", "aten::_native_multi_head_attention"),
    "Add": ("aten::add", "aten::add_"),
}
MODULE_OPS: dict[str, frozenset[str]] = {**TORCH_OPS, **{op: TORCH_OPS.get(op, frozenset()) | frozenset(aten)
                                                         for op, aten in _DECOMPOSED.items()}}


def _layers_by_call(model: Model, modules: set[str]) -> dict[str, list[list[int]]]:
    """Module path -> its layers, one list per scope the exporter traced it in (a call), in export order."""
    scopes: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for layer in model.layers:
        path = module_of_node(layer.name, modules) or ""
        scopes[path].setdefault(scope_of_node(layer.name), []).append(layer.index)
    return {path: list(calls.values()) for path, calls in scopes.items()}


def _own_ops(ranges: Sequence[Annotation], ops: Sequence[CpuEvent]) -> list[list[CpuEvent]]:
    """Each range's top-level ATen ops that lie in none of its child ranges (ranges sorted by start)."""
    own: list[list[CpuEvent]] = [[] for _ in ranges]
    items = sorted([(r.start_us, -r.dur_us, 0, i) for i, r in enumerate(ranges)]
                   + [(o.start_us, -o.dur_us, 1, i) for i, o in enumerate(ops)])
    stack: list[int] = []  # open ranges, innermost last
    busy_until: dict[int, float] = {}  # range -> end of its last top-level op
    for start, _, is_op, i in items:
        while stack and ranges[stack[-1]].end_us < start:
            stack.pop()
        if not is_op:
            stack.append(i)
            continue
        if not stack:
            continue
        inner = stack[-1]
        if start < busy_until.get(inner, float("-inf")):
            continue  # nested in an op of this range
        own[inner].append(ops[i])
        busy_until[inner] = ops[i].end_us
    return own


MAX_ALIGN_CELLS = 4_000_000  # ops x layers of one call above which the alignment is greedy (time, not need)


def _score(model: Model, op: CpuEvent, index: int) -> float:
    """How well an op stands for a layer: 0 (another kind), 1 (its kind), 1.5 (its kind and first input shape)."""
    layer = model.layers[index]
    if op.name not in MODULE_OPS.get(layer.op, ()):
        return 0.0
    dims = op.input_dims[0] if op.input_dims else ()
    return 1.5 if dims and layer.inputs and tuple(dims) == tuple(layer.inputs[0].shape) else 1.0


def _align(model: Model, ops: Sequence[CpuEvent], layers: Sequence[int]) -> dict[int, int]:
    """Op position -> layer index: the order-keeping pairing of most weight (``_score``), so that an op the
    export folded away (Swin's relative-position ``aten::index``) cannot pull the rest out of step."""
    n, m = len(ops), len(layers)
    if n * m > MAX_ALIGN_CELLS:  # greedy: each op to the next layer of its kind
        out, pos = {}, 0
        for j, op in enumerate(ops):
            q = next((q for q in range(pos, m) if _score(model, op, layers[q])), None)
            if q is not None:
                out[j], pos = layers[q], q + 1
        return out
    score = [[_score(model, op, index) for index in layers] for op in ops]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for a in range(n - 1, -1, -1):
        row, below = best[a], best[a + 1]
        for b in range(m - 1, -1, -1):
            row[b] = max(below[b], row[b + 1], score[a][b] + below[b + 1] if score[a][b] else 0.0)
    out: dict[int, int] = {}
    a = b = 0
    while a < n and b < m:
        if score[a][b] and best[a][b] == score[a][b] + best[a + 1][b + 1]:
            out[a] = layers[b]
            a, b = a + 1, b + 1
        elif best[a][b] == best[a + 1][b]:
            a += 1
        else:
            b += 1
    return out


def _pattern(path: str) -> str:
    """A module path with its indices as ``*`` (one line for a cause of every block of a stage)."""
    return ".".join("*" if a.isnumeric() else re.sub(r"_\d+$", "_*", a) for a in path.split(".")) if path \
        else "<root>"


def module_spans(model: Model, ranges: Sequence[Annotation], ops: Sequence[CpuEvent]
                 ) -> list[tuple[float, float, NodeLayers]]:
    """(start, end, node) host spans of one run: its module ranges and their own ATen ops, each with the
    layers it ran (the module doc); ``ranges`` and ``ops`` are that run's."""
    ranges = sorted(ranges, key=lambda r: (r.start_us, -r.dur_us))
    paths = [r.name.removeprefix(NODE_RANGE) for r in ranges]
    by_call = _layers_by_call(model, set(paths))
    calls_in_run = Counter(paths)
    seen: Counter[str] = Counter()
    spans: list[tuple[float, float, NodeLayers]] = []
    for r, path, ops_r in zip(ranges, paths, _own_ops(ranges, ops), strict=True):
        k = seen[path]
        seen[path] += 1
        traced = by_call.get(path, [])
        label = f"the range of module '{_pattern(path)}'"
        if not traced:
            why = f"in {label}: the export has no layer in that module's scope"
            spans.append((r.start_us, r.end_us, NodeLayers(path, "", (), why)))
            continue
        own = traced[k] if k < len(traced) else []  # every traced scope holds a layer: empty means none
        if not own:
            why = f"in {label}, call {k + 1} of {calls_in_run[path]}: the export traced it in {len(traced)} scope(s)"
            spans.append((r.start_us, r.end_us, NodeLayers(path, "", (), why)))
            continue
        aligned = _align(model, ops_r, own)
        if not aligned:
            spans.append((r.start_us, r.end_us, NodeLayers(path, "", tuple(own))))
            continue
        first = min(aligned.values(), key=own.index)
        fused: dict[int, list[int]] = defaultdict(list)  # aligned layer -> unaligned layers it ran
        host = first
        for index in own:
            if index in aligned.values():
                host = index
            elif index != host:
                fused[host].append(index)
        nodes = {index: NodeLayers(f"{path}:{model.layers[index].op}", "", (index, *fused[index]))
                 for index in aligned.values()}
        spans.append((r.start_us, r.end_us, nodes[first]))
        charge = nodes[first]
        for j, op in enumerate(ops_r):
            charge = nodes[aligned[j]] if j in aligned else charge
            spans.append((op.start_us, op.end_us, charge))
    return spans


def innermost(spans: Sequence[tuple[float, float, NodeLayers]]) -> Callable[[float], NodeLayers | None]:
    """A lookup ``t -> the node of the innermost span holding t`` (None outside all) over nested spans."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -(spans[i][1] - spans[i][0])))
    starts = [spans[i][0] for i in order]
    parent: list[int] = []
    stack: list[int] = []
    for pos, i in enumerate(order):
        while stack and spans[order[stack[-1]]][1] < spans[i][0]:
            stack.pop()
        parent.append(stack[-1] if stack else -1)
        stack.append(pos)

    def at(t: float) -> NodeLayers | None:
        pos = bisect.bisect_right(starts, t) - 1
        while pos >= 0 and spans[order[pos]][1] < t:
            pos = parent[pos]
        return spans[order[pos]][2] if pos >= 0 else None

    return at
