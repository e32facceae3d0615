"""A bundle belongs to a model by content hash, and an analysis without enough data is refused:
`benanza analyze` / `generate --from-profile` through the CLI, on the zoo and the shipped bundles."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.cli import main
from benanza.paths import perfdb_dir

SHIPPED = perfdb_dir() / "bundles"
VGG_B1 = SHIPPED / "vgg19_b1_ort_fp32"
RESNET_B1 = SHIPPED / "resnet50_b1_ort_fp32"


def one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    return lines[0]


def test_every_shipped_bundle_records_the_hash_of_its_zoo_model() -> None:
    bundles = sorted(p for p in SHIPPED.iterdir() if (p / "meta.json").is_file())
    assert len(bundles) == 20
    for path in bundles:
        meta = json.loads((path / "meta.json").read_text())
        zoo_file = (LIGHT / f"light_{meta['model']}").read_bytes()
        assert meta.get("model_sha256") == hashlib.sha256(zoo_file).hexdigest(), path.name


def test_the_same_model_under_another_name_is_accepted(tmp_path: Path) -> None:
    renamed = tmp_path / "my_network.onnx"
    shutil.copy(LIGHT / "light_vgg19.onnx", renamed)
    out = CliRunner().invoke(main, ["analyze", str(renamed), "--profile", str(VGG_B1)])
    assert out.exit_code == 0, out.output
    assert "Benanza ratio" in out.output


def test_another_model_under_the_bundles_name_is_refused(tmp_path: Path) -> None:
    """The issue's case: VGG-19 saved as resnet50.onnx, analyzed with a ResNet-50 bundle."""
    impostor = tmp_path / "resnet50.onnx"
    shutil.copy(LIGHT / "light_vgg19.onnx", impostor)
    out = CliRunner().invoke(main, ["analyze", str(impostor), "--profile", str(RESNET_B1)])
    assert out.exit_code == 1
    line = one_error_line(out.output)
    assert "profile bundle of another model ('resnet50.onnx'" in line and str(impostor) in line


def test_generate_from_profile_uses_the_hash_too(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(LIGHT / "light_vgg19.onnx", models / "renamed.onnx")
    ok = CliRunner().invoke(main, ["generate", str(models), "--out", str(tmp_path / "p"),
                                   "--from-profile", str(VGG_B1)])
    assert ok.exit_code == 0, ok.output
    impostor = tmp_path / "vgg19.onnx"
    shutil.copy(LIGHT / "light_resnet50.onnx", impostor)
    bad = CliRunner().invoke(main, ["generate", str(impostor), "--out", str(tmp_path / "q"),
                                    "--from-profile", str(VGG_B1)])
    assert bad.exit_code == 1
    assert "profile bundle of another model" in one_error_line(bad.output)


def test_a_profile_that_maps_onto_few_layers_is_refused(tmp_path: Path) -> None:
    """A bundle without a hash (written before it) passes the name check; its profile (VGG-19's)
    maps onto few of ResNet-50's layers, so the run is refused instead of reported."""
    bundle = tmp_path / "old_bundle"
    shutil.copytree(VGG_B1, bundle)
    meta = json.loads((bundle / "meta.json").read_text())
    meta["model"] = "resnet50.onnx"
    del meta["model_sha256"]
    (bundle / "meta.json").write_text(json.dumps(meta))
    out = CliRunner().invoke(main, ["analyze", str(LIGHT / "light_resnet50.onnx"), "--profile", str(bundle)])
    assert out.exit_code == 1, out.output
    line = one_error_line(out.output)
    assert "of 176 layers of light_resnet50 map onto this profile" in line
    assert f"benanza profile {LIGHT / 'light_resnet50.onnx'} --batch 1" in line


@pytest.mark.parametrize("args, says", [
    (["--batch", "3"], "library layers of light_resnet50 at batch 3 in fp32,tf32"),
    (["--dtype", "bf16"], "library layers of light_resnet50 at batch 1 in bf16"),
])
def test_a_batch_or_precision_the_database_lacks_fails_loudly(args: list[str], says: str) -> None:
    """Was "LBL_seq 0 ms" with exit code 0 for --batch 3."""
    out = CliRunner().invoke(main, ["analyze", str(LIGHT / "light_resnet50.onnx"), *args])
    assert out.exit_code == 1, out.output
    line = one_error_line(out.output)
    assert "holds measurements of none" in line and says in line
    assert f"benanza run {LIGHT / 'light_resnet50.onnx'} --batch" in line and "--db perf.db" in line
