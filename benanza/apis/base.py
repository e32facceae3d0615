"""What every API definition shares: the job builder's result and refusal, and the checks of
more than one builder."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benanza.library import PRECISIONS, Precision
from benanza.model.layer import FusionCandidate, Layer, Model


@dataclass(frozen=True)
class JobFields:
    """What a job builder returns: the template's numbers plus the manifest's description."""

    row: dict[str, Any]  # fields of one row of the generated job table: numbers, hex keys, enum spellings
    shapes: dict[str, Any]  # human-readable shapes/attributes for manifest.json
    algorithms: tuple[str, ...]  # algorithms measured per job; ("*",) when enumerated at run time
    layout: str = ""
    math: str = ""  # a Math value when the API has no math mode ("n/a"); "" = the precision's


class Unsupported(Exception):
    """Raised by a job builder: this layer cannot be benchmarked with this API (the message says why)."""


JobBuilder = Callable[[Layer | FusionCandidate, Model, Precision], JobFields]


FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})
_INT32_MAX = 2**31 - 1


def _layout(precision: Precision) -> str:
    return PRECISIONS[precision].cudnn_layout.removeprefix("CUDNN_TENSOR_")


# Activation coefficient (cudnnSetActivationDescriptor's coef) from the ONNX op's attributes.
ACTIVATION_COEF: dict[str, Callable[[dict[str, Any]], float]] = {
    "Clip": lambda attrs: float(attrs.get("max", math.inf)),
    "Elu": lambda attrs: float(attrs.get("alpha", 1.0)),
}
