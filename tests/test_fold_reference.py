"""The folders added for today's exports (mask and position-id chains, Swin's window masks) agree with
ONNX's own reference implementation (onnx.reference.ReferenceEvaluator) on seeded random inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from benanza.model.fold import fold_node

RNG = np.random.default_rng(16)


def _reference(op: str, inputs: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("out", 0, None)],
                              initializer=[numpy_helper.from_array(v, n) for n, v in zip(names, inputs, strict=True)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(model).run(None, {})


CASES = [
    ("CumSum", [RNG.integers(-5, 5, (3, 4)), np.array(1)], {}),
    ("CumSum", [RNG.integers(-5, 5, (3, 4)), np.array(0)], {"exclusive": 1, "reverse": 1}),
    ("GatherND", [RNG.random((2, 3, 4)), np.array([[0, 1], [1, 2]])], {}),
    ("GatherND", [RNG.random((2, 3, 4)), np.array([[[1], [0]], [[2], [1]]])], {"batch_dims": 1}),
    ("ScatterND", [RNG.random((4, 3)), np.array([[1], [3]]), RNG.random((2, 3))], {}),
    ("Mod", [RNG.integers(-9, 9, (5,)), np.array(4)], {}),
    ("Mod", [RNG.random(5) * 7 - 3, np.array(2.5)], {"fmod": 1}),
    ("Pow", [RNG.random((2, 3)), np.array(3.0)], {}),
    ("And", [RNG.random((3, 3)) > 0.5, RNG.random((1, 3)) > 0.5], {}),
    ("LessOrEqual", [RNG.integers(0, 4, (3, 1)), RNG.integers(0, 4, (1, 3))], {}),
    ("GreaterOrEqual", [RNG.integers(0, 4, (3, 1)), RNG.integers(0, 4, (1, 3))], {}),
]


@pytest.mark.parametrize(("op", "inputs", "attrs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_folder_matches_the_onnx_reference(op: str, inputs: list[np.ndarray], attrs: dict[str, Any]) -> None:
    inputs = [np.asarray(v, dtype=np.float32) if np.asarray(v).dtype.kind == "f" else
              np.asarray(v, dtype=np.int64) if np.asarray(v).dtype.kind in "iu" else np.asarray(v) for v in inputs]
    got = fold_node(op, inputs, attrs)[0]
    want = _reference(op, inputs, attrs)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)
