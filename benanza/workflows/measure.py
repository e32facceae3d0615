"""Measure models: load them, plan and generate one benchmark project, and the library calls a
profile bundle logged (``benanza generate --from-profile``).

The heavy stages (onnx, the planner, codegen, the bundle mapping) are imported by the functions
that use them: commands that only read a database load none of them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.model.layer import Model
from benanza.profile.bundle import bundle_seq_len, read_bundle
from benanza.profile.catalog import find_model
from benanza.records import ExecutedCall


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
    from benanza.workflows.prepare import check_bundle_model

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
    p = planner.plan(loaded, precisions, apis=apis, ceilings=apis is None, skip=skip)
    if not p.jobs and skip is None:
        raise BenanzaError(f"{', '.join(str(m) for m in models)}: nothing to benchmark ({len(p.dropped)} dropped)")
    if not p.jobs:
        return None
    codegen.generate(p, out, command_line())
    return out


def generate_executed_project(model: Path, bundles: tuple[Path, ...], out: Path,
                              skip: Callable[[Any], bool] | None = None) -> Path | None:
    """The project of the library calls ``bundles`` logged (``generate --from-profile``), less what
    ``skip`` says is measured; None when nothing is left."""
    from benanza.generate import codegen
    from benanza.generate.plan import plan_executed

    p = plan_executed(profile_calls(model, bundles), skip=skip)
    if not p.jobs:
        return None
    codegen.generate(p, out, command_line())
    return out


def command_line() -> str:
    """This process's command, as the generated files record what made them."""
    return shlex.join(["benanza", *sys.argv[1:]])
