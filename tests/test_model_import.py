"""The model processor on real models: the nine light ONNX zoo models and tiny generated ones.

Expectations are computed here independently of the processor: layer counts from
the models' op inventory, MACs from ONNX's own shape inference on the untouched
file, auto_pad from ONNX's reference evaluator.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from benanza.errors import BenanzaError
from benanza.model.onnx_import import load_model, load_models

ZOO_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
ZOO = sorted(p.stem.removeprefix("light_") for p in ZOO_DIR.glob("light_*.onnx"))
DATA = Path(__file__).resolve().parent / "data" / "models"

# Layers = nodes minus those that fold to constants.  From each model's op inventory:
# every ConstantOfShape (the run-time weights), DenseNet's and Inception-v2's Unsqueeze of
# BN weights, and Inception-v1's Reshape of the classifier weight.
EXPECTED_LAYERS = {
    "bvlc_alexnet": 40 - 16,
    "densenet121": 1746 - 836 - 242,
    "inception_v1": 237 - 93 - 1,
    "inception_v2": 916 - 407 - 138,
    "resnet50": 415 - 239,
    "shufflenet": 446 - 243,
    "squeezenet": 105 - 39,
    "vgg19": 82 - 36,
    "zfnet512": 38 - 16,
}
# Published multiply-accumulate counts at batch 1 (224x224).
KNOWN_GMACS = {"vgg19": 19.6, "resnet50": 4.09, "bvlc_alexnet": 0.655}


def zoo_file(name: str) -> Path:
    return ZOO_DIR / f"light_{name}.onnx"


@pytest.fixture(scope="module")
def zoo1():
    return {name: load_model(zoo_file(name)) for name in ZOO}


@pytest.fixture(scope="module")
def zoo8():
    return {name: load_model(zoo_file(name), batch=8) for name in ZOO}


def test_the_zoo_has_nine_models():
    assert ZOO == sorted(EXPECTED_LAYERS)


def _constant_nodes(model: onnx.ModelProto) -> int:
    """Independent count of folding nodes: generators, and shape ops whose inputs are all weights."""
    g = model.graph
    weights = {t.name for t in g.initializer}
    weights |= {o for n in g.node if n.op_type in ("ConstantOfShape", "Constant") for o in n.output}
    count = 0
    for n in g.node:
        if n.op_type in ("ConstantOfShape", "Constant"):
            count += 1
        elif n.op_type in ("Unsqueeze", "Reshape") and n.input[0] in weights:
            weights.update(n.output)
            count += 1
    return count


@pytest.mark.parametrize("name", ZOO)
def test_zoo_layer_count_is_the_non_constant_nodes(zoo1, name):
    proto = onnx.load(str(zoo_file(name)))
    model = zoo1[name]
    assert len(model.layers) == EXPECTED_LAYERS[name] == len(proto.graph.node) - _constant_nodes(proto)
    assert not {"ConstantOfShape", "Constant"} & {layer.op for layer in model.layers}
    assert model.problems == []
    assert [layer.index for layer in model.layers] == list(range(len(model.layers)))


def _independent_macs(path: Path) -> int:
    """Conv N*K*OH*OW*C/g*R*S and Gemm M*N*K from ONNX's shape inference on the file as shipped."""
    proto = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    g = proto.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*g.input, *g.value_info, *g.output]}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    macs = 0
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Conv":
            n_, k, oh, ow = shapes[n.output[0]]
            _, c_per_group, r, s = shapes[n.input[1]]
            macs += n_ * k * oh * ow * c_per_group * r * s
        elif n.op_type == "Gemm":
            a = shapes[n.input[0]]
            m_, n_out = shapes[n.output[0]]
            k = a[0] if attrs.get("transA", 0) else a[1]
            macs += m_ * n_out * k
    return macs


@pytest.mark.parametrize("name", ZOO)
def test_zoo_macs_match_an_independent_count(zoo1, name):
    assert sum(layer.macs for layer in zoo1[name].layers) == _independent_macs(zoo_file(name))


