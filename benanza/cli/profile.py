"""``benanza profile``: capture a profile bundle of a framework run, and show how it maps onto the layers."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

import click
from rich.table import Table

from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, parse_precisions
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.plain_text import line
from benanza.profile.capture import (
    CAPTURE_PRECISIONS,
    EXPORTED,
    PROFILED_RUNS,
    AlgoSearch,
    capture,
    capture_torch_module,
)
from benanza.profile.capture_protocol import Framework

# What reading the bundle and mapping it onto the model import (its parsers, onnx, networkx, numpy: about
# 1 s), loaded on a thread of its own while a capture's children run (_import_meanwhile): they start
# without waiting for it.
MAPPING_MODULES = ("benanza.profile.bundle", "benanza.model.onnx_import", "benanza.profile.mapping")

# --framework spellings -> the bundle's framework.
FRAMEWORKS: dict[str, Framework] = {"onnxruntime": Framework.ONNXRUNTIME, "ort": Framework.ONNXRUNTIME,
                                    "torch": Framework.PYTORCH, "pytorch": Framework.PYTORCH}


@main.command("profile")
@click.argument("model", required=False, type=ExistingPath(dir_okay=False, path_type=Path))
@click.option("--framework", type=click.Choice(sorted(FRAMEWORKS)), default="onnxruntime", show_default=True,
              help="Framework to run the model in (ONNX Runtime CUDA EP, or PyTorch through onnx2torch).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Batch size.")
@click.option("--seq-len", type=click.IntRange(min=1), default=None,
              help="Value of the model's other symbolic input dims (a transformer's sequence length).")
@click.option("--dtype", default=Precision.FP32.value, show_default=True,
              help="One precision: fp32 (TF32 off), tf32 (TF32 allowed), fp16 (model cast to half).")
@click.option("--out", "out", required=True, type=CheckedPath(file_okay=False, path_type=Path),
              help="Bundle directory to write (must be new or empty); with --map-only, the bundle to read.")
@click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True,
              help="Timed runs of the latency run (meta.json's latency_ms).")
@click.option("--profiled-runs", type=click.IntRange(min=1), default=PROFILED_RUNS, show_default=True,
              help="Runs inside the profiler and API logging (the kernel trace and logs grow with them).")
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True, help="Untimed warm-up runs.")
@click.option("--algo-search", type=click.Choice([a.value for a in AlgoSearch]), default=AlgoSearch.EXHAUSTIVE.value,
              show_default=True, help="ONNX Runtime cudnn_conv_algo_search (PyTorch: exhaustive = cudnn.benchmark).")
@click.option("--map-only", is_flag=True, help="Do not run anything: map the existing bundle --out onto MODEL.")
@click.option("--torch-module", "torch_module", default=None, metavar="PKG.MODULE:FACTORY",
              help="Profile your own nn.Module instead of MODEL: the factory returns the module (random weights) "
                   "and its example inputs; it is exported to ONNX (the bundle's exported.onnx, module-path node "
                   "names) and run natively in PyTorch, kernels mapped to layers through the module hierarchy.")
@friendly_errors
def profile_command(model: Path | None, framework: str, batch: int, seq_len: int | None, dtype: str, out: Path,
                    runs: int, profiled_runs: int, warmup: int, algo_search: str, map_only: bool,
                    torch_module: str | None) -> None:
    """Run MODEL in a framework on the GPU and write a profile bundle (docs/PROFILES.md).

    The bundle holds the framework profile, the GPU kernel trace, the cuDNN/cuBLAS API
    logs and meta.json with the end-to-end latency (measured in a separate run without
    logging). Afterwards the bundle is mapped onto MODEL's layers and summarized.
    With --torch-module no MODEL is given: the module's export is the model.
    """
    precisions = parse_precisions(dtype)
    if len(precisions) != 1 or precisions[0] not in CAPTURE_PRECISIONS:
        raise BenanzaError(f"--dtype: a profile runs in one of {', '.join(p.value for p in CAPTURE_PRECISIONS)}, "
                           f"got {dtype!r}")
    dtype = precisions[0].value
    if not map_only:
        _import_meanwhile(MAPPING_MODULES)
    if torch_module is not None:
        if model is not None:
            raise BenanzaError("--torch-module profiles the module's own export: give no MODEL")
        if not map_only:
            capture_torch_module(torch_module, dtype, out, batch=batch, runs=runs, warmup=warmup,
                                 algo_search=algo_search, profiled_runs=profiled_runs)
            console.print(line(f"wrote profile bundle {out}"), highlight=False)
        model = out / EXPORTED
        if not model.is_file():
            raise BenanzaError(f"{out}: no {EXPORTED} (not a --torch-module bundle)")
    elif model is None:
        raise BenanzaError("give MODEL (an ONNX file) or --torch-module pkg.module:factory")
    elif not map_only:
        capture(model, FRAMEWORKS[framework].value, batch, dtype, out, runs=runs, warmup=warmup,
                algo_search=algo_search, profiled_runs=profiled_runs, seq_len=seq_len)
        console.print(line(f"wrote profile bundle {out}"), highlight=False)
    from benanza.model.onnx_import import load_model
    from benanza.profile.bundle import bundle_seq_len, read_bundle
    from benanza.profile.mapping import map_bundle_report, summary

    bundle = read_bundle(out)
    mapping = map_bundle_report(load_model(model, bundle.meta.batch, bundle_seq_len(bundle)), bundle)
    table = Table("", "value", title=line(f"{model.name} in {bundle.meta.framework} "
                                           f"{bundle.meta.framework_version}, batch {bundle.meta.batch}, "
                                           f"{bundle.meta.dtype}"))
    for name, value in summary(mapping).items():
        table.add_row(name, "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value))
    console.print(table)
    for index, why in mapping.unmapped_layers:
        err_console.print(line(f"unmapped layer {index}: {why}"), highlight=False)
    for note in mapping.notes:
        err_console.print(line(f"note: {note}"), highlight=False)


def _import_meanwhile(modules: tuple[str, ...]) -> None:
    """Import ``modules`` on a daemon thread: the capture's children, which need none of them, start at once,
    and the mapping after the capture finds them loaded (Python's import locks keep the two threads apart)."""
    threading.Thread(target=lambda: [importlib.import_module(m) for m in modules], daemon=True,
                     name="import-meanwhile").start()
