"""The hardware's physical peaks per GPU: what no roofline ceiling may exceed.

The roofline's ceilings are measured on the system, and a measured row may raise them
(``peaks.effective_ceilings``), but never past what the hardware can do for that kind of work:
a row that seems to is miscounted (FLOPs or bytes), not fast. Vendor datasheet figures, dense
math (no 2:4 sparsity), keyed by the GPU name the systems table stores (CUDA's device name).
A GPU not listed has no physical cap: its ceilings are the measured ones, labelled so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benanza.library import Precision


@dataclass(frozen=True)
class PhysicalPeaks:
    hbm_gbs: float  # device memory bandwidth, GB/s (1e9 B/s)
    flops: Mapping[Precision, float]  # dense FLOP/s per precision
    source: str  # where the figures come from


PHYSICAL_PEAKS: dict[str, PhysicalPeaks] = {
    "NVIDIA H100 80GB HBM3": PhysicalPeaks(
        hbm_gbs=3350.0,
        flops={Precision.FP32: 66.9e12, Precision.TF32: 494.7e12, Precision.FP16: 989.4e12,
               Precision.BF16: 989.4e12},
        source="NVIDIA H100 SXM5 datasheet (dense)"),
}


def physical_peaks(system: Mapping[str, Any]) -> PhysicalPeaks | None:
    """The physical peaks of the system's GPU, None when the GPU is not in ``PHYSICAL_PEAKS``."""
    return PHYSICAL_PEAKS.get(str(system.get("gpu") or ""))
