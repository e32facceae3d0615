"""The analysis's best execution as a replay plan: the steps ``benanza replay`` runs (docs/REPLAY.md).

Each group of the headline execution (``execution.Group``) becomes the call its charged row names,
with the job-table row its micro-benchmark had (the API's own builder, ``ApiDef.builder``), so the
replay makes exactly the call that was timed: API, algorithm or engine config, precision, layout and
fused epilogue. Groups the bound charges a roofline (pools, softmax, elementwise chains) run their
fastest measured call instead, and say so in the step's note. A step the replay cannot run yet is
refused with one line naming the layer and the API, never skipped.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from benanza.analyze.choose import fastest, usable
from benanza.analyze.dag import contract, layer_graph
from benanza.analyze.execution import Bounds, Execution, Group, GroupKind, is_alias
from benanza.analyze.folding import tensor_consumers
from benanza.analyze.inputs import Inputs
from benanza.analyze.peaks import effective_ceilings
from benanza.analyze.replay_views import NotAWindow, Window, view_windows
from benanza.apis import REGISTRY, whole_call
from benanza.apis.base import Unsupported
from benanza.apis.cudnn_ops import dims4
from benanza.apis.graph import engine_cells, with_named_configs
from benanza.errors import BenanzaError
from benanza.generate.codegen import PRECISION_INDEX
from benanza.generate.replay import (
    CHAIN_NONE,
    CHAIN_OPS,
    COPY_KINDS,
    IN_PLACE_KINDS,
    KERNEL_ALGORITHM,
    KERNEL_KINDS,
    MAX_CHAIN_CONSTS,
    MAX_CHAIN_INPUTS,
    MAX_CHAIN_OPS,
    REPLAY_KINDS,
    VIEW_KINDS,
    Buffer,
    ReplayPlan,
    Step,
    StepKind,
    step_tolerance,
)
from benanza.library import DTYPE_BYTES, NO_COPY_OPS, PRECISIONS, Api, Fusion, Precision
from benanza.model.layer import FusionCandidate, Layer, Model, Tensor, bias_add
from benanza.records import Result

SUPPORTED = ", ".join([*(api.value for api in REPLAY_KINDS), *(f"{op} (copies)" for op in COPY_KINDS)])
ROOFLINE_NOTE = "the bound charges its bytes at the copy roofline; the replay runs its fastest measured call"
CHAIN_NOTE = "the bound charges its bytes at the copy roofline; the replay runs benanza's fused kernel"
IN_PLACE_NOTE = ("the bound charges a measured in-place call (C += A); the replay writes a buffer of its own "
                 "(benanza's fused kernel, else the fastest measured call that does)")
POOL_NOTE = "the bound charges its bytes at the copy roofline; the replay runs benanza's pooling kernel"
TRANSFORM_NOTE = "a layout change the bound does not charge (composition cost)"
VIEW_NOTE = "a view the bound reads through strides (charged nothing), run as one strided copy"
# A contiguous window is read in place (an alias of its root from an element offset on) where the offset keeps the
# pointer as aligned as cudaMalloc's own (256 bytes): the library call that reads it sees an ordinary buffer.
ALIAS_ALIGN_BYTES = 256
BIAS_NOTE = "the conv's bias add, a call of its own as the bound charges it"
SDPA_K_NOTE = "K as the fused attention reads it ([b, h, s, d]) from the model's K^T: a copy the bound does not charge"
# The GEMM APIs, whose operands are the model's A and B (B a constant of the step's own, or an activation).
GEMM_APIS = frozenset({Api.GEMM_EX, Api.LT_MATMUL, Api.GRAPH_MATMUL})


def best_execution(inputs: Inputs) -> tuple[Execution, Inputs]:
    """The headline execution exactly as ``analyze`` computes it (same ceilings, same graph)."""
    model = inputs.model
    graph = layer_graph(model.graph, (layer.index for layer in model.layers))
    ceil, _notes = effective_ceilings(model, inputs)
    inputs = replace(inputs, ceilings=ceil)
    return Bounds.of(model, inputs, graph).headline, inputs


def _layout_free(shape: tuple[int, ...]) -> bool:
    """Whether NCHW and NHWC store this tensor alike (not 4-D, or one channel, or a 1 x 1 image)."""
    return len(shape) != 4 or shape[1] == 1 or shape[2] * shape[3] == 1


def _dims4(shape: tuple[int, ...]) -> list[int]:
    return [int(v) for v in shape]


@dataclass(frozen=True)
class _Pending:
    """A view not copied yet: the layers it composes (views and the aliases between them, first to last), the
    buffer its window reads and that window; a chain of views is one window of its first view's source."""

    layers: tuple[int, ...]
    src: int
    window: Window


