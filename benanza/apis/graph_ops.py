"""Recognisers of the op graphs each graph API runs, over a graph's whole operation list.

Why: a graph is filed by what it computes, not by its first operation: an SDPA graph starts
with the MATMUL of Q and K^T and would otherwise read as a GEMM.  A graph op is plain data,
``(kind, mode)`` as the cuDNN log reader spells them (``("MATMUL", None)``,
``("POINTWISE", "EXP")``, ``("REDUCTION", ...)``), so that this module needs no log reader.
Each recogniser is exclusive of the others: a graph matches at most one.
"""

from __future__ import annotations

from collections.abc import Sequence

GraphOp = tuple[str, str | None]  # (kind, mode) of one operation of an op graph


def _kinds(ops: Sequence[GraphOp]) -> list[str]:
    return [kind for kind, _mode in ops]


def is_conv_graph(ops: Sequence[GraphOp]) -> bool:
    """A forward convolution and its pointwise epilogue (bias, residual add, activation)."""
    kinds = _kinds(ops)
    return kinds.count("CONVOLUTION_FORWARD") == 1 and "MATMUL" not in kinds


def is_matmul_graph(ops: Sequence[GraphOp]) -> bool:
    """One MATMUL and its pointwise epilogue: nothing but POINTWISE besides it."""
    kinds = _kinds(ops)
    return kinds.count("MATMUL") == 1 and all(k in ("MATMUL", "POINTWISE") for k in kinds)


def is_sdpa_graph(ops: Sequence[GraphOp]) -> bool:
    """Attention: MATMUL(Q, K^T) -> [scale, mask] -> softmax (a REDUCTION and an EXP) -> MATMUL(., V)."""
    kinds = _kinds(ops)
    matmuls = [i for i, k in enumerate(kinds) if k == "MATMUL"]
    if len(matmuls) != 2 or "CONVOLUTION_FORWARD" in kinds:
        return False
    between = ops[matmuls[0] + 1:matmuls[1]]
    return any(k == "REDUCTION" for k, _m in between) and ("POINTWISE", "EXP") in between


def is_norm_graph(ops: Sequence[GraphOp]) -> bool:
    """A normalization forward (LayerNorm, RMSNorm) and its pointwise neighbours."""
    kinds = _kinds(ops)
    return kinds.count("NORM_FORWARD") == 1 and "MATMUL" not in kinds and "CONVOLUTION_FORWARD" not in kinds


def is_pointwise_graph(ops: Sequence[GraphOp]) -> bool:
    """A chain of pointwise operations alone (GELU, SiLU, bias + activation fused into one pass)."""
    return bool(ops) and all(kind == "POINTWISE" for kind in _kinds(ops))
