"""The profile bundles recorded on the H100 (perfdb/bundles) against the shipped database.

Real data: ONNX Runtime 1.31 (CUDA EP) and PyTorch 2.11 runs of zoo models, recorded with
`benanza profile` (docs/RESULTS.md §4). A sound lower bound never exceeds what was measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import LIGHT

from benanza.cli.analyze import analyze_model
from benanza.cli.quickstart import shipped_bundle
from benanza.paths import perfdb_dir, shipped_db
from benanza.profile.bundle import read_bundle

BUNDLES = sorted(p for p in (perfdb_dir() / "bundles").iterdir() if p.is_dir())
DIRECT_ENGINES = ("eng28_", "eng70_")  # one implicit-GEMM kernel per call (FFT engines launch several)


def model_of(bundle: Path) -> Path:
    stem = Path(read_bundle(bundle).meta.model).stem.removeprefix("light_")
    return LIGHT / f"light_{'bvlc_alexnet' if stem == 'alexnet' else stem}.onnx"


@pytest.fixture(scope="module")
def h100() -> Path:
    return shipped_db()


def test_the_zoo_models_the_readme_analyzes_have_a_bundle() -> None:
    for stem in ("resnet50", "inception_v1", "densenet121", "vgg19"):
        assert shipped_bundle(Path(f"{stem}.onnx")) is not None, stem


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_bundle_maps_fully_and_the_benanza_ratio_is_at_most_1(bundle: Path, h100: Path) -> None:
    report, mapping = analyze_model(model_of(bundle), h100, bundle)
    s = report.summary
    assert not mapping.unmapped_layers
    assert s["mapped layers (measured and as-executed)"] > 0
    for name in ("BR_seq vs end-to-end", "BR_par vs end-to-end", "BR_seq vs GPU busy", "BR_par vs GPU busy"):
        assert 0 < s[name] <= 1, (name, s[name])
    assert s["GPU busy (ms)"] <= s["measured end-to-end (ms)"]


def test_resnet50_b64_conv_kernels_match_their_as_executed_benchmarks(h100: Path) -> None:
    """The mapping picks the right call and kernel: at batch 64 (L2 effects small) each conv's
    implicit-GEMM kernel lasts what its engine config measured in the micro-benchmark."""
    bundle = perfdb_dir() / "bundles" / "resnet50_b64_ort_fp32"
    report, mapping = analyze_model(model_of(bundle), h100, bundle)
    rows = {r["#"]: r for r in report.tables["layers"].rows}
    ratios = []
    for i, lp in mapping.profile.layers.items():
        call = rows[i]["as-executed call"] or ""
        if rows[i]["op"] == "Conv" and any(e in call for e in DIRECT_ENGINES) and lp.kernels:
            ratios.append(max(k.dur_us for k in lp.kernels) / 1e3 / rows[i]["as-executed (ms)"])
    assert len(ratios) >= 40
    close = [r for r in ratios if abs(r - 1) <= 0.1]
    assert len(close) >= 0.95 * len(ratios), sorted(ratios)
