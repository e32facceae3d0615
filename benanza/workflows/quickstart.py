"""``benanza quickstart``, the README's main job: measure the models of a directory where a GPU is
(generate, build, run; a profile of each model in ONNX Runtime or PyTorch), else take the shipped
H100 database and profile bundles; analyze each model and write its HTML page."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from benanza.analyze.tables import Report
from benanza.errors import BenanzaError
from benanza.profile.bundle import Framework
from benanza.workflows.measure import QUIET, Progress, build, failed, generate, measure_on_cluster, run_here

# Frameworks the quickstart profiles with on a GPU, in order of preference.
FRAMEWORKS = (Framework.ONNXRUNTIME, Framework.PYTORCH)
TIMEOUT_S = 300.0  # per job


class QuickstartProgress(Progress):
    """``Progress``, and each model as soon as it is analyzed."""

    def analyzed(self, name: str, report: Report, page: Path) -> None:
        """Model ``name``'s analysis, whose HTML page is ``page``."""


@dataclass(frozen=True)
class Analyzed:
    """One model's answer: its name, the bundle it was analyzed against ("-": none), its report and page."""

    name: str
    bundle: str
    report: Report
    page: Path


@dataclass(frozen=True)
class QuickstartRun:
    analyzed: list[Analyzed] = field(default_factory=list)
    failed: bool = False  # an executable could not run on the cluster: nothing was analyzed


def record_bundle(model: Path, bundles: Path, progress: Progress = QUIET) -> Path | None:
    """Profile MODEL at batch 1 in fp32 on this GPU: ONNX Runtime's CUDA EP, else PyTorch.

    A framework that is missing or fails is reported in one line; the model is then
    analyzed without a profile (bounds only) rather than stopping the whole job.
    """
    from benanza.profile.capture import capture

    for framework in FRAMEWORKS:
        bundle = bundles / f"{model.stem}_b1_{framework.value}_fp32"
        if bundle.is_dir() and (bundle / "meta.json").is_file():
            return bundle  # recorded by an earlier quickstart
        shutil.rmtree(bundle, ignore_errors=True)
        try:
            return capture(model, framework.value, 1, "fp32", bundle, runs=30, warmup=10, profiled_runs=5)
        except BenanzaError as exc:
            shutil.rmtree(bundle, ignore_errors=True)  # a failed capture leaves no half bundle behind
            progress.warned(f"{model.name}: no {framework.value} profile: {exc}")
    return None


def quickstart(models_dir: Path, out: Path, precisions: tuple[str, ...], cluster: str | None = None,
               scheduler_file: Path | None = None, shard_jobs: int | None = None,
               progress: QuickstartProgress | None = None) -> QuickstartRun:
    """Analyze every model of ``models_dir`` into ``out``: with a GPU, measure first into OUT/perf.db
    (started from the shipped database when that was measured on this same system) and profile each
    model; with ``cluster`` or ``scheduler_file`` the cluster's GPUs measure (profiles: this machine's
    GPU, else shipped); without either, the shipped database and bundles. A model that cannot be
    analyzed is said and skipped; each analyzed one's page is OUT/<model>.html."""
    from benanza.measure import system
    from benanza.measure.system import system_id
    from benanza.profile.catalog import shipped_bundle
    from benanza.report import write_html
    from benanza.store import db as perfdb
    from benanza.store.shipped import shipped_db
    from benanza.store.systems import seed_database
    from benanza.workflows.analysis import analyze_model

    progress = progress or QuickstartProgress()
    models = sorted(models_dir.glob("*.onnx"))
    if not models:
        raise BenanzaError(f"{models_dir}: no *.onnx files; get some with: benanza models zoo "
                           f"{shlex.quote(str(models_dir))}")
    out.mkdir(parents=True, exist_ok=True)
    gpu = bool(system.fingerprint().get("usable"))
    if cluster or scheduler_file:
        db_path = out / "perf.db"
        project = generate(models, out / "project", precisions, None, progress)
        if failed(measure_on_cluster([project], db_path, cluster, scheduler_file, progress, timeout_s=TIMEOUT_S,
                                     shard_jobs=shard_jobs)):
            return QuickstartRun(failed=True)
    elif gpu:
        db_path = out / "perf.db"
        here = system.fingerprint(bandwidth=True)
        if seed_database(db_path, here):
            progress.warned(f"{db_path}: started from the shipped database, measured on this same system (GPU, "
                            "driver, CUDA, cuDNN, cuBLAS): its jobs are not measured again")
        db = perfdb.open_db(db_path)
        project = generate(models, out / "project", precisions, None, progress,
                           skip=perfdb.measured(db, system_id(here)))
        if project is None:
            progress.said(f"{db_path}: holds every benchmark of these models already")
        else:
            run_here(project, db_path, here, progress, build(project, progress), timeout_s=TIMEOUT_S)
    else:
        db_path = shipped_db()
        progress.warned(f"no usable NVIDIA GPU here: analyzing with the shipped database {db_path}")
    done = []
    for model in models:
        bundle = record_bundle(model, out / "bundles", progress) if gpu else shipped_bundle(model)
        try:
            with progress.step(f"analyzing {model.name}" + (f" against {bundle.name}" if bundle else "")):
                report, _ = analyze_model(model, db_path, bundle, db_label=str(out / "perf.db"))
        except BenanzaError as exc:  # one model without data must not hide the others' results
            progress.warned(f"{model.name}: not analyzed: {exc}")
            continue
        page = write_html(report, out / f"{model.stem}.html")
        progress.analyzed(model.stem, report, page)
        done.append(Analyzed(model.stem, bundle.name if bundle else "-", report, page))
    return QuickstartRun(done)
