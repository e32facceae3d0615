"""The system's peaks for the roofline: a large device copy and a large GEMM per precision."""

from __future__ import annotations

from benanza.apis.base import ApiDef, ApiFamily, JobFields
from benanza.apis.job_table import KEY, PRECISION, Column, Kind
from benanza.apis.log_side import NO_LOG_SIDE
from benanza.library import Api, Math, Precision

CEILING_KEY = "ceiling"  # layer_key of the ceiling results
CEILING_COPY_BYTES = 1 << 30  # one cudaMemcpyAsync device to device
CEILING_GEMM_SIZE = 8192  # square GEMM per precision


def ceiling_jobs() -> list[tuple[Precision, JobFields]]:
    """The system's peaks for the roofline: a large device copy, and one large GEMM per precision."""
    jobs = [(Precision.FP32, JobFields({"memcpy": True, "size": CEILING_COPY_BYTES, "algorithm": "copy_d2d"},
                                       {"bytes": CEILING_COPY_BYTES}, ("copy_d2d",), math=Math.NONE.value))]
    for p in Precision:
        name, n = f"gemm_{p.value}", CEILING_GEMM_SIZE
        jobs.append((p, JobFields({"memcpy": False, "size": n, "algorithm": name}, {"m": n, "n": n, "k": n}, (name,))))
    return jobs


# Planned on its own (plan's ``ceilings``), not from a layer: no builder.
# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 80
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    "CEILING": {"call": "ceiling"},  # the system's measured peaks (device copy bandwidth, GEMM rate per precision)
}


DEFINITIONS = (
    ApiDef(Api.CEILING, "bench_ceilings", "ceilings.cu.j2", ApiFamily.NONE, "cublas", None,
           columns=(KEY, PRECISION, Column("algorithm", Kind.TEXT), Column("memcpy", Kind.FLAG),
                    Column("size", Kind.INT)),
           tensor_core=True, host_only=True, log=NO_LOG_SIDE),
)
