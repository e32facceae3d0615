"""The layer IR: what every stage after the model processor sees.

It never imports ``onnx`` (ONNX stays at the edge, in ``onnx_import``), so the
planner, codegen, database and analyzer work on plain data.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from benanza.library import OP_APIS, Api


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy spelling: "float32", "float16", "int64", ...
    constant: bool = False  # a weight or other folded value (not produced by a layer)


@dataclass
class Layer:
    """One ONNX node after constant folding and shape inference."""

    name: str  # node name as the model spells it: untrusted text, never put into C++ or a shell
    op: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    attrs: dict[str, Any]  # normalized: defaults filled in, auto_pad resolved to explicit pads
    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    index: int = 0  # position in the model's topological order
    # values of one-element constants it keeps as inputs (attrs.INDEX_INPUTS: a select's index): not in the
    # key, since the cost does not depend on them; the replay needs them to know which elements a view reads
    values: dict[str, list[int]] = field(default_factory=dict)
    key: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.key = layer_key(self.op, self.attrs, self.inputs, self.outputs)

    @property
    def apis(self) -> tuple[Api, ...]:
        """Library calls this layer maps to; empty for an op the table does not know."""
        return OP_APIS.get(self.op, ())

    @property
    def supported(self) -> bool:
        return self.op in OP_APIS

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


def layer_key(op: str, attrs: dict[str, Any], inputs: list[Tensor], outputs: list[Tensor]) -> str:
    """Stable hash of everything that decides a layer's cost; names are not part of it.

    Exact by construction: every attribute and every dimension takes part, so no
    "0 means any" match can happen downstream (the original Benanza's pad bug).
    """
    canon = {
        "op": op,
        "attrs": {k: _plain(v) for k, v in sorted(attrs.items())},
        "inputs": [[list(t.shape), t.dtype, t.constant] for t in inputs],
        "outputs": [[list(t.shape), t.dtype] for t in outputs],
    }
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return value  # keep floats as floats: 1.0 and 1 are different attributes
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


# Ops whose bias frameworks may add with a call of its own after the op (ONNX Runtime's
# cudnnAddTensor after every convolution, a folded BatchNormalization's shift included).
SEPARATE_BIAS_OPS = frozenset({"Conv"})


def separate_bias(layer: Layer) -> bool:
    """Whether a bias added after ``layer`` is a call of its own (``bias_add``): a conv with a
    channel axis. The planner benchmarks it and the analyzer reads its rows for exactly these."""
    return layer.op in SEPARATE_BIAS_OPS and bool(layer.outputs) and len(layer.outputs[0].shape) >= 3


def bias_add(layer: Layer) -> Layer:
    """The per-channel bias add after ``layer``'s output, as the ONNX Add that computes it.

    Why: the benchmark of a separately added bias is the one an ``Add(y, bias[C,1,..])``
    layer gets, so it shares that layer's key; the planner benchmarks it for every
    layer of ``SEPARATE_BIAS_OPS`` and the analyzer counts it where the logs show the call.
    """
    y = layer.outputs[0]
    bias = Tensor(f"{layer.name}.bias", (y.shape[1], *(1,) * (len(y.shape) - 2)), y.dtype, constant=True)
    out = Tensor(f"{y.name}.biased", y.shape, y.dtype)
    return Layer(f"{layer.name}.bias_add", "Add", [y, bias], [out], {}, index=layer.index)


@dataclass(frozen=True)
class FusionCandidate:
    """A chain of layers that one fused library call could replace."""

    pattern: str  # a benanza.library.Fusion value
    layers: tuple[int, ...]  # layer indices, in execution order
    layer_keys: tuple[str, ...] = ()  # the member layers' keys, in the same order
    activation: str = ""  # a benanza.library.Activation value ("" when the chain has no activation)
    key: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", fusion_key(self.pattern, self.layer_keys, self.activation))


def fusion_key(pattern: str, layer_keys: tuple[str, ...], activation: str) -> str:
    """Stable hash of a fused benchmark: the same chain of layer keys fuses into one benchmark."""
    text = json.dumps([pattern, list(layer_keys), activation], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Model:
    name: str
    path: str
    batch: int
    layers: list[Layer]
    graph: nx.DiGraph  # nodes: layer indices; edges: producer -> consumer
    fusions: list[FusionCandidate] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each: unknown ops, ...

    @property
    def unique_keys(self) -> set[str]:
        return {layer.key for layer in self.layers}
