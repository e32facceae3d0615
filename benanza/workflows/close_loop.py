"""Close the loop: what a gap's fix predicts for a profiled run, read from its analysis
(``analyze.predictions``) with the database reads BatchNorm folding needs. bench/close_loop.py applies
each change natively, times it and compares (docs/RESULTS.md §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benanza.analyze.predictions import FOLDED_BN, PREDICTORS, READINGS, bias_add_keys, folded_bn, shown, tf32_saving
from benanza.errors import BenanzaError
from benanza.library import Precision


def predict(model_path: Path, bundle: Path, db_path: Path, reading: str, apis: str = "both",
            batch: int | None = None) -> dict[str, Any]:
    """The analysis of ``bundle`` (the run before the change) against ``db_path`` with the API families
    ``apis``, and the saving ``reading`` (a key of ``PREDICTORS``, or ``FOLDED_BN``) predicts from it:
    its figures with ``predicted_ms``, beside the analysis' own (``predictions.SHOWN``)."""
    from benanza.workflows.analysis import analyze_model

    if reading not in READINGS:
        raise BenanzaError(f"no prediction {reading!r}: choose from {', '.join(sorted(READINGS))}")
    report, _ = analyze_model(model_path, db_path, bundle, apis=apis)
    if reading != FOLDED_BN:
        return {**shown(report), **PREDICTORS[reading](report)}
    from benanza.model.onnx_import import load_model
    from benanza.store import db as perfdb
    from benanza.store.systems import pick_system

    model = load_model(model_path, batch or report.model["batch"])
    db = perfdb.open_db(db_path, readonly=True)
    system = pick_system(db, None, str(db_path))
    rows = perfdb.results_for(db, system["id"], bias_add_keys(model))
    return {**shown(report), **folded_bn(report, model, rows, float(system["bandwidth_gbs"]))}


def predict_or_model_alone(model_path: Path, bundle: Path, db_path: Path, reading: str, apis: str = "both",
                           batch: int | None = None) -> dict[str, Any]:
    """``predict``, or its one-line error. A precision what-if depends on the model, the database and
    the run's numerics only, not on the mapping: where the bundle's analysis is refused (a profile that
    maps too few layers) it is read from the analysis of the model alone in strict fp32."""
    from benanza.workflows.analysis import analyze_model

    try:
        return predict(model_path, bundle, db_path, reading, apis, batch)
    except Exception as exc:  # the one line is the answer, whatever failed in the analysis
        error = f"{type(exc).__name__}: {exc}"[:400]
    if reading != "what-if tf32 saving":
        return {"predicted_ms": None, "error": error}
    try:
        report, _ = analyze_model(model_path, db_path, None, batch=batch, precisions=[Precision.FP32], apis=apis)
    except Exception as exc:
        return {"predicted_ms": None, "error": f"{error}; without the bundle: {type(exc).__name__}: {exc}"[:400]}
    s = report.summary
    return {**tf32_saving(report), "LBL_seq (ms)": s.lbl_seq_ms, "what-if tf32: LBL_seq (ms)": s.what_if_ms.get("tf32"),
            "from the model alone (the bundle's analysis refused)": error}
