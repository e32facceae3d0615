"""The cost model on hand-computed cases (the zoo totals are checked in test_model_import)."""

from __future__ import annotations

import pytest

from benanza.model.costs import DTYPE_BYTES, layer_cost, tensor_bytes
from benanza.model.layer import Tensor


def t(*shape: int, dtype: str = "float32", const: bool = False) -> Tensor:
    return Tensor("t", shape, dtype, const)


def test_grouped_conv_with_bias():
    # N=2, C=8, K=6, groups=2, 3x3 kernel, output 5x5: MACs = 2*6*5*5*(8/2)*3*3
    cost = layer_cost("Conv", [t(2, 8, 7, 7), t(6, 4, 3, 3, const=True), t(6, const=True)], [t(2, 6, 5, 5)],
                      {"group": 2})
    macs = 2 * 6 * 5 * 5 * 4 * 3 * 3
    assert cost.macs == macs
    assert cost.flops == 2 * macs + 2 * 6 * 5 * 5
    assert cost.bytes_read == 4 * (2 * 8 * 7 * 7 + 6 * 4 * 3 * 3 + 6)
    assert cost.bytes_written == 4 * 2 * 6 * 5 * 5


def test_gemm_transposes_and_bias():
    a, b, c = t(64, 32), t(100, 64, const=True), t(100, const=True)  # A^T: 32x64, B^T: 64x100
    cost = layer_cost("Gemm", [a, b, c], [t(32, 100)], {"alpha": 1.0, "beta": 1.0, "transA": 1, "transB": 1})
    assert cost.macs == 32 * 100 * 64
    assert cost.flops == 2 * 32 * 100 * 64 + 32 * 100
    scaled = layer_cost("Gemm", [a, b, c], [t(32, 100)], {"alpha": 0.5, "beta": 2.0, "transA": 1, "transB": 1})
    assert scaled.flops == 2 * 32 * 100 * 64 + 3 * 32 * 100


def test_batched_matmul():
    cost = layer_cost("MatMul", [t(4, 12, 16, 64), t(4, 12, 64, 16)], [t(4, 12, 16, 16)], {})
    assert cost.macs == 4 * 12 * 16 * 16 * 64 and cost.flops == 2 * cost.macs


@pytest.mark.parametrize(("op", "attrs", "per_element"), [
    ("Relu", {}, 1), ("Clip", {}, 2), ("Sigmoid", {}, 4), ("Tanh", {}, 5), ("BatchNormalization", {}, 2),
    ("Softmax", {"axis": 1}, 5), ("LRN", {"size": 5}, 13), ("MaxPool", {"kernel_shape": [3, 3]}, 9),
    ("AveragePool", {"kernel_shape": [2, 2]}, 5), ("Add", {}, 1), ("Concat", {"axis": 1}, 0),
])
def test_per_element_flops(op, attrs, per_element):
    out = t(2, 3, 4, 4)
    assert layer_cost(op, [t(2, 3, 4, 4)], [out], attrs).flops == per_element * 2 * 3 * 4 * 4


def test_global_pool_and_sum():
    assert layer_cost("GlobalAveragePool", [t(1, 8, 7, 7)], [t(1, 8, 1, 1)], {}).flops == 8 * 49 + 8
    assert layer_cost("Sum", [t(1, 8), t(1, 8), t(1, 8)], [t(1, 8)], {}).flops == 2 * 8


def test_bytes_follow_the_dtype():
    assert tensor_bytes(t(10, 10, dtype="float16")) == 200
    assert tensor_bytes(t(3, dtype="int64")) == 24
    assert DTYPE_BYTES["bfloat16"] == 2
    with pytest.raises(KeyError):
        tensor_bytes(t(3, dtype="complex_thing"))
