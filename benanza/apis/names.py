"""The pieces of the names benchmarks give engine configs and cuBLASLt algorithms, spelled once.

Why: a framework's call read from its log and the benchmark that measured the same config
must carry the same name (the as-executed lookup is an exact string match).  The log readers
build names from these pieces in Python; codegen renders the same pieces into the C++
header ``benanza/name_parts.h`` (``templates/name_parts.h.j2``) that the harness builds its
names from, so neither side spells them on its own.
"""

from __future__ import annotations

from typing import Any

# Graph API: eng<engine id> then _k<KNOB>=<value> per knob choice (apis.engine_config).
ENGINE_TAG = "eng"
KNOB_TAG = "_k"

# cuBLASLt: algo<id> then _<part><value> per configuration attribute, in this order; the
# default is the value's spelling where the attribute is unset (the cuBLASLt log omits it).
LT_ALGO_TAG = "algo"
LT_PARTS: tuple[tuple[str, str], ...] = (
    ("tile", "UNDEFINED"), ("stages", "UNDEFINED"), ("splitk", "1"), ("red", "none"), ("swizzle", "0"),
    ("custom", "0"), ("inner", "UNDEFINED"), ("cluster", "AUTO"),
)
# cublasLtReductionScheme_t without CUBLASLT_REDUCTION_SCHEME_ -> the "red" part's value.
LT_REDUCTIONS: dict[str, str] = {"NONE": "none", "INPLACE": "inplace", "COMPUTE_TYPE": "compute",
                                 "OUTPUT_TYPE": "output"}
LT_OTHER_REDUCTION = "other"


def header_context() -> dict[str, Any]:
    """What ``templates/name_parts.h.j2`` renders: the pieces above as plain data."""
    return {"engine_tag": ENGINE_TAG, "knob_tag": KNOB_TAG, "lt_algo_tag": LT_ALGO_TAG,
            "lt_parts": [part for part, _default in LT_PARTS], "lt_reductions": list(LT_REDUCTIONS.items()),
            "lt_other_reduction": LT_OTHER_REDUCTION}
