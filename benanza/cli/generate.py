"""``benanza generate``: models -> a CMake project of cuDNN/cuBLAS benchmarks (plan, then codegen)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import (
    CheckedPath,
    ExistingPath,
    model_or_module,
    parse_precisions,
    seq_len_option,
    torch_module_option,
)
from benanza.cli.progress import working
from benanza.errors import BenanzaError
from benanza.generate import codegen
from benanza.generate.plan import ALREADY_MEASURED, EXECUTABLES, UNNAMED, Plan, plan, plan_executed
from benanza.library import Api, Precision
from benanza.plain_text import labelled, plain
from benanza.store.systems import skip_predicate
from benanza.workflows.measure import load, profile_calls

# --api accepts the executable slug (conv_fwd) or the API's own name (cudnnConvolutionForward).
API_NAMES: dict[str, Api] = {
    **{exe.removeprefix("bench_"): api for api, exe in EXECUTABLES.items()},
    **{api.value: api for api in Api},
}


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_batches(text: str) -> list[int]:
    try:
        batches = [int(b) for b in _csv(text)]
    except ValueError:
        raise BenanzaError(f"--batch: expected comma-separated integers, got {text!r}") from None
    if not batches or any(b < 1 for b in batches):
        raise BenanzaError(f"--batch: batches must be >= 1, got {text!r}")
    return list(dict.fromkeys(batches))


def _batches(text: str) -> str:
    """--batch checked as click checks every other command's (a bad value: usage line, exit 2)."""
    try:
        parse_batches(text)
    except BenanzaError as exc:
        raise click.BadParameter(str(exc).removeprefix("--batch: "), param_hint="'--batch'") from None
    return text


def parse_apis(text: str | None) -> list[Api] | None:
    if text is None:
        return None
    bad = [a for a in _csv(text) if a not in API_NAMES]
    if bad or not _csv(text):
        choices = ", ".join(exe.removeprefix("bench_") for exe in EXECUTABLES.values())
        raise BenanzaError(f"--api: unknown {', '.join(bad) or 'empty list'}; choose from {choices}")
    return [API_NAMES[a] for a in dict.fromkeys(_csv(text))]


def summary(p: Plan, manifest: codegen.Manifest, out: Path) -> list[Any]:
    """Tables for the terminal: jobs per executable, and dropped candidates by reason."""
    jobs = Table("executable", "api", "jobs", "benchmarks", title=plain(f"benchmarks in {out}"))
    for exe, spec in manifest.executables.items():
        count = sum(1 for b in manifest.benchmarks if b["executable"] == exe)
        jobs.add_row(exe, spec["api"], str(spec["num_jobs"]), str(count))
    jobs.add_row("total", "", str(len(manifest.jobs)), str(len(manifest.benchmarks)))
    dropped = Table("reason", "candidates", title="not generated")
    for reason, count in sorted(p.drop_reasons().items(), key=lambda kv: -kv[1]):
        dropped.add_row(reason, str(count))
    return [jobs, dropped]


@main.command("generate")
@click.argument("model", required=False, type=ExistingPath(path_type=Path))
@torch_module_option
@click.option("--out", "out_dir", required=True, type=CheckedPath(file_okay=False, path_type=Path),
              help="Directory of the generated CMake project (created; unchanged files are left alone).")
@click.option("--batch", default="1", show_default=True, callback=lambda _ctx, _param, value: _batches(value),
              help="Comma-separated batch sizes, e.g. 1,8,64.")
@seq_len_option
@click.option("--dtype", default="fp32", show_default=True,
              help=f"Comma-separated precisions (any case): {', '.join(p.value for p in Precision)}.")
@click.option("--api", "apis", default=None,
              help="Comma-separated APIs to generate (e.g. conv_fwd,conv_bias_act); default all.")
@click.option("--db", "db_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database: skip benchmarks it already holds for the system.")
@click.option("--system", default=None, help="System id (prefix) or GPU name in --db (default: its only system).")
@click.option("--from-profile", "bundles", multiple=True,
              type=ExistingPath(file_okay=False, path_type=Path),
              help="Benchmark exactly the library calls logged in this profile bundle (the engine configs the "
                   "framework chose, at the bundle's batch and precision; --batch, --dtype and --api are not "
                   "used). Repeatable.")
@friendly_errors
def generate(model: Path | None, torch_module: str | None, out_dir: Path, batch: str, seq_len: int | None, dtype: str,
             apis: str | None, db_path: Path | None, system: str | None, bundles: tuple[Path, ...]) -> None:
    """Plan and generate the micro-benchmarks of MODEL (an .onnx file or a directory of them), or of a
    PyTorch module (--torch-module) exported at each --batch."""
    batches, precisions, api_list = parse_batches(batch), parse_precisions(dtype), parse_apis(apis)
    if torch_module is not None:
        if len(batches) > 1:  # one export per batch: a model whose export hard-codes its batch needs them all
            raise BenanzaError("--torch-module: give one --batch per generate (each batch is its own export)")
        if bundles:
            raise BenanzaError("--torch-module: --from-profile takes the bundle's own export; give it as MODEL")
    model = model_or_module(model, torch_module, batches[0] if torch_module else None)
    skip = skip_predicate(db_path, system)
    with working(f"planning the benchmarks of {model}"):
        if bundles:
            p = plan_executed(profile_calls(model, bundles), skip=skip)
        else:
            models, errors = load(model, batches, seq_len)
            for line in errors:
                console.print(labelled("skipped:", "yellow", line), highlight=False)
            p = plan(models, precisions, apis=api_list, skip=skip, ceilings=api_list is None)
    held = sum(1 for d in p.dropped if d.reason in (ALREADY_MEASURED, UNNAMED))
    if not p.jobs and held:  # a finished campaign run again: success, nothing to do
        console.print(plain(f"{model}: nothing to generate: the database already holds all {held} job(s) "
                            "asked for (--force on benanza run measures again)"), highlight=False)
        return
    if not p.jobs:
        raise BenanzaError(f"{model}: nothing to generate ({len(p.dropped)} candidates dropped: "
                           f"{'; '.join(sorted(p.drop_reasons())) or 'no layers'})")
    command = shlex.join(["benanza", "generate", str(model), "--out", str(out_dir), "--batch", batch,
                          *(["--seq-len", str(seq_len)] if seq_len else []), "--dtype", dtype,
                          *(["--api", apis] if apis else []), *(["--db", str(db_path)] if db_path else []),
                          *(a for b in bundles for a in ("--from-profile", str(b)))])
    manifest = codegen.generate(p, out_dir, command)
    for table in summary(p, manifest, out_dir):
        console.print(table)
    db_next = str(db_path) if db_path and db_path.suffix != ".xz" else "perf.db"
    console.print(plain(f"{len(manifest.written)} files written; next, build and measure on a GPU: "
                        f"benanza run {shlex.quote(str(out_dir))} --db {shlex.quote(db_next)}"),
                  highlight=False, soft_wrap=True)
