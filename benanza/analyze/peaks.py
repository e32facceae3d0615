"""The peaks and byte counts the execution bound charges with: a tensor's bytes in the run's
storage precision (``inputs.storage``), and one effective ceiling per memory level and precision.

Why a module of its own: gaps.py and core.py need the same storage rule and ceilings as the
execution bound (analyze/execution.py), which is long enough without them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from benanza.analyze.choose import usable
from benanza.analyze.inputs import PRECISION_BYTES, Ceilings, Inputs
from benanza.analyze.roofline import layer_bytes
from benanza.library import Fusion, Precision
from benanza.model.costs import DTYPE_BYTES
from benanza.model.layer import Layer, Model, Tensor
from benanza.records import Result


def tensor_bytes(t: Tensor, store: Precision) -> float:
    """Bytes of ``t`` when the run stores floating-point data in ``store``."""
    n = math.prod(t.shape) if t.shape else 1
    if t.dtype.startswith(("float", "bfloat")):
        return float(n * PRECISION_BYTES[store])
    return float(n * DTYPE_BYTES.get(t.dtype, 4))


def effective_ceilings(model: Model, inputs: Inputs) -> tuple[Ceilings, list[str]]:
    """One peak bandwidth per memory level and one peak FLOP/s per precision: the best measured, so
    no benchmark of the model exceeds its roofline. Starts from the ceilings benchmark (and the
    system's bandwidth, ``sources.ceilings``); a warm benchmark that beats them raises them -- the
    L2 level for data that fits in L2 (the system's ``l2_bytes``), HBM otherwise -- and a note says
    which benchmark did."""
    ceil = inputs.ceilings
    l2 = int(inputs.system.get("l2_bytes") or 0) or None
    ceil = replace(ceil, cache_bytes=l2, cache_bandwidth_gbs=ceil.cache_bandwidth_gbs or ceil.bandwidth_gbs)
    flops = dict(ceil.flops)
    notes: list[str] = []
    raised: dict[str, tuple[float, Layer, Result]] = {}  # "hbm" / "l2" -> (B/ms, layer, row)
    raised_peak: dict[Precision, tuple[float, Layer, Result]] = {}
    precisions, unfused = {p.value: p for p in Precision}, Fusion.NONE.value  # once, not per row
    for layer in model.layers:
        for r in usable(inputs.measurements.get(layer.key, ())):
            if r.fusion != unfused or not r.median_ms or r.dtype not in precisions:
                continue
            p = precisions[r.dtype]
            moved = layer_bytes(layer, p)
            floor = ceil.memory_ms(moved)
            level = "l2" if l2 and moved <= l2 else "hbm"
            if floor is not None and floor > r.median_ms and moved / r.median_ms > raised.get(level, (0.0,))[0]:
                raised[level] = (moved / r.median_ms, layer, r)
            peak = flops.get(p)
            if peak and layer.flops / peak * 1e3 > r.median_ms:
                got = layer.flops / r.median_ms * 1e3
                if got > raised_peak.get(p, (0.0,))[0]:
                    raised_peak[p] = (got, layer, r)
    for level, (per_ms, layer, r) in sorted(raised.items()):
        old = ceil.cache_bandwidth_gbs if level == "l2" else ceil.bandwidth_gbs
        notes.append(f"{'L2-resident' if level == 'l2' else 'HBM'} bandwidth ceiling raised from {old or 0:.0f} to "
                     f"{per_ms / 1e6:.0f} GB/s: {layer.op} '{layer.name}' ({r.api} / {r.algorithm}) moves "
                     f"{layer_bytes(layer, Precision(r.dtype)):.3g} B in {r.median_ms:.4g} ms")
    for p, (got, layer, r) in sorted(raised_peak.items()):
        notes.append(f"{p.value} peak raised from {flops[p] / 1e12:.1f} to {got / 1e12:.1f} TFLOP/s: {layer.op} "
                     f"'{layer.name}' ({r.api} / {r.algorithm}) does fewer FLOPs than the direct count "
                     "(Winograd/FFT)")
        flops[p] = got
    hbm = raised["hbm"][0] / 1e6 if "hbm" in raised else ceil.bandwidth_gbs
    cache = max(raised["l2"][0] / 1e6 if "l2" in raised else 0.0, hbm or 0.0, ceil.cache_bandwidth_gbs or 0.0)
    return replace(ceil, bandwidth_gbs=hbm, cache_bandwidth_gbs=cache or None, flops=flops), notes
