"""Build the analyzer's Inputs from a performance database and a profile bundle.

The analyzer itself stays pure (``core.analyze`` over frozen dataclasses); this is
the one place that reads the database for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benanza.analyze.inputs import Ceilings, Inputs, Profile
from benanza.errors import BenanzaError
from benanza.library import Precision, Status
from benanza.model.layer import Model, bias_add, separate_bias
from benanza.store import db as perfdb

if TYPE_CHECKING:
    from sqlite_utils import Database

    from benanza.profile.bundle import Bundle

# The ceilings executable's result rows (layer_key "ceiling"): algorithm -> what it measures.
CEILING_KEY = "ceiling"
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
    """Everything the database holds on ``system`` for the model's layers, its fusion candidates,
    the bias add after each conv (a key of its own: the bound charges it whether or not a profile
    logged it, and PyTorch logs none) and the profile's further calls."""
    keys = {layer.key for layer in model.layers} | {f.key for f in model.fusions}
    keys |= {bias_add(layer).key for layer in model.layers if separate_bias(layer)}
    if profile is not None:
        keys |= {c.key for lp in profile.layers.values() for c in lp.extra if c.key}
    measurements = perfdb.results_for(db, system["id"], keys)
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
