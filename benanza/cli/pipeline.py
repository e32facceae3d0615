"""``benanza pipeline``: generate + build + run (+ analyze) in one command; with ``--profile-with``,
profile + generate + build + run + analyze: an unseen model's first answer from one command."""

from __future__ import annotations

import json
from pathlib import Path

import click

from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import (
    CheckedPath,
    ExistingPath,
    build_cache_option,
    max_engines_option,
    parse_precisions,
    seq_len_option,
)
from benanza.cli.profile import FRAMEWORKS
from benanza.cli.progress import ConsoleProgress, working
from benanza.cli.run import cluster_options
from benanza.errors import BenanzaError
from benanza.measure import system
from benanza.phases import Phases
from benanza.plain_text import line, plain
from benanza.report import print_report
from benanza.workflows import measure


@main.command("pipeline")
@click.argument("model", type=ExistingPath(path_type=Path))
@click.option("--db", "db_path", required=True, type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database to fill (created if needed).")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: the model's own).")
@seq_len_option
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True, help="Precisions to benchmark.")
@click.option("--project-dir", type=CheckedPath(file_okay=False, path_type=Path), default=Path("benanza-project"),
              show_default=True, help="Where the generated benchmark project goes.")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True, help="Seconds per job.")
@click.option("-j", "--build-jobs", type=click.IntRange(min=1), help="Parallel compile jobs.")
@click.option("--profile", "bundle", type=CheckedPath(file_okay=False, path_type=Path),
              help="Also analyze against this profile bundle (a single MODEL file).")
@click.option("--profile-with", "profile_with", type=click.Choice(sorted(FRAMEWORKS)),
              help="First profile MODEL (one file) in this framework, at --batch (default 1) in the first --dtype, "
                   "into PROJECT_DIR-bundle; measure the calls it logged beside the plan (PROJECT_DIR-executed) and "
                   "analyze against it. Needs a GPU here (no --cluster).")
@click.option("--timings", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Also write the seconds each step took, and the measured jobs' timed GPU seconds, as JSON.")
@max_engines_option
@build_cache_option
@cluster_options
@friendly_errors
def pipeline_cmd(model: Path, db_path: Path, batch: int | None, seq_len: int | None, dtypes: str, project_dir: Path,
                 timeout_s: float, build_jobs: int | None, bundle: Path | None, profile_with: str | None,
                 timings: Path | None, max_engines: int | None, cluster: str | None, scheduler_file: Path | None,
                 shard_jobs: int | None, no_build_cache: bool) -> None:
    """generate + build + run (+ analyze) in one command.

    Without a usable GPU it says so in one line and stops after the build (with --profile-with, before
    anything runs). Each measuring step shows a bar with the jobs done and an estimate of the time left;
    at the end two lines say where the time went: per step, and the measured jobs per phase. With
    --max-engines N the answer is a first one: each graph-API job measures the heuristics' first N
    engine configs, and the bound may lie above what every config reaches.
    """
    models = sorted(model.glob("*.onnx")) if model.is_dir() else [model]
    if not models:
        raise BenanzaError(f"{model}: no *.onnx files")
    precisions = tuple(p.value for p in parse_precisions(dtypes))
    profiled = Phases()
    if profile_with:
        batch = batch or 1
        bundle = profile_first(model, profile_with, batch, precisions[0], seq_len, project_dir, bundle,
                               bool(cluster or scheduler_file))
        profiled.lap("profile")
    done = measure.pipeline(model, db_path, precisions, batch, seq_len, project_dir, timeout_s, bundle,
                            executed_calls=bool(profile_with), build_jobs=build_jobs,
                            build_cache=False if no_build_cache else None, cluster=cluster,
                            scheduler_file=scheduler_file, shard_jobs=shard_jobs, max_engines=max_engines,
                            progress=ConsoleProgress(bars=True))
    if done.failed:
        raise SystemExit(1)
    if done.report is not None:
        print_report(done.report, console)
    if max_engines:
        err_console.print(line(f"note: graph-API jobs measured the heuristics' first {max_engines} engine config(s) "
                               "each (--max-engines): a first answer; the bound over every config needs a run "
                               "without it"))
    say_timings({**profiled.times, **done.steps_s}, done.timed_gpu_s, done.job_phases_s, timings)


def say_timings(steps: dict[str, float], timed_gpu_s: float, job_phases_s: dict[str, float],
                path: Path | None) -> None:
    """Where the pipeline's time went (and ``--timings``' JSON): each step's seconds, the measured jobs'
    timed GPU seconds (the part the GPU itself needed), and the jobs' time per phase (what to cut next)."""
    from benanza.measure.campaign import PHASE_LABELS

    total = sum(steps.values())
    err_console.print(line(f"pipeline {total:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items())
                           + f" (timed GPU work {timed_gpu_s:.1f} s)"), highlight=False, soft_wrap=True)
    if any(job_phases_s.values()):
        err_console.print(line("measured jobs per phase: " + ", ".join(
            f"{PHASE_LABELS.get(k, k)} {v:.1f} s" for k, v in job_phases_s.items() if v)),
            highlight=False, soft_wrap=True)
    if path is not None:
        path.write_text(json.dumps({"steps_s": steps, "total_s": round(total, 3),
                                    "timed_gpu_s": round(timed_gpu_s, 3), "job_phases_s": job_phases_s}, indent=1))


def profile_first(model: Path, framework: str, batch: int, precision: str, seq_len: int | None, project_dir: Path,
                  given: Path | None, on_cluster: bool) -> Path:
    """``--profile-with``: the bundle of MODEL's run in ``framework`` (checked before anything is generated)."""
    from benanza.profile.capture import capture

    if given is not None:
        raise BenanzaError("--profile-with captures its own bundle: give it or --profile, not both")
    if not model.is_file():
        raise BenanzaError(f"{model}: --profile-with profiles one model file, not a directory")
    if on_cluster:
        raise BenanzaError("--profile-with profiles and measures on this machine's GPU: leave out --cluster and "
                           "--scheduler-file")
    bundle = project_dir.with_name(f"{project_dir.name}-bundle")
    if bundle.exists() and (not bundle.is_dir() or any(bundle.iterdir())):
        raise BenanzaError(f"{bundle}: an earlier --profile-with run's bundle is there: remove it, or analyze "
                           "against it with --profile instead")
    info = system.fingerprint()
    if not info.get("usable"):
        raise BenanzaError(f"--profile-with needs a usable NVIDIA GPU here ({info.get('reason', 'unknown reason')})")
    with working(f"profiling {model} in {framework} (batch {batch}, {precision}) into {bundle}"):
        capture(model, FRAMEWORKS[framework].value, batch, precision, bundle, seq_len=seq_len)
    console.print(plain(f"profiled {model} in {framework} into {bundle}"), highlight=False)
    return bundle
