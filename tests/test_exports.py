"""Today's exports load: the checked-in corpus of tiny torch.onnx.export files (TorchScript exporter at
opset 17, dynamo exporter at 18 and 20; tests/data/exports/make_exports.py made them), with symbolic
batch/sequence dims and Shape->Gather->Concat->Reshape chains.  No torch needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza.errors import BenanzaError
from benanza.model.onnx_import import load_model

EXPORTS = Path(__file__).parent / "data" / "exports"
FILES = sorted(EXPORTS.glob("*.onnx"))
# The tiny configs of make_exports.py: hidden size, layers, ViT patches and patch size.
HIDDEN, LAYERS, PATCHES, PATCH = 16, 2, 16, 8


def encoder_macs(layers: int, seq: int, hidden: int) -> int:
    """MACs of a transformer encoder/decoder stack with a 4h feed-forward, per sample:
    L * (12*s*h^2 + 2*s^2*h): Q, K, V and output projections 4*s*h^2, feed-forward 8*s*h^2,
    Q.K^T and attention.V s^2*h each.  Embedding lookups, norms and softmax have no MACs."""
    return layers * (12 * seq * hidden**2 + 2 * seq**2 * hidden)


def expected_macs(stem: str, batch: int, seq: int) -> int:
    if stem.startswith(("tinybert", "tinygpt2")):
        return batch * encoder_macs(LAYERS, seq, HIDDEN)
    if stem.startswith("tinyvit"):  # 16 patches + the class token; the patch embedding is a stride-8 conv
        return batch * (encoder_macs(LAYERS, PATCHES + 1, HIDDEN) + PATCHES * 3 * PATCH * PATCH * HIDDEN)
    # tinyresnet: stem conv 3->8 k3 s2 to 16x16, four 8->8 k3 convs at 8x8, fc 8->10
    return batch * (16 * 16 * 8 * 27 + 4 * 8 * 8 * 8 * 72 + 8 * 10)


def test_corpus_covers_both_exporters_and_opsets() -> None:
    opsets = {f.stem: next(o.version for o in onnx.load(str(f)).opset_import if o.domain == "") for f in FILES}
    assert {v for k, v in opsets.items() if "_ts" in k} == {17}
    assert {v for k, v in opsets.items() if "_dynamo" in k} == {18, 20}
    assert {k.split("_")[0] for k in opsets} == {"tinybert", "tinygpt2", "tinyresnet", "tinyvit"}
    assert all(f.stat().st_size < 100_000 for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
@pytest.mark.parametrize(("batch", "seq"), [(1, 16), (8, 48)])  # the tiny configs hold 64 positions
def test_export_loads_with_exact_macs(path: Path, batch: int, seq: int) -> None:
    model = load_model(path, batch, seq)
    assert sum(layer.macs for layer in model.layers) == expected_macs(path.stem, batch, seq)
    for layer in model.layers:  # every shape concrete and the batch everywhere it should be
        assert all(d >= 1 for t in [*layer.inputs, *layer.outputs] for d in t.shape), layer.name
    if "bert" in path.stem or "gpt2" in path.stem:
        matmuls = [layer for layer in model.layers if layer.op == "MatMul" and len(layer.outputs[0].shape) == 4]
        assert {layer.outputs[0].shape[-2] for layer in matmuls} == {seq}  # attention scores: s x s


@pytest.mark.parametrize("path", [EXPORTS / "tinybert_ts17.onnx", EXPORTS / "tinygpt2_dynamo20.onnx"],
                         ids=lambda p: p.stem)
def test_symbolic_sequence_without_a_value_is_one_line(path: Path) -> None:
    with pytest.raises(BenanzaError) as err:
        load_model(path, 1)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and "'seq'" in text and "--seq-len" in text


def test_ops_without_a_library_call_are_listed_problems() -> None:
    model = load_model(EXPORTS / "tinybert_ts17.onnx", 1, 16)
    listed = {p.split("op '")[1].split("'")[0] for p in model.problems}
    assert {"And", "GatherElements"} <= listed  # LayerNormalization and Erf have benchmarks (graph norm, pointwise)
    assert not {"LayerNormalization", "Erf", "MatMul", "Softmax"} & listed
    assert all(str(EXPORTS / "tinybert_ts17.onnx") in p and "\n" not in p for p in model.problems)


def _scalar_chain_model(path: Path) -> None:
    """x -> Shape -> Gather(scalar 0) -> Unsqueeze -> Concat([-1]) -> Reshape: the exporters' flatten chain,
    with the gathered index a 0-d constant (what both torch exporters write)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["shape"], name="shape"),
        helper.make_node("Constant", [], ["zero"], name="zero",
                         value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
        helper.make_node("Gather", ["shape", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(np.array([0], np.int64), "axes"),
                     onnx.numpy_helper.from_array(np.array([-1], np.int64), "minus1")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("batch", [1, 5])
def test_scalar_index_chain_resolves(tmp_path: Path, batch: int) -> None:
    """The flatten chain of a symbolic-batch export resolves at any batch."""
    path = tmp_path / "chain.onnx"
    _scalar_chain_model(path)
    model = load_model(path, batch)
    reshape = next(layer for layer in model.layers if layer.op == "Reshape")
    assert reshape.outputs[0].shape == (batch, 12)


def test_folded_scalars_stay_scalars_in_the_inference_copy() -> None:
    """Failed on the old loader: np.ascontiguousarray made a folded 0-d constant shape [1], so the
    exporters' Gather(Shape, 0) -> Unsqueeze -> Concat chains broke onnx shape inference in round 2."""
    from benanza.model import onnx_import

    nodes = [helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze")]
    proto = helper.make_model(helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("n1", 7, None)]))
    consts = onnx_import._Consts([])
    consts.add("n", np.array(3, np.int64))
    consts.add("axes", np.array([0], np.int64))
    light = onnx_import._inference_proto(proto, nodes, consts, [], [])
    assert {t.name: list(t.dims) for t in light.graph.initializer} == {"n": [], "axes": [1]}


@pytest.mark.parametrize("stem", ["tinybert_dynamo18", "tinygpt2_dynamo20", "tinyvit_dynamo18"])
def test_materialized_export_runs_in_onnx_runtime(tmp_path: Path, stem: str) -> None:
    """What `benanza profile --seq-len` hands a framework: static inputs, folded constants (index tensors
    with their values), random weights; ONNX Runtime (CPU) runs it to the shape the loader inferred."""
    ort = pytest.importorskip("onnxruntime")
    from benanza.profile.materialize import materialize

    mat = materialize(EXPORTS / f"{stem}.onnx", 3, tmp_path / "model.onnx", seq_len=24)
    proto = onnx.load(str(mat.path))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in proto.graph.input}
    assert all(s[0] == 3 for s in shapes.values())
    if "vit" not in stem:
        assert all(s == [3, 24] for s in shapes.values())
    sess = ort.InferenceSession(str(mat.path), providers=["CPUExecutionProvider"])
    feeds = {i.name: (np.ones(shapes[i.name], np.int64) if "int" in i.type
                      else np.random.default_rng(0).random(shapes[i.name], dtype=np.float32))
             for i in sess.get_inputs()}
    out = sess.run(None, feeds)[0]
    if "vit" not in stem:  # folded masks and position ids hold the export's own values: same result
        original = ort.InferenceSession(str(EXPORTS / f"{stem}.onnx"), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(out, original.run(None, feeds)[0], rtol=1e-5, atol=1e-5)
    model = load_model(EXPORTS / f"{stem}.onnx", 3, 24)
    last = {t.name: t.shape for layer in model.layers for t in layer.outputs}
    assert out.shape == last[proto.graph.output[0].name]
    assert np.isfinite(out).all()


def test_cli_layers_needs_the_sequence_length() -> None:
    from click.testing import CliRunner

    from benanza.cli import main

    path = EXPORTS / "tinygpt2_dynamo18.onnx"
    refused = CliRunner().invoke(main, ["layers", str(path)])
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert f"{path}: input 'input_ids' has dynamic dimension 'seq' at axis 1 with no value" in refused.output
    listed = CliRunner().invoke(main, ["layers", str(path), "--batch", "2", "--seq-len", "32", "--json"])
    assert listed.exit_code == 0, listed.output


@pytest.mark.filterwarnings("ignore:overflow")
@pytest.mark.parametrize("stem", ["tinybert_dynamo18", "tinybert_ts17"])
def test_fp16_copy_of_a_masked_export_runs(tmp_path: Path, stem: str) -> None:
    """BERT casts its attention mask to float32: the fp16 copy casts it to float16 (was refused: 'Cast')."""
    ort = pytest.importorskip("onnxruntime")
    from benanza.profile.materialize import materialize, to_fp16

    mat = materialize(EXPORTS / f"{stem}.onnx", 2, tmp_path / "model.onnx", seq_len=16)
    half = to_fp16(mat.path, tmp_path / "half.onnx")
    sess = ort.InferenceSession(str(half), providers=["CPUExecutionProvider"])
    out = sess.run(None, {i.name: np.ones((2, 16), np.int64) for i in sess.get_inputs()})[0]
    assert out.dtype == np.float16 and out.shape == (2, 16, HIDDEN) and np.isfinite(out).all()
