"""The replay's random data stays in fp16's range: the zoo's residual models run forward (ONNX Runtime,
CPU, fp32) with the distributions the replay program draws (inputs and biases in [-1, 1), weights in
[-s, s) with s = sqrt(WEIGHT_GAIN / fan_in)). With He's gain 6, ShuffleNet's last convs reach 1.3e6 and the
H100 replay of ShuffleNet b1 fp16 failed its checks with inf from the first overflowing step on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import LIGHT
from onnx import numpy_helper

from benanza.workflows.replay import WEIGHT_GAIN

FP16_MAX = 65504.0
# The deepest residual models of the zoo: every activation stays this far below fp16's largest value.
MARGIN = 16.0


def _roles(model: onnx.ModelProto) -> dict[str, str]:
    """Parameter name -> how the replay draws it (a BatchNormalization is folded into its conv: a bias)."""
    roles: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            roles[node.input[1]] = node.op_type
        elif node.op_type == "BatchNormalization":
            roles.update(zip(node.input[1:], ("one", "bias", "zero", "one"), strict=False))
    return roles


def _draw(role: str, shape: list[int], gain: float, rng: np.random.Generator) -> np.ndarray:
    if role in ("Conv", "Gemm"):  # Conv's W is [k, c, r, s], Gemm's B [k, n] (fan-in k)
        fan_in = int(np.prod(shape[1:])) if role == "Conv" else shape[0]
        value = rng.uniform(-1, 1, shape) * np.sqrt(gain / fan_in)
    else:
        value = {"one": np.ones(shape), "zero": np.zeros(shape)}.get(role, rng.uniform(-1, 1, shape))
    return value.astype(np.float32)


def largest_activation(path: Path, gain: float, seed: int = 0) -> float:
    """max |x| over every conv, GEMM and sum output of one batch-1 forward pass."""
    model = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    roles = _roles(model)
    shapes = {i.name: [int(v) for v in numpy_helper.to_array(i)] for i in model.graph.initializer
              if len(i.dims) == 1 and i.data_type == onnx.TensorProto.INT64}
    kept, drawn = [], []  # the zoo's parameters are graph inputs or ConstantOfShape outputs
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            role = roles.get(node.output[0], "bias")
            drawn.append(numpy_helper.from_array(_draw(role, shapes[node.input[0]], gain, rng), node.output[0]))
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    model.graph.initializer.extend(drawn)
    listed = {o.name for o in model.graph.output}
    for node in kept:
        if node.op_type in ("Conv", "Gemm", "Sum", "Add") and node.output[0] not in listed:
            model.graph.output.append(onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: _draw(roles.get(i.name, "bias"), [d if isinstance(d, int) else 1 for d in i.shape], gain, rng)
             for i in session.get_inputs()}
    return max(float(np.abs(out).max()) for out in session.run(None, feeds))


@pytest.mark.parametrize("stem", ["shufflenet", "resnet50"])
def test_random_activations_stay_in_fp16_range(stem: str) -> None:
    largest = largest_activation(LIGHT / f"light_{stem}.onnx", WEIGHT_GAIN)
    assert largest < FP16_MAX / MARGIN, f"{stem}: max |activation| {largest:.3g} with gain {WEIGHT_GAIN}"
