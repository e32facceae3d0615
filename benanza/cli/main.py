"""The ``benanza`` command group; each command module registers itself on it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from benanza import __version__
from benanza.errors import BenanzaError
from benanza.plain_text import labelled

PIPE_WIDTH = 400  # a pipe or a file gets long lines (tables at their natural width), never 80 columns


def _console(stderr: bool = False) -> Console:
    """A terminal keeps its own width; piped output is wide enough that tables do not fold."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=max(probe.width, PIPE_WIDTH))


console = _console()
err_console = _console(stderr=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benanza")
def main() -> None:
    """benanza: generate cuDNN/cuBLAS micro-benchmarks from ONNX models, measure them
    into a performance database, and compute the lower-bound latency of a framework run."""


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn BenanzaError into one line on stderr and exit code 1 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BenanzaError as exc:
            err_console.print(labelled("error:", "bold red", exc), highlight=False, soft_wrap=True)
            sys.exit(1)

    return wrapper
