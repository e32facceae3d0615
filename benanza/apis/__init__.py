"""One definition per library API benanza benchmarks: ``REGISTRY`` maps every ``Api`` to its
``ApiDef`` (see docs/GENERATOR.md, "Adding an API").

Every module of this package may list its definitions in ``DEFINITIONS``; the registry
collects them, so that adding an API adds a module here and touches no table elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Sequence
from functools import cache

from benanza.apis.base import ApiDef, ApiFamily
from benanza.apis.graph_ops import GraphOp
from benanza.library import Api, Fusion

__all__ = ["NAMED_CONFIG_APIS", "REGISTRY", "ApiDef", "ApiFamily", "api_family", "cublas_api", "graph_api",
           "has_weights", "whole_call"]


def _definitions() -> Iterator[ApiDef]:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        yield from getattr(importlib.import_module(f"{__name__}.{info.name}"), "DEFINITIONS", ())


def _registry() -> dict[Api, ApiDef]:
    found: dict[Api, ApiDef] = {}
    for d in _definitions():
        if d.api in found:
            raise RuntimeError(f"benanza.apis: {d.api.value} is defined twice")
        found[d.api] = d
    return {api: found[api] for api in Api if api in found}  # in Api order: jobs are numbered in it


REGISTRY: dict[Api, ApiDef] = _registry()

# APIs whose jobs can name the engine configs they measure (ApiDef.named_configs).
NAMED_CONFIG_APIS = frozenset(api for api, d in REGISTRY.items() if d.named_configs)


@cache  # per row of every layer: the Api lookup once per name
def api_family(api: str) -> ApiFamily | None:
    """Family of an ``Api`` value as stored in a Result; None for a name the registry does not know."""
    try:
        return REGISTRY[Api(api)].family
    except (ValueError, KeyError):
        return None


def has_weights(api: str) -> bool:
    """Whether a call of ``api`` (an ``Api`` value, as rows and logs spell it) reads a layer's weights."""
    try:
        return REGISTRY[Api(api)].weights
    except (ValueError, KeyError):  # not an API benanza benchmarks
        return False


def graph_api(ops: Sequence[GraphOp]) -> Api | None:
    """The API of a graph-API op graph, from its whole operation list (``(kind, mode)`` pairs; an
    SDPA graph starts with a MATMUL): the one whose ``log.graph_recogniser`` accepts it, else None."""
    found = [api for api, d in REGISTRY.items() if d.log.graph_recogniser is not None
             and d.log.graph_recogniser(ops)]
    return found[0] if len(found) == 1 else None


@cache  # per logged cuBLAS call: a few distinct (function, kind) pairs
def cublas_api(function: str, kind: str) -> Api:
    """The API a cuBLAS log line ran as: the one whose ``log.cublas_call`` takes its function and kind
    ("gemm" or "gemv"); the cuBLAS APIs' recognisers cover every line between them, exclusively."""
    found = [api for api, d in REGISTRY.items() if d.log.cublas_call is not None and d.log.cublas_call(function, kind)]
    if len(found) != 1:
        raise ValueError(f"{function} ({kind}): {len(found)} cuBLAS APIs take it, not one")
    return found[0]


def whole_call(api: str, fusion: str) -> bool:
    """Whether a row of ``api`` and ``fusion`` (values as rows spell them) is a whole execution of what
    it stands for: not a call whose output another kernel must pre-fill first (ApiDef.prefilled)."""
    try:
        return Fusion(fusion) not in REGISTRY[Api(api)].prefilled
    except (ValueError, KeyError):
        return True
