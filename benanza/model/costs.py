"""Per-layer cost model: MACs, FLOPs, bytes read and bytes written.

The roofline bound of a layer is ``max(FLOPs / peak, bytes / bandwidth)``, so these
numbers must be exact for the big ops and honest for the small ones.  One
function per op kind in ``COSTS``; an op absent from it costs 0 FLOPs but still
moves its bytes.

FLOPs (a multiply-add is 2 FLOPs; ``E`` = output elements):

- Conv: ``MACs = N*K*OH*OW*(C/group)*R*S`` (any spatial rank); ``FLOPs = 2*MACs``
  plus ``E`` when a bias input is given.
- Gemm: ``MACs = M*N*K``; ``FLOPs = 2*MACs``, plus ``E`` for ``alpha != 1`` and
  ``E`` for a C input with ``beta != 0`` (plus ``E`` more if ``beta`` not in {0, 1}).
- MatMul: batched, ``MACs = prod(output) * K``; ``FLOPs = 2*MACs``.
- Elementwise, per output element: Relu 1 (max), Clip 2 (max, min), LeakyRelu 2,
  Elu 3, Sigmoid 4 (neg, exp, add, div), Tanh 5 (two exps, add, sub, div), Add/Sub/Mul/Div 1,
  Sum/Max/Min with k inputs k-1.
- BatchNormalization (inference): 2 per element (one multiply-add with the
  per-channel scale and shift folded from mean/var/gamma/beta).
- MaxPool: ``prod(kernel)`` comparisons per output element; AveragePool the same
  adds plus 1 divide; GlobalAveragePool / GlobalMaxPool one op per input element
  (plus 1 divide per output for the average).
- Softmax: 5 per element (max, subtract, exp, sum, divide).
- LRN: ``2*size + 3`` per element (size squares, size-1 adds, scale and bias, pow, divide).
- Copy-like ops (Concat, Reshape, Transpose, ...): 0.

Bytes: ``bytes_read`` is the sum over all input tensors, weights included, except where an op
reads only part of an input (``READS``): a sliding window (Conv, pooling) whose stride skips input
positions, a Gather (its indices and the rows they pick), a Slice (the slice).  ``bytes_written``
is the sum over outputs.  Element sizes come from ``DTYPE_BYTES``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benanza.library import DTYPE_BYTES
from benanza.model.layer import Tensor


@dataclass(frozen=True)
class Cost:
    macs: int
    flops: int
    bytes_read: int
    bytes_written: int


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def tensor_bytes(t: Tensor) -> int:
    """Bytes of one tensor; an unknown dtype is an error, never a silent 0."""
    return numel(t.shape) * DTYPE_BYTES[t.dtype]


Attrs = dict[str, Any]
MacsFlops = tuple[int, int]
CostFn = Callable[[list[Tensor], list[Tensor], Attrs], MacsFlops]


def _conv(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
    w = inputs[1].shape  # K x C/g x R x S
    out = numel(outputs[0].shape)
    macs = out * numel(w[1:])
    return macs, 2 * macs + (out if len(inputs) > 2 else 0)


def _gemm(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
    a = inputs[0].shape
    k = a[0] if attrs.get("transA", 0) else a[1]
    out = numel(outputs[0].shape)
    macs = out * k
    flops = 2 * macs + (out if attrs.get("alpha", 1.0) != 1.0 else 0)
    beta = attrs.get("beta", 1.0)
    if len(inputs) > 2 and beta != 0.0:
        flops += out * (1 if beta == 1.0 else 2)
    return macs, flops


def _matmul(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
    k = inputs[0].shape[-1]
    macs = numel(outputs[0].shape) * k
    return macs, 2 * macs


def _per_output(flops_per_element: int) -> CostFn:
    return lambda inputs, outputs, attrs: (0, flops_per_element * numel(outputs[0].shape))


def _variadic(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
    return 0, max(len(inputs) - 1, 1) * numel(outputs[0].shape)


def _pool(extra: int) -> CostFn:
    def cost(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
        return 0, (numel(attrs["kernel_shape"]) + extra) * numel(outputs[0].shape)

    return cost


def _global_pool(extra: int) -> CostFn:
    def cost(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
        return 0, numel(inputs[0].shape) + extra * numel(outputs[0].shape)

    return cost


def _lrn(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> MacsFlops:
    return 0, (2 * int(attrs["size"]) + 3) * numel(outputs[0].shape)


COSTS: dict[str, CostFn] = {
    "Conv": _conv,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Relu": _per_output(1),
    "Clip": _per_output(2),
    "LeakyRelu": _per_output(2),
    "Elu": _per_output(3),
    "Sigmoid": _per_output(4),
    "Tanh": _per_output(5),
    "Add": _per_output(1),
    "Sub": _per_output(1),
    "Mul": _per_output(1),
    "Div": _per_output(1),
    "Sum": _variadic,
    "Max": _variadic,
    "Min": _variadic,
    "BatchNormalization": _per_output(2),
    "MaxPool": _pool(0),
    "AveragePool": _pool(1),
    "GlobalMaxPool": _global_pool(0),
    "GlobalAveragePool": _global_pool(1),
    "Softmax": _per_output(5),
    "LRN": _lrn,
}


ReadFn = Callable[[list[Tensor], list[Tensor], Attrs], int]


def _all_read(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> int:
    return sum(tensor_bytes(t) for t in inputs)


def _covered(size: int, out: int, kernel: int, stride: int, dilation: int, pad_begin: int) -> int:
    """How many of an axis's ``size`` input positions some output position's window reads."""
    if dilation == 1 and stride <= kernel:  # the windows overlap or touch: one span (and no long loop)
        return max(0, min(size, (out - 1) * stride + kernel - pad_begin) - max(0, -pad_begin))
    return len({i for o in range(out) for j in range(kernel)
                if 0 <= (i := o * stride + j * dilation - pad_begin) < size})


def _window_read(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> int:
    """A sliding window reads only the input positions some window covers: a 1x1 conv of stride 2
    reads a quarter of its input. Counted whole, ResNet-50's downsampling convs 'moved' 4.3-5.0 TB/s
    on an H100 (HBM peak 3.35) and raised the bound's bandwidth ceiling with them."""
    x, y = inputs[0].shape, outputs[0].shape
    kernel, strides = attrs.get("kernel_shape"), attrs.get("strides")
    dilations, pads = attrs.get("dilations"), attrs.get("pads")
    rank = len(x) - 2
    if rank < 1 or len(y) != len(x) or not kernel or not strides or not dilations or not pads or len(kernel) != rank:
        return _all_read(inputs, outputs, attrs)
    covered = math.prod(_covered(x[2 + a], y[2 + a], kernel[a], strides[a], dilations[a], pads[a])
                        for a in range(rank))
    data = x[0] * x[1] * covered * DTYPE_BYTES[inputs[0].dtype]
    return data + sum(tensor_bytes(t) for t in inputs[1:])


