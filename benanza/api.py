"""The Python API for notebooks and scripts: the functions the CLI calls, returning data.

    from benanza import api
    report = api.analyze("models/zoo/resnet50.onnx", profile="perfdb/bundles/resnet50_b1_ort_fp32")
    report.summary.lbl_seq_ms                       # the headline figures: a typed record (analyze.summary)
    report.figures()["lbl_seq_ms"]                  # the same, keyed as the JSON output keys them
    layers = pandas.DataFrame(report.records("layers"))
    both = api.compare(["perfdb/bundles/resnet50_b1_ort_fp32", "perfdb/bundles/resnet50_b1_torch_fp32"])

Errors are ``benanza.errors.BenanzaError`` with the CLI's one-line messages. ``Report.summary`` is
the ``Summary`` every writer reads; ``figures()`` and ``records()`` key it as ``benanza analyze --json``
does (docs/analysis.schema.json).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from benanza.analyze.compare import Comparison
from benanza.analyze.compare import compare as _compare
from benanza.analyze.inputs import WhatIf
from benanza.analyze.tables import Report
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.model.layer import Model
from benanza.store.shipped import readable_db, shipped_db

PathLike = str | Path


def database(db: PathLike | None) -> Path:
    """The database a reading call opens (the CLI's too): the shipped H100 one by default; a ``.xz``
    unpacked to a cache."""
    try:
        return shipped_db() if db is None else readable_db(Path(db))
    except FileNotFoundError as exc:
        raise BenanzaError(str(exc)) from None


def _precisions(dtype: str | Iterable[str] | None) -> list[Precision] | None:
    if dtype is None:
        return None
    items = dtype.split(",") if isinstance(dtype, str) else list(dtype)
    try:
        return [Precision(item.strip().lower()) for item in items]
    except ValueError:
        raise BenanzaError(f"dtype {dtype!r}: choose from {', '.join(p.value for p in Precision)}") from None


def load(model: PathLike, batch: int | None = None, seq_len: int | None = None) -> Model:
    """The model's layers, costs, keys and DAG (``benanza layers``)."""
    from benanza.model.onnx_import import load_model

    return load_model(Path(model), batch, seq_len)


def analyze(model: PathLike, profile: PathLike | None = None, db: PathLike | None = None, system: str | None = None,
            batch: int | None = None, dtype: str | Iterable[str] | None = None, apis: str = "both",
            seq_len: int | None = None, what_if: Iterable[str] | None = None) -> Report:
    """``benanza analyze``: the bound, gaps and tables of ``model`` against ``db`` (default: the shipped
    H100 database), with a profile bundle's run when ``profile`` is given."""
    from benanza.workflows.analysis import analyze_model

    whatifs = None if what_if is None else [WhatIf(w) for w in what_if]
    report, _ = analyze_model(Path(model), database(db), None if profile is None else Path(profile), system, batch,
                              _precisions(dtype), apis, db_label=None if db is None else str(db), seq_len=seq_len,
                              what_if=whatifs)
    return report


def compare(bundles: Sequence[PathLike], model: PathLike | None = None, db: PathLike | None = None,
            system: str | None = None) -> Comparison:
    """``benanza compare BUNDLE...``: one model's analyses side by side, labelled by bundle name; the
    model is found by the bundles' content hash (``bundles.locate_model``) unless given."""
    from benanza.profile import catalog
    from benanza.profile.bundle import read_bundle
    from benanza.workflows.analysis import analyze_model

    if len(bundles) < 2:
        raise BenanzaError(f"compare: needs at least two analyses, got {len(bundles)}")
    where = None if model is None else Path(model)
    if where is not None and not where.exists():
        raise BenanzaError(f"{where}: no such model file or directory (--model)")
    path, label = database(db), None if db is None else str(db)
    sides = []
    for bundle in map(Path, bundles):
        if not bundle.is_dir():
            raise BenanzaError(f"{bundle}: not a profile bundle directory (give bundles, or one model and --system)")
        found = catalog.locate_model(read_bundle(bundle), where)
        sides.append((bundle.name, analyze_model(found, path, bundle, system, db_label=label)[0]))
    return _compare(sides)


def compare_systems(model: PathLike, systems: Sequence[str], db: PathLike | None = None) -> Comparison:
    """``benanza compare MODEL --system A --system B``: one model's bound on several systems of ``db``."""
    from benanza.workflows.analysis import analyze_model

    if len(systems) < 2:
        raise BenanzaError(f"{model}: comparing one model needs two --system or more")
    path, label = database(db), None if db is None else str(db)
    return _compare([(name, analyze_model(Path(model), path, None, name, db_label=label)[0]) for name in systems])
