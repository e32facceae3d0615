"""``benanza layers`` and ``benanza models zoo`` through click's CliRunner, checked through the library."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza.cli import main
from benanza.cli.models import ZOO, zoo_source
from benanza.library import Api
from benanza.model.onnx_import import load_model

DATA = Path(__file__).resolve().parent / "data" / "models"


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory):
    dest = tmp_path_factory.mktemp("zoo")
    result = CliRunner().invoke(main, ["models", "zoo", str(dest)])
    assert result.exit_code == 0, result.output
    return dest


def test_zoo_copies_the_nine_models(zoo_dir):
    files = sorted(p.name for p in zoo_dir.glob("*.onnx"))
    assert files == sorted(ZOO.values()) and len(files) == 9
    for src, dst in ZOO.items():
        assert (zoo_dir / dst).read_bytes() == (zoo_source() / src).read_bytes()


def test_layers_table_lists_every_model_and_the_total(zoo_dir):
    result = CliRunner().invoke(main, ["layers", str(zoo_dir), "--batch", "2"])
    assert result.exit_code == 0, result.output
    for name in ZOO.values():
        assert Path(name).stem in result.output
    models = [load_model(p, 2) for p in sorted(zoo_dir.glob("*.onnx"))]
    total = sum(len(m.layers) for m in models)
    unique = len(set().union(*(m.unique_keys for m in models)))
    total_line = next(line for line in result.output.splitlines() if line.strip().startswith("total"))
    assert total_line.split()[1:3] == [str(total), str(unique)]
    resnet_line = next(line for line in result.output.splitlines() if line.strip().startswith("resnet50"))
    assert resnet_line.split()[1:4] == ["2", "176", "56"] and resnet_line.split()[-1] == "yes"


def test_layers_of_one_model_lists_every_layer(zoo_dir):
    """One model file: a row per layer (index, name, op, output shape, library calls), then its summary;
    a directory stays one row per model unless --per-layer."""
    model = load_model(zoo_dir / "squeezenet.onnx", 2)
    result = CliRunner().invoke(main, ["layers", str(zoo_dir / "squeezenet.onnx"), "--batch", "2"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    assert [(int(r[0]), r[1], r[2]) for r in rows] == [(lr.index, lr.name, lr.op) for lr in model.layers]
    first = model.layers[0]
    assert rows[0][3] == "x".join(map(str, first.outputs[0].shape)) and "cudnnConvolutionForward," in rows[0]
    assert any(line.strip().startswith("squeezenet") for line in result.output.splitlines())  # the summary row
    summary = CliRunner().invoke(main, ["layers", str(zoo_dir / "squeezenet.onnx"), "--summary"])
    assert not any(line.split()[:1] == ["0"] for line in summary.output.splitlines())
    every = CliRunner().invoke(main, ["layers", str(zoo_dir), "--per-layer"])
    assert every.exit_code == 0 and every.output.count(" layers ") >= len(ZOO)


def test_layers_json_matches_the_library(zoo_dir):
    path = zoo_dir / "resnet50.onnx"
    result = CliRunner().invoke(main, ["layers", str(path), "--json", "--batch", "4"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (entry,) = data["models"]
    model = load_model(path, 4)
    assert set(entry) == {"name", "batch", "num_layers", "unique_layers", "macs", "flops", "layers"}
    assert (entry["name"], entry["batch"], entry["num_layers"]) == ("resnet50", 4, len(model.layers))
    assert entry["unique_layers"] == len(model.unique_keys)
    assert entry["macs"] == sum(layer.macs for layer in model.layers)
    first = entry["layers"][0]
    assert set(first) == {"name", "op", "key", "inputs", "outputs", "attrs", "macs", "flops", "bytes", "api"}
    assert first["key"] == model.layers[0].key and first["op"] == "Conv"
    assert first["inputs"][0] == {"name": "gpu_0/data_0", "shape": [4, 3, 224, 224], "dtype": "float32"}
    assert first["api"] == [Api.CONV_FWD.value, Api.GRAPH_CONV.value]
    assert first["attrs"]["pads"] == [3, 3, 3, 3]


def test_unknown_op_warns_and_still_lists():
    result = CliRunner().invoke(main, ["layers", str(DATA / "unknown_op.onnx"), "--json"])
    assert result.exit_code == 0
    assert "FancyNorm" in result.stderr and "no library mapping" in result.stderr
    layers = json.loads(result.stdout)["models"][0]["layers"]
    assert [layer["op"] for layer in layers] == ["Conv", "example.custom.FancyNorm", "Relu"]
    assert layers[1]["api"] == []


def _assert_one_line_error(result, name: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an escaped exception
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and name in lines[0], result.stderr


@pytest.mark.parametrize(("content", "name"), [
    (b"\x08\x07\x12\x04junk\xff\xff\xff", "garbage.onnx"),
    (b"just some text, not a model\n", "text.onnx"),
])
def test_bad_files_give_one_line(tmp_path, content, name):
    (tmp_path / name).write_bytes(content)
    _assert_one_line_error(CliRunner().invoke(main, ["layers", str(tmp_path / name)]), name)


def test_truncated_file_gives_one_line(tmp_path, zoo_dir):
    data = (zoo_dir / "densenet121.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 3])
    _assert_one_line_error(CliRunner().invoke(main, ["layers", str(tmp_path / "cut.onnx")]), "cut.onnx")


def test_unresolvable_batch_gives_one_line():
    result = CliRunner().invoke(main, ["layers", str(DATA / "hard_batch.onnx"), "--batch", "2"])
    _assert_one_line_error(result, "hard_batch.onnx")
    assert "merge_batch" in result.stderr
    assert "--torch-module PKG.MODULE:FACTORY" in result.stderr  # the way to have it exported at that batch


def test_missing_path_and_empty_directory(tmp_path):
    _assert_one_line_error(CliRunner().invoke(main, ["layers", str(tmp_path / "nope.onnx")]), "nope.onnx")
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(CliRunner().invoke(main, ["layers", str(tmp_path / "empty")]), "empty")


def test_bad_batch_value_is_refused(zoo_dir):
    result = CliRunner().invoke(main, ["layers", str(zoo_dir / "vgg19.onnx"), "--batch", "0"])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_directory_with_one_bad_file_lists_the_rest_and_fails(tmp_path, zoo_dir):
    shutil.copy(zoo_dir / "alexnet.onnx", tmp_path)
    shutil.copy(zoo_dir / "squeezenet.onnx", tmp_path)
    (tmp_path / "broken.onnx").write_bytes(b"\x00\x01garbage")
    result = CliRunner().invoke(main, ["layers", str(tmp_path), "--json"])
    assert result.exit_code == 1
    assert [m["name"] for m in json.loads(result.stdout)["models"]] == ["alexnet", "squeezenet"]
    _assert_one_line_error(result, "broken.onnx")


def test_commands_have_help():
    for args in (["layers", "--help"], ["models", "--help"], ["models", "zoo", "--help"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and len(result.output.splitlines()) > 3
