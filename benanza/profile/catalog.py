"""Profile bundles on this machine: the shipped ones (perfdb/bundles) and local ones, and the
model file each was recorded with (found by content hash, whatever it is called)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.paths import onnx_light_zoo, perfdb_dir
from benanza.profile.bundle import META, Bundle, model_digest, read_bundle


def model_stem(name: str) -> str:
    """A model's name without directory, ``.onnx`` and the zoo's ``light_`` prefix."""
    return Path(name).name.removesuffix(".onnx").removeprefix("light_")


COLUMNS = ("bundle", "where", "model", "batch", "framework", "dtype", "median (ms)", "gpu", "path")


def shipped_dir() -> Path:
    return perfdb_dir() / "bundles"


def _bundle_dirs(root: Path) -> list[Path]:
    if (root / META).is_file():
        return [root]
    return sorted(p.parent for p in root.glob(f"*/{META}"))


def list_bundles(local: Iterable[Path] = ()) -> list[dict[str, Any]]:
    """One record per bundle: shipped first, then each local directory's, each sorted by name."""
    records = []
    for where, roots in (("shipped", [shipped_dir()]), ("local", list(local))):
        for root in roots:
            if not root.is_dir():
                raise BenanzaError(f"{root}: no such directory of profile bundles")
            for path in _bundle_dirs(root):
                meta = read_bundle(path).meta
                records.append({"bundle": path.name, "where": where, "model": meta.model, "batch": meta.batch,
                                "framework": f"{meta.framework} {meta.framework_version}", "dtype": meta.dtype,
                                "median (ms)": meta.latency_ms.median, "gpu": meta.system.get("gpu", ""),
                                "path": str(path)})
    return records


def find_model(bundle: Bundle, where: Path) -> Path:
    """The ONNX file ``bundle`` was recorded with: ``where`` itself, or the file in directory ``where``
    with the bundle's content hash (else its zoo name, for bundles written before the hash)."""
    if where.is_file():
        return where
    candidates = sorted(where.glob("*.onnx"))
    if bundle.meta.model_sha256:
        for path in candidates:
            if model_digest(path) == bundle.meta.model_sha256:
                return path
    else:
        by_name = where / f"{model_stem(bundle.meta.model)}.onnx"
        if by_name.is_file():
            return by_name
    raise BenanzaError(f"{bundle.path}: no model file of it ('{bundle.meta.model}') in {where}; pass the model "
                       f"with --model, or get the zoo with: benanza models zoo {shlex.quote(str(where))}")


def model_places(bundle: Bundle) -> list[Path]:
    """Where a bundle's model is looked for when none is given, wherever the command runs: the bundle
    itself (a --torch-module bundle holds its export), ./models/zoo, the checkout's models/zoo, and
    the light zoo inside the onnx package (the shipped bundles' models, byte for byte)."""
    return [bundle.path, Path("models/zoo"), perfdb_dir().parent / "models" / "zoo", onnx_light_zoo()]


def locate_model(bundle: Bundle, given: Path | None) -> Path:
    """``find_model`` in ``given``, or (None) in each of ``model_places`` in turn; one line naming
    every place looked in when none holds it."""
    if given is not None:
        return find_model(bundle, given)
    places = [p for p in dict.fromkeys(model_places(bundle)) if p.is_dir()]
    for place in places:
        try:
            return find_model(bundle, place)
        except BenanzaError:
            continue
    raise BenanzaError(f"{bundle.path}: no model file of it ('{bundle.meta.model}') in "
                       f"{', '.join(str(p) for p in places) or 'any known place'}; pass the model with --model")


def bundle_model(models: Path, bundle: Bundle) -> Path:
    """Where the model a bundle was recorded with lies in the directory ``models`` (zoo names)."""
    return models / f"{model_stem(bundle.meta.model)}.onnx"


def shipped_bundle(model: Path) -> Path | None:
    """A profile bundle shipped for this model at batch 1 (perfdb/bundles/<stem>_b1_*), if any."""
    found = sorted((perfdb_dir() / "bundles").glob(f"{model.stem}_b1_*"))
    return found[0] if found else None
