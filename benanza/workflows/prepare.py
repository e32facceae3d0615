"""Everything before an analysis, in one place: the model, the bundle's mapping and the database's
rows as the analyzer's ``Inputs``, and every refusal on the way (a wrong answer with exit code 0 is
worse than a one-line error).

In the order ``prepare`` runs them: the bundle is of this model (content hash) and agrees with
itself (batch, sequence length); the model has work benanza can bound; the profile was recorded on
the database's system (GPU, cuDNN, cuBLAS); at least half of the layers map onto it; the
precisions the run allowed (its recorded TF32 settings); the database holds at least half of the
model's library layers at this batch and precision; then the rows and measured ceilings. Each
refusal raises ``BenanzaError`` with one line that names what is missing and the command that
would supply it.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from benanza.analyze.inputs import FAMILIES, Ceilings, Constraints, Inputs, StoredReplay, measurement_keys
from benanza.apis.ceilings import CEILING_KEY
from benanza.errors import BenanzaError
from benanza.library import Api, Precision, Status
from benanza.model.layer import Model
from benanza.model.onnx_import import load_model
from benanza.profile.bundle import Bundle, bundle_seq_len, model_digest, read_bundle
from benanza.profile.catalog import model_stem
from benanza.profile.mapping import Mapping as BundleMapping
from benanza.profile.mapping import map_bundle_report
from benanza.records import Profile
from benanza.store import db as perfdb
from benanza.store.systems import pick_system

MIN_COVERAGE = 0.5  # below this share of layers an LBL or a ratio says more about the gaps in the data


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


def library_keys(model: Model) -> set[str]:
    """Layer keys of the layers a cuDNN/cuBLAS call serves (the others have a roofline bound)."""
    return {layer.key for layer in model.layers if any(api != Api.COPY for api in layer.apis)}


def check_database(db: Database, db_path: Path, system: dict[str, Any], model: Model, model_path: Path,
                   precisions: Iterable[Precision], seq_len: int | None = None) -> None:
    """The database must hold measurements for at least half of the model's library layers at
    this batch and in these precisions. The refusal names the database the user gave (the shipped
    one by default) and a command that runs as written: a compressed database is read-only, so it
    measures into a new perf.db."""
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


# The ceilings executable's result rows (layer_key CEILING_KEY): algorithm -> what it measures.
GEMM_CEILINGS: dict[str, Precision] = {f"gemm_{p.value}": p for p in Precision}
COPY_CEILING = "copy_d2d"


# What a profile must share with the database system: (meta.json system field, systems column).
SAME_SYSTEM_FIELDS = (("gpu", "gpu"), ("cudnn_version", "cudnn_version"), ("cublas_version", "cublas_version"))


def check_same_system(bundle: Bundle, system: Mapping[str, Any]) -> None:
    """Refuse to compare a run with benchmarks of another GPU or library version: engine ids,
    knobs and algorithm speeds change between them. The cuDNN log's own version counts too."""
    ran = {field: bundle.meta.system.get(field) for field, _ in SAME_SYSTEM_FIELDS}
    log = bundle.files.get("cudnn_log") and bundle.cudnn_log
    if log:
        ran["cudnn_version"] = log.version
    for field, column in SAME_SYSTEM_FIELDS:
        have = system.get(column)
        if ran[field] and have and str(ran[field]) != str(have):
            raise BenanzaError(f"{bundle.path}: the profile ran with {field} {ran[field]}, the database system "
                               f"{system['id'][:12]} has {have}; measure this system, or choose another with "
                               "--system")


def ceilings(db: Database, system: Mapping[str, Any]) -> Ceilings:
    """Measured peaks: the ceilings benchmark's rows, else the system's measured bandwidth, each
    labelled with the measurement it comes from (``Ceilings.sources``)."""
    rows = perfdb.results_for(db, system["id"], [CEILING_KEY]).get(CEILING_KEY, [])
    ok = {r.algorithm: r for r in rows if r.status == Status.OK and r.api == CEILING_KEY}
    copy = ok.get(COPY_CEILING)
    # One peak bandwidth, the best measured: the ceilings benchmark's cudaMemcpy (2430 GB/s on the
    # H100) is slower than the system's own bandwidth kernel (3014 GB/s), and a roofline below what a
    # kernel reaches would put benchmarks above 100 % and memory-bound layers' bounds above their runs.
    measured = [(float(v), label) for v, label in
                ((copy.notes.get("gbs") if copy else None, f"measured: ceilings benchmark {COPY_CEILING}"),
                 (system.get("bandwidth_gbs"), "measured: the system's bandwidth kernel")) if v]
    bandwidth, label = max(measured, default=(None, None))
    flops = {p: float(ok[a].notes["tflops"]) * 1e12 for a, p in GEMM_CEILINGS.items()
             if a in ok and ok[a].notes.get("tflops")}
    sources = {p.value: f"measured: ceilings benchmark {a}" for a, p in GEMM_CEILINGS.items() if p in flops}
    if label:
        sources["hbm"] = label
    return Ceilings(bandwidth_gbs=bandwidth or None, flops=flops, sources=sources)


