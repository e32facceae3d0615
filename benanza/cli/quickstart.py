"""``benanza quickstart``: the README's main job in one command."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from benanza.analyze.headline import figures, top_gaps
from benanza.analyze.tables import Report
from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, parse_precisions
from benanza.cli.progress import ConsoleProgress
from benanza.cli.run import cluster_options
from benanza.plain_text import line
from benanza.report import print_report
from benanza.report.fmt import cell
from benanza.workflows.quickstart import QuickstartProgress, quickstart


class _Lines(ConsoleProgress, QuickstartProgress):
    """Each model's headline in one line as it is analyzed, or its full report with --verbose."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def analyzed(self, name: str, report: Report, page: Path) -> None:
        if self.verbose:
            print_report(report, console, top=5)
            console.print(line(f"wrote {page}"), highlight=False)
        else:
            console.print(line(headline_line(name, report, page)), highlight=False, soft_wrap=True)


@main.command("quickstart")
@click.argument("models_dir", type=ExistingPath(file_okay=False, path_type=Path),
                default=Path("models/zoo"))
@click.option("--out", type=CheckedPath(file_okay=False, path_type=Path), default=Path("out"), show_default=True,
              help="Where the generated project, the database (on a GPU) and the HTML reports go.")
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True,
              help="Precisions to benchmark (GPU machines only).")
@click.option("-v", "--verbose", is_flag=True,
              help="Print each model's full report in the terminal too (else one line per model; the full "
                   "report is in its HTML page).")
@cluster_options
@friendly_errors
def quickstart_cmd(models_dir: Path, out: Path, dtypes: str, verbose: bool, cluster: str | None,
               scheduler_file: Path | None, shard_jobs: int | None) -> None:
    """Analyze every model of MODELS_DIR: with a GPU, measure first (generate, build, run,
    and a profile of each model in ONNX Runtime or PyTorch; the database starts from the
    shipped one when that was measured on this same system); without one, analyze against
    the shipped H100 database and profile bundles. With --cluster or --scheduler-file the
    cluster's GPUs measure into OUT/perf.db (profiles: this machine's GPU, else shipped).

    Prints one line per model and a summary table across models; each model's full report
    goes to OUT/<model>.html (and to the terminal with --verbose)."""
    precisions = tuple(p.value for p in parse_precisions(dtypes))
    done = quickstart(models_dir, out, precisions, cluster, scheduler_file, shard_jobs, _Lines(verbose))
    if done.failed:
        raise SystemExit(1)
    if done.analyzed:
        console.print(summary_across([(a.name, a.bundle, a.report) for a in done.analyzed]))


def headline_line(name: str, report: Report, page: Path) -> str:
    """A model's headline in one line: its bound, measured share and largest gap, and where the report is."""
    s = report.summary
    gaps = top_gaps(report, 1)
    gap = f"; largest gap {gaps[0][0]} {cell(gaps[0][1], '(ms)')} ms" if gaps else ""
    return (f"{name}: LBL_seq {cell(s.lbl_seq_ms, '(ms)')} ms, "
            f"measured share {cell(s.measured_share, '')}{gap} -> {page}")


def summary_across(reports: list[tuple[str, str, Report]]) -> Table:
    """One row per model: the headline figures and the largest gap, for reading across models."""
    table = Table(title="quickstart summary", title_justify="left")
    labels = [label for label, _, _ in figures(reports[0][2])]
    for column in ("model", "profile", *labels, "largest gap"):
        table.add_column(column, justify="left" if column in ("model", "profile", "largest gap") else "right",
                         overflow="fold")
    for name, bundle, report in reports:
        gaps = top_gaps(report, 1)
        table.add_row(Text(name), Text(bundle), *(Text(cell(value, label)) for label, value, _ in figures(report)),
                      Text(f"{gaps[0][0]} {cell(gaps[0][1], '(ms)')} ms" if gaps else "-"))
    return table
