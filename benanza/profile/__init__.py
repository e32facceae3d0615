"""Readers for what a framework run leaves behind: library API logs, framework profiles,
kernel traces and the profile bundle directory that holds them.

Each reader is pure parsing into plain frozen dataclasses; analysis lives elsewhere.

The names below load on first use (PEP 562): a capture child imports modules of this package,
and every import it pays comes before its GPU work, on the profile's critical path.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "engine_config_name": "benanza.apis.engine_config",
    "Bundle": "benanza.profile.bundle", "read_bundle": "benanza.profile.bundle", "write_meta": "benanza.profile.bundle",
    "read_cublas_log": "benanza.profile.cublas_log",
    "read_cudnn_log": "benanza.profile.cudnn_log",
    "busy_time": "benanza.profile.kineto", "gaps": "benanza.profile.kineto",
    "read_kineto_trace": "benanza.profile.kineto",
    "read_ort_profile": "benanza.profile.ort_profile",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
