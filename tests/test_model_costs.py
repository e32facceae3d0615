"""The cost model on hand-computed cases (the zoo totals are checked in test_model_import)."""

from __future__ import annotations

import itertools

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


def window(k: int, s: int, pad: int = 0, d: int = 1) -> dict:
    return {"group": 1, "kernel_shape": [k, k], "strides": [s, s], "dilations": [d, d], "pads": [pad] * 4}


def test_a_strided_window_reads_only_the_positions_it_covers():
    """ResNet-50's downsampling 1x1 convs (stride 2) read a quarter of their input: counted whole,
    their benchmarks 'moved' 4.3-5.0 TB/s on an H100 and raised the bound's HBM ceiling."""
    x, w = t(256, 256, 56, 56), t(512, 256, 1, 1, const=True)
    cost = layer_cost("Conv", [x, w], [t(256, 512, 28, 28)], window(1, 2))
    assert cost.bytes_read == 4 * (256 * 256 * 28 * 28 + 512 * 256)
    # 3x3 / 2 pad 1 and 3x3 / 1 pad 1 cover every position; 1x1 / 3 reads every third row and column
    assert layer_cost("Conv", [t(1, 8, 56, 56), t(8, 8, 3, 3)], [t(1, 8, 28, 28)], window(3, 2, 1)).bytes_read \
        == 4 * (8 * 56 * 56 + 8 * 8 * 9)
    assert layer_cost("MaxPool", [t(1, 8, 9, 9)], [t(1, 8, 3, 3)], window(1, 3)).bytes_read == 4 * 8 * 3 * 3
    assert layer_cost("MaxPool", [t(1, 8, 112, 112)], [t(1, 8, 56, 56)], window(3, 2, 1)).bytes_read \
        == 4 * 8 * 112 * 112
    # dilation 2, kernel 2, stride 4 on 8 positions: windows at 0 and 4 read 0, 2, 4, 6
    assert layer_cost("Conv", [t(1, 1, 8, 8), t(1, 1, 2, 2)], [t(1, 1, 2, 2)], window(2, 4, 0, 2)).bytes_read \
        == 4 * (4 * 4 + 4)


def test_the_covered_span_shortcut_counts_what_the_windows_read():
    """``_covered`` takes one span when windows overlap (no loop over long 1-D signals): the same count
    as listing every position every window reads."""
    from benanza.model.costs import _covered

    for size, k, s, d, p in itertools.product(range(1, 20), range(1, 6), range(1, 5), range(1, 3), range(3)):
        out = (size + 2 * p - (k - 1) * d - 1) // s + 1
        if out >= 1:
            listed = {i for o in range(out) for j in range(k) if 0 <= (i := o * s + j * d - p) < size}
            assert _covered(size, out, k, s, d, p) == len(listed), (size, k, s, d, p)


def test_a_gather_reads_the_rows_it_picks_and_a_slice_the_slice():
    table, ids = t(30522, 768, const=True), t(8, 128, dtype="int64")
    cost = layer_cost("Gather", [table, ids], [t(8, 128, 768)], {"axis": 0})
    assert cost.bytes_read == 4 * 8 * 128 * 768 + 8 * 8 * 128  # not the 94 MB table
    small = layer_cost("Gather", [t(4, 768), t(64, dtype="int64")], [t(64, 768)], {"axis": 0})
    assert small.bytes_read == 4 * 4 * 768 + 8 * 64  # never more than the whole data tensor
    assert layer_cost("Slice", [t(8, 1024, 768)], [t(8, 1, 768)], {"axes": [1]}).bytes_read == 4 * 8 * 768


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
