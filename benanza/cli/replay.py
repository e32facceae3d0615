"""``benanza replay``: run the model's best equivalent execution as one program and time it beside LBL."""

from __future__ import annotations

import json
from pathlib import Path

import click

from benanza.atomic import check_output, write_text
from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import (
    CheckedPath,
    ExistingPath,
    database,
    force_option,
    parse_precisions,
    seq_len_option,
)
from benanza.cli.progress import working
from benanza.errors import BenanzaError
from benanza.plain_text import line
from benanza.workflows.measure import command_line
from benanza.workflows.replay import ReplayOutcome, replay, store


@main.command("replay")
@click.argument("model", type=ExistingPath(dir_okay=False, path_type=Path))
@click.option("--db", "db_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database whose best execution is replayed: .db, .columns.xz or .db.xz "
                   "(default: the shipped H100 database). A .db file also stores the run's result (its replays "
                   "table), which benanza analyze then shows beside LBL.")
@click.option("--profile", "bundle", type=ExistingPath(file_okay=False, path_type=Path),
              help="Profile bundle of MODEL (benanza profile): replay the framework's own calls as the bundle's logs "
                   "show them (the as-executed execution) instead of the best, under the run's precisions; a call "
                   "without a measured row is refused.")
@click.option("--best", "best_too", is_flag=True,
              help="With --profile: replay the best execution under the run's precisions instead (the other side "
                   "of replay(as-executed) - replay(best)).")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: the bundle's, else the model's).")
@seq_len_option
@click.option("--dtype", "dtypes", help="Precisions the best execution may use, e.g. fp16 (default: fp32,tf32).")
@click.option("--system", "system_name", help="System id (prefix) or GPU name, when the database holds several.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Directory of the replay project (default: replay_<model>_b<batch>_<dtype>).")
@click.option("--generate-only", is_flag=True, help="Write the plan and the project, build and run nothing.")
@click.option("--build-only", is_flag=True, help="Build the program but do not run it (no GPU needed).")
@click.option("--device", type=click.IntRange(min=0), default=0, show_default=True, help="CUDA device to run on.")
@click.option("--no-cold", is_flag=True, help="Time warm L2 only (skip the cold-L2 figure).")
@click.option("--json", "json_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Write the result (plan summary, replay times, per-step times and checks) as JSON.")
@click.option("--replace", is_flag=True,
              help="Replace a replay of the same plan that --db already holds (kept otherwise: measurements are "
                   "immutable).")
