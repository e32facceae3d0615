"""Every command a refusal or a note suggests runs as written (issue 33).

``conftest.run_every_suggestion`` wraps ``CliRunner.invoke`` for the whole suite: each output line
that starts with ``error:`` or ``note:`` and names a benanza command ends with a suggestion, and the
first time a worker sees one it runs it here, as written, from a new empty directory. It must not hold
a placeholder (MODEL, PATH, BUNDLE ...), must not be a usage error (exit 2) or a traceback, and must
succeed or stop only because this machine has no GPU. The test whose command printed it fails
otherwise, naming the suggestion and what went wrong.

Where a GPU is present, the commands that would measure on it (run, profile, pipeline) are parsed,
not run: the suite must not spend minutes measuring. CI has no GPU, so there they run.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import tempfile
from collections.abc import Callable, Iterator, Sequence

import click
from click.testing import CliRunner, Result

from benanza.cli.main import COMMAND_MODULES, main

COMMANDS = "|".join(map(re.escape, COMMAND_MODULES))
LINE = re.compile(rf"^\s*(?:error|note):.*?\bbenanza ((?:{COMMANDS}) .*)$")
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*(?:\.\.\.|…)?")
NO_GPU = re.compile(r"^error: no usable (?:NVIDIA|CUDA) GPU", re.M)
GPU_COMMANDS = frozenset({"run", "profile", "pipeline"})

# suggestion (its arguments) -> None when it ran as written, else what went wrong; one worker's memory
SEEN: dict[tuple[str, ...], str | None] = {}


def suggestions(output: str) -> list[tuple[str, ...]]:
    """The commands that error and note lines of ``output`` end with, as arguments after ``benanza``."""
    found = []
    for text in output.splitlines():
        hit = LINE.match(text)
        if hit:
            try:
                found.append(tuple(shlex.split(hit.group(1))))
            except ValueError as exc:  # an unbalanced quote: it cannot run as written either
                found.append(("<unparsable>", hit.group(1), str(exc)))
    return found


def _parse_only(args: Sequence[str]) -> None:
    """Parse a top-level command's arguments as click would (its options, types and checks), run nothing."""
    ctx = click.Context(main, info_name="benanza")
    command = main.get_command(ctx, args[0])  # imports the lazy command's module
    if command is None:
        raise click.UsageError(f"no such command {args[0]!r}")
    command.make_context(args[0], list(args[1:]), parent=ctx).close()


def problem(args: tuple[str, ...], invoke: Callable[..., Result]) -> str | None:
    """Why ``benanza ARGS`` does not run as written, or None when it does (or stops only for want of a GPU)."""
    if args[0] == "<unparsable>":
        return f"cannot be split into arguments ({args[2]})"
    holes = [a for a in args[1:] if PLACEHOLDER.fullmatch(a)]
    if holes:
        return f"holds placeholder(s) {', '.join(holes)} that the user must fill in"
    from conftest import GPU

    if GPU and args[0] in GPU_COMMANDS:
        try:
            _parse_only(args)
        except click.ClickException as exc:
            return f"does not parse: {exc.format_message()}"
        except Exception as exc:  # a path check's one-line error (CheckedPath)
            return f"does not parse: {exc}"
        return None
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        result = invoke(CliRunner(), main, list(args))
    if result.exit_code == 0:
        return None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"raised {result.exception!r}"
    if result.exit_code == 1 and NO_GPU.search(result.output):
        return None
    tail = " | ".join(result.output.strip().splitlines()[-3:])
    return f"exit {result.exit_code}: {tail}"


_running = False


@contextlib.contextmanager
def checking(patch, invoke: Callable[..., Result]) -> Iterator[None]:
    """Within: every ``CliRunner.invoke`` has the suggestions of its output run as written (once per worker)."""

    def checked(self: CliRunner, cli, args=None, *rest, **kwargs) -> Result:
        global _running
        result = invoke(self, cli, args, *rest, **kwargs)
        if _running:  # a suggestion's own output: not followed further
            return result
        for suggestion in suggestions(result.output):
            if suggestion not in SEEN:
                _running = True
                try:
                    SEEN[suggestion] = problem(suggestion, invoke)
                finally:
                    _running = False
            if SEEN[suggestion] is not None:
                shown = " ".join(args) if isinstance(args, list | tuple) else str(args)
                raise AssertionError(f"`benanza {shown}` suggested `{shlex.join(['benanza', *suggestion])}`, "
                                     f"which does not run as written: {SEEN[suggestion]}")
        return result

    patch.setattr(CliRunner, "invoke", checked)
    yield
