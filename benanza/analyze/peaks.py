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
from benanza.analyze.physical import physical_peaks
from benanza.analyze.roofline import layer_bytes
from benanza.library import FEWER_FLOP_ALGORITHMS, FEWER_FLOP_NOTES, Fusion, Precision
from benanza.model.costs import DTYPE_BYTES
from benanza.model.layer import Layer, Model, Tensor
from benanza.records import Result


def tensor_bytes(t: Tensor, store: Precision) -> float:
    """Bytes of ``t`` when the run stores floating-point data in ``store``."""
    n = math.prod(t.shape) if t.shape else 1
    if t.dtype.startswith(("float", "bfloat")):
        return float(n * PRECISION_BYTES[store])
    return float(n * DTYPE_BYTES.get(t.dtype, 4))


def fewer_flops(row: Result) -> bool:
    """Whether ``row`` computes a convolution with fewer FLOPs than the direct count (Winograd, FFT;
    ``library.FEWER_FLOP_ALGORITHMS``, an engine config's numerical notes): its speed says nothing
    about a compute peak, and its efficiency against the direct-count roofline means nothing."""
    if row.algorithm in FEWER_FLOP_ALGORITHMS:
        return True
    notes = row.notes.get("numerical_notes") if isinstance(row.notes, dict) else None
    return bool(notes) and any(m in str(n) for n in notes for m in FEWER_FLOP_NOTES)


HBM, L2_LEVEL = "hbm", "l2"  # the memory levels' keys in Ceilings.sources (the precisions are the others)
LEVEL_NAMES = {HBM: "HBM", L2_LEVEL: "L2-resident"}
GIVEN = "given with the inputs (no source recorded)"
Tally = dict[str, tuple[float, int, tuple[Layer, Result]]]  # ceiling -> (fastest rate, rows, fastest's layer and row)


def _tally(into: Tally, name: str, rate: float, layer: Layer, row: Result) -> None:
    """Count ``row`` under ``name``, keeping the fastest."""
    fastest, n, at = into.get(name, (0.0, 0, (layer, row)))
    into[name] = (max(rate, fastest), n + 1, (layer, row) if rate > fastest else at)


def _call(layer: Layer, r: Result) -> str:
    return f"{layer.op} '{layer.name}' ({r.api} / {r.algorithm}, {r.dtype})"


def _physical_cap(value: float, cap: float | None, name: str, what: str, unit: str, scale: float,
                  sources: dict[str, str], notes: list[str]) -> float:
    """A measured ceiling above the hardware's physical peak is a measurement (or table) error:
    the physical peak stands, labelled so."""
    if cap is None or value <= cap:
        return value
    notes.append(f"{what} {value / scale:.1f} {unit} ({sources[name]}) is above the physical peak "
                 f"{cap / scale:.1f} {unit}: the physical peak stands")
    sources[name] = f"physical peak ({sources[name]} gave {value / scale:.1f} {unit}, above it)"
    return cap


