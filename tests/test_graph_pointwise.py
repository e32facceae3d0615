"""The graph API's fused pointwise chain (apis.graph_pointwise): GELU's Erf form (BERT, TorchScript
export), its tanh form (GPT-2, dynamo export) and a bias + SiLU chain become one program that the
template renders and kernels.cu evaluates.  The generated source is rendered, built against the real
cudnn-frontend headers and listed by test_transformer_layers's project (GELU in both forms), so the
harness is compiled once for all transformer APIs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza.apis.base import Unsupported
from benanza.apis.graph_pointwise import graph_pointwise_job
from benanza.generate.plan import plan
from benanza.library import Api, Fusion, Precision
from benanza.model.layer import Model
from benanza.model.onnx_import import load_model

EXPORTS = Path(__file__).parent / "data" / "exports"


def bias_silu(tmp_path: Path) -> Model:
    """y = (x + b) * sigmoid(x + b), x [2, 16, 32]: the bias + SiLU form of a gated MLP."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 32])
    bias = numpy_helper.from_array(np.ones(32, np.float32), "b")
    nodes = [helper.make_node("Add", ["x", "b"], ["xb"], name="bias"),
             helper.make_node("Sigmoid", ["xb"], ["s"], name="sig"),
             helper.make_node("Mul", ["xb", "s"], ["y"], name="silu")]
    model = helper.make_model(helper.make_graph(nodes, "bias_silu", [x], [y], [bias]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "bias_silu.onnx")
    return load_model(tmp_path / "bias_silu.onnx")


def chains(model: Model) -> list:
    return [f for f in model.fusions if f.pattern == Fusion.POINTWISE.value]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Model]:
    return {"gelu_erf": load_model(EXPORTS / "tinybert_ts17.onnx", 2, 16),
            "gelu_tanh": load_model(EXPORTS / "tinygpt2_dynamo20.onnx", 2, 16),
            "bias_silu": bias_silu(tmp_path_factory.mktemp("silu"))}


@pytest.mark.parametrize(("name", "modes"), [
    ("gelu_erf", ["DIV", "ERF", "ADD", "MUL", "MUL"]),
    ("gelu_tanh", ["MUL", "POW", "MUL", "ADD", "MUL", "TANH_FWD", "ADD", "MUL"]),
    ("bias_silu", ["ADD", "SIGMOID_FWD", "MUL"]),
])
def test_chain_becomes_one_program(models: dict[str, Model], name: str, modes: list[str]) -> None:
    model = models[name]
    cand = next(c for c in chains(model) if len(c.layers) == len(modes))
    row = graph_pointwise_job(cand, model, Precision.FP16).row
    assert row["modes"] == modes
    x = model.layers[cand.layers[0]].inputs[0]
    assert (row["rows"], row["cols"]) == (int(np.prod(x.shape[:-1])), x.shape[-1])
    steps = len(modes)
    for i, (a, b) in enumerate(zip(row["a"], row["b"], strict=True)):  # operands: earlier registers or constants
        assert a < i + 1 and b < i + 1 and (a >= 0 or b >= 0)
    assert len(row["a"]) == steps and all(n in (1, row["cols"]) for n in row["const_cols"])
    if name == "bias_silu":
        assert row["const_cols"] == [32] and row["a"] == [0, 1, 1] and row["b"] == [-2, -1, 2]


def test_a_chain_reading_two_tensors_is_refused(models: dict[str, Model]) -> None:
    model = models["gelu_erf"]
    cand = chains(model)[0]
    with pytest.raises(Unsupported, match="fusion candidate"):
        graph_pointwise_job(model.layers[cand.layers[0]], model, Precision.FP16)


def test_planned_beside_the_copy_roofline(models: dict[str, Model]) -> None:
    p = plan(models.values(), [Precision.FP32, Precision.FP16])
    fused = [j for j in p.jobs if j.fusion is Fusion.POINTWISE]
    assert {j.api for j in fused} == {Api.COPY, Api.GRAPH_POINTWISE}
    assert {j.precision for j in fused if j.api is Api.GRAPH_POINTWISE} == {Precision.FP32, Precision.FP16}
