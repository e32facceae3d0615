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
# The replay's random weights lie in [-s, s) with s = sqrt(WEIGHT_GAIN / fan_in): 3 keeps each layer's second
# moment (Var(w) = 1 / fan_in), so residual sums and biases leave a random model's activations O(1..100).
# He's 6 doubled it at every layer without a ReLU after it: ShuffleNet reached 1.3e6 and overflowed fp16
# (tests/test_replay_range.py runs the zoo forward with these distributions).
WEIGHT_GAIN = 3.0


@dataclass
class ReplayOutcome:
    """A plan, where its project is, and (once run) the program's result line and system line."""

    plan: Any  # generate.replay.ReplayPlan
    project: Path
    executable: Path | None = None
    result: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    identity: dict[str, Any] = field(default_factory=dict)  # model_key and apis: the database key (identify)

    def step_results(self) -> list[dict[str, Any]]:
        """Each step of the plan with what the run measured of it (``replay_ms``, the check): the rows
        ``bench/replay.py`` writes, the database's ``replay_steps`` and ``replay_explain`` read."""
        ran = {r.get("step"): r for r in self.result.get("steps", []) if isinstance(r, dict)}
        out = []
        for s in self.plan.steps:
            r = ran.get(s.index, {})
            out.append({"step": s.index, "kind": s.kind, "api": s.api, "algorithm": s.algorithm, "dtype": s.dtype,
                        "layout": s.layout, "fusion": s.fusion, "layers": list(s.names), "charged_ms": s.charged_ms,
                        "measured_ms": s.measured_ms, "note": s.note, "replay_ms": r.get("median_ms"),
                        "workspace_bytes": r.get("workspace_bytes"), "max_rel_error": r.get("max_rel_error"),
                        "tolerance": r.get("tolerance"), "checked": r.get("checked"),
                        "ref_max_abs": r.get("ref_max_abs")})
        return out

    def explanation(self) -> Any:
        """replay_warm - LBL_seq in named parts (``analyze.replay_explain``); None before a timed run."""
        from benanza.analyze.replay_explain import explain

        warm = (self.result.get("warm") or {}).get("median_ms")
        return explain(warm, self.plan.lbl_seq_ms, self.step_results()) if warm else None

    def record(self) -> dict[str, Any]:
        """The ``replays`` row of this run (``store.replays.REPLAY_COLUMNS``, its system aside)."""
        from benanza.store.replays import plan_key, precisions_key

        plan, warm, cold = self.plan, self.result.get("warm") or {}, self.result.get("cold") or {}
        return {"model": plan.model, "batch": plan.batch, "model_key": self.identity.get("model_key"),
                "precisions": precisions_key(plan.precisions), "apis": self.identity.get("apis", "both"),
                "plan_key": plan_key(self.step_results()), "storage": plan.dtype, "steps": len(plan.steps),
                "lbl_seq_ms": plan.lbl_seq_ms, "lbl_par_ms": plan.lbl_par_ms, "warm_ms": warm.get("median_ms"),
                "cold_ms": cold.get("median_ms"), "warm_timing": warm.get("timing"),
                "cold_timing": cold.get("timing"), "status": self.result.get("status") or "failed",
                "message": self.result.get("message") or None, "checked_steps": self.result.get("checked_steps"),
                "failed_steps": self.result.get("failed_steps"), "plan_system_id": plan.system.get("id")}

    def summary(self) -> dict[str, Any]:
        """One JSON-ready record: the bound, the replay's warm and cold medians, their ratio, the check."""
        plan = self.plan
        warm = (self.result.get("warm") or {}).get("median_ms")
        cold = (self.result.get("cold") or {}).get("median_ms")
        return {"model": plan.model, "batch": plan.batch, "dtype": plan.dtype, "precisions": list(plan.precisions),
                "execution": plan.execution,
                "steps": len(plan.steps), "lbl_seq_ms": plan.lbl_seq_ms, "lbl_par_ms": plan.lbl_par_ms,
                "replay_warm_ms": warm, "replay_cold_ms": cold,
                "replay_over_lbl_seq": warm / plan.lbl_seq_ms if warm and plan.lbl_seq_ms else None,
                "replay_over_lbl_par": warm / plan.lbl_par_ms if warm and plan.lbl_par_ms else None,
                "status": self.result.get("status"), "message": self.result.get("message", ""),
                "checked_steps": self.result.get("checked_steps"), "failed_steps": self.result.get("failed_steps"),
                "gpu": self.system.get("gpu")}


def plan_model(model_path: Path, db_path: Path, batch: int | None = None,
               precisions: Iterable[Precision] | None = None, system_name: str | None = None, apis: str = "both",
               seq_len: int | None = None, cache: bool = True, bundle: Path | None = None,
               execution: str = "best") -> Any:
    """The replay plan of the model's best execution at ``batch`` in ``precisions`` (``analyze``'s inputs);
    with ``bundle``, under the run's precisions, and of the run's own calls where ``execution`` is
    ``"as-executed"``."""
    inputs = prepared_inputs(model_path, db_path, batch, precisions, system_name, apis, seq_len, cache, bundle)
    return PLANNERS[execution](inputs)