@force_option
@friendly_errors
def replay_cmd(model: Path, db_path: Path | None, bundle: Path | None, best_too: bool, batch: int | None,
               seq_len: int | None, dtypes: str | None,
               system_name: str | None, out_dir: Path | None, generate_only: bool, build_only: bool, device: int,
               no_cold: bool, json_path: Path | None, replace: bool, force: bool) -> None:
    """Replay MODEL's best equivalent execution (the headline LBL's) as one C++ program.

    Each step makes exactly the call the analysis chose (API, algorithm or engine config, layout,
    fused epilogue); roofline-charged layers run their fastest measured call; the whole sequence is
    one CUDA graph timed like the micro-benchmarks (warm L2, then cold L2), and every step's output
    is checked against the fp32 reference of its own inputs. Refuses, in one line naming the layer
    and the API, a plan with a call the replay cannot make yet (docs/REPLAY.md). Says where the time
    beyond LBL_seq goes (roofline stand-ins, copies the bound does not charge, composition) and, with
    --db FILE.db, stores the result for benanza analyze.

    With --profile BUNDLE it replays the framework's own execution instead: each layer's library call as
    the bundle's logs show it (API, algorithm or engine config, precision, layout, fusion), the layers the
    framework ran with kernels of its own as the bound charges them; replay(as-executed) - replay(best)
    (--profile BUNDLE --best) is the realized value of the advice. Such a replay is not stored in --db.
    """
    if best_too and bundle is None:
        raise click.UsageError("--best compares with a bundle's execution: give --profile BUNDLE too")
    if json_path:
        check_output(json_path, "json", (model, db_path), force)
    precisions = parse_precisions(dtypes) if dtypes is not None else None
    label = "-".join(p.value for p in precisions) if precisions else "default"
    execution = None if bundle is None else "best" if best_too else "as-executed"
    what = f"_{bundle.name}_{execution}" if bundle is not None else ""
    out = out_dir or Path(f"replay_{model.stem}_b{batch or 'model'}_{label}{what}")
    with working(f"replaying {model.name}"):
        outcome = replay(model, database(db_path), out, command_line(), batch, precisions, system_name,
                         seq_len=seq_len, build_it=not generate_only, run_it=not (generate_only or build_only),
                         device=device, cold=not no_cold, bundle=bundle, execution=execution)
    plan = outcome.plan
    console.print(line(f"{plan.model} batch {plan.batch} {plan.dtype}, {plan.execution} execution: "
                       f"{len(plan.steps)} steps, "
                       f"LBL_seq {plan.lbl_seq_ms:.4g} ms, LBL_par {plan.lbl_par_ms:.4g} ms; project {out}"),
                  highlight=False)
    summary = outcome.summary()
    if outcome.result:
        warm, cold = summary["replay_warm_ms"], summary["replay_cold_ms"]
        text = f"replay {warm:.4g} ms warm" if warm else "replay not timed"
        text += f", {cold:.4g} ms cold" if cold else ""
        if summary["replay_over_lbl_seq"]:
            text += f"; replay / LBL_seq {summary['replay_over_lbl_seq']:.3g}"
        text += f"; check {summary['status']}"
        text += f" ({summary['message']})" if summary["message"] else ""
        console.print(line(text), highlight=False)
    elif outcome.executable is not None:
        console.print(line(f"built {outcome.executable}"), highlight=False)
    explanation = outcome.explanation()
    if explanation is not None:
        console.print(line(f"where the time goes: {explanation.reason()}"), highlight=False)
    if json_path:
        record = {"schema": 1, "execution": plan.execution, "summary": summary, "result": outcome.result,
                  "system": outcome.system,
                  "explanation": explanation.to_dict() if explanation is not None else None, "plan": plan.to_dict()}
        write_text(json_path, json.dumps(record, indent=1) + "\n")
        console.print(line(f"wrote {json_path}"), highlight=False)
    if outcome.result:  # after every output: a database that refuses the write loses nothing else
        _store(outcome, db_path, replace)
    if outcome.result and summary["status"] != "ok":
        raise SystemExit(1)


def _store(outcome: ReplayOutcome, db_path: Path | None, replace: bool) -> None:
    """Store a run in --db when it is a .db file; say in one line where it went, or why not."""
    if outcome.plan.execution != "best":
        console.print(line(f"not stored: the replays table holds best executions only (what analyze shows beside "
                           f"LBL); this {outcome.plan.execution} replay is in its output above and --json"),
                      highlight=False)
        return
    if db_path is None or db_path.suffix == ".xz":
        shown = db_path or "the shipped database"
        console.print(line(f"not stored: {shown} is compressed (read-only); --db FILE.db stores the replay, which "
                           "analyze then shows beside LBL"), highlight=False)
        return
    try:
        sid, written = store(outcome, db_path, force=replace)
    except BenanzaError as exc:
        raise BenanzaError(f"{exc.message}; the replay was not stored (its results are above)") from None
    console.print(line(f"stored in {db_path} (system {sid})" if written else
                       f"{db_path} already holds this replay of the same plan; kept it (--replace replaces it)"),
                  highlight=False)
    planned = outcome.plan.system.get("id")
    if planned and planned != sid:
        console.print(line(f"note: the replay ran on system {sid}, its plan's measurements are of system {planned}: "
                           "an analysis shows it for the system it ran on only"), highlight=False)
