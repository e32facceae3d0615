"""``--torch-module`` profiles map onto the module's export: module ranges, per-call scopes and the ATen ops
inside each call reach the layers (benanza/profile/module_spans.py), and what does not map says why.

The bundles in tests/data/modules are real CPU runs of real (toy-width) torchvision modules under the
capture's module ranges, recorded by tests/module_traces.py with one stand-in kernel per leaf ATen
op (a CPU has no kernels; the host side, which decides the mapping, is the GPU run's). No torch
needed: these run in CI. Swin is the issue's failure (14 of 581 layers: the first Conv,
``/features/features.0/features.0.0/Conv``, had no node)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza.cli.main import main
from benanza.errors import BenanzaError
from benanza.model.onnx_import import load_model
from benanza.profile.mapping import kernel_time_mapped, map_bundle_report
from benanza.profile.torch_module import module_of_node

MODULES = Path(__file__).parent / "data" / "modules"


def _map(name: str, where: Path | None = None):
    bundle = where or MODULES / name
    model = load_model(bundle / "exported.onnx")
    return model, map_bundle_report(model, bundle)


@pytest.mark.parametrize("name", ["tiny_swin", "tiny_bottlenecks", "tiny_vit"])
def test_every_layer_and_all_kernel_time_map(name: str) -> None:
    _, m = _map(name)
    share, _ = kernel_time_mapped(m.profile)
    assert m.unmapped_layers == ()
    assert share is not None and share >= 0.95


def test_swin_first_conv_has_its_own_node_and_kernels() -> None:
    model, m = _map("tiny_swin")
    conv = next(layer for layer in model.layers if layer.name == "/features/features.0/features.0.0/Conv")
    assert m.nodes.get(conv.index) == "features.0.0:Conv"
    assert m.profile.layers[conv.index].gpu_ms and m.profile.layers[conv.index].kernels


def test_attention_ops_reach_their_own_layers() -> None:
    """Swin's attention module runs ~30 layers of its own: its softmax kernel reaches the Softmax layer,
    not the module's first layer."""
    model, m = _map("tiny_swin")
    softmax = [layer for layer in model.layers if layer.op == "Softmax"]
    assert softmax and all(m.profile.layers[s.index].gpu_ms for s in softmax)
    assert all(any("softmax" in k.name for k in m.profile.layers[s.index].kernels) for s in softmax)


def test_a_module_called_three_times_gives_each_call_its_layer() -> None:
    """ResNet's Bottleneck calls one ReLU module three times (export scopes relu, relu_1, relu_2)."""
    model, m = _map("tiny_bottlenecks")
    relus = [layer for layer in model.layers if layer.op == "Relu"]
    assert len(relus) == 6
    for layer in relus:
        lp = m.profile.layers[layer.index]
        assert lp.fused_into is None and lp.gpu_ms and len(lp.kernels) == 1  # its own call's kernel


def test_unmapped_kernels_say_where_they_fell_one_line_per_cause() -> None:
    _, m = _map("tiny_swin")
    assert len(m.unmapped_causes) == 1
    cause, runs, ms = m.unmapped_causes[0]
    assert cause.startswith("in the range of module 'features.*.*.mlp.*': the export has no layer")
    assert "aten::dropout x4" in cause and runs == 4 and ms > 0
    assert any(n.startswith("4 unmapped GPU run(s)") for n in m.notes)


def test_launch_outside_every_range_is_explained(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(MODULES / "tiny_bottlenecks", bundle)
    import gzip

    with gzip.open(bundle / "torch_trace.json.gz", "rt") as f:
        trace = json.load(f)
    for corr, run in enumerate((e for e in list(trace["traceEvents"]) if e.get("name") == "model_run"), start=7):
        root = min((e for e in trace["traceEvents"] if e.get("name") == "benanza.node:" and e["ts"] >= run["ts"]),
                   key=lambda e: e["ts"])
        t = (run["ts"] + root["ts"]) / 2  # inside the run, before the root module's range opens
        trace["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t,
             "dur": 0.0001, "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": "stray", "pid": 0, "tid": 7, "ts": t, "dur": 2.0,
             "args": {"correlation": corr, "device": 0, "stream": 7}}]
    with gzip.open(bundle / "torch_trace.json.gz", "wt") as f:
        json.dump(trace, f)
    _, m = _map("", bundle)
    assert [(c.split(" (")[0], n) for c, n, _ in m.unmapped_causes] == [("launched outside every node range", 1)]


