"""Measure models: load them, plan and generate one benchmark project, and the library calls a
profile bundle logged (``benanza generate --from-profile``); build projects and run their jobs into a
database, on this machine's GPU (``measure_here``) or a Dask cluster's (``measure_on_cluster``), and
the whole ``benanza pipeline`` sequence (``pipeline``). Each reports its stages through a ``Progress``
(the CLI's draws spinners, bars and tables; the default says nothing) and returns what happened.

The heavy stages (onnx, the planner, codegen, the bundle mapping, the runner) are imported by the
functions that use them: commands that only read a database load none of them.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benanza.errors import BenanzaError
from benanza.phases import Phases
from benanza.records import ExecutedCall

if TYPE_CHECKING:  # the CLI imports this module for Progress: it loads no stage until a function runs
    from benanza.analyze.tables import Report
    from benanza.measure.build_cache import BuildOutcome
    from benanza.measure.cluster import CampaignSummary
    from benanza.measure.runner import JobOutcome, RunSummary
    from benanza.model.layer import Model


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
    from benanza.profile.bundle import bundle_seq_len, read_bundle
    from benanza.profile.catalog import find_model
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


class JobBar:
    """One project's jobs as they finish; the default shows nothing."""

    def planned(self, total: int) -> None:
        """How many jobs run, once known (a cluster knows it after probing its workers)."""

    def advance(self, outcome: JobOutcome, worker: str | None = None) -> None:
        """One job ended (on ``worker``, on a cluster)."""


class Progress:
    """What a measuring workflow reports as it goes. Every hook is optional: the default reports
    nothing (a notebook, a test); the CLI's draws a spinner per step, a bar per run and a table per
    project from the same hooks."""

    def step(self, message: str) -> AbstractContextManager[None]:
        """A step that takes seconds to minutes (generating, building, profiling), while it runs."""
        return nullcontext()

    def built(self, project: Path, done: BuildOutcome) -> None:
        """A project was built; ``done`` says what the build cache gave."""

    def running(self, project: Path, total: int | None) -> AbstractContextManager[JobBar]:
        """A project's jobs run: ``total`` of them (None: not known yet)."""
        return nullcontext(JobBar())

    def ran(self, project: Path, summary: RunSummary | CampaignSummary) -> None:
        """A project's jobs ran; ``summary`` says how each ended."""

    def said(self, message: str) -> None:
        """A line of what was done (the CLI prints it on stdout)."""

    def warned(self, message: str) -> None:
        """What could not be done, and why (the CLI prints it on stderr); the sequence goes on."""


QUIET = Progress()
# CMakeLists.txt stops with "benanza: BZ_CUDNN_INCLUDE not found; set CUDNN_INCLUDE_DIR ..." when the
# cuDNN/cuBLAS wheels (requirements-cuda.txt) are missing: one line says what to install.
MISSING_LIBRARY = re.compile(r"benanza: (BZ_\w+) not found")


def generate(models: list[Path], out: Path, precisions: tuple[str, ...], batch: int | None,
             progress: Progress = QUIET, **options: Any) -> Path | None:
    """``generate_project`` as a step of a longer sequence."""
    with progress.step(f"generating the benchmarks of {len(models)} model(s) into {out}"):
        return generate_project(models, out, precisions, batch, **options)


def build(project: Path, progress: Progress = QUIET, build_dir: Path | None = None, jobs: int | None = None,
          cache: bool | None = None) -> Path:
    """``runner.build_project``; a missing cuDNN/cuBLAS becomes one line naming the fix. Returns the
    build directory."""
    from benanza.measure import runner

    with progress.step(f"building {project} (CMake + Ninja; a first build takes minutes)"):
        try:
            done = runner.build_project(project, build_dir, jobs, cache)
        except BenanzaError as exc:
            missing = MISSING_LIBRARY.search(str(exc))
            if missing:
                raise BenanzaError(f"{project}: {missing.group(1).removeprefix('BZ_')} not found: install the "
                                   "cuDNN/cuBLAS headers and libraries with: pip install -r requirements-cuda.txt "
                                   "(or set CUDNN_INCLUDE_DIR/CUDNN_LIBRARY_DIR)") from None
            raise
    progress.built(project, done)
    return done.out