def inputs_from_db(db: Database, model: Model, system: Mapping[str, Any], profile: Profile | None = None,
                   **options: Any) -> Inputs:
    """Everything the database holds on ``system`` for the keys the analysis reads (``measurement_keys``)."""
    measurements = perfdb.results_for(db, system["id"], measurement_keys(model, profile))
    return Inputs(model=model, measurements=measurements, system=dict(system), ceilings=ceilings(db, system),
                  profile=profile, **options)


# A run's framework setting that allows TF32 math on fp32 data: (framework, meta.json "extra" field).
TF32_SETTINGS: dict[str, str] = {"onnxruntime": "use_tf32", "pytorch": "allow_tf32"}


def run_precisions(framework: str, precision: str, extra: Mapping[str, Any]) -> tuple[frozenset[Precision], str]:
    """The precisions a recorded run could compute in, from its settings: (precisions, why).

    fp16/bf16 runs compute in that precision; an fp32/tf32 run may use TF32 only where its
    framework's TF32 switch was on (ORT ``use_tf32``, PyTorch ``allow_tf32``). Without a
    recorded switch the run's dtype decides (tf32: TF32 allowed; fp32: both, the looser bound).
    """
    p = Precision(precision)
    if p in (Precision.FP16, Precision.BF16):
        return frozenset({p}), f"{p.value} run"
    setting = TF32_SETTINGS.get(framework)
    if setting is not None and extra.get(setting) is not None:
        on = bool(extra[setting])
        return (frozenset({Precision.FP32, Precision.TF32}) if on else frozenset({Precision.FP32}),
                f"{framework} {setting}={extra[setting]}")
    if p is Precision.TF32:
        return frozenset({Precision.FP32, Precision.TF32}), "tf32 run"
    return frozenset({Precision.FP32, Precision.TF32}), "fp32 run without a recorded TF32 setting: TF32 allowed"


def prepare(model_path: Path, db_path: Path, bundle_path: Path | None, system_name: str | None, batch: int | None,
             precisions: list[Precision] | None, apis: str, db_label: str | None,
             seq_len: int | None = None) -> tuple[Inputs, BundleMapping | None]:
    """The analysis's inputs and the bundle's mapping, after every check passed (``analysis.analyze_model``)."""
    bundle = read_bundle(bundle_path) if bundle_path else None
    if bundle is not None:
        check_bundle_model(bundle, model_path)
        check_trace_batch(bundle)
        if batch is not None and batch != bundle.meta.batch:
            raise BenanzaError(f"{bundle_path}: bundle was recorded at batch {bundle.meta.batch}, not {batch}")
        batch = bundle.meta.batch
        recorded = bundle_seq_len(bundle)
        if seq_len is not None and recorded is not None and seq_len != recorded:
            raise BenanzaError(f"{bundle_path}: bundle was recorded at sequence length {recorded}, not {seq_len}")
        seq_len = recorded if recorded is not None else seq_len
    model = load_model(model_path, batch, seq_len)
    check_supported(model, model_path)
    mapping = map_bundle_report(model, bundle) if bundle is not None else None
    if not db_path.exists():
        raise BenanzaError(f"{db_path}: no such performance database")
    db = perfdb.open_db(db_path, readonly=True)
    sys_row = pick_system(db, system_name, str(db_path))
    if bundle is not None and mapping is not None:
        check_same_system(bundle, sys_row)  # another GPU or library first: the mapping is then moot
        check_mapping(bundle, model, model_path, len(mapping.unmapped_layers))
    constraints = Constraints(families=frozenset(FAMILIES[apis]))
    if not precisions and bundle is not None:  # the precisions the run's recorded settings allowed
        precisions, _ = run_precisions(bundle.meta.framework, bundle.meta.dtype, bundle.meta.extra)
    if precisions:
        constraints = constraints.with_precisions(frozenset(precisions))
    check_database(db, Path(db_label or db_path), sys_row, model, model_path, constraints.precisions, seq_len)
    inputs = inputs_from_db(db, model, sys_row, mapping.profile if mapping else None, constraints=constraints,
                            replays=replays_from_db(db, model, sys_row, constraints.precisions, apis))
    return inputs, mapping


def replays_from_db(db: Database, model: Model, system: Mapping[str, Any], precisions: Iterable[Precision],
                    apis: str) -> tuple[StoredReplay, ...]:
    """The replays the database holds of this model (name, batch, layers), precisions and API families on
    ``system``, newest first; each above ``EXPLAIN_ABOVE`` x its LBL_seq with its one-line reason."""
    from benanza.store.replays import model_key, stored_replays

    rows = stored_replays(db, system["id"], model.name, model.batch,
                          model_key((layer.key for layer in model.layers), model.graph.edges), precisions, apis)
    out = []
    for row in rows:
        reason = ""
        if row["warm_ms"] and row["lbl_seq_ms"] and row["warm_ms"] > row["lbl_seq_ms"]:
            from benanza.analyze.replay_explain import explain  # a replay's plan module: only when one is held

            why = explain(row["warm_ms"], row["lbl_seq_ms"], row["step_results"])
            reason = why.reason() if why.needs_reason() else ""
        out.append(StoredReplay(row["warm_ms"], row["cold_ms"], row["lbl_seq_ms"], row["lbl_par_ms"], row["status"],
                                row["steps"], row["measured_at"] or "", reason))
    return tuple(out)
