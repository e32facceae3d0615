"""``benanza layers`` and ``benanza models zoo``: what the model processor makes of ONNX files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

from benanza.atomic import write_stdout
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import CheckedPath, seq_len_option
from benanza.errors import BenanzaError
from benanza.library import Api
from benanza.model.graph import has_parallel_branches
from benanza.model.layer import Layer, Model, Tensor
from benanza.paths import onnx_light_zoo as zoo_source
from benanza.plain_text import labelled, plain

# The light zoo models shipped inside the onnx package -> the names they get in a model directory.
ZOO: dict[str, str] = {
    "light_bvlc_alexnet.onnx": "alexnet.onnx",
    "light_densenet121.onnx": "densenet121.onnx",
    "light_inception_v1.onnx": "inception_v1.onnx",
    "light_inception_v2.onnx": "inception_v2.onnx",
    "light_resnet50.onnx": "resnet50.onnx",
    "light_shufflenet.onnx": "shufflenet.onnx",
    "light_squeezenet.onnx": "squeezenet.onnx",
    "light_vgg19.onnx": "vgg19.onnx",
    "light_zfnet512.onnx": "zfnet512.onnx",
}


def is_library(layer: Layer) -> bool:
    """Served by a cuDNN/cuBLAS call (not a roofline-only copy, not an unknown op)."""
    return any(api != Api.COPY for api in layer.apis)


def _tensor_json(t: Tensor) -> dict[str, Any]:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype}


def model_json(model: Model) -> dict[str, Any]:
    """The ``--json`` record of one model (its layers in execution order)."""
    return {
        "name": model.name,
        "batch": model.batch,
        "num_layers": len(model.layers),
        "unique_layers": len(model.unique_keys),
        "macs": sum(layer.macs for layer in model.layers),
        "flops": sum(layer.flops for layer in model.layers),
        "layers": [
            {
                "name": layer.name,
                "op": layer.op,
                "key": layer.key,
                "inputs": [_tensor_json(t) for t in layer.inputs],
                "outputs": [_tensor_json(t) for t in layer.outputs],
                "attrs": layer.attrs,
                "macs": layer.macs,
                "flops": layer.flops,
                "bytes": layer.bytes,
                "api": [api.value for api in layer.apis],
            }
            for layer in model.layers
        ],
    }


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}" if whole else "-"


COLUMNS = ("model", "batch", "layers", "unique keys", "MACs (G)", "FLOPs (G)", "library layers (%)",
           "library MACs (%)", "fusions", "parallel")


def _table(models: list[Model]) -> Table:
    table = Table(title="layers per model", box=box.SIMPLE_HEAD)
    for column in COLUMNS:  # fold, never elide: a cut-off number is a wrong number
        table.add_column(column, justify="left" if column == "model" else "right", overflow="fold")
    for m in models:
        macs = sum(layer.macs for layer in m.layers)
        lib = [layer for layer in m.layers if is_library(layer)]
        table.add_row(plain(m.name), str(m.batch), str(len(m.layers)), str(len(m.unique_keys)), f"{macs / 1e9:.3f}",
                      f"{sum(layer.flops for layer in m.layers) / 1e9:.3f}", _share(len(lib), len(m.layers)),
                      _share(sum(layer.macs for layer in lib), macs), str(len(m.fusions)),
                      "yes" if has_parallel_branches(m.graph) else "no")
    total = sum(len(m.layers) for m in models)
    unique = len(set().union(*(m.unique_keys for m in models)))
    table.add_section()
    table.add_row("total", "", str(total), str(unique), f"{sum(lr.macs for m in models for lr in m.layers) / 1e9:.3f}",
                  f"{sum(lr.flops for m in models for lr in m.layers) / 1e9:.3f}", "", "",
                  str(sum(len(m.fusions) for m in models)), "")
    return table


LAYER_COLUMNS = ("#", "layer", "op", "output shape", "MACs (M)", "bytes (MB)", "library calls", "key")


def _layer_table(model: Model) -> Table:
    """One row per layer in execution order: what each layer is and which library calls serve it."""
    table = Table(title=f"{plain(model.name)}, batch {model.batch}: {len(model.layers)} layers", box=box.SIMPLE_HEAD)
    for col in LAYER_COLUMNS:
        table.add_column(col, justify="right" if col in ("#", "MACs (M)", "bytes (MB)") else "left")
    for layer in model.layers:
        shape = "x".join(str(d) for d in layer.outputs[0].shape) if layer.outputs else ""
        table.add_row(str(layer.index), plain(layer.name), plain(layer.op), shape, f"{layer.macs / 1e6:.1f}",
                      f"{layer.bytes / 1e6:.2f}", ", ".join(api.value for api in layer.apis) or "-",
                      layer.key[:16])
    return table


@main.command("layers")
@click.argument("model_or_dir", type=CheckedPath(path_type=Path))
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="Batch size: the leading dim of the model's data inputs (default: the file's own, or 1).")
@seq_len_option
@click.option("--per-layer/--summary", "per_layer", default=None,
              help="A table of every layer of each model, or only the one-row-per-model summary "
                   "(default: every layer for one model file, the summary for a directory).")
@click.option("--json", "as_json", is_flag=True, help="Print every layer as JSON on stdout instead of the table.")
@friendly_errors
def layers_cmd(model_or_dir: Path, batch: int | None, seq_len: int | None, per_layer: bool | None,
               as_json: bool) -> None:
    """List the layers of one ONNX model (every layer, then its summary row) or of every *.onnx
    in a directory (one summary row each; --per-layer for every layer).

    Bad files are reported one line each on stderr (exit code 1); the others are still listed.
    """
    from benanza.model.onnx_import import load_models  # onnx is imported only by commands that read models

    models, errors = load_models(model_or_dir, batch, seq_len)
    for m in models:
        for problem in m.problems:
            err_console.print(labelled("warning:", "yellow", problem), highlight=False, soft_wrap=True)
    if as_json:
        write_stdout(json.dumps({"models": [model_json(m) for m in models]}) + "\n")
    elif models:
        # a terminal gets its own width; a pipe or a file gets the whole table
        out = console if console.is_terminal else Console(width=max(console.width, 140))
        if per_layer or (per_layer is None and model_or_dir.is_file()):
            for m in models:
                out.print(_layer_table(m))
        out.print(_table(models))
    for line in errors:
        err_console.print(labelled("error:", "bold red", line), highlight=False, soft_wrap=True)
    if errors:
        sys.exit(1)


@main.group("models")
def models_group() -> None:
    """Get real ONNX models to work on."""


def copy_zoo(dest: Path) -> list[Path]:
    """Copy the nine light zoo models into ``dest`` under clear names; returns the written paths."""
    src = zoo_source()
    missing = [name for name in ZOO if not (src / name).is_file()]
    if missing:
        raise BenanzaError(f"{src}: the installed onnx package lacks {', '.join(missing)}")
    if dest.exists() and not dest.is_dir():
        raise BenanzaError(f"{dest}: exists and is not a directory")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, new_name in ZOO.items():
        shutil.copyfile(src / name, dest / new_name)
        written.append(dest / new_name)
    return written


@models_group.command("zoo")
@click.argument("directory", type=CheckedPath(path_type=Path))
@friendly_errors
def zoo_cmd(directory: Path) -> None:
    """Copy the nine light ONNX zoo models shipped with the onnx package into DIRECTORY.

    Their weights are computed at run time (ConstantOfShape), so they are small
    files with the real architectures and shapes: all benanza needs.
    """
    for path in copy_zoo(directory):
        console.print(plain(f"copied {path} ({path.stat().st_size / 1024:.0f} KiB)"), highlight=False)
