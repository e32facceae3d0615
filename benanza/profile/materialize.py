"""Weight surgery for a capture: the zoo's weightless models made runnable (random weights of
a sensible scale, constants folded), an fp16 copy for ONNX Runtime, and a bundle's model
without its weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from benanza.errors import BenanzaError
from benanza.model.attrs import VALUE_INPUTS
from benanza.model.layer import Layer
from benanza.model.onnx_import import load_model_constants
from benanza.profile.capture_protocol import SEED


def _uniform(low: float, high: float) -> Callable[[tuple[int, ...], dict[str, Any]], tuple[float, float]]:
    return lambda shape, attrs: (low, high)


def _fan_in_bound(axis: Callable[[tuple[int, ...], dict[str, Any]], int]) -> Callable[..., tuple[float, float]]:
    """Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)): activations keep their scale through deep nets."""
    def bound(shape: tuple[int, ...], attrs: dict[str, Any]) -> tuple[float, float]:
        b = 1.0 / float(np.sqrt(max(1, axis(shape, attrs))))
        return -b, b
    return bound


# (consumer op, input position) -> range of the random values a placeholder weight gets.
# BatchNormalization's scale and variance stay positive (variance feeds a square root).
WEIGHT_INIT: dict[tuple[str, int], Callable[[tuple[int, ...], dict[str, Any]], tuple[float, float]]] = {
    ("Conv", 1): _fan_in_bound(lambda s, a: int(np.prod(s[1:]))),
    ("ConvTranspose", 1): _fan_in_bound(lambda s, a: int(np.prod(s[1:]))),
    ("Gemm", 1): _fan_in_bound(lambda s, a: s[-1] if a.get("transB", 0) else s[0]),
    ("Gemm", 0): _fan_in_bound(lambda s, a: s[0] if a.get("transA", 0) else s[-1]),
    ("MatMul", 1): _fan_in_bound(lambda s, a: s[-2] if len(s) >= 2 else s[0]),
    ("MatMul", 0): _fan_in_bound(lambda s, a: s[-1]),
    ("BatchNormalization", 1): _uniform(0.5, 1.5),
    ("BatchNormalization", 4): _uniform(0.5, 1.5),
    ("InstanceNormalization", 1): _uniform(0.5, 1.5),
    ("PRelu", 1): _uniform(0.0, 0.25),
}
DEFAULT_INIT = _uniform(-0.1, 0.1)
EXTERNAL_DATA_BYTES = 1_500_000_000  # protobuf's 2 GB limit: bigger models keep weights in a side file


@dataclass(frozen=True)
class Materialized:
    """What :func:`materialize` wrote."""

    path: Path
    batch: int
    randomized: tuple[str, ...]  # weights computed at run time (ConstantOfShape...) that now hold random values
    kept: tuple[str, ...]  # constants kept with their values (real initializers, shape tensors)


def _random_weight(shape: tuple[int, ...], dtype: np.dtype, role: tuple[str, int] | None,
                   attrs: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    low, high = WEIGHT_INIT.get(role, DEFAULT_INIT)(shape, attrs) if role else DEFAULT_INIT(shape, attrs)
    return rng.uniform(low, high, size=shape).astype(dtype)


def _value_input(value: Any, dtype: str, name: str) -> TensorProto:
    """An initializer for an input that the model processor moved into an attribute (Reshape's shape, ...)."""
    array = np.asarray(value)
    if dtype:
        array = array.astype(dtype)
    elif array.dtype.kind == "f":
        array = array.astype(np.float32)
    else:
        array = array.astype(np.int64)
    return numpy_helper.from_array(np.array(array, order="C"), name)


def _varied(value: np.ndarray) -> bool:
    return value.size > 1 and not bool(np.all(value == value.reshape(-1)[0]))


def _node_for(layer: Layer, by_output: dict[str, onnx.NodeProto], label: str) -> onnx.NodeProto:
    node = next((by_output[t.name] for t in layer.outputs if t.name in by_output), None)
    if node is None:
        raise BenanzaError(f"{label}: layer '{layer.name}' ({layer.op}) has no node in the file")
    return node


def materialize(model_path: str | Path, batch: int, out_path: str | Path, seed: int = SEED,
                seq_len: int | None = None) -> Materialized:
    """Fold the model's constant subgraphs, set the batch and write it with real random weights.

    The light zoo models compute their weights at run time (``ConstantOfShape``):
    a framework would run those nodes and time zero-filled weights. Here only the
    model processor's layers remain as nodes (``load_model`` does the folding, so the
    layers the analyzer sees and the graph the framework runs are the same), every
    weight is an initializer of the right shape, computed weights hold random values
    (never zeros, DESIGN.md's measurement rules) and real initializers keep theirs.
    """
    path = Path(model_path)
    label = str(path)
    model, values = load_model_constants(path, batch, seq_len)
    proto = onnx.load(str(path))
    g = proto.graph
    by_output = {o: n for n in g.node for o in n.output if o}
    original = {t.name: t for t in g.initializer}
    produced = {t.name for layer in model.layers for t in layer.outputs}
    constants = set(original) | set(by_output)
    data_inputs = [v for v in g.input if v.name not in constants]
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    initializers: dict[str, TensorProto] = {}
    randomized, kept = [], []
    for layer in model.layers:
        node = onnx.NodeProto()
        node.CopyFrom(_node_for(layer, by_output, label))
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        moved = VALUE_INPUTS.get(layer.op, {})
        weights = {t.name: t for t in layer.inputs if t.constant}
        for pos, name in enumerate(node.input):
            if not name or name in produced or any(v.name == name for v in data_inputs):
                continue
            if pos in moved and moved[pos] in layer.attrs:
                dtype = "" if name not in original else onnx.helper.tensor_dtype_to_np_dtype(
                    original[name].data_type).name
                init = _value_input(layer.attrs[moved[pos]], dtype, name)
                new_name = name
                while new_name in initializers and initializers[new_name].SerializeToString() != \
                        init.SerializeToString():
                    new_name += "_"
                init.name = new_name
                node.input[pos] = new_name
                initializers[new_name] = init
                kept.append(new_name)
            elif name in initializers:
                continue
            elif name in original:
                initializers[name] = original[name]
                kept.append(name)
            elif name in values and (np.dtype(values[name].dtype).kind != "f" or _varied(values[name])):
                # computed index tensors, masks, position embeddings: their values decide what runs
                # (a computed float of one repeated value is a light-zoo ConstantOfShape weight: random below)
                initializers[name] = numpy_helper.from_array(np.array(values[name], order="C"), name)
                kept.append(name)
            elif name in weights and np.dtype(weights[name].dtype).kind == "f":
                t = weights[name]
                value = _random_weight(t.shape, np.dtype(t.dtype), (layer.op, pos), attrs, rng)
                initializers[name] = numpy_helper.from_array(value, name)
                randomized.append(name)
            else:
                raise BenanzaError(f"{label}: input '{name}' of {layer.op} node '{layer.name}' is a computed "
                                   "non-float constant that cannot be materialized")
        nodes.append(node)
    resolved = {t.name: t.shape for layer in model.layers for t in layer.inputs}
    for v in data_inputs:  # every dim static, as the model processor resolved it (batch, sequence length)
        dims = v.type.tensor_type.shape.dim
        shape = resolved.get(v.name)
        for axis, d in enumerate(dims):
            if shape is not None or axis == 0:
                d.Clear()
                d.dim_value = shape[axis] if shape is not None else model.batch
    shapes = {t.name: list(t.shape) for layer in model.layers for t in layer.outputs}
    graph = onnx.helper.make_graph(
        nodes, g.name or path.stem, inputs=list(data_inputs),
        outputs=[onnx.helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, shapes.get(o.name))
                 for o in g.output],
        initializer=list(initializers.values()))
    out_model = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import),
                                       producer_name="benanza profile")
    out_model.ir_version = max(proto.ir_version, 4)  # IR >= 4: initializers need not be graph inputs
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    _save(out_model, out)
    return Materialized(out, model.batch, tuple(randomized), tuple(kept))


