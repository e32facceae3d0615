"""Non-library layers: the roofline bound of a device-to-device copy."""

from __future__ import annotations

import math

from benanza.apis.base import FLOAT_DTYPES, ApiDef, ApiFamily, JobFields, Unsupported
from benanza.apis.job_table import FUSION, KEY, PRECISION, Column, Kind
from benanza.apis.log_side import NO_LOG_SIDE
from benanza.library import DTYPE_BYTES, NO_COPY_OPS, PRECISIONS, Api, Fusion, Math, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

COPY_ALGORITHM = "cudaMemcpyAsync"
COPY_COLUMNS = (KEY, PRECISION, FUSION, Column("bytes", Kind.INT))  # its job table (copy.cu.j2)



def copy_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """Roofline bound of a non-library layer: one device-to-device cudaMemcpyAsync of its output's bytes.

    A pointwise chain (Fusion.POINTWISE) is bounded as one pass: its last layer's output.
    """
    if isinstance(item, FusionCandidate) and item.pattern == Fusion.POINTWISE.value:
        item = model.layers[item.layers[-1]]
    elif not isinstance(item, Layer):
        raise Unsupported("a copy bound takes a single layer")
    if item.op in NO_COPY_OPS:
        raise Unsupported("moves no bytes")
    outputs = [t for t in item.outputs if t.name]
    for t in outputs:
        if t.dtype not in FLOAT_DTYPES:
            raise Unsupported(f"output dtype {t.dtype} is not a floating-point type (shape arithmetic, not data)")
    size = DTYPE_BYTES[PRECISIONS[precision].storage]
    count = sum(math.prod(t.shape) for t in outputs)
    if count == 0:
        raise Unsupported("moves no bytes")
    return JobFields({"bytes": count * size}, {"outputs": [list(t.shape) for t in outputs], "bytes": count * size},
                     (COPY_ALGORITHM,), "", Math.NONE.value)


# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 70
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    # Non-library layers, bounded by bytes moved at measured bandwidth: data movement, the
    # transformer's embeddings and slices (they read and write their output's bytes), and
    # pointwise ops outside cuDNN's legacy calls (the GELU / SiLU / RMSNorm chains' members:
    # one read-and-write pass, Transpose's bound).
    "COPY": {"call": "roofline", "ops": (
        "Concat", "Reshape", "Flatten", "Transpose", "Dropout", "Unsqueeze", "Squeeze", "Identity", "Pad",
        "Gather", "Slice", "Split", "Expand", "Cast",
        "Erf", "Div", "Sub", "Pow", "Sqrt", "Reciprocal", "Neg", "Exp", "Where", "Gelu", "ReduceMean")},
}


DEFINITIONS = (
    ApiDef(Api.COPY, "bench_copy", "copy.cu.j2", ApiFamily.NONE, "none", copy_job,
           columns=COPY_COLUMNS, algorithms=(COPY_ALGORITHM,), host_only=True,
           fusions=(Fusion.POINTWISE,), log=NO_LOG_SIDE),  # one fused pass: the chain's output at the copy roofline
)
