"""Refusals before an analysis: a wrong answer with exit code 0 is worse than a one-line error.

Each check raises ``BenanzaError`` with one line that names what is missing and the
command that would supply it.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benanza.errors import BenanzaError
from benanza.library import Api, Precision
from benanza.model.layer import Model
from benanza.profile.bundle import Bundle, model_digest

if TYPE_CHECKING:
    from sqlite_utils import Database

MIN_COVERAGE = 0.5  # below this share of layers an LBL or a ratio says more about the gaps in the data


def model_stem(name: str) -> str:
    """A model's name without directory, ``.onnx`` and the zoo's ``light_`` prefix."""
    return Path(name).name.removesuffix(".onnx").removeprefix("light_")


# Ops whose work benanza can neither benchmark nor count (recurrences, control flow): a bound that
# charges them their bytes alone says nothing about the model, so its analysis is refused.
UNSUPPORTED_OPS = frozenset({"LSTM", "GRU", "RNN", "Loop", "Scan", "If"})


def check_supported(model: Model, model_path: Path) -> None:
    """Refuse, in one line naming the ops, a model whose work lies in layers benanza cannot bound:
    an op of ``UNSUPPORTED_OPS``, or no layer with a library call at all."""
    unsupported = sorted({layer.op for layer in model.layers if layer.op in UNSUPPORTED_OPS})
    if not unsupported and any(layer.apis for layer in model.layers):
        return
    ops = unsupported or sorted({layer.op for layer in model.layers})
    raise BenanzaError(f"{model_path}: unsupported op(s) {', '.join(ops)[:200]}: benanza has no library call or "
                       "cost model for them, so it cannot bound this model")


def check_bundle_model(bundle: Bundle, model_path: Path) -> None:
    """The bundle must have been recorded with this very model: by content hash when the bundle
    has one (any file name is fine), else by file name (bundles written before the hash)."""
    recorded = bundle.meta.model_sha256
    if recorded:
        if model_digest(model_path) != recorded:
            raise BenanzaError(f"{bundle.path}: profile bundle of another model ('{bundle.meta.model}', sha256 "
                               f"{recorded[:12]}), not of {model_path} (sha256 {model_digest(model_path)[:12]})")
    elif model_stem(bundle.meta.model) != model_stem(model_path.name):
        raise BenanzaError(f"{bundle.path}: profile bundle of model '{bundle.meta.model}', not of {model_path.name}")


PROFILE_FRAMEWORKS = ("onnxruntime", "pytorch")  # bundle frameworks `benanza profile --framework` takes
PROFILE_DTYPES = ("fp32", "tf32", "fp16")  # bundle dtypes `benanza profile --dtype` takes


def profile_command(model: Model, model_path: Path, bundle: Bundle) -> str:
    """``benanza profile`` of this model at its batch, in the bundle's framework and precision, into a
    new directory named after them: a command that runs as written (no placeholder to fill in)."""
    args = ["benanza", "profile", str(model_path), "--batch", str(model.batch)]
    name = [model_stem(model_path.name), f"b{model.batch}"]
    for flag, value, known in (("--framework", bundle.meta.framework, PROFILE_FRAMEWORKS),
                               ("--dtype", bundle.meta.dtype, PROFILE_DTYPES)):
        if value in known:
            args += [flag, value]
            name.append(value)
    return shlex.join([*args, "--out", "_".join(name)])


def check_mapping(bundle: Bundle, model: Model, model_path: Path, unmapped: int) -> None:
    """At least half of the model's layers must map onto the bundle's profile."""
    total = len(model.layers)
    mapped = total - unmapped
    if total and mapped < MIN_COVERAGE * total:
        raise BenanzaError(f"{bundle.path}: only {mapped} of {total} layers of {model.name} map onto this profile "
                           f"(< {MIN_COVERAGE:.0%}); record a profile of this model: "
                           f"{profile_command(model, model_path, bundle)}")


def executed_calls_command(model_path: Path, bundle_path: Path, db_path: Path) -> str:
    """``benanza generate`` of every call the bundle's run made that ``db_path`` lacks, into a new
    directory named after the bundle; it ends by naming the ``benanza run`` that measures them."""
    return shlex.join(["benanza", "generate", str(model_path), "--from-profile", str(bundle_path),
                       "--db", str(db_path), "--out", f"{Path(bundle_path).name}_calls"])


def library_keys(model: Model) -> set[str]:
    """Layer keys of the layers a cuDNN/cuBLAS call serves (the others have a roofline bound)."""
    return {layer.key for layer in model.layers if any(api != Api.COPY for api in layer.apis)}


def check_database(db: Database, db_path: Path, system: dict[str, Any], model: Model, model_path: Path,
                   precisions: Iterable[Precision], seq_len: int | None = None) -> None:
    """The database must hold measurements for at least half of the model's library layers at
    this batch and in these precisions. The refusal names the database the user gave (the shipped
    one by default) and a command that runs as written: a compressed database is read-only, so it
    measures into a new perf.db."""
    from benanza.store import db as perfdb  # sqlite-utils: not for a cached analysis

    precisions = sorted(set(precisions), key=list(Precision).index)
    wanted = library_keys(model)
    have = perfdb.measured_keys(db, system["id"], wanted, precisions)
    if wanted and len(have) < MIN_COVERAGE * len(wanted):
        precision_list = ",".join(p.value for p in precisions)
        held = "none" if not have else f"only {len(have)}"
        raise BenanzaError(
            f"{db_path}: holds measurements of {held} of the {len(wanted)} library layers of {model.name} "
            f"at batch {model.batch} in {precision_list} on {system.get('gpu') or system['id'][:12]}; "
            f"measure them: benanza run {shlex.quote(str(model_path))} --batch {model.batch} "
            f"{f'--seq-len {seq_len} ' if seq_len else ''}--dtype {precision_list} "
            f"--db {shlex.quote('perf.db' if db_path.suffix == '.xz' else str(db_path))}")


BATCH_SHARE = 0.1  # the batch leads at least this share as many traced tensors as the most common leading dim


def trace_batches(bundle: Bundle) -> Counter[int]:
    """How many of the activations the bundle's trace recorded lead with each dim: ORT node outputs
    and PyTorch ops' first inputs of rank >= 2. Weights lead with their channels (a linear layer's
    4096), but far fewer of them than activations lead with the batch."""
    leading: Counter[int] = Counter()
    if bundle.ort_profile is not None:
        leading.update(n.outputs[0][1][0] for run in bundle.ort_profile.runs for n in run.nodes
                       if n.outputs and len(n.outputs[0][1]) >= 2)
    if bundle.torch_trace is not None:
        leading.update(op.input_dims[0][0] for op in bundle.torch_trace.cpu_ops
                       if op.input_dims and len(op.input_dims[0]) >= 2)
    return leading


def check_trace_batch(bundle: Bundle) -> None:
    """meta.json's batch must lead the tensors the trace recorded (``BATCH_SHARE``).

    Why: a batch edited from 1 to 64 loaded the model at 64, mapped 0 layers and reported a
    "lower bound" 9x the measured latency with exit code 0.
    """
    leading = trace_batches(bundle)
    if leading and leading[bundle.meta.batch] < BATCH_SHARE * max(leading.values()):
        seen = ", ".join(f"{d} ({n})" for d, n in leading.most_common(4))
        raise BenanzaError(f"{bundle.path}: meta.json says batch {bundle.meta.batch}, but the trace's tensors lead "
                           f"with other dims (leading dim (tensors): {seen}): the bundle contradicts itself")


BUSY_SLACK = 0.1  # GPU busy may exceed the end-to-end median by this share (separate runs) before it is a contradiction
RATIOS = ("Benanza ratio", "BR_seq vs end-to-end", "BR_par vs end-to-end", "BR_seq vs GPU busy", "BR_par vs GPU busy")


def check_report(report: Any, bundle_path: Path) -> None:
    """Refuse an analysis of a bundle whose figures contradict each other: a lower bound above what
    was measured (Benanza ratio > 1), GPU kernel time beyond the run's wall time, no layer mapped,
    or a figure that is not a finite number. Any of these is a damaged or edited bundle, and a
    wrong answer with exit code 0 is worse than a one-line refusal."""
    s = report.summary
    for name, value in s.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise BenanzaError(f"{bundle_path}: the analysis gives {name} = {value}: the bundle's figures are damaged")
    busy, e2e = s.get("GPU busy (ms)"), s.get("measured end-to-end (ms)")
    if busy is not None and busy <= 0:
        raise BenanzaError(f"{bundle_path}: the trace's GPU kernels add up to {busy:g} ms per run: kernels of no "
                           "duration are no measurement")
    if busy is not None and e2e is not None and busy > (1 + BUSY_SLACK) * e2e:
        raise BenanzaError(f"{bundle_path}: the trace's GPU kernel time per run ({busy:.4g} ms) exceeds the measured "
                           f"end-to-end latency ({e2e:.4g} ms): the bundle contradicts itself")
    for name in RATIOS:
        value = s.get(name)
        if value is not None and not 0 < value <= 1:
            raise BenanzaError(f"{bundle_path}: {name} {value:.4g} lies outside (0, 1]: a lower bound above the "
                               "measured time means the bundle's figures contradict each other (batch, latency or "
                               "trace edited?)")
    if not s.get("mapped layers (measured and as-executed)"):
        raise BenanzaError(f"{bundle_path}: no layer of the model maps onto this profile's measured kernels: nothing "
                           "to compare the bound with")
