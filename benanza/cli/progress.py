"""How the CLI shows a workflow's progress: a spinner line for every step that takes more than a
second, the build cache's one line, a bar per run and a table per measured project."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from benanza.cli.main import console, err_console
from benanza.plain_text import labelled, line, one_line, plain
from benanza.workflows import measure

# Summary rows: label -> RunSummary field (jobs first, then the results' own statuses).
SUMMARY_ROWS = (
    ("jobs in manifest", "jobs"), ("skipped (already measured)", "skipped"),
    ("left out (no weights: their warm rows stand for them)", "weightless"), ("ran", "ran"),
    ("completed", "completed"), ("harness errors", "job_errors"), ("crashed", "crashed"), ("timed out", "timeout"),
    ("garbage output", "garbage"),
    ("restarts", "restarts"), ("results stored", "results"), ("ok", "ok"), ("unsupported", "not_supported"),
    ("out of memory", "out_of_memory"), ("failed", "failed"), ("check failed", "check_failed"),
    ("plans loaded from the plan cache", "plans_loaded"), ("plans compiled and kept there", "plans_kept"),
)  # fmt: skip
# only --l2 cold-weights leaves jobs out; only graph-API runs with runtime-compiled engines use the plan cache
ONLY_IF_ANY = frozenset({"weightless", "plans_loaded", "plans_kept"})


def summary_table(summary: Any, title: str) -> Table:
    """A RunSummary's counts, one row each."""
    table = Table("", "count", title=plain(title))
    for label, name in SUMMARY_ROWS:
        if name not in ONLY_IF_ANY or getattr(summary, name):
            table.add_row(label, str(getattr(summary, name)))
    return table


def worker_table(summary: Any, title: str) -> Table:
    """One row per worker of a CampaignSummary (one GPU): its system (id prefix, as ``analyze --system``
    takes it) and its jobs."""
    table = Table(title=title)
    for header in ("worker", "host", "GPU", "system"):
        table.add_column(header, no_wrap=True)
    for header in ("ran", "ok", "crashed", "timeout", "garbage", "restarts", "results"):
        table.add_column(header, justify="right")
    for name, report in sorted(summary.workers.items()):
        s = report.summary
        table.add_row(escape(name), escape(report.host), escape(report.gpu), report.system_id[:8], str(s.ran),
                      str(s.completed), str(s.crashed), str(s.timeout), str(s.garbage), str(s.restarts),
                      str(s.results))
    return table


class _Bar(measure.JobBar):
    def __init__(self, bar: Any, task: Any, name: str) -> None:
        self.bar, self.task, self.name = bar, task, name

    def planned(self, total: int) -> None:
        self.bar.update(self.task, total=total, description=self.name)

    def advance(self, outcome: Any, worker: str | None = None) -> None:
        job = f"{outcome.job.executable}#{outcome.job.index} {outcome.status}"
        self.bar.update(self.task, advance=1, last=job if worker is None else escape(f"{worker}: {job}"))


class ConsoleProgress(measure.Progress):
    """A workflow's progress on the terminal. ``bars``: a progress bar per run; ``title``: a local
    run's table title (default: the project); ``errors``: print a local run's errors under its table
    (a cluster run's are always printed)."""

    def __init__(self, bars: bool = False, title: Callable[[Path, Any], str] | None = None,
                 errors: bool = False) -> None:
        self.bars, self.errors = bars, errors
        self.title = title or (lambda project, _: str(project))

    def step(self, message: str) -> Any:
        return working(message)

    def built(self, project: Path, done: Any) -> None:
        if done.cache_used:
            note = f" (not stored: {done.note})" if done.note else ""
            err_console.print(line(f"built {project} in {done.seconds:.1f} s: {len(done.cached)} executable(s) from "
                                   f"the build cache, {len(done.compiled)} compiled{note}"), highlight=False,
                              soft_wrap=True)
        elif done.note:
            err_console.print(line(f"built {project} without the build cache: {done.note}"), highlight=False,
                              soft_wrap=True)

    @contextmanager
    def running(self, project: Path, total: int | None) -> Iterator[measure.JobBar]:
        if not self.bars:
            yield measure.JobBar()
            return
        import rich.progress as rp  # commands that draw no bar load none of it

        with rp.Progress(rp.TextColumn("[bold]{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn(),
                         rp.TextColumn("{task.fields[last]}"), rp.TimeElapsedColumn(), rp.TimeRemainingColumn(),
                         console=console) as bar:
            name = escape(f"measuring {project.name}")  # a directory name is shown literally, never as markup
            yield _Bar(bar, bar.add_task(name if total is not None else f"{name} (probing workers)", total=total,
                                         last=""), name)

    def ran(self, project: Path, summary: Any) -> None:
        if hasattr(summary, "workers"):  # a cluster's CampaignSummary
            console.print(summary_table(summary.total, f"{project} on {len(summary.systems)} system(s), "
                                                       f"{summary.shards} shards"))
            console.print(worker_table(summary, "per worker (one GPU each)"))
            for error in summary.errors:
                console.print(f"[bold red]error:[/] {escape(error)}", highlight=False, soft_wrap=True)
            return
        console.print(summary_table(summary, self.title(project, summary)))
        for error in summary.errors if self.errors else ():
            console.print(labelled("error:", "bold red", error), highlight=False, soft_wrap=True)

    def said(self, message: str) -> None:
        console.print(plain(message), highlight=False)

    def warned(self, message: str) -> None:
        err_console.print(line(message), highlight=False)


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner with ``message`` on a terminal's stderr while a step runs (nothing in a pipe or log).
    The message names files: it is shown literally (a directory named ``[bold red]`` is no markup)."""
    with err_console.status(Text(one_line(message))):
        yield
