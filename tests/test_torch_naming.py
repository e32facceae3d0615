"""PyTorch profiles of real exports map to the layers: onnx2torch converts a materialized export,
it runs on the CPU under torch.profiler with benanza's per-node ranges, and the ranges the trace
records name the layers of the model the analyzer loads (the exporters' ``/layer1/layer1.0/conv1/Conv``
names, which onnx2torch's module names mangle).  Needs torch and onnx2torch (skipped without)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")

from benanza.model.onnx_import import load_model  # noqa: E402
from benanza.profile.capture_child import node_ranges  # noqa: E402
from benanza.profile.kineto import read_kineto_trace  # noqa: E402
from benanza.profile.materialize import materialize  # noqa: E402
from benanza.profile.node_layers import torch_range_layers  # noqa: E402
from benanza.profile.onnx_torch import ConversionError, convert_named  # noqa: E402
from benanza.profile.ranges import NODE_RANGE, RUN_RANGE  # noqa: E402

EXPORTS = Path(__file__).parent / "data" / "exports"
BATCH, SEQ = 2, 16


@pytest.mark.parametrize("stem", ["tinyresnet_ts17", "tinyresnet_dynamo18", "tinyvit_dynamo20", "tinygpt2_dynamo20",
                                  "tinybert_ts17"])
def test_profiled_ranges_map_every_layer(tmp_path: Path, stem: str) -> None:
    source = EXPORTS / f"{stem}.onnx"
    mat = materialize(source, BATCH, tmp_path / "model.onnx", seq_len=SEQ)
    module, names = convert_named(str(mat.path))
    node_ranges(module, names)
    proto = onnx.load(str(mat.path))
    feeds = []
    for v in proto.graph.input:
        shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
        integer = v.type.tensor_type.elem_type == TensorProto.INT64
        feeds.append(torch.ones(shape, dtype=torch.int64) if integer else torch.rand(shape))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        with torch.profiler.record_function(RUN_RANGE):
            module(*feeds)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    ranges = [a for a in read_kineto_trace(tmp_path / "trace.json").annotations
              if a.name.startswith(NODE_RANGE) and not a.gpu]
    model = load_model(source, BATCH, SEQ)
    mapped = {i for node in torch_range_layers(model, ranges) for i in node.layers}
    assert len(mapped) >= 0.95 * len(model.layers), sorted({r.name for r in ranges})[:5]
    assert mapped == {layer.index for layer in model.layers}
    if stem == "tinyresnet_ts17":  # the TorchScript exporter's module-path names, as the model spells them
        assert NODE_RANGE + "/layer1/layer1.0/conv1/Conv" in {r.name for r in ranges}


@pytest.mark.parametrize("path", sorted(EXPORTS.glob("*.onnx")), ids=lambda p: p.stem)
def test_conversion_computes_what_onnx_runtime_computes(tmp_path: Path, path: Path) -> None:
    """Every export of the corpus converts (Gelu-20, ReduceMean-18, Split-18, Flatten at axis == rank,
    opset-16 comparisons...) and the module's output matches ONNX Runtime's on the same materialized model."""
    ort = pytest.importorskip("onnxruntime")
    mat = materialize(path, BATCH, tmp_path / "model.onnx", seq_len=SEQ)
    module, _ = convert_named(str(mat.path))
    sess = ort.InferenceSession(str(mat.path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: (np.ones((BATCH, SEQ), np.int64) if "int" in i.type
                      else rng.random((BATCH, 3, 32, 32), dtype=np.float32)) for i in sess.get_inputs()}
    with torch.no_grad():
        out = module(*[torch.from_numpy(v) for v in feeds.values()])
    out = out[0] if isinstance(out, (list, tuple)) else out
    np.testing.assert_allclose(out.numpy(), sess.run(None, feeds)[0], rtol=1e-4, atol=1e-5)


def test_unconvertible_node_is_one_line(tmp_path: Path) -> None:
    """An op onnx2torch has no converter for: one line naming the node and op (no traceback)."""
    node = helper.make_node("Det", ["x"], ["y"], name="weird/det")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "det.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ConversionError) as err:
        convert_named(str(path))
    assert str(err.value) == "onnx2torch cannot convert node 'weird/det' (Det, version 11): no converter for it"