def _save(model: onnx.ModelProto, out: Path) -> None:
    big = sum(t.ByteSize() for t in model.graph.initializer) > EXTERNAL_DATA_BYTES
    try:
        onnx.save_model(model, str(out), save_as_external_data=big, location=f"{out.name}.data" if big else None)
        onnx.checker.check_model(str(out), full_check=True)
    except Exception as exc:  # onnx raises several types; all mean the written model is inconsistent
        text = str(exc).strip().splitlines()
        raise BenanzaError(f"{out}: the materialized model is not valid ONNX: {text[0] if text else exc!r}") from None


def strip_weights(path: Path) -> None:
    """Drop the initializers of a model in place: the mapping reads only its nodes, and
    weights would make a bundle as large as the model (ResNet-50: 98 MB)."""
    model = onnx.load(str(path), load_external_data=False)
    del model.graph.initializer[:]
    onnx.save_model(model, str(path))
    for side in path.parent.glob(f"{path.name}.data"):
        side.unlink()


# Ops whose float attributes or outputs would not follow an fp16 cast of inputs and weights.
FP16_BLOCKERS = frozenset({"Constant", "ConstantOfShape", "RandomNormal", "RandomUniform", "EyeLike"})
# A Cast to float32 (a transformer's attention mask) casts to float16 in the fp16 copy.
CAST_TO = {TensorProto.FLOAT: TensorProto.FLOAT16}


def to_fp16(model_path: str | Path, out_path: str | Path) -> Path:
    """fp16 copy of a materialized model: float inputs, outputs and initializers cast to float16.

    Enough for the CNNs benanza targets (every op then computes in fp16); a graph that
    makes float tensors of its own (Cast, Constant, ...) is refused with the node named.
    """
    path = Path(model_path)
    model = onnx.load(str(path))
    blocker = next((n for n in model.graph.node if n.op_type in FP16_BLOCKERS), None)
    for node in model.graph.node:
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to":
                    attr.i = CAST_TO.get(attr.i, attr.i)
    if blocker is not None:
        raise BenanzaError(f"{path}: fp16 capture needs a graph without {blocker.op_type} nodes "
                           f"(node '{blocker.name or blocker.output[0]}' makes its own float tensor); "
                           "profile it in fp32 or tf32")
    for value in [*model.graph.input, *model.graph.output]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    for i, init in enumerate(model.graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            array = numpy_helper.to_array(init).astype(np.float16)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(array, init.name))
    del model.graph.value_info[:]
    out = Path(out_path)
    _save(model, out)
    return out
