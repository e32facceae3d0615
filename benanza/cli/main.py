"""The ``benanza`` command group; each command module registers itself on it when first needed."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from benanza import __version__
from benanza.errors import BenanzaError
from benanza.plain_text import labelled, plain

PIPE_WIDTH = 400  # a pipe or a file gets long lines (tables at their natural width), never 80 columns


def _console(stderr: bool = False) -> Console:
    """A terminal keeps its own width; piped output is wide enough that tables do not fold."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=max(probe.width, PIPE_WIDTH))


console = _console()
err_console = _console(stderr=True)


# command name -> the benanza.cli module that defines it. A command's module (and the heavy
# stages it imports: onnx, the runner, sqlite-utils) is imported only when that command runs or
# the help lists the commands, so that ``benanza analyze`` does not pay for ``benanza run``.
COMMAND_MODULES: dict[str, str] = {
    "analyze": "analyze", "build-cache": "build_cache", "bundles": "compare", "compare": "compare", "db": "db",
    "generate": "generate", "layers": "models", "models": "models", "pipeline": "pipeline", "plan-cache": "build_cache",
    "profile": "profile", "quickstart": "quickstart", "replay": "replay", "run": "run",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (``COMMAND_MODULES``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMAND_MODULES) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            importlib.import_module(f"benanza.cli.{COMMAND_MODULES[cmd_name]}")  # registers it on ``main``
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benanza")
def main() -> None:
    """benanza: generate cuDNN/cuBLAS micro-benchmarks from ONNX models, measure them
    into a performance database, and compute the lower-bound latency of a framework run."""


INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn BenanzaError into one line on stderr and exit code 1 (no traceback); Ctrl-C into one line
    and exit code 130, the same in every command."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BenanzaError as exc:
            err_console.print(labelled("error:", "bold red", exc.message), highlight=False, soft_wrap=True)
            for line in exc.detail.splitlines():
                err_console.print(plain(f"  {line}"), highlight=False, soft_wrap=True)
            sys.exit(1)
        except KeyboardInterrupt:
            err_console.print(labelled("interrupted:", "bold red", "stopped by Ctrl-C; outputs are whole or absent"),
                              highlight=False, soft_wrap=True)
            sys.exit(INTERRUPTED)
        except OSError as exc:  # the system refused a write or a read: a full disk, a read-only place, /dev/full
            if exc.filename is None:  # a terminal writer's: stdout takes no more, so nothing more goes there
                _silence_stdout()
            where = exc.filename if exc.filename is not None else "cannot write the output"
            err_console.print(labelled("error:", "bold red", f"{where}: {exc.strerror or exc}"),
                              highlight=False, soft_wrap=True)
            sys.exit(1)

    return wrapper


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit adds no second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind stdout (a test runner's capture)
        pass
