"""Speed-of-light bound of a layer from the measured peaks: max(FLOPs/peak, bytes/bandwidth)."""

from __future__ import annotations

from benanza.analyze.inputs import PRECISION_BYTES, Ceilings, Constraints
from benanza.library import Precision
from benanza.model.costs import DTYPE_BYTES
from benanza.model.layer import Layer


def model_dtype(layer: Layer) -> str:
    """The layer's data type: its first output's (inputs may be int64 shapes or indices)."""
    tensors = layer.outputs or layer.inputs
    return tensors[0].dtype if tensors else "float32"


def layer_bytes(layer: Layer, precision: Precision | None) -> float:
    """Bytes the layer moves when run in ``precision`` (fp16 moves half of an fp32 model's bytes)."""
    if precision is None:
        return float(layer.bytes)
    own = DTYPE_BYTES.get(model_dtype(layer))
    if own is None or not model_dtype(layer).startswith(("float", "bfloat")):
        return float(layer.bytes)
    return layer.bytes * PRECISION_BYTES[precision] / own


def bound_ms(layer: Layer, precision: Precision | None, ceilings: Ceilings) -> float | None:
    """max(FLOPs / peak FLOP/s, bytes / peak bandwidth) in ms; None when a needed peak is absent."""
    memory_ms = ceilings.memory_ms(layer_bytes(layer, precision))
    if memory_ms is None:
        return None
    if layer.flops <= 0:
        return memory_ms
    peak = ceilings.peak_flops(precision) if precision is not None else None
    if peak is None:
        return None
    return max(layer.flops / peak * 1e3, memory_ms)


def efficiency_pct(bound: float | None, latency_ms: float | None) -> float | None:
    """How close a latency is to the bound, in percent (100 = at the speed of light)."""
    if bound is None or latency_ms is None or latency_ms <= 0:
        return None
    return 100.0 * bound / latency_ms


def intensity(layer: Layer, precision: Precision | None) -> float | None:
    """Arithmetic intensity in FLOP per byte (None for a layer that moves nothing)."""
    moved = layer_bytes(layer, precision)
    return layer.flops / moved if moved > 0 and layer.flops > 0 else None


def achieved_flops(layer: Layer, latency_ms: float | None) -> float | None:
    """FLOP/s the layer reaches at ``latency_ms``."""
    if latency_ms is None or latency_ms <= 0 or layer.flops <= 0:
        return None
    return layer.flops / (latency_ms / 1e3)


def speed_of_light(layer: Layer, constraints: Constraints, ceilings: Ceilings) -> float | None:
    """What a layer costs at least under ``constraints``: max(FLOPs / the best allowed peak, its bytes in
    the run's storage type / bandwidth); the charge of a layer that has no measured row."""
    memory = ceilings.memory_ms(layer_bytes(layer, constraints.store))
    if memory is None or layer.flops <= 0:
        return memory
    peak = max((p for p in map(ceilings.peak_flops, constraints.precisions) if p), default=None)
    return None if peak is None else max(layer.flops / peak * 1e3, memory)