def run_here(project: Path, db_path: Path, system: dict[str, Any], progress: Progress = QUIET,
             build_dir: Path | None = None, **run_options: Any) -> RunSummary:
    """Run a built project's pending jobs on this machine's GPU into ``db_path`` (``system``: its
    fingerprint, ``measure.system.fingerprint(bandwidth=True)``); ``run_options`` go to ``runner.run``
    (timeout_s, force, l2, max_reps, max_engines)."""
    from benanza.library import L2
    from benanza.measure import runner
    from benanza.store import db as perfdb
    from benanza.store.db import DatabaseSink

    db = perfdb.open_db(db_path)
    l2 = run_options.get("l2", L2.WARM.value)
    jobs = runner.jobs_to_run(runner.manifest_jobs(runner.load_manifest(project), l2), l2)
    with progress.running(project, sum(len(j) for j in jobs.values())) as bar:
        summary = runner.run(project, DatabaseSink(db), progress=lambda outcome, _: bar.advance(outcome),
                             build_dir=build_dir, system=system, **run_options)
    progress.ran(project, summary)
    return summary


def measure_here(projects: list[Path], db_path: Path, system: dict[str, Any], progress: Progress = QUIET,
                 build_dir: Path | None = None, build_jobs: int | None = None, build_cache: bool | None = None,
                 **run_options: Any) -> list[RunSummary]:
    """Build each project and run it on this machine's GPU (``run_here``); one summary per project."""
    from benanza.store import db as perfdb

    perfdb.open_db(db_path)  # created before the first build, as a run that stops in a build leaves it
    return [run_here(project, db_path, system, progress, build(project, progress, build_dir, build_jobs, build_cache),
                     **run_options) for project in projects]


def measure_on_cluster(projects: list[Path], db_path: Path, address: str | None, scheduler_file: Path | None,
                       progress: Progress = QUIET, build_dir: Path | None = None, build_jobs: int | None = None,
                       build_cache: bool | None = None, **run_options: Any) -> list[CampaignSummary]:
    """Build each project here and run it on a Dask cluster's GPUs into ``db_path``, which this process
    alone writes; ``run_options`` go to ``cluster.run_campaign``. Dask missing, or no scheduler, is said
    before anything is built. One summary per project."""
    from benanza.measure import cluster
    from benanza.store import db as perfdb
    from benanza.store.db import DatabaseSink

    cluster.require_dask(local=address == "local")
    dask = cluster.connect(address, scheduler_file)
    summaries = []
    try:
        db = perfdb.open_db(db_path)
        built = [(project, build(project, progress, build_dir, build_jobs, build_cache)) for project in projects]
        for project, out in built:
            with progress.running(project, None) as bar:
                summary = cluster.run_campaign(project, DatabaseSink(db), dask.client, build_dir=out,
                                               progress=lambda outcome, worker: bar.advance(outcome, worker.name),
                                               on_planned=bar.planned, **run_options)
            progress.ran(project, summary)
            summaries.append(summary)
    finally:
        unclean = dask.close()
        if unclean:
            progress.warned(unclean)
    return summaries


def failed(summaries: list[RunSummary] | list[CampaignSummary]) -> bool:
    """Whether an executable of any project could not run (its errors are in its summary)."""
    return any(summary.errors for summary in summaries)


def measure(projects: list[Path], models: list[Path], db_path: Path, precisions: tuple[str, ...],
            batch: int | None, project_dir: Path, progress: Progress = QUIET, cluster: str | None = None,
            scheduler_file: Path | None = None, shard_jobs: int | None = None, build_dir: Path | None = None,
            build_jobs: int | None = None, build_cache: bool | None = None, apis: list[Any] | None = None,
            seq_len: int | None = None, **run_options: Any) -> list[Any]:
    """``benanza run``: generate one project for ``models`` (into ``project_dir``) beside the given
    ``projects``, build each and run it, on a Dask cluster (``cluster``: an address or 'local', or
    ``scheduler_file``) or on this machine's GPU, which is checked before anything is generated.
    One summary per project (RunSummary, or CampaignSummary on a cluster)."""
    from benanza.measure import system

    projects = list(projects)
    if cluster or scheduler_file:
        if models:
            projects.append(generate(models, project_dir, precisions, batch, progress, apis=apis, seq_len=seq_len))
        return measure_on_cluster(projects, db_path, cluster, scheduler_file, progress, build_dir, build_jobs,
                                  build_cache, shard_jobs=shard_jobs, **run_options)
    fingerprint = system.fingerprint(bandwidth=True)
    if not fingerprint["usable"]:
        raise BenanzaError(f"no usable NVIDIA GPU ({fingerprint['reason']}); nothing was built, run or written")
    if models:
        projects.append(generate(models, project_dir, precisions, batch, progress, apis=apis, seq_len=seq_len))
    return measure_here(projects, db_path, fingerprint, progress, build_dir, build_jobs, build_cache, **run_options)