def _best_plan(inputs: Any) -> Any:
    from benanza.analyze.replay import replay_plan

    return replay_plan(inputs)


def _executed_plan(inputs: Any) -> Any:
    from benanza.analyze.replay_executed import executed_plan

    return executed_plan(inputs)


# execution -> its planner over prepared inputs (the as-executed one needs the bundle's profile in them)
PLANNERS = {"best": _best_plan, "as-executed": _executed_plan}


def identify(model: Any, apis: str) -> dict[str, Any]:
    """What keys a replay of ``model`` (``model.layer.Model``) in the database beside its plan: the model's
    layer keys and edges (``store.replays.model_key``) and the API families its bound chose from."""
    from benanza.store.replays import model_key

    return {"model_key": model_key((layer.key for layer in model.layers), model.graph.edges), "apis": apis}


def prepared_inputs(model_path: Path, db_path: Path, batch: int | None, precisions: Iterable[Precision] | None,
            system_name: str | None, apis: str, seq_len: int | None, cache: bool, bundle: Path | None = None) -> Any:
    """``analyze``'s prepared inputs of the model (cached by ``analysis_cache``, the same entry as ``analyze``
    of the same arguments): what its plan and its database identity (``identify``) come from; with
    ``bundle``, the profile mapped onto it (the as-executed plan's calls, the run's precisions)."""
    from benanza.workflows import analysis_cache

    precisions = sorted(set(precisions), key=list(Precision).index) if precisions is not None else None
    options = {"system": system_name, "batch": batch, "apis": apis, "db_label": None,
               "precisions": [p.value for p in precisions] if precisions is not None else None, "seq_len": seq_len}
    key = None
    prepared = None
    if cache:
        try:
            key = analysis_cache.entry_key(model_path, bundle, db_path, options)
        except OSError:
            key = None
        prepared = analysis_cache.load_prepared(key, bundle, db_path) if key is not None and db_path.is_file() else None
    if prepared is None:
        from benanza.workflows.prepare import prepare

        prepared = prepare(model_path, db_path, bundle, system_name, batch, precisions, apis, None, seq_len)
        if key is not None:
            analysis_cache.store_prepared(key, bundle, prepared)
    inputs, _mapping = prepared
    return inputs


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
    argv = [str(outcome.executable), "--plan", str(outcome.project / "src"), "--device", str(device),
            "--weight-gain", repr(WEIGHT_GAIN)]
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
           max_ms: float | None = None, cold: bool = True, build_cache: bool | None = None,
           bundle: Path | None = None, execution: str | None = None) -> ReplayOutcome:
    """Plan, generate, and (unless told not to) build and run the replay of one model: its best execution,
    or with ``bundle`` the framework's own calls (``execution`` "best" replays the best execution under the
    bundle's precisions instead)."""
    inputs = prepared_inputs(model_path, db_path, batch, precisions, system_name, apis, seq_len, True, bundle)
    plan = PLANNERS[execution or ("best" if bundle is None else "as-executed")](inputs)
    outcome = ReplayOutcome(plan, generate(plan, out_dir, command), identity=identify(inputs.model, apis))
    if build_it:
        outcome.executable = build(out_dir, build_cache)
        if run_it:
            run(outcome, device, max_ms, cold)
    return outcome


def store(outcome: ReplayOutcome, db_path: Path, force: bool = False) -> tuple[str, bool]:
    """Write a run's replay and its steps into the database ``db_path`` (its one writer path:
    ``store.replays.store_replay``), under the system the program ran on; returns (system id, whether
    written: a replay of the same plan stored before is kept unless ``force``). A compressed, read-only
    or foreign database raises one line and is left as it was."""
    from benanza.measure.runner import PROCESS_FIELDS
    from benanza.measure.system import normalize
    from benanza.store import db as perfdb
    from benanza.store.replays import store_replay

    if not outcome.result or not outcome.system:
        raise BenanzaError(f"{outcome.project}: the replay has not run: nothing to store")
    if outcome.plan.execution != "best":  # analyze shows a stored replay beside its headline (best) bound
        raise BenanzaError(f"{outcome.project}: an {outcome.plan.execution} replay is not stored: the replays table "
                           "holds best executions only")
    if db_path.suffix == ".xz":
        raise BenanzaError(f"{db_path}: a compressed database is read-only; replays are stored in a .db file "
                           "(db unpack makes one)")
    system = normalize({k: v for k, v in outcome.system.items() if k not in PROCESS_FIELDS})
    db = perfdb.open_db(db_path)
    try:
        return store_replay(db, system, outcome.record(), outcome.step_results(), force)
    finally:
        db.close()