@pytest.mark.parametrize("name", sorted(KNOWN_GMACS))
def test_zoo_macs_match_published_figures(zoo1, name):
    gmacs = sum(layer.macs for layer in zoo1[name].layers) / 1e9
    assert gmacs == pytest.approx(KNOWN_GMACS[name], rel=0.02)


@pytest.mark.parametrize("name", ZOO)
def test_macs_and_flops_scale_exactly_with_batch(zoo1, zoo8, name):
    one, eight = zoo1[name], zoo8[name]
    assert eight.batch == 8 and one.batch == 1
    assert sum(layer.macs for layer in eight.layers) == 8 * sum(layer.macs for layer in one.layers)
    assert sum(layer.flops for layer in eight.layers) == 8 * sum(layer.flops for layer in one.layers)
    assert all(layer.outputs[0].shape[0] == 8 for layer in eight.layers)


def test_hard_coded_reshape_batch_is_repointed(zoo8):
    shuffle = [layer for layer in zoo8["shufflenet"].layers if layer.op == "Reshape"]
    assert len(shuffle) == 33
    assert all(layer.attrs["shape"][0] == 8 and layer.outputs[0].shape[0] == 8 for layer in shuffle)
    assert all(math.prod(layer.inputs[0].shape) == math.prod(layer.outputs[0].shape) for layer in shuffle)
    (fc,) = [layer for layer in zoo8["resnet50"].layers if layer.op == "Gemm"]
    assert fc.inputs[0].shape == (8, 2048) and fc.outputs[0].shape == (8, 1000)


def test_unique_layer_keys_across_the_zoo_dedupe(zoo1, capsys):
    total = sum(len(m.layers) for m in zoo1.values())
    unique = len(set().union(*(m.unique_keys for m in zoo1.values())))
    with capsys.disabled():
        print(f"\nzoo at batch 1: {total} layers, {unique} unique layer keys")
    assert unique < total
    assert len(zoo1["resnet50"].unique_keys) < len(zoo1["resnet50"].layers) / 2  # its repeated bottlenecks


def test_old_ir_weights_are_constants_and_only_data_is_an_input(zoo1):
    model = zoo1["densenet121"]
    inputs = {t.name for layer in model.layers for t in layer.inputs if not t.constant}
    produced = {t.name for layer in model.layers for t in layer.outputs}
    assert inputs - produced == {"data_0"}
    scale_muls = [layer for layer in model.layers if layer.op == "Mul"]
    assert len(scale_muls) == 121
    assert all(layer.inputs[1].constant and layer.inputs[1].shape[1:] == (1, 1) for layer in scale_muls)
    conv = model.layers[0]
    assert conv.op == "Conv" and conv.inputs[1].constant and conv.inputs[1].shape == (64, 3, 7, 7)


def test_zoo_attributes_are_normalized(zoo1):
    lrn = next(layer for layer in zoo1["bvlc_alexnet"].layers if layer.op == "LRN")
    assert set(lrn.attrs) == {"size", "alpha", "beta", "bias"}
    gemm = next(layer for layer in zoo1["vgg19"].layers if layer.op == "Gemm")
    assert gemm.attrs == {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1}
    softmax = next(layer for layer in zoo1["vgg19"].layers if layer.op == "Softmax")
    assert softmax.attrs == {"axis": 1}  # opset 9 default
    bn = next(layer for layer in zoo1["resnet50"].layers if layer.op == "BatchNormalization")
    assert bn.attrs["epsilon"] > 0 and "momentum" in bn.attrs
    # Inception-v1's final average pool keeps Caffe's asymmetric pads, in ONNX order.
    pool = next(layer for layer in zoo1["inception_v1"].layers if layer.op == "AveragePool")
    assert pool.attrs["pads"] == [0, 0, 1, 1] and pool.attrs["count_include_pad"] == 0


# --- tiny generated models --------------------------------------------------------------