def effective_ceilings(model: Model, inputs: Inputs) -> tuple[Ceilings, list[str]]:
    """One peak bandwidth per memory level and one peak FLOP/s per precision, measured, never above
    the GPU's physical peak (``physical.PHYSICAL_PEAKS``), each labelled with where it comes from
    (``Ceilings.sources``). Starts from the ceilings benchmark (and the system's bandwidth,
    ``workflows.prepare.ceilings``); a warm benchmark that beats them raises them -- the L2 level for data
    that fits in L2 (the system's ``l2_bytes``), HBM otherwise -- and a note says which one did.
    Not allowed to raise: a Winograd/FFT row (``fewer_flops``) a compute peak, and a row that would
    need more than the physical peak anything (a miscounted FLOP or byte count); notes say so."""
    ceil, phys = inputs.ceilings, physical_peaks(inputs.system)
    notes: list[str] = []
    sources = {**{Precision(p).value: GIVEN for p in ceil.flops}, **({HBM: GIVEN} if ceil.bandwidth_gbs else {}),
               **({L2_LEVEL: GIVEN} if ceil.cache_bandwidth_gbs else {}), **ceil.sources}
    hbm = None if ceil.bandwidth_gbs is None else _physical_cap(
        ceil.bandwidth_gbs, phys.hbm_gbs if phys else None, HBM, "HBM bandwidth", "GB/s", 1.0, sources, notes)
    flops = {Precision(p): _physical_cap(v, phys.flops.get(p) if phys else None, Precision(p).value,
                                         f"{Precision(p).value} peak", "TFLOP/s", 1e12, sources, notes)
             for p, v in ceil.flops.items()}
    l2 = int(inputs.system.get("l2_bytes") or 0) or None
    ceil = replace(ceil, bandwidth_gbs=hbm, flops=flops, cache_bytes=l2,
                   cache_bandwidth_gbs=ceil.cache_bandwidth_gbs or hbm)
    caps = {HBM: phys.hbm_gbs * 1e6 if phys else None, L2_LEVEL: None}  # B/ms; no physical L2 figure is listed
    raised: dict[str, tuple[float, Layer, Result]] = {}  # level -> (B/ms, layer, row)
    raised_peak: dict[Precision, tuple[float, Layer, Result]] = {}
    beyond: Tally = {}  # rows that would need more than the physical peak
    fewer: Tally = {}  # Winograd/FFT rows faster than the direct-count peak
    precisions, unfused = {p.value: p for p in Precision}, Fusion.NONE.value  # once, not per row
    for layer in model.layers:
        for r in usable(inputs.measurements.get(layer.key, ())):
            if r.fusion != unfused or not r.median_ms or r.dtype not in precisions:
                continue
            p = precisions[r.dtype]
            moved = layer_bytes(layer, p)
            floor = ceil.memory_ms(moved)
            level = L2_LEVEL if l2 and moved <= l2 else HBM
            if floor is not None and floor > r.median_ms:
                per_ms, cap = moved / r.median_ms, caps[level]
                if cap is not None and per_ms > cap:
                    _tally(beyond, level, per_ms, layer, r)
                elif per_ms > raised.get(level, (0.0,))[0]:
                    raised[level] = (per_ms, layer, r)
            peak = flops.get(p)
            if peak and layer.flops / peak * 1e3 > r.median_ms:
                got, cap = layer.flops / r.median_ms * 1e3, phys.flops.get(p) if phys else None
                if fewer_flops(r):
                    _tally(fewer, p.value, got, layer, r)
                elif cap is not None and got > cap:
                    _tally(beyond, p.value, got, layer, r)
                elif got > raised_peak.get(p, (0.0,))[0]:
                    raised_peak[p] = (got, layer, r)
    for name, (got, n, (layer, r)) in sorted(fewer.items()):
        notes.append(f"{n} Winograd/FFT row(s) beat the {name} peak {flops[precisions[name]] / 1e12:.1f} TFLOP/s on "
                     f"the direct FLOP count (fastest: {_call(layer, r)}, {got / 1e12:.1f} TFLOP/s): they compute "
                     "fewer FLOPs, so they raise no peak and have no efficiency against it")
    for name, (rate, n, (layer, r)) in sorted(beyond.items()):
        assert phys is not None  # a cap exists only for a known GPU
        what, value, cap = ((f"{LEVEL_NAMES[name]} bandwidth", f"{rate / 1e6:.0f} GB/s", f"{phys.hbm_gbs:.0f} GB/s")
                            if name in LEVEL_NAMES else
                            (f"{name} peak", f"{rate / 1e12:.1f} TFLOP/s",
                             f"{phys.flops[precisions[name]] / 1e12:.1f} TFLOP/s"))
        notes.append(f"{n} row(s) would need more than the physical {what} {cap} ({phys.source}; fastest: "
                     f"{_call(layer, r)}, {value}): they raise nothing, so their efficiency is above 100 % "
                     "(a miscounted FLOP or byte count?)")
    for level, (per_ms, layer, r) in sorted(raised.items()):
        old = ceil.cache_bandwidth_gbs if level == L2_LEVEL else ceil.bandwidth_gbs
        notes.append(f"{LEVEL_NAMES[level]} bandwidth ceiling raised from {old or 0:.0f} to {per_ms / 1e6:.0f} GB/s: "
                     f"{layer.op} '{layer.name}' ({r.api} / {r.algorithm}) moves "
                     f"{layer_bytes(layer, Precision(r.dtype)):.3g} B in {r.median_ms:.4g} ms")
        sources[level] = f"raised by {_call(layer, r)}"
    for p, (got, layer, r) in sorted(raised_peak.items()):
        notes.append(f"{p.value} peak raised from {flops[p] / 1e12:.1f} to {got / 1e12:.1f} TFLOP/s: {layer.op} "
                     f"'{layer.name}' ({r.api} / {r.algorithm}) does {layer.flops:.3g} FLOPs in {r.median_ms:.4g} ms")
        sources[p.value] = f"raised by {_call(layer, r)}"
        flops[p] = got
    hbm = raised[HBM][0] / 1e6 if HBM in raised else hbm
    # data that fits in L2 moves at least as fast as HBM allows: the faster of L2's own ceiling and HBM's
    cache = raised[L2_LEVEL][0] / 1e6 if L2_LEVEL in raised else inputs.ceilings.cache_bandwidth_gbs
    if hbm and (not cache or hbm >= cache):
        cache, sources[L2_LEVEL] = hbm, f"the HBM bandwidth ({sources[HBM]})"
    return replace(ceil, bandwidth_gbs=hbm, cache_bandwidth_gbs=cache, flops=flops, sources=sources), notes
