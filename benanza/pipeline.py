"""The library functions the CLI, bench/ and the tests share: load models, plan and generate a
project, seed a database, find a bundle's model, pick a system, analyze a model.

They sit above every stage (model, plan, codegen, runner, db, profile, analyze) and import
them lazily where a stage is heavy (onnx, the profile readers); ``benanza.cli`` only
translates flags into calls of these.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benanza import guards
from benanza.apis.base import ApiFamily
from benanza.bundles import find_model
from benanza.errors import BenanzaError
from benanza.guards import check_bundle_model, model_stem
from benanza.library import Precision
from benanza.model.layer import Model
from benanza.paths import perfdb_dir
from benanza.profile.bundle import Bundle, bundle_seq_len, read_bundle
from benanza.records import ExecutedCall

if TYPE_CHECKING:
    from benanza.analyze.inputs import Inputs, WhatIf
    from benanza.profile.mapping import Mapping

# onnx (model loading), sqlite-utils (the database), the planner, codegen and the bundle mapping are
# imported by the functions that use them: ``benanza analyze`` with a cached entry
# (analysis_cache.py) needs none of them.


FAMILIES = {"legacy": {ApiFamily.LEGACY}, "graph": {ApiFamily.GRAPH}, "both": {ApiFamily.LEGACY, ApiFamily.GRAPH}}


def bundle_model(models: Path, bundle: Bundle) -> Path:
    """Where the model a bundle was recorded with lies in the directory ``models`` (zoo names)."""
    return models / f"{model_stem(bundle.meta.model)}.onnx"


def shipped_bundle(model: Path) -> Path | None:
    """A profile bundle shipped for this model at batch 1 (perfdb/bundles/<stem>_b1_*), if any."""
    found = sorted((perfdb_dir() / "bundles").glob(f"{model.stem}_b1_*"))
    return found[0] if found else None


def load(path: Path, batches: list[int], seq_len: int | None = None) -> tuple[list[Model], list[str]]:
    """Every model of ``path`` at every batch (symbolic sequence dims at ``seq_len``); one error line per
    file that failed."""
    from benanza.model.onnx_import import load_models

    models: list[Model] = []
    errors: list[str] = []
    for batch in batches:
        loaded, errs = load_models(path, batch=batch, seq_len=seq_len)
        models += loaded
        errors += errs
    return models, errors


def profile_calls(model: Path, bundles: tuple[Path, ...]) -> list[tuple[Model, str, ExecutedCall]]:
    """Every library call logged in ``bundles``, on its model (``model`` itself, or the bundle's in that directory)."""
    from benanza.model.onnx_import import load_model
    from benanza.profile.mapping import executed_calls

    calls: list[tuple[Model, str, ExecutedCall]] = []
    for path in bundles:
        bundle = read_bundle(path)
        onnx = find_model(bundle, model)
        check_bundle_model(bundle, onnx)
        loaded = load_model(onnx, bundle.meta.batch, bundle_seq_len(bundle))
        calls += [(loaded, key, call) for key, call in executed_calls(loaded, bundle)]
    return calls


def generate_project(models: list[Path], out: Path, precisions: tuple[str, ...], batch: int | None,
                     skip: Callable[[Any], bool] | None = None, apis: list[Any] | None = None,
                     seq_len: int | None = None) -> Path | None:
    """Plan and generate one benchmark project for all ``models`` (the runner skips what is
    measured); with ``skip`` (a database's ``measured`` predicate) only the jobs it lacks,
    and None when it holds them all (without ``skip``, no jobs is an error, never None)."""
    from benanza.generate import codegen
    from benanza.generate import plan as planner
    from benanza.model.onnx_import import load_model

    loaded = [load_model(m, batch, seq_len) for m in models]
    command = " ".join(["benanza", *(shlex.quote(a) for a in sys.argv[1:])])
    p = planner.plan(loaded, precisions, apis=apis, ceilings=apis is None, skip=skip)
    if not p.jobs and skip is None:
        raise BenanzaError(f"{', '.join(str(m) for m in models)}: nothing to benchmark ({len(p.dropped)} dropped)")
    if not p.jobs:
        return None
    codegen.generate(p, out, command)
    return out


def analyze_model(model_path: Path, db_path: Path, bundle_path: Path | None = None, system_name: str | None = None,
                  batch: int | None = None, precisions: Iterable[Precision] | None = None,
                  apis: str = "both", db_label: str | None = None, cache: bool = True, seq_len: int | None = None,
                  what_if: Iterable[WhatIf] | None = None):
    """Load the model (at the bundle's batch), map the bundle, read the database, analyze.

    Without a bundle (the validation harness's per-cell call) ``precisions`` are the ones the
    framework run was allowed: ORT use_tf32=0 or PyTorch strict fp32 {fp32}; TF32 on {fp32, tf32};
    fp16 {fp16}. The summary's ``LBL_seq (ms)`` / ``LBL_par (ms)`` are the headline bound.
    ``seq_len`` sets a text model's symbolic sequence dims when there is no bundle to say it
    (a bundle's own sequence length wins; the two differing is refused). ``what_if``: the changes of
    numerics reported beside the headline (default ``inputs.DEFAULT_WHAT_IFS``), never in it.

    Refuses (one line, guards.py) a bundle of another model, a profile that maps onto fewer
    than half of the layers, a bundle whose batch, latency and kernel times contradict each other
    (before and after the analysis), and a database without rows for this batch and precision.
    With ``cache`` the inputs prepared for the analysis (model, mapping, database rows) are
    stored once the guards pass and read back by a later call on the same files and options
    (benanza/analysis_cache.py); the analysis itself always runs.
    """
    from benanza import analysis_cache
    from benanza.analyze import analyze
    from benanza.analyze.core import MEASURE_EXECUTED_CALLS

    precisions = sorted(set(precisions), key=list(Precision).index) if precisions is not None else None
    key = None
    prepared = None
    if cache:
        options = {"system": system_name, "batch": batch, "apis": apis, "db_label": db_label,
                   "precisions": [p.value for p in precisions] if precisions is not None else None,
                   "seq_len": seq_len}
        try:
            key = analysis_cache.entry_key(model_path, bundle_path, db_path, options)
        except OSError:  # a missing or unreadable file: _prepare says which, in one line
            key = None
        prepared = analysis_cache.load(key, bundle_path) if key is not None and db_path.is_file() else None
    if prepared is None:
        prepared = _prepare(model_path, db_path, bundle_path, system_name, batch, precisions, apis, db_label,
                            seq_len)
        if key is not None:
            analysis_cache.store(key, bundle_path, prepared)
    inputs, mapping = prepared
    if what_if is not None:  # what-ifs change no prepared input: applied after the cache
        inputs = replace(inputs, what_if=tuple(what_if))
    report = analyze(inputs)
    if bundle_path is not None:
        guards.check_report(report, bundle_path)
        command = guards.executed_calls_command(model_path, bundle_path, Path(db_label or db_path))
        report = replace(report, notes=tuple(n.replace(MEASURE_EXECUTED_CALLS, command) for n in report.notes))
    shapes = [" ; ".join("x".join(map(str, t.shape)) for t in layer.inputs if not t.constant) + " -> "
              + " ; ".join("x".join(map(str, t.shape)) for t in layer.outputs) for layer in inputs.model.layers]
    return replace(report, model={**report.model, "layer shapes": shapes}), mapping


def _prepare(model_path: Path, db_path: Path, bundle_path: Path | None, system_name: str | None, batch: int | None,
             precisions: list[Precision] | None, apis: str, db_label: str | None,
             seq_len: int | None = None) -> tuple[Inputs, Mapping | None]:
    """The analysis's inputs and the bundle's mapping, after every guard passed (``analyze_model``)."""
    from benanza.analyze.inputs import Constraints
    from benanza.analyze.sources import check_same_system, inputs_from_db, run_precisions
    from benanza.model.onnx_import import load_model
    from benanza.profile.mapping import map_bundle_report
    from benanza.store import db as perfdb
    from benanza.store.systems import pick_system

    bundle = read_bundle(bundle_path) if bundle_path else None
    if bundle is not None:
        guards.check_bundle_model(bundle, model_path)
        guards.check_trace_batch(bundle)
        if batch is not None and batch != bundle.meta.batch:
            raise BenanzaError(f"{bundle_path}: bundle was recorded at batch {bundle.meta.batch}, not {batch}")
        batch = bundle.meta.batch
        recorded = bundle_seq_len(bundle)
        if seq_len is not None and recorded is not None and seq_len != recorded:
            raise BenanzaError(f"{bundle_path}: bundle was recorded at sequence length {recorded}, not {seq_len}")
        seq_len = recorded if recorded is not None else seq_len
    model = load_model(model_path, batch, seq_len)
    guards.check_supported(model, model_path)
    mapping = map_bundle_report(model, bundle) if bundle is not None else None
    if not db_path.exists():
        raise BenanzaError(f"{db_path}: no such performance database")
    db = perfdb.open_db(db_path, readonly=True)
    sys_row = pick_system(db, system_name, str(db_path))
    if bundle is not None and mapping is not None:
        check_same_system(bundle, sys_row)  # another GPU or library first: the mapping is then moot
        guards.check_mapping(bundle, model, model_path, len(mapping.unmapped_layers))
    constraints = Constraints(families=frozenset(FAMILIES[apis]))
    if not precisions and bundle is not None:  # the precisions the run's recorded settings allowed
        precisions, _ = run_precisions(bundle.meta.framework, bundle.meta.dtype, bundle.meta.extra)
    if precisions:
        constraints = constraints.with_precisions(frozenset(precisions))
    guards.check_database(db, Path(db_label or db_path), sys_row, model, model_path, constraints.precisions, seq_len)
    inputs = inputs_from_db(db, model, sys_row, mapping.profile if mapping else None, constraints=constraints)
    return inputs, mapping
