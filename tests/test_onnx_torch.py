"""The torch capture's ONNX -> PyTorch conversion (benanza.profile.onnx_torch) against ONNX Runtime CPU.

Needs torch, onnx2torch and onnxruntime (skipped where any is missing, e.g. in CI).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import LIGHT
from onnx import TensorProto, helper

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")
ort = pytest.importorskip("onnxruntime")

from benanza.cli.models import ZOO  # noqa: E402
from benanza.profile.materialize import materialize  # noqa: E402
from benanza.profile.onnx_torch import convert  # noqa: E402


def _compare(path: Path, x: np.ndarray) -> None:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    refs = sess.run(None, {sess.get_inputs()[0].name: x})
    with torch.no_grad():
        outs = convert(str(path))(torch.from_numpy(x))
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        # atol relative to the output's scale: the zoo models end in a softmax (values ~1e-3)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-3, atol=1e-4 * max(float(np.abs(ref).max()), 1e-3))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_in_torch_matches_onnxruntime(tmp_path, name):
    mat = materialize(LIGHT / name, 1, tmp_path / "model.onnx")
    shape = [d.dim_value for d in onnx.load(str(mat.path)).graph.input[0].type.tensor_type.shape.dim]
    _compare(mat.path, np.random.default_rng(1).uniform(-1, 1, size=shape).astype(np.float32))


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize(("kernel", "strides", "pads"), [
    ([7, 7], [1, 1], [0, 0, 1, 1]),  # Inception-v1's
    ([3, 2], [2, 2], [1, 0, 0, 1]),
    ([3, 3], [2, 1], [2, 1, 1, 0]),
])
def test_asymmetric_average_pool_matches_onnxruntime(tmp_path, kernel, strides, pads, count_include_pad):
    pool = helper.make_node("AveragePool", ["x"], ["p"], name="pool", kernel_shape=kernel, strides=strides, pads=pads,
                            count_include_pad=count_include_pad)
    after = helper.make_node("MaxPool", ["p"], ["y"], name="after", kernel_shape=[1, 1])  # needs p's inferred shape
    graph = helper.make_graph([pool, after], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=4)
    onnx.save(model, tmp_path / "pool.onnx")
    _compare(tmp_path / "pool.onnx", np.random.default_rng(0).uniform(0.5, 1.5, (2, 3, 9, 8)).astype(np.float32))