@pytest.mark.parametrize("found", [0, 2, "x"])
def test_a_capture_format_not_read_is_refused_in_one_line(tmp_path: Path, found: object) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(MODULES / "tiny_bottlenecks", bundle)
    meta = json.loads((bundle / "meta.json").read_text())
    meta["extra"].update(capture_format=found, benanza_version="9.9.9")
    (bundle / "meta.json").write_text(json.dumps(meta))
    model = load_model(bundle / "exported.onnx")
    with pytest.raises(BenanzaError, match=r"capture format .* \(benanza 9\.9\.9\); this benanza .* record the "
                                           r"profile again") as err:
        map_bundle_report(model, bundle)
    assert "\n" not in str(err.value)
    result = CliRunner().invoke(main, ["profile", "--torch-module", "tiny_modules:tiny_bottlenecks", "--map-only",
                                       "--out", str(bundle)])
    assert result.exit_code == 1 and "capture format" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_bundle_without_the_field_is_format_1_and_maps(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(MODULES / "tiny_bottlenecks", bundle)
    meta = json.loads((bundle / "meta.json").read_text())
    del meta["extra"]["capture_format"]
    (bundle / "meta.json").write_text(json.dumps(meta))
    _, m = _map("", bundle)
    assert m.unmapped_layers == ()


@pytest.mark.parametrize(("name", "modules", "module"), [
    ("/features/features.0/features.0.0/Conv", None, "features.0.0"),  # the Swin layer
    ("/features/features.1/features.1.0/attn/MatMul", None, "features.1.0.attn"),
    ("/blocks/blocks.0/blocks.0.1/blocks.0.1.0/Conv", None, "blocks.0.1.0"),
    ("/layer1/layer1.0/relu_2/Relu", {"layer1", "layer1.0", "layer1.0.relu"}, "layer1.0.relu"),
    ("/layer1/layer1.0/relu_2/Relu", None, "layer1.0.relu_2"),
    ("/encoder/layer.0/output/dense/MatMul", {"encoder", "encoder.layer.0", "encoder.layer.0.output",
                                              "encoder.layer.0.output.dense"}, "encoder.layer.0.output.dense"),
    ("/stage/conv/Conv", {"stage", "stage.inner.conv"}, "stage.inner.conv"),  # a grandchild called past its parent
])
def test_module_of_node_reads_the_exporters_scopes(name: str, modules: set[str] | None, module: str) -> None:
    assert module_of_node(name, modules) == module


def test_a_fresh_cpu_recording_maps_like_the_stored_one(tmp_path: Path) -> None:
    """The stored bundles are what tests/module_traces.py records today (needs torch + torchvision: skipped
    in CI): Swin recorded again maps every layer and all but the Dropouts' stand-in kernels."""
    pytest.importorskip("torchvision")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from module_traces import record

    bundle = record(tmp_path / "b", "tiny_modules:tiny_swin", 2)
    model, m = _map("", bundle)
    share, _ = kernel_time_mapped(m.profile)
    assert model.batch == 2 and m.unmapped_layers == () and share is not None and share >= 0.95


@pytest.mark.parametrize("bundle", sorted(p for p in (MODULES.parent / "modules_h100").glob("*") if p.is_dir()),
                         ids=lambda p: p.name)
def test_gpu_recorded_bundles_map(bundle: Path) -> None:
    """The same toy modules profiled on the H100 by `benanza profile --torch-module` (real kernels; the
    command is in docs/PROFILES.md), kept in tests/data/modules_h100 when recorded."""
    _, m = _map("", bundle)
    share, _ = kernel_time_mapped(m.profile)
    assert m.unmapped_layers == () and share is not None and share >= 0.95, m.unmapped_causes[:3]
