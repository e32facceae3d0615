"""``benanza replay``: the analysis's best execution of a model, planned, generated, built and run as
one program (docs/REPLAY.md); the replay time beside LBL_seq / LBL_par.

The plan comes from the same prepared inputs as ``benanza analyze`` (``prepare``, cached by
``analysis_cache``), so the replay runs what the headline bound charges. The program's source depends
on no model (its plan is read at run time), so the build cache builds it once per toolchain.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.library import Precision

RESULT_EVENT = "replay"
RUN_TIMEOUT_S = 600.0


@dataclass
class ReplayOutcome:
    """A plan, where its project is, and (once run) the program's result line and system line."""

    plan: Any  # generate.replay.ReplayPlan
    project: Path
    executable: Path | None = None
    result: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """One JSON-ready record: the bound, the replay's warm and cold medians, their ratio, the check."""
        plan = self.plan
        warm = (self.result.get("warm") or {}).get("median_ms")
        cold = (self.result.get("cold") or {}).get("median_ms")
        return {"model": plan.model, "batch": plan.batch, "dtype": plan.dtype, "precisions": list(plan.precisions),
                "steps": len(plan.steps), "lbl_seq_ms": plan.lbl_seq_ms, "lbl_par_ms": plan.lbl_par_ms,
                "replay_warm_ms": warm, "replay_cold_ms": cold,
                "replay_over_lbl_seq": warm / plan.lbl_seq_ms if warm and plan.lbl_seq_ms else None,
                "replay_over_lbl_par": warm / plan.lbl_par_ms if warm and plan.lbl_par_ms else None,
                "status": self.result.get("status"), "message": self.result.get("message", ""),
                "checked_steps": self.result.get("checked_steps"), "failed_steps": self.result.get("failed_steps"),
                "gpu": self.system.get("gpu")}


def plan_model(model_path: Path, db_path: Path, batch: int | None = None,
               precisions: Iterable[Precision] | None = None, system_name: str | None = None, apis: str = "both",
               seq_len: int | None = None, cache: bool = True) -> Any:
    """The replay plan of the model's best execution at ``batch`` in ``precisions`` (``analyze``'s inputs)."""
    from benanza.analyze.replay import replay_plan
    from benanza.workflows import analysis_cache

    precisions = sorted(set(precisions), key=list(Precision).index) if precisions is not None else None
    options = {"system": system_name, "batch": batch, "apis": apis, "db_label": None,
               "precisions": [p.value for p in precisions] if precisions is not None else None, "seq_len": seq_len}
    key = None
    prepared = None
    if cache:
        try:
            key = analysis_cache.entry_key(model_path, None, db_path, options)
        except OSError:
            key = None
        prepared = analysis_cache.load(key, None) if key is not None and db_path.is_file() else None
    if prepared is None:
        from benanza.workflows.prepare import prepare

        prepared = prepare(model_path, db_path, None, system_name, batch, precisions, apis, None, seq_len)
        if key is not None:
            analysis_cache.store(key, None, prepared)
    inputs, _mapping = prepared
    return replay_plan(inputs)


def generate(plan: Any, out_dir: Path, command: str) -> Path:
    """Write the replay project (generate.replay.write_project); returns its directory."""
    from benanza.generate.replay import write_project

    write_project(plan, out_dir, command)
    return out_dir


def build(project: Path, cache: bool | None = None) -> Path:
    """Build the replay project (the build cache serves the model-independent executable); its path."""
    from benanza.generate.replay import EXECUTABLE
    from benanza.measure.runner import build as build_project

    return build_project(project, cache=cache) / EXECUTABLE


def run(outcome: ReplayOutcome, device: int = 0, max_ms: float | None = None, cold: bool = True,
        timeout_s: float = RUN_TIMEOUT_S) -> ReplayOutcome:
    """Run the built program on the plan's tables; reads its system line and its one result line."""
    if outcome.executable is None:
        raise BenanzaError(f"{outcome.project}: the replay program is not built")
    argv = [str(outcome.executable), "--plan", str(outcome.project / "src"), "--device", str(device)]
    if max_ms is not None:
        argv += ["--max-ms", str(max_ms)]
    if not cold:
        argv.append("--no-cold")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise BenanzaError(f"{outcome.executable}: the replay ran past {timeout_s:g} s") from None
    for line in done.stdout.splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if data.get("event") == "system":
            outcome.system = data
        elif data.get("event") == RESULT_EVENT:
            outcome.result = data
    if not outcome.result:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise BenanzaError(f"{outcome.executable}: printed no replay result (exit {done.returncode})", detail=tail)
    return outcome


def replay(model_path: Path, db_path: Path, out_dir: Path, command: str, batch: int | None = None,
           precisions: Iterable[Precision] | None = None, system_name: str | None = None, apis: str = "both",
           seq_len: int | None = None, build_it: bool = True, run_it: bool = True, device: int = 0,
           max_ms: float | None = None, cold: bool = True, build_cache: bool | None = None) -> ReplayOutcome:
    """Plan, generate, and (unless told not to) build and run the replay of one model."""
    plan = plan_model(model_path, db_path, batch, precisions, system_name, apis, seq_len)
    outcome = ReplayOutcome(plan, generate(plan, out_dir, command))
    if build_it:
        outcome.executable = build(out_dir, build_cache)
        if run_it:
            run(outcome, device, max_ms, cold)
    return outcome