def _out_dim(size: int, k: int, s: int, d: int, begin: int, end: int) -> int:
    return (size + begin + end - ((k - 1) * d + 1)) // s + 1


def test_asymmetric_pads_stay_in_onnx_order():
    model = load_model(DATA / "pads.onnx")
    conv, pool = model.layers
    assert conv.attrs["pads"] == [0, 1, 2, 3]  # h_begin, w_begin, h_end, w_end
    assert conv.outputs[0].shape == (1, 4, _out_dim(7, 3, 1, 1, 0, 2), _out_dim(8, 3, 1, 1, 1, 3))
    assert pool.attrs["pads"] == [1, 0, 0, 1]
    assert pool.outputs[0].shape[2:] == (_out_dim(7, 2, 2, 1, 1, 0), _out_dim(10, 2, 2, 1, 0, 1))


def _run_with_explicit_pads(path: Path, node_name: str, pads: list[int], x: np.ndarray) -> np.ndarray:
    """Rebuild one node with explicit pads instead of auto_pad and run it with the reference evaluator."""
    proto = onnx.load(str(path))
    node = next(n for n in proto.graph.node if n.name == node_name)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != "auto_pad"}
    if node.op_type == "Conv":
        attrs["kernel_shape"] = list(next(t for t in proto.graph.initializer if t.name == node.input[1]).dims[2:])
    explicit = helper.make_node(node.op_type, list(node.input), ["out"], pads=pads, **attrs)
    graph = helper.make_graph([explicit], "g", list(proto.graph.input),
                              [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)],
                              list(proto.graph.initializer))
    return ReferenceEvaluator(helper.make_model(graph, opset_imports=list(proto.opset_import))).run(None, {"x": x})[0]


@pytest.mark.parametrize(("node", "pads"), [
    ("conv_same_upper", [1, 1, 2, 2]),
    ("conv_same_lower", [2, 2, 1, 1]),
    ("conv_valid", [0, 0, 0, 0]),
    ("conv_same_upper_s2", [1, 1, 2, 2]),
])
def test_auto_pad_resolves_like_the_onnx_reference(node, pads):
    path = DATA / "auto_pad.onnx"
    layer = next(layer for layer in load_model(path).layers if layer.name == node)
    assert layer.attrs["pads"] == pads and "auto_pad" not in layer.attrs
    x = np.random.default_rng(1).standard_normal((1, 2, 7, 9)).astype(np.float32)
    reference = ReferenceEvaluator(onnx.load(str(path)))
    expected = reference.run([n.output[0] for n in onnx.load(str(path)).graph.node if n.name == node], {"x": x})[0]
    got = _run_with_explicit_pads(path, node, layer.attrs["pads"], x)
    assert got.shape == expected.shape == layer.outputs[0].shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_pool_same_lower_puts_the_odd_pad_first():
    """ONNX's reference evaluator ignores auto_pad on pools, so this one is checked against the spec:
    out = ceil(in / stride); total = (out - 1) * stride + kernel - in; SAME_LOWER begins with the larger half."""
    layer = next(layer for layer in load_model(DATA / "auto_pad.onnx").layers if layer.name == "pool_same_lower")
    # H: in 7, k 2, s 2 -> out 4, total 1 -> (1, 0);  W: in 9, k 3, s 2 -> out 5, total 2 -> (1, 1)
    assert layer.attrs["pads"] == [1, 1, 0, 1]
    assert layer.outputs[0].shape == (1, 2, 4, 5)


def test_unknown_op_is_reported_and_the_other_layers_are_listed():
    for batch in (None, 3):
        model = load_model(DATA / "unknown_op.onnx", batch)
        assert [layer.op for layer in model.layers] == ["Conv", "example.custom.FancyNorm", "Relu"]
        assert model.layers[1].apis == ()
        assert len(model.problems) == 1
        assert "unknown_op.onnx" in model.problems[0] and "FancyNorm" in model.problems[0]
        assert model.layers[2].outputs[0].shape == ((batch or 1), 4, 8, 8)


