"""The house follows the data flow (shared/DESIGN.md): its stage packages, in the order data flows,

    model -> apis, generate -> measure -> store -> profile -> analyze -> report -> workflows -> api, cli

stand on the ground modules (vocabulary, records, errors, paths, output helpers), and a module
imports only its own floor, the floors before it and the ground: never one after it, and never in
a circle. Read from every import of the source (function-level and type-only ones too), so a lazy
import cannot hide an edge. Then what the stages load when imported in a fresh interpreter: the IR
and the analyzer never load onnx, the analyzer no database and no profile reader, and
``benanza analyze`` only what a cached analysis needs. Last, bench/ sits on top: no test imports a
bench script, and no bench script takes a private name of the library."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "benanza"
# The floors, in the order data flows; a module may import its own floor and those before it.
STAGES = ("model", "apis", "generate", "measure", "store", "profile", "analyze", "report", "workflows", "api", "cli",
          "__main__")
# What every floor stands on: the vocabulary, the records, errors, where the data files are, output helpers,
# the phase stopwatch.
GROUND = frozenset({"benanza", "benanza.library", "benanza.records", "benanza.errors", "benanza.paths",
                    "benanza.atomic", "benanza.csv_cells", "benanza.plain_text", "benanza.pickled_cache",
                    "benanza.phases"})


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every benanza module ``path`` imports, wherever the import stands."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("benanza"):
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else str(node.module)
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("benanza")]
        for name in names:
            while name not in MODULES:
                name = name.rpartition(".")[0]
            out.add(name)
    return out


@functools.cache
def edges() -> dict[str, set[str]]:
    """Module -> the benanza modules it imports, read once, when a test asks: at import it was a second of every
    pytest process's collection, the ones that run no test of this module included (CI time, docs/RESULTS.md §16)."""
    return {module: _imports(path) - {module} for module, path in MODULES.items()}


def floor(module: str) -> int:
    """-1 for the ground, else the stage's place in ``STAGES``."""
    if module in GROUND:
        return -1
    return STAGES.index(module.split(".")[1])


def test_every_module_stands_on_a_floor() -> None:
    """A new top-level module must say where it stands: on the ground, or in a stage package."""
    lost = [m for m in MODULES if m not in GROUND and m.split(".")[1] not in STAGES]
    assert not lost, f"modules on no floor (add them to a stage package, or to GROUND): {lost}"


def test_no_import_runs_against_the_flow() -> None:
    against = sorted(f"{m} -> {t}" for m, targets in edges().items() for t in targets if floor(t) > floor(m))
    assert not against, "imports against the data flow:\n" + "\n".join(against)


def test_no_circle() -> None:
    """No two modules import each other, directly or through others (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges()[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    assert not circles, f"import circles: {circles}"


def test_analyze_reads_nothing_itself() -> None:
    """The analyzer is pure: no database (store/), no profile reader (profile/), no onnx, no file I/O helper
    of the workflows; its inputs come as data (analyze/inputs.py, benanza.records)."""
    bad = sorted(f"{m} -> {t}" for m, targets in edges().items() if m.startswith("benanza.analyze")
                 for t in targets if t.startswith(("benanza.store", "benanza.profile", "benanza.workflows")))
    assert not bad, bad


def _loaded(module: str) -> list[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


# module -> prefixes of modules it must not load when imported
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "benanza.model.layer": ("onnx", "benanza.generate", "benanza.analyze", "benanza.profile"),
    "benanza.model.graph": ("onnx", "benanza.generate", "benanza.analyze", "benanza.profile"),
    "benanza.model.costs": ("onnx", "benanza.generate", "benanza.analyze", "benanza.profile"),
    "benanza.generate.plan": ("onnx", "benanza.analyze", "benanza.profile", "benanza.store", "benanza.measure"),
    "benanza.measure.runner": ("onnx", "sqlite_utils", "benanza.generate", "benanza.store", "benanza.analyze",
                               "benanza.profile"),
    "benanza.store.db": ("onnx", "benanza.generate", "benanza.measure.runner", "benanza.analyze", "benanza.profile"),
    "benanza.profile.mapping": ("onnx", "torch", "sqlite_utils", "benanza.analyze", "benanza.profile.capture"),
    "benanza.analyze": ("onnx", "sqlite_utils", "benanza.store", "benanza.profile", "benanza.report",
                        "benanza.generate"),
    "benanza.analyze.compare": ("onnx", "sqlite_utils", "benanza.store", "benanza.profile", "benanza.report"),
    "benanza.report": ("onnx", "sqlite_utils", "benanza.profile", "benanza.store"),
    # a capture child pays its imports before its GPU work, on the profile's critical path (issue 32): the
    # parent's side (the materializer and onnx, the layer model and networkx, the bundle readers) stays out
    "benanza.profile.capture_child": ("onnx", "networkx", "sqlite_utils", "benanza.model", "benanza.apis",
                                      "benanza.measure", "benanza.profile.capture", "benanza.profile.bundle",
                                      "benanza.profile.materialize", "benanza.profile.cudnn_log"),
    # ``benanza profile`` starts its capture's children before it loads what reading and mapping the bundle
    # need (issue 32: those imports, about 1 s, load on a thread of their own meanwhile)
    "benanza.cli.profile": ("onnx", "networkx", "numpy", "benanza.analyze", "benanza.model.onnx_import",
                            "benanza.profile.materialize", "benanza.profile.bundle", "benanza.profile.mapping"),
    # ``benanza analyze`` loads only what a cached analysis needs (issue 17: < 1 s after the first call)
    "benanza.cli.analyze": ("onnx", "numpy", "sqlite_utils", "jinja2", "benanza.store.db", "benanza.measure",
                            "benanza.generate", "benanza.workflows.prepare", "benanza.cli.run",
                            "benanza.cli.generate"),
}


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_stage_loads_only_what_it_needs(module: str) -> None:
    bad = [m for m in _loaded(module) for p in FORBIDDEN[module] if m == p or m.startswith(p + ".")]
    assert not bad, f"import {module} loads {bad}"


def _bench_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from benanza... import name`` in a file."""
    return [(str(node.module), a.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benanza") for a in node.names]


def test_no_test_imports_a_bench_script() -> None:
    """bench/ is no library: what a test needs of it belongs in benanza/ (with its own tests)."""
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py")}
    bad = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        if any("sys.path.insert" in line and "bench" in line for line in text.splitlines()):
            bad.append(f"{path.name}: puts bench/ on sys.path")
        for node in ast.walk(ast.parse(text)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{path.name}: import {n}" for n in names if n.split(".")[0] in scripts or n.startswith("bench")]
    assert not bad, bad


def test_no_bench_script_imports_a_private_name() -> None:
    """A bench script calls the library's public functions (the workflows, mostly): a private name is
    the library's to change."""
    bad = [f"{path.name}: from {module} import {name}" for path in sorted((ROOT / "bench").glob("*.py"))
           for module, name in _bench_imports(path) if name.startswith("_") or "._" in module]
    assert not bad, bad