@dataclass(frozen=True)
class PipelineRun:
    """What ``pipeline`` did: the project, the summaries of what it measured, the analysis, and the
    seconds each step took (where an answer's time goes: issue 32)."""

    project: Path
    summaries: tuple[Any, ...] = ()  # RunSummary, or CampaignSummary on a cluster, per measured project
    report: Report | None = None  # with a bundle and one model file
    failed: bool = False  # an executable could not run on the cluster: nothing was analyzed
    steps_s: dict[str, float] = field(default_factory=dict)

    @property
    def timed_gpu_s(self) -> float:
        """The measured jobs' timed repetitions on the GPU: what the measuring steps could not do without."""
        return sum(getattr(s, "total", s).timed_gpu_s for s in self.summaries)

    @property
    def job_phases_s(self) -> dict[str, float]:
        """Where the measured jobs' time went, per ``campaign.JOB_PHASES`` phase, in seconds: the measuring
        steps' wall beyond these is the runner's own (between jobs)."""
        from benanza.measure.campaign import job_phases

        summed: dict[str, float] = {}
        for s in self.summaries:
            for phase, ms in getattr(s, "total", s).phases_ms.items():
                summed[phase] = summed.get(phase, 0.0) + ms
        return {k: round(v / 1e3, 3) for k, v in job_phases(summed).items()}


def pipeline(model: Path, db_path: Path, precisions: tuple[str, ...], batch: int | None, seq_len: int | None,
             project_dir: Path, timeout_s: float, bundle: Path | None = None, executed_calls: bool = False,
             build_jobs: int | None = None, build_cache: bool | None = None, cluster: str | None = None,
             scheduler_file: Path | None = None, shard_jobs: int | None = None,
             max_engines: int | None = None, progress: Progress = QUIET) -> PipelineRun:
    """``benanza pipeline``: generate one project of ``model`` (a file, or a directory of them), build it,
    run it (on a cluster, or on this GPU: without a usable one it stops after the build), then with
    ``executed_calls`` the calls ``bundle`` logged that the database lacks (PROJECT_DIR-executed), and
    analyze ``model`` against ``bundle``. ``max_engines``: the plan's graph-API jobs measure the heuristics'
    first N engine configs (the profile's calls name theirs and ignore it)."""
    from benanza.measure import system
    from benanza.workflows.analysis import analyze_model

    models = sorted(model.glob("*.onnx")) if model.is_dir() else [model]
    if not models:
        raise BenanzaError(f"{model}: no *.onnx files")
    clock = Phases()
    project = generate(models, project_dir, precisions, batch, progress, seq_len=seq_len)
    clock.lap("generate")
    build(project, progress, jobs=build_jobs, cache=build_cache)
    progress.said(f"built {project}")
    clock.lap("build")
    summaries: list[Any] = []
    if cluster or scheduler_file:  # the cluster's workers measure; this process writes db_path
        summaries = measure_on_cluster([project], db_path, cluster, scheduler_file, progress, timeout_s=timeout_s,
                                       shard_jobs=shard_jobs, max_engines=max_engines)
        clock.lap("measure the plan")
        if failed(summaries):
            return PipelineRun(project, tuple(summaries), failed=True, steps_s=clock.times)
    else:
        fingerprint = system.fingerprint(bandwidth=True)
        if not fingerprint.get("usable"):
            progress.warned(f"no usable NVIDIA GPU ({fingerprint.get('reason', 'unknown reason')}): stopping after "
                            "the build")
            return PipelineRun(project, steps_s=clock.times)
        clock.lap("system fingerprint")
        summaries = [run_here(project, db_path, fingerprint, progress, timeout_s=timeout_s, max_engines=max_engines)]
        clock.lap("measure the plan")
        if executed_calls and bundle is not None:  # the library calls the framework ran, where the plan lacks them
            from benanza.store.systems import skip_predicate

            out = project_dir.with_name(f"{project_dir.name}-executed")
            with progress.step(f"generating the calls {bundle} logged into {out}"):
                executed = generate_executed_project(model, (bundle,), out, skip_predicate(db_path, None))
            if executed is not None:
                build(executed, progress, jobs=build_jobs, cache=build_cache)
            clock.lap("generate and build the profile's calls")
            if executed is not None:
                summaries.append(run_here(executed, db_path, fingerprint, progress, timeout_s=timeout_s))
                clock.lap("measure the profile's calls")
    report = None
    if bundle is not None and model.is_file():
        with progress.step(f"analyzing {model.name} against {db_path}"):
            report, _ = analyze_model(model, db_path, bundle, batch=batch, seq_len=seq_len)
        clock.lap("analyze")
    return PipelineRun(project, tuple(summaries), report, steps_s=clock.times)
