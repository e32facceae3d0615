"""A progress line for every step that takes more than a second, and the build step's one-line errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from benanza.cli.main import console, err_console
from benanza.errors import BenanzaError
from benanza.plain_text import line, one_line

# CMakeLists.txt stops with "benanza: BZ_CUDNN_INCLUDE not found; set CUDNN_INCLUDE_DIR ..." when the
# cuDNN/cuBLAS wheels (requirements-cuda.txt) are missing: one line says what to install.
MISSING_LIBRARY = re.compile(r"benanza: (BZ_\w+) not found")


def build(project: Path, build_dir: Path | None = None, jobs: int | None = None, cache: bool | None = None) -> Path:
    """``runner.build_project`` under a progress line, then one line saying what the build cache gave; a
    missing cuDNN/cuBLAS becomes one line naming the fix."""
    from benanza.measure import runner

    with err_console.status(Text(one_line(f"building {project} (CMake + Ninja; a first build takes minutes)"))):
        try:
            done = runner.build_project(project, build_dir, jobs, cache)
        except BenanzaError as exc:
            missing = MISSING_LIBRARY.search(str(exc))
            if missing:
                raise BenanzaError(f"{project}: {missing.group(1).removeprefix('BZ_')} not found: install the "
                                   "cuDNN/cuBLAS headers and libraries with: pip install -r requirements-cuda.txt "
                                   "(or set CUDNN_INCLUDE_DIR/CUDNN_LIBRARY_DIR)") from None
            raise
    if done.cache_used:
        note = f" (not stored: {done.note})" if done.note else ""
        err_console.print(line(f"built {project} in {done.seconds:.1f} s: {len(done.cached)} executable(s) from the "
                                f"build cache, {len(done.compiled)} compiled{note}"), highlight=False, soft_wrap=True)
    elif done.note:
        err_console.print(line(f"built {project} without the build cache: {done.note}"), highlight=False,
                          soft_wrap=True)
    return done.out


def generate(models: list[Path], out: Path, precisions: tuple[str, ...], batch: int | None,
             **options: Any) -> Path | None:
    """``workflows.measure.generate_project`` under a progress line."""
    from benanza.workflows.measure import generate_project

    with working(f"generating the benchmarks of {len(models)} model(s) into {out}"):
        return generate_project(models, out, precisions, batch, **options)


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner with ``message`` on a terminal's stderr while a step runs (nothing in a pipe or log).
    The message names files: it is shown literally (a directory named ``[bold red]`` is no markup)."""
    with err_console.status(Text(one_line(message))):
        yield


class JobBar:
    """A measuring step's progress callback (``runner.run``'s ``progress``): advances the bar, names the
    last job, and sums the jobs' timed GPU seconds (the harness's ``timed_gpu``), the step's floor."""

    def __init__(self, bar: Progress, task: Any) -> None:
        self.bar, self.task, self.timed_gpu_s = bar, task, 0.0

    def __call__(self, outcome: Any, _summary: Any) -> None:
        self.timed_gpu_s += float(outcome.phases.get("timed_gpu", 0.0)) / 1e3
        self.bar.update(self.task, advance=1,
                        last=escape(f"{outcome.job.executable}#{outcome.job.index} {outcome.status}"))


@contextmanager
def measuring(description: str, total: int) -> Iterator[JobBar]:
    """The bar of a measuring step: ``description`` (the step, literally), jobs done of ``total``, the last
    job, the time elapsed and an estimate of the time left."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=console) as bar:
        yield JobBar(bar, bar.add_task(escape(description), total=total, last=""))
