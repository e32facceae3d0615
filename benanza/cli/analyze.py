"""``benanza analyze``: a model against the database and a profile."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from benanza.analyze.inputs import DEFAULT_WHAT_IFS, FAMILIES
from benanza.atomic import STDOUT, check_output
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import (
    CheckedPath,
    ExistingPath,
    database,
    database_label,
    force_option,
    model_or_module,
    parse_precisions,
    parse_what_ifs,
    seq_len_option,
    torch_module_option,
)
from benanza.cli.progress import working
from benanza.plain_text import line
from benanza.report import print_report, write_csv, write_html, write_json, write_trace
from benanza.workflows.analysis import analyze_model


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The analysis builds some 10^5 small objects that live until it ends and are freed by reference
    counting; the cycle collector's passes over them only cost time (about a tenth of a cached call)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@main.command("analyze")
@click.argument("model", required=False, type=ExistingPath(dir_okay=False, path_type=Path))
@torch_module_option
@click.option("--db", "db_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database: .db, .columns.xz or .db.xz "
                   "(default: the shipped H100 database, perfdb/h100.columns.xz).")
@click.option("--profile", "bundle", type=ExistingPath(file_okay=False, path_type=Path),
              help="Profile bundle of MODEL (benanza profile); without one only the bounds are reported.")
@click.option("--system", "system_name", help="System id (prefix) or GPU name, when the database holds several.")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: the bundle's, else the model's).")
@seq_len_option
@click.option("--dtype", "dtypes",
              help="Precisions the bound may use, e.g. fp32,tf32 (default: the profile's recorded settings "
                   "(ORT use_tf32, PyTorch allow_tf32, fp16), else fp32,tf32).")
@click.option("--api", "apis", type=click.Choice(sorted(FAMILIES)), default="both", show_default=True,
              help="cuDNN API families the best policy may use.")
@click.option("--what-if", "what_ifs", default=",".join(w.value for w in DEFAULT_WHAT_IFS), show_default=True,
              help="Changes of numerics the run did not allow, each reported as its own bound beside the headline "
                   "with its accuracy cost, never in it: tf32, fp16, bf16, approx (fp32 algorithms beyond fp32's "
                   "tolerance, e.g. Winograd), comma-separated, or none.")
@click.option("--json", "json_path", type=CheckedPath(dir_okay=False, path_type=Path), help="Write the report as JSON.")
@click.option("--html", "html_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Write a self-contained HTML page with plots.")
@click.option("--csv", "csv_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Write the per-layer table as CSV (op, shapes, measured, as-executed, best, bound, gap, ...).")
@click.option("--trace", "trace_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Write a Chrome/Perfetto trace: model, layers, library calls and kernels on one timeline "
                   "(the profiled run, beside the timed runs' median and the bounds' schedules).")
@force_option
@friendly_errors
def analyze_cmd(model: Path | None, torch_module: str | None, db_path: Path | None, bundle: Path | None,
                system_name: str | None, batch: int | None, seq_len: int | None, dtypes: str | None, apis: str,
                what_ifs: str, json_path: Path | None, html_path: Path | None, csv_path: Path | None,
                trace_path: Path | None, force: bool) -> None:
    """Lower-bound latency of MODEL on a system and where a framework run loses time.

    LBL (sequential and parallel) of the cheapest equivalent execution from measured
    implementations (the headline), layer-wise under the best, as-executed and heuristic policies,
    the Benanza ratio (LBL_seq over the run's kernel-only GPU time), the framework-overhead,
    algorithm-selection, layout, fusion and parallelism gaps under the run's own numerics, and
    precision what-ifs beside them (docs/METRICS.md). Refuses a bundle of another model, a profile
    that maps onto fewer than half of the layers, a bundle whose figures contradict each other
    (docs/PROFILES.md "Guarantees") and a database without rows for the batch/precision.
    """
    outputs = ((json_path, write_json, "json"), (html_path, write_html, "html"), (csv_path, write_csv, "csv"),
               (trace_path, write_trace, "trace"))
    for path, _, kind in outputs:  # before any work: never over an input or someone else's file
        if path:
            check_output(path, kind, (model, bundle, db_path), force)
    # with an output on stdout ("-") the human-readable report goes to stderr
    out = err_console if any(str(path) == STDOUT for path, _, _ in outputs) else console
    model = model_or_module(model, torch_module, batch)
    with no_cycle_collection():
        label = database_label(db_path)
        precisions = parse_precisions(dtypes) if dtypes is not None else None
        what_if = parse_what_ifs(what_ifs)
        with working(f"analyzing {model.name}" + (f" against {bundle.name}" if bundle else "")):
            report, mapping = analyze_model(model, database(db_path), bundle, system_name, batch, precisions, apis,
                                            db_label=label, seq_len=seq_len, what_if=what_if)
        print_report(report, out)
        if mapping is not None:  # what the bundle lacks or could not link, as `profile --map-only` says it
            for index, why in mapping.unmapped_layers:
                err_console.print(line(f"unmapped layer {index}: {why}"), highlight=False)
            for note in mapping.notes:
                err_console.print(line(f"note: {note}"), highlight=False)
        for path, write, _ in outputs:
            if path:
                write(report, path)
                out.print(line(f"wrote {path}"), highlight=False)