def _gather_read(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> int:
    """The indices and the rows they pick (an embedding lookup reads a few rows of its table),
    at most the whole data tensor."""
    if len(inputs) < 2:
        return _all_read(inputs, outputs, attrs)
    data, indices = inputs[0], inputs[1]
    axis = int(attrs.get("axis", 0)) % max(len(data.shape), 1)
    row = numel(data.shape) // max(data.shape[axis], 1) if data.shape else 1
    picked = min(numel(indices.shape) * row, numel(data.shape)) * DTYPE_BYTES[data.dtype]
    return picked + tensor_bytes(indices) + sum(tensor_bytes(t) for t in inputs[2:])


def _slice_read(inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> int:
    """The slice itself (what it writes), at most the whole input."""
    if not outputs:
        return _all_read(inputs, outputs, attrs)
    return min(tensor_bytes(outputs[0]), tensor_bytes(inputs[0])) + sum(tensor_bytes(t) for t in inputs[1:])


READS: dict[str, ReadFn] = {
    "Conv": _window_read,
    "MaxPool": _window_read,
    "AveragePool": _window_read,
    "LpPool": _window_read,
    "Gather": _gather_read,
    "Slice": _slice_read,
}


def layer_cost(op: str, inputs: list[Tensor], outputs: list[Tensor], attrs: Attrs) -> Cost:
    """MACs, FLOPs and bytes of one layer (see the module docstring for the FLOP counts)."""
    fn = COSTS.get(op)
    macs, flops = fn(inputs, outputs, attrs) if fn else (0, 0)
    read = READS.get(op, _all_read)(inputs, outputs, attrs)
    return Cost(macs, flops, read, sum(tensor_bytes(t) for t in outputs))
