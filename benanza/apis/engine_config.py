"""The graph API's named-config codec: one spelling of an engine config for the generator,
the log reader and the analyzer (an as-executed lookup is an exact string match)."""

from __future__ import annotations

import re

from benanza.apis.names import ENGINE_TAG, KNOB_TAG

_KNOB_PREFIX = "CUDNN_KNOB_TYPE_"
_KNOB_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def engine_config_name(engine_id: int, knobs: dict[str, int]) -> str:
    """Canonical name of a graph-API engine config: ``eng{id}`` + ``_k{KNOB}={value}`` sorted by knob.

    ``KNOB`` is the knob type without ``CUDNN_KNOB_TYPE_`` (either spelling is accepted).
    The benchmark generator names its graph-API benchmarks with this same function, so
    the analyzer's lookup of an as-executed engine config is an exact string match.
    """
    if isinstance(engine_id, bool) or not isinstance(engine_id, int) or engine_id < 0:
        raise ValueError(f"engine id must be a non-negative int, got {engine_id!r}")
    parts = [f"{ENGINE_TAG}{engine_id}"]
    short: dict[str, int] = {}
    for name, value in knobs.items():
        key = name.removeprefix(_KNOB_PREFIX)
        if not _KNOB_NAME.match(key) or isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"bad knob {name!r}={value!r}")
        short[key] = value
    parts += [f"{KNOB_TAG}{key}={short[key]}" for key in sorted(short)]
    return "".join(parts)


def parse_engine_config_name(name: str) -> tuple[int, dict[str, int]]:
    """Inverse of :func:`engine_config_name` (knob names come back without the prefix)."""
    eng, knob = re.escape(ENGINE_TAG), re.escape(KNOB_TAG)
    m = re.fullmatch(rf"{eng}(\d+)((?:{knob}[A-Za-z0-9_]+?=-?\d+)*)", name)
    if not m:
        raise ValueError(f"not an engine config name: {name!r}")
    knobs = {k: int(v) for k, v in re.findall(rf"{knob}([A-Za-z0-9_]+?)=(-?\d+)", m.group(2))}
    return int(m.group(1)), knobs