def test_shape_chains_fold_and_dynamic_batch_is_set():
    for batch in (None, 5):
        model = load_model(DATA / "shape_chain.onnx", batch)
        assert [layer.op for layer in model.layers] == ["Conv", "Clip", "Reshape", "Gemm", "Softmax"]
        n = batch or 1
        assert model.batch == n
        clip, reshape, gemm, softmax = model.layers[1:]
        assert clip.attrs == {"min": 0.0, "max": 6.0} and len(clip.inputs) == 1
        assert reshape.outputs[0].shape == (n, 144) and reshape.attrs["shape"] == [n, -1]
        assert gemm.macs == n * 10 * 144
        assert softmax.attrs == {"axis": 1}  # opset 13 default -1, made positive


def test_reshape_that_hard_codes_batch_cannot_take_a_new_batch():
    assert load_model(DATA / "hard_batch.onnx").layers[1].outputs[0].shape == (6, 4)
    with pytest.raises(BenanzaError, match=r"hard_batch\.onnx: Reshape node 'merge_batch'.*batch"):
        load_model(DATA / "hard_batch.onnx", batch=2)


def test_external_data_is_loaded_from_the_model_directory(tmp_path):
    proto = onnx.load(str(DATA / "fusions.onnx"))
    onnx.save(proto, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.weights", size_threshold=0)
    assert (tmp_path / "ext.weights").stat().st_size > 0
    inline, external = load_model(DATA / "fusions.onnx"), load_model(tmp_path / "ext.onnx")
    assert [layer.key for layer in external.layers] == [layer.key for layer in inline.layers]
    (tmp_path / "ext.weights").unlink()
    with pytest.raises(BenanzaError, match=r"ext\.onnx: cannot load"):
        load_model(tmp_path / "ext.onnx")


def test_large_run_time_weights_are_never_materialized(tmp_path):
    """A 1 GiB ConstantOfShape weight costs its shape, not its bytes."""
    shape = numpy_helper.from_array(np.array([65536, 4096], np.int64), "wshape")
    nodes = [helper.make_node("ConstantOfShape", ["wshape"], ["w"]),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="big")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 65536])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4096])], [shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "big.onnx")
    (layer,) = load_model(tmp_path / "big.onnx").layers
    assert layer.inputs[1].constant and layer.inputs[1].shape == (65536, 4096)
    assert layer.macs == 2 * 65536 * 4096 and layer.bytes_read == 4 * (2 * 65536 + 65536 * 4096)


@pytest.mark.parametrize(("content", "message"), [
    (b"\x08\x07\x12\x04junk\xff\xff\xff", "not an ONNX model"),
    (b"hello, this is a text file\n" * 4, "not an ONNX model"),
    (b"", "not an ONNX model"),
])
def test_bad_files_raise_one_line_naming_the_file(tmp_path, content, message):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    with pytest.raises(BenanzaError, match=message) as info:
        load_model(bad)
    assert str(bad) in str(info.value) and "\n" not in str(info.value)


def test_truncated_model_raises(tmp_path):
    data = zoo_file("resnet50").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(BenanzaError, match=r"cut\.onnx: not an ONNX model"):
        load_model(tmp_path / "cut.onnx")


def test_directory_loads_every_model_and_reports_bad_files(tmp_path):
    for name in ("vgg19", "squeezenet"):
        shutil.copy(zoo_file(name), tmp_path / f"{name}.onnx")
    (tmp_path / "broken.onnx").write_bytes(b"garbage")
    (tmp_path / "notes.txt").write_text("not a model")
    models, errors = load_models(tmp_path)
    assert [m.name for m in models] == ["squeezenet", "vgg19"]
    assert len(errors) == 1 and "broken.onnx" in errors[0]
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenanzaError, match=r"empty: directory has no \*\.onnx files"):
        load_models(tmp_path / "empty")
    with pytest.raises(BenanzaError, match="no such file"):
        load_models(tmp_path / "missing.onnx")
