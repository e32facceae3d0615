"""Analyze a model: its prepared inputs (``prepare``, cached on disk by ``analysis_cache``), the pure
analysis (``benanza.analyze``), and the checks of its figures after it.

Imports only what a cached analysis needs: onnx, SQLite, the planner and the bundle mapping are
loaded by ``prepare`` on a cache miss (``benanza analyze`` answers a later call in under a second).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from benanza.errors import BenanzaError
from benanza.library import Precision

if TYPE_CHECKING:
    from benanza.analyze.inputs import WhatIf
    from benanza.analyze.tables import Report

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

    Refuses (one line, prepare.py and ``check_report``) a bundle of another model, a profile that maps onto fewer
    than half of the layers, a bundle whose batch, latency and kernel times contradict each other
    (before and after the analysis), and a database without rows for this batch and precision.
    With ``cache`` the inputs prepared for the analysis (model, mapping; the database rows are read
    again) are stored once the checks pass and read back by a later call on the same files and options
    (benanza/workflows/analysis_cache.py); the analysis itself always runs.
    """
    from benanza.analyze import analyze
    from benanza.analyze.core import MEASURE_EXECUTED_CALLS
    from benanza.workflows import analysis_cache

    precisions = sorted(set(precisions), key=list(Precision).index) if precisions is not None else None
    key = None
    prepared = None
    if cache:
        options = {"system": system_name, "batch": batch, "apis": apis, "db_label": db_label,
                   "precisions": [p.value for p in precisions] if precisions is not None else None,
                   "seq_len": seq_len}
        try:
            key = analysis_cache.entry_key(model_path, bundle_path, db_path, options)
        except OSError:  # a missing or unreadable file: prepare says which, in one line
            key = None
        prepared = (analysis_cache.load_prepared(key, bundle_path, db_path) if key is not None and db_path.is_file()
                    else None)
    if prepared is None:
        from benanza.workflows.prepare import prepare  # onnx, SQLite, the mapping: a cache miss only

        prepared = prepare(model_path, db_path, bundle_path, system_name, batch, precisions, apis, db_label,
                            seq_len)
        if key is not None:
            analysis_cache.store_prepared(key, bundle_path, prepared)
    inputs, mapping = prepared
    if what_if is not None:  # what-ifs change no prepared input: applied after the cache
        inputs = replace(inputs, what_if=tuple(what_if))
    report = analyze(inputs)
    if bundle_path is not None:
        check_report(report, bundle_path)
        command = executed_calls_command(model_path, bundle_path, Path(db_label or db_path))
        report = replace(report, notes=tuple(n.replace(MEASURE_EXECUTED_CALLS, command) for n in report.notes))
    shapes = [" ; ".join("x".join(map(str, t.shape)) for t in layer.inputs if not t.constant) + " -> "
              + " ; ".join("x".join(map(str, t.shape)) for t in layer.outputs) for layer in inputs.model.layers]
    return replace(report, model={**report.model, "layer shapes": shapes}), mapping


def executed_calls_command(model_path: Path, bundle_path: Path, db_path: Path) -> str:
    """``benanza generate`` of every call the bundle's run made that ``db_path`` lacks, into a new
    directory named after the bundle; it ends by naming the ``benanza run`` that measures them."""
    return shlex.join(["benanza", "generate", str(model_path), "--from-profile", str(bundle_path),
                       "--db", str(db_path), "--out", f"{Path(bundle_path).name}_calls"])


BUSY_SLACK = 0.1  # GPU busy may exceed the end-to-end median by this share (separate runs) before it is a contradiction
# (label in a refusal, Summary attribute): the ratios a lower bound keeps within (0, 1]
RATIOS = (("Benanza ratio", "benanza_ratio"), ("BR_seq vs end-to-end", "br_seq_e2e"),
          ("BR_par vs end-to-end", "br_par_e2e"), ("BR_seq vs GPU busy", "br_seq_busy"),
          ("BR_par vs GPU busy", "br_par_busy"))


def check_report(report: Report, bundle_path: Path) -> None:
    """Refuse an analysis of a bundle whose figures contradict each other: a lower bound above what
    was measured (Benanza ratio > 1), GPU kernel time beyond the run's wall time, no layer mapped,
    or a figure that is not a finite number. Any of these is a damaged or edited bundle, and a
    wrong answer with exit code 0 is worse than a one-line refusal."""
    s = report.summary
    for name, value in s.labelled().items():
        if isinstance(value, float) and not math.isfinite(value):
            raise BenanzaError(f"{bundle_path}: the analysis gives {name} = {value}: the bundle's figures are damaged")
    busy, e2e = s.gpu_busy_ms, s.e2e_ms
    if busy is not None and busy <= 0:
        raise BenanzaError(f"{bundle_path}: the trace's GPU kernels add up to {busy:g} ms per run: kernels of no "
                           "duration are no measurement")
    if busy is not None and e2e is not None and busy > (1 + BUSY_SLACK) * e2e:
        raise BenanzaError(f"{bundle_path}: the trace's GPU kernel time per run ({busy:.4g} ms) exceeds the measured "
                           f"end-to-end latency ({e2e:.4g} ms): the bundle contradicts itself")
    for name, attribute in RATIOS:
        value = getattr(s, attribute)
        if value is not None and not 0 < value <= 1:
            raise BenanzaError(f"{bundle_path}: {name} {value:.4g} lies outside (0, 1]: a lower bound above the "
                               "measured time means the bundle's figures contradict each other (batch, latency or "
                               "trace edited?)")
    if not s.mapped.layers:
        raise BenanzaError(f"{bundle_path}: no layer of the model maps onto this profile's measured kernels: nothing "
                           "to compare the bound with")
