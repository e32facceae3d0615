"""Writes the tiny ONNX models the model-processor tests use (run it to regenerate them).

    PYTHONPATH=. python tests/data/models/make_models.py

Each model isolates one behaviour: asymmetric pads, auto_pad, an unknown op, a
PyTorch-style shape chain with a dynamic batch, the fusion patterns, and a Reshape
that hard-codes its batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(0)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           inits: list[onnx.TensorProto], opset: int, value_info: list[onnx.ValueInfoProto] | None = None,
           domains: tuple[str, ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits, value_info=value_info or [])
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model).graph.output  # outputs need a declared shape
    for out, typed in zip(model.graph.output, inferred, strict=True):
        out.type.CopyFrom(typed.type)
    return model


def _vi(name: str, shape: list[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def pads() -> onnx.ModelProto:
    """Conv and MaxPool with asymmetric explicit pads ([h_begin, w_begin, h_end, w_end])."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv_asym", kernel_shape=[3, 3], pads=[0, 1, 2, 3]),
        helper.make_node("MaxPool", ["c"], ["y"], name="pool_asym", kernel_shape=[2, 2], strides=[2, 2],
                         pads=[1, 0, 0, 1]),
    ]
    return _model(nodes, [_vi("x", [1, 2, 7, 8])], [_vi("y", None)], [_w("w", 4, 2, 3, 3)], 13)


def auto_pad() -> onnx.ModelProto:
    """The same input through SAME_UPPER, SAME_LOWER and VALID convolutions and a SAME_UPPER pool."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["upper"], name="conv_same_upper", auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["x", "w"], ["lower"], name="conv_same_lower", auto_pad="SAME_LOWER"),
        helper.make_node("Conv", ["x", "w"], ["valid"], name="conv_valid", auto_pad="VALID"),
        helper.make_node("Conv", ["x", "w"], ["strided"], name="conv_same_upper_s2", auto_pad="SAME_UPPER",
                         strides=[2, 2]),
        helper.make_node("MaxPool", ["x"], ["pool"], name="pool_same_lower", auto_pad="SAME_LOWER",
                         kernel_shape=[2, 3], strides=[2, 2]),
    ]
    outs = [_vi(n, None) for n in ("upper", "lower", "valid", "strided", "pool")]
    return _model(nodes, [_vi("x", [1, 2, 7, 9])], outs, [_w("w", 3, 2, 4, 4)], 13)


def unknown_op() -> onnx.ModelProto:
    """Conv -> FancyNorm (no library mapping; its output shape declared in value_info) -> Relu."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("FancyNorm", ["c"], ["f"], name="fancy", domain="example.custom"),
        helper.make_node("Relu", ["f"], ["y"], name="relu"),
    ]
    model = _model(nodes, [_vi("x", [1, 3, 8, 8])], [_vi("y", None)], [_w("w", 4, 3, 3, 3), _w("b", 4)], 13,
                   value_info=[_vi("f", [1, 4, 8, 8])], domains=("example.custom",))
    return model


def shape_chain() -> onnx.ModelProto:
    """PyTorch-style export: dynamic batch, Shape->Gather->Unsqueeze->Concat->Reshape, Clip from inputs."""
    i64 = TensorProto.INT64
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["r"], name="relu6"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Constant", [], ["zero"], name="const0", value=helper.make_tensor("z", i64, [], [0])),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather"),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax"),
    ]
    inits = [_w("w", 4, 3, 3, 3), numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             _w("fc_w", 10, 4 * 6 * 6), _w("fc_b", 10)]
    return _model(nodes, [_vi("x", ["N", 3, 6, 6])], [_vi("y", None)], inits, 13)


def fusions() -> onnx.ModelProto:
    """Every chain kind the fusion finder knows, plus one chain it must not fuse."""
    nodes = [
        # conv -> add(per-channel bias) -> relu                    : conv+bias+act
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "bias1"], ["a1"], name="bias1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
        # conv -> bn -> add(residual r1) -> relu                   : conv+bias+add+act
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "s", "bb", "m", "v"], ["b2"], name="bn2"),
        helper.make_node("Add", ["b2", "r1"], ["a2"], name="residual"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        # conv -> bn -> mul(scale) -> add(shift) -> sigmoid        : conv+bn+act (DenseNet's BN+scale)
        helper.make_node("Conv", ["r2", "w2"], ["c3"], name="c3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c3", "s", "bb", "m", "v"], ["b3"], name="bn3"),
        helper.make_node("Mul", ["b3", "scale3"], ["m3"], name="scale3"),
        helper.make_node("Add", ["m3", "bias1"], ["s3"], name="shift3"),
        helper.make_node("Sigmoid", ["s3"], ["r3"], name="sig3"),
        # conv -> relu, but the conv output is also a model output : not fused
        helper.make_node("Conv", ["r3", "w2"], ["c4"], name="c4", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c4"], ["r4"], name="relu4"),
        # matmul -> add(bias) -> relu                              : gemm+bias+act
        helper.make_node("Flatten", ["r4"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "fw"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "fb"], ["ab"], name="fc_bias"),
        helper.make_node("Relu", ["ab"], ["y"], name="fc_relu"),
    ]
    c = 4
    inits = [_w("w1", c, 3, 3, 3), _w("w2", c, c, 3, 3), _w("bias1", 1, c, 1, 1), _w("scale3", c, 1, 1),
             _w("s", c), _w("bb", c), _w("m", c), numpy_helper.from_array(np.ones(c, np.float32), "v"),
             _w("fw", c * 5 * 5, 7), _w("fb", 7)]
    return _model(nodes, [_vi("x", [1, 3, 5, 5])], [_vi("y", None), _vi("c4", None)], inits, 13)


def hard_batch() -> onnx.ModelProto:
    """A Reshape that folds the batch into another dim: no new batch can be set."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["y"], name="merge_batch"),
    ]
    inits = [numpy_helper.from_array(np.array([6, 4], np.int64), "shape")]
    return _model(nodes, [_vi("x", [1, 6, 2, 2])], [_vi("y", None)], inits, 13)


MODELS = {
    "pads.onnx": pads,
    "auto_pad.onnx": auto_pad,
    "unknown_op.onnx": unknown_op,
    "shape_chain.onnx": shape_chain,
    "fusions.onnx": fusions,
    "hard_batch.onnx": hard_batch,
}

if __name__ == "__main__":
    for name, make in MODELS.items():
        model = make()
        onnx.checker.check_model(model)
        onnx.save(model, HERE / name)
        print(f"wrote {HERE / name}")
