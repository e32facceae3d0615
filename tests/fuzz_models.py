"""Seeded mutations of small real ONNX models, for tests/test_fuzz_models.py.

Each mutation is one thing a hostile or broken exporter can write: markup and terminal
escapes in names, non-UTF-8 names, impossible dims, attributes of the wrong type or
value, initializers whose data disagree with their dims, dtypes no layer can run on,
missing required attributes.  ``mutants(seed, n)`` yields ``(label, bytes)`` pairs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

MODELS = Path(__file__).parent / "data" / "models"

HOSTILE_TEXT = (
    "[/]", "[bold]x[/bold]", "a[/b]", "\x1b[31mred\x1b[0m", "\x1b]8;;http://evil/\x07link\x1b]8;;\x07",
    "\x1b]0;title\x07", "tab\there", "nul\x00byte", "$(rm -rf /)", "`id`", "quote\"'", "line\nbreak",
    "back\\slash", "*/ #include", "\u202eevil", "🙂", "", " ", "x" * 300,
)  # fmt: skip
BAD_DIMS = (0, -1, -988, 2**31, 2**31 + 5, 2**40, 2**62)
MARKER = b"MUTANT_NAME_"  # replaced at byte level by bytes that are not UTF-8


def base_zoo() -> onnx.ModelProto:
    """A small CNN with the ops the zoo uses most: grouped dilated Conv, LRN, pools, Gemm."""
    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=2, dilations=[1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("LRN", ["r1"], ["n1"], name="norm1", size=3, alpha=1e-4, beta=0.75, bias=1.0),
        helper.make_node("MaxPool", ["n1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["p1", "s", "bb", "m", "v"], ["bn"], name="bn1"),
        helper.make_node("AveragePool", ["bn"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], name="fc", transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="prob"),
    ]
    inits = [w("w1", 8, 2, 3, 3), w("b1", 8), w("s", 8), w("bb", 8), w("m", 8),
             numpy_helper.from_array(np.ones(8, np.float32), "v"), w("fc_w", 10, 8 * 2 * 2), w("fc_b", 10)]
    graph = helper.make_graph(nodes, "zoo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def bases() -> list[onnx.ModelProto]:
    return [base_zoo(), *(onnx.load(str(p)) for p in sorted(MODELS.glob("*.onnx")))]


# --- mutations: each changes one thing in place ------------------------------------------


def _node(m: onnx.ModelProto, rng: random.Random) -> onnx.NodeProto:
    return rng.choice(list(m.graph.node))


def hostile_node_name(m: onnx.ModelProto, rng: random.Random) -> None:
    _node(m, rng).name = rng.choice(HOSTILE_TEXT)


def hostile_tensor_name(m: onnx.ModelProto, rng: random.Random) -> None:
    """Rename one tensor everywhere (stays a valid graph, with a hostile name)."""
    names = sorted({o for n in m.graph.node for o in n.output if o})
    old, new = rng.choice(names), rng.choice(HOSTILE_TEXT) or "[/]"
    for n in m.graph.node:
        for i, name in enumerate(n.input):
            if name == old:
                n.input[i] = new
        for i, name in enumerate(n.output):
            if name == old:
                n.output[i] = new
    for v in [*m.graph.output, *m.graph.value_info]:
        if v.name == old:
            v.name = new


def hostile_graph_name(m: onnx.ModelProto, rng: random.Random) -> None:
    m.graph.name = rng.choice(HOSTILE_TEXT)


def non_utf8_name(m: onnx.ModelProto, rng: random.Random) -> None:
    """Mark a node, graph or attribute name; ``_finish`` swaps the marker for invalid UTF-8."""
    node = _node(m, rng)
    where = rng.choice(("node", "graph", "attr", "op"))
    if where == "node":
        node.name = MARKER.decode()
    elif where == "graph":
        m.graph.name = MARKER.decode()
    elif where == "op":
        node.domain = MARKER.decode()
    elif node.attribute:
        rng.choice(list(node.attribute)).name = MARKER.decode()
    else:
        node.attribute.append(helper.make_attribute(MARKER.decode(), 1))


def bad_input_dim(m: onnx.ModelProto, rng: random.Random) -> None:
    dims = m.graph.input[0].type.tensor_type.shape.dim
    if len(dims) > 1:
        d = dims[rng.randrange(1, len(dims))]
        d.Clear()
        d.dim_value = rng.choice(BAD_DIMS)


def bad_initializer_dims(m: onnx.ModelProto, rng: random.Random) -> None:
    """Dims that disagree with the data, or impossible ones."""
    if not m.graph.initializer:
        return
    t = rng.choice(list(m.graph.initializer))
    if t.dims:
        t.dims[rng.randrange(len(t.dims))] = rng.choice((*BAD_DIMS, 3, 7))
    else:
        t.dims.append(rng.choice((*BAD_DIMS, 2)))


def bad_initializer_dtype(m: onnx.ModelProto, rng: random.Random) -> None:
    if not m.graph.initializer:
        return
    t = rng.choice(list(m.graph.initializer))
    t.data_type = rng.choice((TensorProto.COMPLEX64, TensorProto.STRING, TensorProto.COMPLEX128, 999, -3,
                              TensorProto.UNDEFINED))


def bad_input_dtype(m: onnx.ModelProto, rng: random.Random) -> None:
    m.graph.input[0].type.tensor_type.elem_type = rng.choice((TensorProto.COMPLEX64, TensorProto.STRING,
                                                              TensorProto.BOOL, TensorProto.COMPLEX128))


def attr_wrong_type(m: onnx.ModelProto, rng: random.Random) -> None:
    """A numeric attribute given as a string, a float for an int, a list for a scalar..."""
    node = _node(m, rng)
    if not node.attribute:
        return
    a = rng.choice(list(node.attribute))
    name = a.name
    replacement = rng.choice((
        helper.make_attribute(name, "3"), helper.make_attribute(name, b"\xff\xfe"), helper.make_attribute(name, 2.5),
        helper.make_attribute(name, [1.5, 2.5]), helper.make_attribute(name, 7), helper.make_attribute(name, [7]),
        helper.make_attribute(name, ["a", "b"]), helper.make_attribute(name, [], attr_type=AttributeProto.INTS),
    ))
    if replacement.type == AttributeProto.UNDEFINED:
        return
    a.CopyFrom(replacement)


def attr_bad_value(m: onnx.ModelProto, rng: random.Random) -> None:
    """Zero dilations or strides, a group that does not divide the channels, huge or negative kernels..."""
    convs = [n for n in m.graph.node if n.op_type in ("Conv", "MaxPool", "AveragePool", "LRN", "Gemm", "Flatten")]
    if not convs:
        return
    node = rng.choice(convs)
    name, value = rng.choice((
        ("dilations", [0, 0]), ("dilations", [1, -2]), ("strides", [0, 1]), ("strides", [-1, -1]),
        ("group", 3), ("group", 0), ("group", -2), ("group", 2**40), ("kernel_shape", [0, 3]),
        ("kernel_shape", [2**31, 1]), ("pads", [-5, 0, 0, 0]), ("pads", [2**40, 0, 0, 0]), ("size", 0),
        ("size", -3), ("axis", 99), ("transB", 5), ("pads", [1, 1]), ("kernel_shape", [3]),
        ("alpha", float("nan")), ("beta", float("inf")),
    ))
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, value))


def drop_required_attr(m: onnx.ModelProto, rng: random.Random) -> None:
    """LRN without size, pools without kernel_shape, Cast without to..."""
    node = _node(m, rng)
    if node.attribute:
        del node.attribute[rng.randrange(len(node.attribute))]


def swap_op(m: onnx.ModelProto, rng: random.Random) -> None:
    _node(m, rng).op_type = rng.choice(("Conv", "LRN", "Gemm", "MaxPool", "Relu", "Cast", "Reshape", "Softmax",
                                        "ConvTranspose", "MatMul", "BatchNormalization", "Add"))


def drop_node_input(m: onnx.ModelProto, rng: random.Random) -> None:
    node = _node(m, rng)
    if node.input:
        del node.input[rng.randrange(len(node.input))]


def truncate(m: onnx.ModelProto, rng: random.Random) -> None:
    """Handled in ``_finish`` (the bytes are cut)."""


MUTATIONS: tuple[Callable[[onnx.ModelProto, random.Random], None], ...] = (
    hostile_node_name, hostile_tensor_name, hostile_graph_name, non_utf8_name, bad_input_dim, bad_initializer_dims,
    bad_initializer_dtype, bad_input_dtype, attr_wrong_type, attr_bad_value, drop_required_attr, swap_op,
    drop_node_input, truncate,
)


def _finish(m: onnx.ModelProto, mutation: Callable[..., None], rng: random.Random) -> bytes:
    data = m.SerializeToString()
    if MARKER in data:  # same length, so the protobuf framing stays valid
        data = data.replace(MARKER, b"\xff\xfe\xc3(\x80\xed\xa0\x80\xf8\x88\x80\x80")
    if mutation is truncate:
        data = data[: rng.randrange(1, max(2, len(data)))]
    return data


def mutants(seed: int, n: int) -> Iterator[tuple[str, bytes]]:
    """``n`` mutated models (1-3 mutations each), the same ones for the same seed."""
    rng = random.Random(seed)
    originals = bases()
    for i in range(n):
        base = rng.randrange(len(originals))
        m = onnx.ModelProto()
        m.CopyFrom(originals[base])
        applied = [rng.choice(MUTATIONS) for _ in range(rng.choice((1, 1, 2, 3)))]
        for mutation in applied:
            mutation(m, rng)
        yield f"{i}:base{base}:{'+'.join(f.__name__ for f in applied)}", _finish(m, applied[-1], rng)
