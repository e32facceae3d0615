"""The ``benanza`` command group; each command module registers itself on it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from benanza import __version__
from benanza.errors import BenanzaError

console = Console()
err_console = Console(stderr=True)


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
            # escaped: a message quoting a name or a command (pip install 'benanza[dask]') is not markup
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            sys.exit(1)

    return wrapper
