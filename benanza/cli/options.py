"""Flag parsers shared by every command, so a bad value reads the same everywhere."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.paths import cache_dir, perfdb_dir
from benanza.store.packed import PACKED_SUFFIX

if TYPE_CHECKING:
    from benanza.analyze.inputs import WhatIf


class InputError(click.ClickException):
    """A path argument that does not exist or is of the wrong kind: bad input, so exit code 1 and one
    ``error:`` line as every other refusal (click's usage errors exit 2 with three lines)."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        from benanza.cli.main import err_console
        from benanza.plain_text import labelled

        err_console.print(labelled("error:", "bold red", self.message), highlight=False, soft_wrap=True)


class CheckedPath(click.Path):
    """``click.Path`` whose refusal (missing, a directory where a file belongs, unwritable) is an
    ``InputError`` naming the path: one line and exit 1, as every other bad input."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if str(value) == "-" and not self.file_okay:  # "-" is stdout for a file output; no directory is
            raise InputError("-: a directory cannot go to stdout; give a directory path")
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            why = ("no such file or directory" if self.exists and not os.path.lexists(value)
                   else "is a directory, not a file" if os.path.isdir(value) and not self.dir_okay
                   else "is not a directory" if os.path.lexists(value) and not os.path.isdir(value)
                   and not self.file_okay
                   else exc.message.rstrip("."))
            raise InputError(f"{value}: {why}") from None


class ExistingPath(CheckedPath):
    """``CheckedPath`` of a path that must exist (an input)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(exists=True, **kwargs)


def parse_precisions(text: str | tuple[str, ...] | list[str]) -> list[Precision]:
    """``--dtype fp32,TF32`` -> [FP32, TF32]: case-insensitive, in the order given, duplicates dropped.

    One wording for every command; an empty item (``fp32,,tf32``) or an unknown one is an error,
    never silently skipped.
    """
    parts = [text] if isinstance(text, str) else list(text)
    items = [item.strip().lower() for part in parts for item in part.split(",")]
    valid = [p.value for p in Precision]
    if not items or any(not item for item in items):
        raise BenanzaError(f"--dtype: empty item in {','.join(parts)!r}; choose from {', '.join(valid)}")
    bad = [item for item in items if item not in valid]
    if bad:
        raise BenanzaError(f"--dtype: unknown {', '.join(bad)}; choose from {', '.join(valid)}")
    return [Precision(p) for p in dict.fromkeys(items)]


def database_label(path: Path | None) -> str:
    """The database a message names: the one the user gave, else the shipped one (never a file they did not give)."""
    return str(path) if path is not None else str(perfdb_dir() / f"h100{PACKED_SUFFIX}")


def database(path: Path | None) -> Path:
    """The database a reading command opens: the shipped one by default; a ``.xz`` is unpacked to a cache."""
    from benanza.api import database as opened  # the API's: one rule for both

    return opened(path)


def parse_what_ifs(text: str) -> list[WhatIf]:
    """``--what-if tf32,fp16`` -> [TF32, FP16]; ``none`` -> []: the same rules as ``--dtype``."""
    from benanza.analyze.inputs import WhatIf  # the analyzer's: only the commands that analyze pay its import

    items = [item.strip().lower() for item in text.split(",")]
    valid = [w.value for w in WhatIf]
    if items == ["none"]:
        return []
    if any(not item for item in items):
        raise BenanzaError(f"--what-if: empty item in {text!r}; choose from {', '.join(valid)} or none")
    bad = [item for item in items if item not in valid]
    if bad:
        raise BenanzaError(f"--what-if: unknown {', '.join(bad)}; choose from {', '.join(valid)} or none")
    return [WhatIf(w) for w in dict.fromkeys(items)]


def seq_len_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--seq-len``: every command that loads a model takes it (the symbolic-dimension error names it)."""
    return click.option("--seq-len", type=click.IntRange(min=1), default=None,
                        help="Value of every other symbolic input dim (a transformer's sequence length); "
                             "a model with such dims needs it.")(command)


def force_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--force``: the one flag that lets an output replace a file that is not its own earlier output."""
    return click.option("--force", is_flag=True,
                        help="Replace an output file even if it is an input of this command or not an earlier "
                             "benanza output of its kind (refused otherwise).")(command)


def build_cache_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--no-build-cache (run, pipeline): compile every executable with CMake, as if none was built before."""
    return click.option("--no-build-cache", is_flag=True,
                        help="Compile every executable with CMake instead of reusing those built before with the "
                             "same sources, flags and libraries (benanza build-cache; also "
                             "BENANZA_NO_BUILD_CACHE=1).")(command)


def max_engines_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--max-engines (run, pipeline): fewer graph-API engine configs per job, the heuristics' first N, for a
    quicker first answer; the bound over every config needs a run without it."""
    return click.option("--max-engines", type=click.IntRange(min=1),
                        help="Cap on graph-API engine configs measured per job, the heuristics' first N (default: "
                             "every one the heuristics offer).")(command)


def torch_module_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--torch-module PKG.MODULE:FACTORY`` in place of MODEL: the module exported at the batch asked."""
    return click.option("--torch-module", "torch_module", metavar="PKG.MODULE:FACTORY", default=None,
                        help="A PyTorch module instead of MODEL (the factory as for benanza profile): exported to "
                             "ONNX at --batch, so a model whose export hard-codes its batch is analyzed at any "
                             "batch.")(command)


def model_or_module(model: Path | None, torch_module: str | None, batch: int | None) -> Path:
    """MODEL, or ``torch_module`` exported at ``batch`` (one of the two, never both). The export is kept in
    the user cache (``exports/``), so that a command a refusal suggests for it runs as written."""
    if (model is None) == (torch_module is None):
        raise BenanzaError("give MODEL (an ONNX file) or --torch-module PKG.MODULE:FACTORY, one of the two")
    if torch_module is None:
        return model
    from benanza.profile.capture import export_torch_module
    from benanza.profile.torch_module import parse_spec

    spec = parse_spec(torch_module)
    where = cache_dir() / "exports"
    where.mkdir(parents=True, exist_ok=True)
    path, _ = export_torch_module(torch_module, where / f"{spec.module}.{spec.factory}_b{batch or 'default'}.onnx",
                                  batch)
    return path
