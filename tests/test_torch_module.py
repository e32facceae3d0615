"""``benanza profile --torch-module pkg.module:factory``: the spec, the factory's failures, the export with
module-path node names, and kernels reaching layers through the module hierarchy.

The spec and CLI checks run everywhere; the rest needs torch (CI has none: skipped there; run
here with a CPU torch). The mapping test profiles the real module on the CPU under
torch.profiler with benanza's module ranges and maps the real trace's ranges onto the
export's layers (no GPU here: the kernels-to-ranges link is the GPU capture's, unchanged)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza.cli.main import main
from benanza.errors import BenanzaError
from benanza.profile.torch_module import module_of_node, parse_spec

sys.path.insert(0, str(Path(__file__).parent))  # tiny_modules for the factories


@pytest.mark.parametrize("spec", ["tiny_modules", "tiny_modules:", ":f", "a..b:f", "a.b:f-g", "a b:f", "a:b:c"])
def test_bad_spec_is_one_line(spec: str) -> None:
    with pytest.raises(BenanzaError, match=r"expected pkg\.module:factory"):
        parse_spec(spec)


def test_spec_parts() -> None:
    assert (parse_spec("pkg.mod:make").module, parse_spec("pkg.mod:make").factory) == ("pkg.mod", "make")


@pytest.mark.parametrize(("args", "message"), [
    (["--torch-module", "not a spec"], "expected pkg.module:factory"),
    (["--torch-module", "a.b:f", "x.onnx"], "give no MODEL"),
    ([], "give MODEL"),
])
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    if "x.onnx" in args:
        (tmp_path / "x.onnx").write_bytes(b"")
        args = [a if a != "x.onnx" else str(tmp_path / "x.onnx") for a in args]
    result = CliRunner().invoke(main, ["profile", *args, "--out", str(tmp_path / "b")])
    assert result.exit_code != 0 and message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("name", "module"), [
    ("/layer1/layer1.0/conv1/Conv", "layer1.0.conv1"),
    ("/encoder/layer.0/attention/self/query/MatMul", "encoder.layer.0.attention.self.query"),
    ("/fc/Gemm", "fc"),
    ("/Flatten", None),
    ("node_conv", None),
])
def test_module_of_node(name: str, module: str | None) -> None:
    assert module_of_node(name) == module


# ---------------------------------------------------------------- with torch

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_package_xyz.mod:f", "cannot import no_such_package_xyz.mod: ModuleNotFoundError"),
    ("tiny_modules:missing", "has no callable 'missing'"),
    ("tiny_modules:raises", "the factory raised RuntimeError: weights file missing"),
    ("tiny_modules:not_a_module", "returned int, not an nn.Module"),
    ("tiny_modules:no_inputs", "no example inputs"),
    ("tiny_modules:unexportable", "export to ONNX failed"),
])
def test_factory_failures_are_one_line(tmp_path: Path, spec: str, message: str) -> None:
    _torch()
    from benanza.profile.capture import export_torch_module

    with pytest.raises(BenanzaError) as err:
        export_torch_module(spec, tmp_path / "m.onnx")
    assert message in str(err.value) and "\n" not in str(err.value) and spec in str(err.value)


def test_export_names_every_layer_by_its_module(tmp_path: Path) -> None:
    _torch()
    from tiny_modules import tiny_net

    from benanza.model.onnx_import import load_model
    from benanza.profile.capture import export_torch_module

    path, batch = export_torch_module("tiny_modules:tiny_net", tmp_path / "m.onnx", batch=2)
    model = load_model(path)
    modules = {name for name, _ in tiny_net()[0].named_modules()}
    assert batch == 2 and model.layers[0].inputs[0].shape[0] == 2
    scopes = {module_of_node(layer.name) for layer in model.layers}
    assert {"stem", "layer1.0.conv1", "layer1.1.relu", "fc"} <= scopes
    assert scopes - {None} <= modules  # every scope is a real module path


def test_export_keeps_the_batchnorm_the_module_runs(tmp_path: Path) -> None:
    """Eager PyTorch runs each BatchNorm module as a kernel of its own. The TorchScript exporter's eval
    mode folds it into the conv's weights, and the analysis then sees no BN layer: its kernels map to
    no layer and the folding gap is 0 where BN folding saved 0.29 ms of torchvision ResNet-50 b64
    on the H100 (docs/RESULTS.md §4.1)."""
    _torch()
    from benanza.model.onnx_import import load_model
    from benanza.profile.capture import export_torch_module

    path, _ = export_torch_module("tiny_modules:tiny_net", tmp_path / "m.onnx", batch=2)
    bns = [layer for layer in load_model(path).layers if layer.op == "BatchNormalization"]
    assert [module_of_node(layer.name) for layer in bns] == ["layer1.0.bn1", "layer1.1.bn1"]


def test_cpu_profile_maps_every_layer_through_the_module_hierarchy(tmp_path: Path) -> None:
    torch = _torch()
    from benanza.model.onnx_import import load_model
    from benanza.profile import torch_module
    from benanza.profile.capture import export_torch_module
    from benanza.profile.kineto import read_kineto_trace
    from benanza.profile.node_layers import torch_range_layers
    from benanza.profile.ranges import NODE_RANGE

    path, _ = export_torch_module("tiny_modules:tiny_net", tmp_path / "m.onnx", batch=2)
    model = load_model(path)
    module, inputs = torch_module.build(parse_spec("tiny_modules:tiny_net"), 2)
    torch_module.module_ranges(module)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        module(*inputs)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    ranges = [a for a in read_kineto_trace(tmp_path / "trace.json").annotations if a.name.startswith(NODE_RANGE)]
    nodes = torch_range_layers(model, ranges)
    mapped = {i for n in nodes for i in n.layers}
    assert mapped == {layer.index for layer in model.layers}
    conv1 = next(n for n in nodes if n.name == "layer1.0.conv1")
    assert [model.layers[i].op for i in conv1.layers] == ["Conv"]


def test_capture_without_a_gpu_is_one_line_and_writes_no_bundle(tmp_path: Path) -> None:
    torch = _torch()
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(main, ["profile", "--torch-module", "tiny_modules:tiny_net", "--out",
                                       str(tmp_path / "b")])
    assert result.exit_code != 0 and "no usable CUDA GPU" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "b").exists()


def test_analyze_and_generate_export_a_module_at_the_batch_asked(tmp_path: Path) -> None:
    """`--torch-module` wherever a model is taken: the module exported at --batch (a model whose export
    hard-codes its batch is analyzed at any batch); the command a refusal suggests names an export that
    stays, so it runs as written."""
    _torch()
    from click.testing import CliRunner

    from benanza.cli import main
    from benanza.model.onnx_import import load_model

    out = CliRunner().invoke(main, ["analyze", "--torch-module", "tiny_modules:tiny_net", "--batch", "3"])
    assert out.exit_code == 1 and "measure them: benanza run " in out.output, out.output  # no H100 rows for it
    suggested = Path(out.output.split("benanza run ", 1)[1].split()[0])
    assert suggested.is_file() and load_model(suggested).batch == 3
    gen = CliRunner().invoke(main, ["generate", "--torch-module", "tiny_modules:tiny_net", "--batch", "2", "--out",
                                    str(tmp_path / "p")])
    assert gen.exit_code == 0, gen.output
    assert '"batch":2' in (tmp_path / "p" / "manifest.json").read_text()
    both = CliRunner().invoke(main, ["analyze", str(tmp_path / "m.onnx"), "--torch-module", "tiny_modules:tiny_net"])
    assert both.exit_code == 1