class _Builder:
    def __init__(self, model: Model, inputs: Inputs, store: Precision) -> None:
        self.model, self.inputs, self.store = model, inputs, store
        self.consumers = tensor_consumers(model)
        self.produced = {t.name for layer in model.layers for t in layer.outputs}
        self.buffers: list[Buffer] = []
        self.by_tensor: dict[str, int] = {}  # tensor name -> buffer id holding it
        self.transformed: dict[tuple[int, str], int] = {}  # (buffer, layout) -> buffer in that layout
        self.steps: list[Step] = []
        # views the bound reads through strides, materialized when a step reads them
        self.views: dict[str, _Pending] = {}
        self.element_bytes = DTYPE_BYTES[PRECISIONS[store].storage]

    # ---------------------------------------------------------- refusals
    def refuse(self, layer: Layer, what: str) -> BenanzaError:
        return BenanzaError(f"{self.model.name}: layer {layer.name!r} ({layer.op}): {what}; "
                            f"replay steps exist for {SUPPORTED} so far (docs/REPLAY.md)")

    # ---------------------------------------------------------- buffers
    def _new(self, tensor: Tensor | str, shape: tuple[int, ...], layout: str, alias: int = -1,
             is_input: bool = False, offset: int = 0) -> int:
        name = tensor.name if isinstance(tensor, Tensor) else tensor
        b = Buffer(len(self.buffers), name, tuple(shape), math.prod(shape) if shape else 1,
                   "" if _layout_free(tuple(shape)) else layout, alias, is_input, offset)
        self.buffers.append(b)
        return b.id

    def root_of(self, b: int) -> tuple[int, int]:
        """The buffer of its own whose memory ``b`` shares, and the element ``b`` starts at in it."""
        buf = self.buffers[b]
        return (buf.alias, buf.offset) if buf.alias >= 0 else (b, 0)

    def in_place(self, src: int, window: Window) -> tuple[int, int] | None:
        """(root, offset) where a reader can take ``window`` of buffer ``src`` as it lies (a contiguous window
        at an aligned offset: no copy), else None."""
        root, base = self.root_of(src)
        offset = base + window.offset
        return (root, offset) if window.contiguous() and offset * self.element_bytes % ALIAS_ALIGN_BYTES == 0 \
            else None

    def read(self, layer: Layer, tensor: Tensor, layout: str) -> int:
        """The buffer a step reads ``tensor`` from, in ``layout`` (a transform step added when needed)."""
        if tensor.name in self.views:
            self.materialize(tensor)
        if tensor.name not in self.by_tensor:
            if tensor.constant or tensor.name in self.produced:
                raise self.refuse(layer, f"input {tensor.name!r} is a constant or not yet computed")
            self.by_tensor[tensor.name] = self._new(tensor, tensor.shape, layout, is_input=True)
        b = self.buffers[self.by_tensor[tensor.name]]
        if not b.layout or not layout or b.layout == layout:
            return b.id
        if (b.id, layout) not in self.transformed:
            out = self._new(f"{b.tensor}@{layout}", b.shape, layout)
            fmt = {"NCHW": "CUDNN_TENSOR_NCHW", "NHWC": "CUDNN_TENSOR_NHWC"}
            row = {"dims": _dims4(b.shape), "src": fmt[b.layout], "dst": fmt[layout]}
            storage = self.store
            self.steps.append(Step(len(self.steps), StepKind.TRANSFORM, "", "cudnnTransformTensor", storage.value,
                                   layout, Fusion.NONE.value, (layer.index,), (layer.name,), (b.id,), out, row,
                                   PRECISION_INDEX[(storage, layout)], 0.0, 0.0, None, TRANSFORM_NOTE))
            self.transformed[(b.id, layout)] = out
        return self.transformed[(b.id, layout)]

    def constant(self, tensor: Tensor) -> int:
        """A model constant a step reads as data (a ViT's class token into its Concat): a buffer of its own,
        random like a model input (the values of constants are not in the layer IR)."""
        if tensor.name not in self.by_tensor:
            self.by_tensor[tensor.name] = self._new(tensor, tensor.shape, "", is_input=True)
        return self.by_tensor[tensor.name]

    def write(self, tensor: Tensor, layout: str) -> int:
        self.by_tensor[tensor.name] = self._new(tensor, tensor.shape, layout)
        return self.by_tensor[tensor.name]

    # ---------------------------------------------------------- groups
    def alias(self, layer: Layer) -> None:
        if layer.op in VIEW_KINDS:
            self.view(layer)
            return
        if layer.op not in NO_COPY_OPS:
            raise self.refuse(layer, f"a view read through strides ({layer.op}) is not replayed yet")
        if self.compose_alias(layer):
            return
        src = self.read(layer, layer.inputs[0], "NCHW")  # a reshape means the model's own (NCHW) order
        root, offset = self.root_of(src)
        out = layer.outputs[0]
        self.by_tensor[out.name] = self._new(out, out.shape, "", alias=root, offset=offset)

    def compose_alias(self, layer: Layer) -> bool:
        """A Reshape (Squeeze, Flatten ...) of a pending view that another layer reads: the view's window
        reshaped, still pending, where the dims it merges or splits are contiguous in the window; False
        where not (the view is then copied first and the alias shares the copy)."""
        pending, out = self.views.get(layer.inputs[0].name), layer.outputs[0]
        if pending is None or not self.consumers.get(out.name):
            return False
        try:
            window = pending.window.reshaped(tuple(out.shape))
        except NotAWindow:
            return False
        self.views[out.name] = _Pending((*pending.layers, layer.index), pending.src, window)
        return True

    def view(self, layer: Layer) -> None:
        """A view the bound charges nothing (a Transpose, Slice, Split or select: its consumers read it through
        strides): each output a window of the input (``replay_views``), run as one strided copy in the model's
        order (the cost of a consumer that cannot read strides) when a step reads it (``materialize``); a call
        that reads it through strides itself (SDPA's K) copies it once, composed. A view of a pending view
        composes with it: one window of the first view's source, one copy for the whole chain."""
        pending = self.views.get(layer.inputs[0].name)
        try:
            windows = view_windows(layer, pending.window if pending else None)
        except NotAWindow as exc:
            raise self.refuse(layer, f"a view the strided copy cannot run: {exc}") from None
        src, chain = (pending.src, pending.layers) if pending else (self.read(layer, layer.inputs[0], "NCHW"), ())
        for out, window in zip([t for t in layer.outputs if t.name], windows, strict=True):
            self.views[out.name] = _Pending((*chain, layer.index), src, window)

    def materialize(self, tensor: Tensor, perm: list[int] | None = None, name: str = "",
                    reader: Layer | None = None) -> int:
        """The strided copy of a pending view into a buffer of its own (``perm`` applied after its own, into one
        named ``name``); a tensor that is no pending view is copied whole, permuted, as ``reader`` (the step's
        layer) reads it. A window a reader can take as it lies (``in_place``) is an alias instead: no step."""
        if tensor.name in self.views:
            pending = self.views[tensor.name]
            layers, src, window = pending.layers, pending.src, pending.window
        elif reader is not None:
            layers, src = (reader.index,), self.read(reader, tensor, "NCHW")
            window = Window.packed(self.buffers[src].shape)
        else:
            raise BenanzaError(f"{self.model.name}: {tensor.name!r} is no pending view")  # (a planner bug)
        if perm is None:
            del self.views[tensor.name]
        else:
            try:
                window = window.permuted(perm)
            except NotAWindow as exc:
                raise self.refuse(self.model.layers[layers[-1]], str(exc)) from None
        out: Tensor | str = tensor if perm is None else name
        at = self.in_place(src, window)
        if at is not None:
            writes = self._new(out, window.dims, "NCHW", alias=at[0], offset=at[1])
        else:
            writes = self._new(out, window.dims, "NCHW")
            self.copy_step(layers, src, writes, window, VIEW_NOTE if perm is None else SDPA_K_NOTE)
        if perm is None:
            self.by_tensor[tensor.name] = writes
        return writes

    def copy_step(self, layers: tuple[int, ...], src: int, writes: int, window: Window, note: str) -> None:
        """One strided copy (``StepKind.PERMUTE``) of ``window`` of ``src``, packed, for the chain ``layers``."""
        store = self.store
        self.steps.append(Step(len(self.steps), StepKind.PERMUTE, "", KERNEL_ALGORITHM, store.value,
                               "NCHW", Fusion.NONE.value, layers, tuple(self.model.layers[i].name for i in layers),
                               (src,), writes, window.row(), PRECISION_INDEX[(store, "NCHW")], 0.0, 0.0, None, note))

    def outputs_of(self, members: tuple[int, ...]) -> list[Tensor]:
        """Tensors of the group read outside it, or model outputs (nobody reads them)."""
        inside = set(members)
        return [t for i in members for t in self.model.layers[i].outputs if t.name
                and (not self.consumers.get(t.name) or any(c not in inside for c in self.consumers[t.name]))]

    def item(self, row: Result, head: Layer) -> Layer | FusionCandidate:
        if row.fusion == Fusion.NONE.value:
            return head
        cand = next((f for f in self.model.fusions if f.key == row.layer_key and f.pattern == row.fusion), None)
        if cand is None:
            raise self.refuse(head, f"fused row {row.fusion} matches no fusion candidate of the model")
        return cand

    def call(self, group: Group, row: Result, members: tuple[int, ...], charged: float, note: str = "") -> None:
        """One step making ``row``'s call for ``members`` (the group's, or one layer of a roofline chain)."""
        head = self.model.layers[members[0]]
        try:
            api = Api(row.api)
        except ValueError:
            raise self.refuse(head, f"{row.api} is no library call") from None
        kind = REPLAY_KINDS.get(api)
        if api is Api.COPY and head.op in COPY_KINDS and len(members) == 1:
            self.concat(head, row, charged, note)
            return
        if kind is None:
            what = f"its bound is a {api.value} charge" if api is Api.COPY else f"its chosen call {api.value}"
            raise self.refuse(head, f"{what} has no replay step yet")
        precision = Precision(row.dtype)
        if PRECISIONS[precision].storage != PRECISIONS[self.store].storage:
            raise self.refuse(head, f"its chosen row stores {precision.value}, the run stores {self.store.value}")
        item = self.item(row, head)
        try:
            fields = REGISTRY[api].builder(item, self.model, precision)  # type: ignore[misc]
        except Unsupported as exc:
            raise self.refuse(head, f"{api.value}: {exc}") from None
        layout = row.layout or fields.layout
        spec = REGISTRY[api]
        index_layout = layout if spec.both_layouts and layout else PRECISIONS[precision].cudnn_layout.removeprefix(
            "CUDNN_TENSOR_")
        rowd = {**fields.row, "key": row.layer_key, "fusion": row.fusion}
        if "engines" in rowd:  # the graph API: exactly the chosen engine config, by name
            rowd["engines"] = engine_cells(with_named_configs(fields, [row.algorithm]).row["engines"])
        if "format" in rowd and layout:
            rowd["format"] = f"CUDNN_TENSOR_{layout}"
            rowd["layout"] = layout
        outs = self.outputs_of(members)
        if len(outs) != 1:
            raise self.refuse(head, f"its group writes {len(outs)} tensors read elsewhere (one is replayed)")
        reads = self.operands(api, rowd, head, members, item, layout)
        writes = self.write(outs[0], layout)
        names = tuple(self.model.layers[i].name for i in group.layers) if members == group.layers else \
            tuple(self.model.layers[i].name for i in members)
        self.steps.append(Step(len(self.steps), kind, api.value, row.algorithm, precision.value, layout, row.fusion,
                               members, names, reads, writes, rowd, PRECISION_INDEX[(precision, index_layout)],
                               step_tolerance(precision, row.algorithm), charged, row.median_ms, note))

    def concat(self, layer: Layer, row: Result, charged: float, note: str) -> None:
        """A Concat as copies of each input into its slice of the output (``StepKind.CONCAT``): along
        the channels of NHWC data as NHWC rows, else in the model's own (NCHW) order."""
        out = layer.outputs[0]
        rank = len(out.shape)
        axis = int(layer.attrs.get("axis", 1)) % rank
        inputs = [t for t in layer.inputs if t.name]
        held = [self.buffers[self.by_tensor[t.name]].layout for t in inputs if t.name in self.by_tensor]
        nhwc = rank == 4 and axis == 1 and "NHWC" in held
        layout = "NHWC" if nhwc else "NCHW"
        reads = tuple(self.constant(t) if t.constant else self.read(layer, t, layout) for t in inputs)
        if nhwc:
            parts, outer, inner = [t.shape[1] for t in inputs], out.shape[0] * out.shape[2] * out.shape[3], 1
        else:
            parts, outer, inner = [t.shape[axis] for t in inputs], math.prod(out.shape[:axis]), \
                math.prod(out.shape[axis + 1:])
        writes = self.write(out, layout)
        precision = self.store
        self.steps.append(Step(len(self.steps), COPY_KINDS[layer.op], row.api, row.algorithm, precision.value, layout,
                               Fusion.NONE.value, (layer.index,), (layer.name,), reads, writes,
                               {"parts": [int(v) for v in parts], "outer": int(outer), "inner": int(inner)},
                               PRECISION_INDEX[(precision, layout)], 0.0, charged, row.median_ms,
                               note or "a copy of each input into its slice of the output"))

    def operands(self, api: Api, row: dict[str, Any], head: Layer, members: tuple[int, ...],
                 item: Layer | FusionCandidate, layout: str) -> tuple[int, ...]:
        """Buffers the call reads: its activation input, a residual fusion's second input (z), an
        elementwise op's second activation."""
        if api in GEMM_APIS:
            if row.get("a_constant"):
                raise self.refuse(head, f"{api.value} replays a GEMM whose A is an activation only")
            if head.attrs.get("transA", 0) or (head.attrs.get("transB", 0) and not row.get("b_constant")):
                raise self.refuse(head, "a GEMM whose activation operand is transposed is not replayed yet")
            a = self.read(head, head.inputs[0], layout)
            return (a,) if row.get("b_constant") else (a, self.read(head, head.inputs[1], layout))
        if api in GRAPH_OPERANDS:
            return GRAPH_OPERANDS[api](self, head, members)
        if api is Api.OP_TENSOR:  # the input with the output's shape first (a), then b if it is no constant
            inputs = sorted((t for t in head.inputs if t.name), key=lambda t: t.shape != head.outputs[0].shape)
            return tuple(self.read(head, t, layout) for t in inputs if not t.constant)
        x = self.read(head, head.inputs[0], layout)
        if isinstance(item, FusionCandidate) and item.pattern == Fusion.CONV_BIAS_ADD_ACT.value:
            inside = {t.name for i in members for t in self.model.layers[i].outputs}
            add = next(self.model.layers[i] for i in members if self.model.layers[i].op in ("Add", "Sum"))
            z = [t for t in add.inputs if t.name not in inside and not t.constant]
            if len(z) != 1:
                raise self.refuse(add, "a residual fusion without exactly one residual input")
            return x, self.read(add, z[0], layout)
        return (x,)

    def bias(self, group: Group, row: Result) -> None:
        """A conv's bias add after it, as the bound charged it: ``cudnnAddTensor`` in place on the conv's
        output (checked with the conv), or ``cudnnOpTensor`` into a buffer of its own (as its benchmark);
        measured in another layout than the conv wrote, after a transform step (checked with that)."""
        head = self.model.layers[group.layers[0]]
        api = Api(row.api)
        kind = REPLAY_KINDS.get(api)
        if kind not in (StepKind.ADD_TENSOR, StepKind.OP_TENSOR):
            raise self.refuse(head, f"its bias add {api.value} has no replay step yet")
        precision = Precision(row.dtype)
        fields = REGISTRY[api].builder(bias_add(head), self.model, precision)  # type: ignore[misc]
        prev = self.steps[-1]
        layout = row.layout or fields.layout
        out = self.outputs_of(group.layers)[0]
        src = prev.writes
        if layout != prev.layout and not _layout_free(self.buffers[prev.writes].shape):
            # measured in another layout than its conv wrote: a layout change first (composition cost), the
            # bias added to the changed copy (in place: that copy is the tensor from now on)
            src = self.read(head, out, layout)
            del self.transformed[(prev.writes, layout)]
            self.by_tensor[out.name] = src
        writes = src
        if kind == StepKind.OP_TENSOR:
            writes = self.write(out, layout)
        rowd = {**fields.row, "key": row.layer_key, "fusion": row.fusion}
        tolerance = step_tolerance(precision, row.algorithm)
        if src != prev.writes and kind == StepKind.ADD_TENSOR:  # the transform checks the in-place bias with it
            self.steps[-1] = replace(self.steps[-1], tolerance=max(self.steps[-1].tolerance, tolerance))
        self.steps.append(Step(len(self.steps), kind, api.value, row.algorithm, precision.value, layout, row.fusion,
                               group.layers, (f"{head.name} (bias)",), (src,), writes, rowd,
                               PRECISION_INDEX[(precision, PRECISIONS[precision].cudnn_layout.removeprefix(
                                   "CUDNN_TENSOR_"))], tolerance, 0.0, row.median_ms, BIAS_NOTE))

    def fastest_measured(self, layer: Layer) -> Result | None:
        """The fastest ok row of the layer's own call under the run's constraints (a roofline group's stand-in):
        a call that writes a buffer of its own (an in-place one, cudnnAddTensor's C += A, would overwrite
        an input another layer still reads); None when none ran ok."""
        rows = [r for r in usable(self.inputs.measurements.get(layer.key, ())) if r.fusion == Fusion.NONE.value
                and self.inputs.constraints.allows(r) and whole_call(r.api, r.fusion) and _stands_in(r, layer)]
        return fastest(rows)

    def measured_call(self, layer: Layer) -> Result:
        """``fastest_measured``, or the refusal that names what was measured of the layer and how it ended."""
        best = self.fastest_measured(layer)
        if best is None:
            tried = Counter(f"{r.api} {r.status}" for r in self.inputs.measurements.get(layer.key, ())
                            if r.fusion == Fusion.NONE.value and r.l2 == "warm")
            what = ", ".join(f"{k} x{n}" for k, n in sorted(tried.items())) or "no row"
            raise self.refuse(layer, f"the bound charges it a roofline and no measured call of it ran ok ({what})")
        return best

    # ---------------------------------------------------------- benanza's own kernels
    def own_kernel(self, group: Group) -> bool:
        """A roofline group run by benanza's own kernel (``KERNEL_KINDS``): a pool, or an elementwise
        chain whose every member has a kernel op; False when it has none (its members then run their
        fastest measured calls)."""
        kinds = {KERNEL_KINDS.get(self.model.layers[i].op) for i in group.layers}
        if len(kinds) != 1 or None in kinds:
            return False
        build = {StepKind.CHAIN: self.chain, StepKind.POOL: self.pool}[kinds.pop()]  # type: ignore[index]
        return build(group)

    def _step_layout(self, tensors: list[Tensor]) -> str:
        """The layout a layout-agnostic kernel runs in: its first laid-out input's (no transform), else NCHW."""
        held = [self.buffers[self.by_tensor[t.name]].layout for t in tensors if t.name in self.by_tensor]
        return next((layout for layout in held if layout), "NCHW")

    def _own_step(self, kind: str, group: Group, reads: tuple[int, ...], out: Tensor, layout: str,
                  row: dict[str, Any], note: str) -> None:
        store = self.store
        writes = self.write(out, layout)
        self.steps.append(Step(len(self.steps), kind, "", KERNEL_ALGORITHM, store.value, layout, Fusion.NONE.value,
                               group.layers, tuple(self.model.layers[i].name for i in group.layers), reads, writes,
                               row, PRECISION_INDEX[(store, layout)], step_tolerance(store, ""), group.ms, None,
                               note))

    def pool(self, group: Group) -> bool:
        """A pool with benanza's pooling kernel, dims and mode as its pooling benchmark has them, where no
        library call of it ran ok (ceil mode, asymmetric pads): a measured cuDNN pooling call runs as measured."""
        layer = self.model.layers[group.layers[0]]
        if self.fastest_measured(layer) is not None:
            return False
        try:
            fields = REGISTRY[Api.POOLING].builder(layer, self.model, self.store)  # type: ignore[misc]
        except Unsupported:
            return False
        layout = self._step_layout([layer.inputs[0]])
        x = self.read(layer, layer.inputs[0], layout)
        row = {"dims": fields.row["dims"], "mode": fields.row["mode"], "format": f"CUDNN_TENSOR_{layout}"}
        self._own_step(StepKind.POOL, group, (x,), layer.outputs[0], layout, row, POOL_NOTE)
        return True

    def chain(self, group: Group) -> bool:
        """An elementwise chain as one pass of benanza's fused kernel (``ChainProgram``): its inputs from
        outside the group read once, its one output written once, every member an instruction."""
        program = _chain_program(self.model, group.layers, self.outputs_of(group.layers))
        if program is None:
            return False
        inputs, out, row = program
        layout = self._step_layout(inputs)
        reads = tuple(self.read(self.model.layers[group.layers[0]], t, layout) for t in inputs)
        row = {**row, "format": f"CUDNN_TENSOR_{layout}"}
        self._own_step(StepKind.CHAIN, group, reads, out, layout, row, CHAIN_NOTE)
        return True

    def fused_stand_in(self, group: Group) -> bool:
        """A roofline group that is exactly a fusion candidate with a measured fused call (a GELU chain's
        graph-API pointwise op graph): that one call stands in for the chain's bytes, as ROOFLINE_NOTE says."""
        members = tuple(sorted(group.layers))
        for cand in self.model.fusions:
            if tuple(sorted(cand.layers)) != members or not cand.key:
                continue
            rows = [r for r in usable(self.inputs.measurements.get(cand.key, ())) if r.fusion == cand.pattern
                    and self.inputs.constraints.allows(r) and whole_call(r.api, r.fusion)
                    and Api(r.api) in REPLAY_KINDS]
            best = fastest(rows)
            if best is not None:
                self.call(group, best, group.layers, group.ms, ROOFLINE_NOTE)
                return True
        return False

    def group(self, group: Group) -> None:
        head = self.model.layers[group.layers[0]]
        if group.kind == GroupKind.ALIAS:
            self.alias(head)
            return
        in_place = bool(group.rows) and _in_place_charge(group.rows[0])
        if group.rows and not (_copy_charge(group.rows[0]) or in_place):
            self.call(group, group.rows[0], group.layers, group.ms)
            for extra in group.rows[1:]:
                self.bias(group, extra)
            return
        if (group.kind == GroupKind.CALL or group.folded) and not group.rows:
            raise self.refuse(head, "the bound charges it a roofline (no measured call) and the replay needs one")
        first = len(self.steps)
        self.roofline(group)
        if in_place:  # the charge was a measured in-place call: say so, not "its bytes at the roofline"
            self.steps[first:] = [replace(s, note=IN_PLACE_NOTE) for s in self.steps[first:]]

    def roofline(self, group: Group) -> None:
        """A group no one call of which the replay makes as charged: its measured fused call, benanza's own
        kernel, or each member's fastest measured call that writes a buffer of its own."""
        if self.fused_stand_in(group):  # a pointwise chain: its measured fused call (graph_pointwise)
            return
        if self.own_kernel(group):  # benanza's fused chain or pooling kernel
            return
        for n, i in enumerate(group.layers):  # a roofline group: each member its fastest measured call
            layer = self.model.layers[i]
            if is_alias(layer, self.consumers):
                self.alias(layer)
                continue
            self.call(group, self.measured_call(layer), (i,), group.ms if n == 0 else 0.0, ROOFLINE_NOTE)


