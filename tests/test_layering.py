"""Stages import only forward (model -> plan -> codegen; runner -> db; profile readers -> mapping
-> analyze -> report), and the IR never loads onnx: each module is imported in a fresh
interpreter and the modules it pulled in are checked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# module -> prefixes of modules it must not load
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "benanza.model.layer": ("onnx", "benanza.generate.plan", "benanza.analyze", "benanza.profile"),
    "benanza.model.graph": ("onnx", "benanza.generate.plan", "benanza.analyze", "benanza.profile"),
    "benanza.model.costs": ("onnx", "benanza.generate.plan", "benanza.analyze", "benanza.profile"),
    "benanza.generate.plan": ("onnx", "benanza.analyze", "benanza.profile", "benanza.generate.codegen", "benanza.cli",
                              "benanza.store"),
    "benanza.generate.codegen": ("onnx", "benanza.analyze", "benanza.profile", "benanza.cli", "benanza.measure.runner"),
    "benanza.store.db": ("benanza.generate.plan", "benanza.analyze", "benanza.profile", "benanza.cli",
                         "benanza.measure.runner"),
    "benanza.measure.runner": ("benanza.generate.plan", "benanza.analyze", "benanza.profile", "benanza.cli"),
    "benanza.profile.mapping": ("onnx", "torch", "benanza.analyze", "benanza.cli", "benanza.profile.capture"),
    "benanza.analyze": ("onnx", "benanza.cli", "benanza.report", "benanza.generate.plan", "benanza.generate.codegen"),
    "benanza.report": ("onnx", "benanza.cli", "benanza.profile"),
    # ``benanza analyze`` loads only what a cached analysis needs (issue 17: < 1 s after the first call)
    "benanza.cli.analyze": ("onnx", "numpy", "sqlite_utils", "jinja2", "benanza.store.db", "benanza.measure",
                            "benanza.generate", "benanza.cli.run", "benanza.cli.generate"),
}


def _loaded(module: str) -> list[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_stage_imports_only_forward(module: str) -> None:
    bad = [m for m in _loaded(module) for p in FORBIDDEN[module] if m == p or m.startswith(p + ".")]
    assert not bad, f"import {module} loads {bad}"