def _copy_charge(row: Result) -> bool:
    """A fused chain the bound charges by the copy benchmark (its bytes at the roofline, no call of it:
    EfficientNet's SiLU at b64): the replay runs it as a roofline chain."""
    return Api(row.api) is Api.COPY and row.fusion != Fusion.NONE.value


def _in_place_charge(row: Result) -> bool:
    """A layer charged its measured in-place call (cudnnAddTensor's C += A for a residual Add, EfficientNet b64
    fp32): C is an input another layer may still read, so the replay writes a buffer of its own instead."""
    return REPLAY_KINDS.get(Api(row.api)) in IN_PLACE_KINDS


def _stands_in(row: Result, layer: Layer) -> bool:
    """Whether a measured row of ``layer`` is a call the replay can make for it: a step kind that writes a
    buffer of its own (not ``IN_PLACE_KINDS``), or a Concat's copies. The copy benchmark's rows of other
    layers time their bytes at the roofline, no call of the op (EfficientNet's Sigmoid at b64 chose one)."""
    api = Api(row.api)
    if api is Api.COPY:
        return layer.op in COPY_KINDS
    kind = REPLAY_KINDS.get(api)
    return kind is not None and kind not in IN_PLACE_KINDS


def _per_channel(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether a constant of ``shape`` broadcasts (ONNX: aligned right) to ``out`` as one value per channel (axis 1)."""
    if len(out) < 2 or len(shape) > len(out):
        return False
    padded = (1,) * (len(out) - len(shape)) + shape
    return padded[1] == out[1] and all(v == 1 for k, v in enumerate(padded) if k != 1)


def _chain_program(model: Model, members: tuple[int, ...],
                   outputs: list[Tensor]) -> tuple[list[Tensor], Tensor, dict[str, Any]] | None:
    """(inputs, output, row) of an elementwise chain as a ``ChainProgram``, or None where the kernel cannot
    run it: an op without a ``ChainOpDef``, a tensor operand broadcast, a constant that is neither a scalar
    nor per channel, more than one output, or beyond the program's limits."""
    if len(outputs) != 1:
        return None
    out = outputs[0]
    dims = dims4(out.shape)
    channels = dims[1]
    regs: dict[str, int] = {}  # tensor -> register: inputs first, then each instruction's result
    inputs: list[Tensor] = []
    inside = {t.name for i in members for t in model.layers[i].outputs}
    for i in members:
        for t in model.layers[i].inputs:
            if t.name and not t.constant and t.name not in inside and t.name not in regs:
                if tuple(t.shape) != tuple(out.shape):
                    return None  # a tensor operand that broadcasts: not this kernel's
                regs[t.name] = len(inputs)
                inputs.append(t)
    consts: list[int] = []
    prog: dict[str, list[Any]] = {"ops": [], "a": [], "b": [], "c": [], "alpha": [], "beta": []}

    def constant(count: int) -> int:
        consts.append(count)
        return -2 - (len(consts) - 1)

    def operand(t: Tensor) -> int | None:
        if t.name in regs:
            return regs[t.name]
        if not t.constant:
            return None
        if math.prod(t.shape) == 1:
            return constant(1)
        return constant(channels) if _per_channel(tuple(t.shape), tuple(out.shape)) else None

    def emit(op: str, a: int, b: int = CHAIN_NONE, c: int = CHAIN_NONE, params: tuple[float, ...] = ()) -> int:
        alpha, beta = (*params, 0.0, 0.0)[:2]
        for key, value in zip(("ops", "a", "b", "c", "alpha", "beta"), (op, a, b, c, alpha, beta), strict=True):
            prog[key].append(value)
        return len(inputs) + len(prog["ops"]) - 1

    for i in members:
        layer = model.layers[i]
        d = CHAIN_OPS.get(layer.op)
        if d is None or tuple(layer.outputs[0].shape) != tuple(out.shape):
            return None
        args = [t for t in layer.inputs if t.name][:1 if d.channel_constants else None]
        codes = [operand(t) for t in args]
        if not codes or None in codes or (d.operands > 0 and len(codes) != d.operands):
            return None
        params = tuple(float(layer.attrs.get(name, default)) for name, default in d.params)
        if d.channel_constants:  # BatchNormalization: x * scale + shift, per channel
            if len(out.shape) < 2:
                return None
            result = emit(d.op, codes[0], *(constant(channels) for _ in range(d.channel_constants)))
        else:
            result = emit(d.op, *codes[:2], params=params)  # type: ignore[arg-type]
            for extra in codes[2:]:  # Sum of more than two: pairwise
                result = emit(d.op, result, extra)  # type: ignore[arg-type]
        regs[layer.outputs[0].name] = result
    if regs.get(out.name) != len(inputs) + len(prog["ops"]) - 1 or len(prog["ops"]) > MAX_CHAIN_OPS \
            or not 1 <= len(inputs) <= MAX_CHAIN_INPUTS or len(consts) > MAX_CHAIN_CONSTS:
        return None
    return inputs, out, {"dims": dims, **prog, "consts": consts}


def _outer_input(b: _Builder, head: Layer, members: tuple[int, ...]) -> tuple[int, ...]:
    """A pointwise chain's one variable input from outside the chain (its constants are the step's own)."""
    inside = {t.name for i in members for t in b.model.layers[i].outputs}
    outer = list(dict.fromkeys(t.name for i in members for t in b.model.layers[i].inputs
                               if t.name and not t.constant and t.name not in inside))
    if len(outer) != 1:
        raise b.refuse(head, f"a pointwise chain reading {len(outer)} variable tensors")
    tensor = next(t for i in members for t in b.model.layers[i].inputs if t.name == outer[0])
    return (b.read(head, tensor, ""),)


def _sdpa_operands(b: _Builder, head: Layer, members: tuple[int, ...]) -> tuple[int, ...]:
    """Q, K and V of an attention core as cuDNN's SDPA reads them, [b, h, s, d] each: Q and V as the
    MatMuls read them, K from the model's K^T (the first MatMul's B) by one strided copy. A Transpose
    inside the core (TorchScript's K^T) composes with the copy: where it undoes the swap, K is read as is."""
    layers = [b.model.layers[i] for i in members]
    producer = {t.name: m for m in layers for t in m.outputs}
    qk, pv = [m for m in layers if m.op == "MatMul"][:2]

    def outside(t: Tensor) -> tuple[Tensor, list[int]]:
        """The tensor from outside the core that ``t`` is, and the permutation of it that ``t`` is: through a
        scale (decomposed SDPA) or a Transpose inside the core."""
        perm = list(range(len(t.shape)))
        while t.name in producer:
            m = producer[t.name]
            if m.op == "Transpose":
                perm = [int(m.attrs["perm"][p]) for p in perm]
            elif any(tuple(u.shape) != tuple(t.shape) for u in m.inputs if not u.constant):
                raise b.refuse(m, "a layer inside the attention core that is no scale or Transpose of its operand")
            t = next(u for u in m.inputs if not u.constant)
        return t, perm

    def operand(t: Tensor, perm: list[int], suffix: str) -> int:
        if perm == sorted(perm):
            return b.read(head, t, "")
        return b.materialize(t, perm, f"{t.name}{suffix}", head)

    (q, q_perm), (kt, kt_perm), (v, v_perm) = outside(qk.inputs[0]), outside(qk.inputs[1]), outside(pv.inputs[1])
    rank = len(kt_perm)
    k_perm = [kt_perm[i] for i in (*range(rank - 2), rank - 1, rank - 2)]  # K = K^T with its last two dims swapped
    return operand(q, q_perm, "^P"), operand(kt, k_perm, "^T"), operand(v, v_perm, "^P")


# Graph-API calls whose operands are not a layer's first input: API -> the buffers its step reads.
GRAPH_OPERANDS: dict[Api, Callable[[_Builder, Layer, tuple[int, ...]], tuple[int, ...]]] = {
    Api.GRAPH_POINTWISE: _outer_input, Api.GRAPH_SDPA: _sdpa_operands}


def _order(model: Model, exe: Execution) -> list[Group]:
    """The groups in an order that runs each after everything it reads (a fused group whose residual
    comes from a later layer, ResNet's shortcut, waits for it), ties by head index."""
    graph = layer_graph(model.graph, (layer.index for layer in model.layers))
    contracted = contract(graph, [g.layers for g in exe.groups if len(g.layers) > 1])
    if contracted is None:
        raise BenanzaError(f"{model.name}: the best execution's fused groups form a cycle: no order runs them")
    heads = {g.layers[0]: g for g in exe.groups}
    return [heads[n] for n in nx.lexicographical_topological_sort(contracted) if n in heads]


def replay_plan(inputs: Inputs, exe: Execution | None = None, execution: str = "best") -> ReplayPlan:
    """The plan that runs ``inputs``' best execution (``best_execution`` unless given), step by step;
    ``execution`` names what ``exe`` is (``replay_executed.executed_plan`` passes the framework's own)."""
    if exe is None:
        exe, inputs = best_execution(inputs)
    model = inputs.model
    store = inputs.constraints.store
    b = _Builder(model, inputs, store)
    if exe.uncharged:
        i, why = exe.uncharged[0]
        raise b.refuse(model.layers[i], f"the bound could not charge it ({why})")
    for group in _order(model, exe):
        b.group(group)
    outputs = _model_outputs(model, b.by_tensor, b.consumers)
    precisions = tuple(p.value for p in Precision if p in inputs.constraints.precisions)
    return ReplayPlan(model.name, model.batch, store.value, precisions, dict(inputs.system), exe.seq_ms, exe.par_ms,
                      tuple(b.buffers), tuple(b.steps), outputs, execution=execution)


def _model_outputs(model: Model, by_tensor: Mapping[str, int], consumers: Mapping[str, list[int]]) -> tuple[int, ...]:
    return tuple(by_tensor[t.name] for layer in model.layers for t in layer.outputs
                 if t.name and not consumers.get(t.name) and t.name in by_tensor)
