"""A fused chain the bound charges by the copy benchmark (its bytes at the roofline, no call of it) runs as
a roofline chain. EfficientNet-B0's SiLUs (Sigmoid -> Mul) at batch 64 on the H100: the copy row was the
fastest charge of the fused candidate, and the replay refused ("its bound is a roofline charge has no replay
step yet") where it should run what a roofline chain runs."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
import test_replay
from onnx import TensorProto, helper, numpy_helper

from benanza.analyze import replay as ana
from benanza.generate import replay as gen
from benanza.library import Api, Fusion, Precision
from benanza.workflows.replay import plan_model

FP16 = (Precision.FP16,)


def silu_model(path: Path) -> Path:
    """x -> Conv 1x1 -> y; y * Sigmoid(y): a conv and the SiLU chain a fusion candidate covers whole."""
    import numpy as np

    w = numpy_helper.from_array(np.zeros((32, 32, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
         helper.make_node("Sigmoid", ["y"], ["s"], name="sigmoid"),
         helper.make_node("Mul", ["y", "s"], ["z"], name="mul")],
        "silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32, 28, 28])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 32, 28, 28])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_copy_charged_chain_runs_as_a_roofline_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy benchmark's charge of the fused candidate (warm L2) beats its measured fused call and the DRAM
    roofline, as at EfficientNet's b64: the chain runs that one measured call, noted as a roofline stand-in
    (the parent refused)."""
    model = silu_model(tmp_path / "silu.onnx")
    monkeypatch.setattr(test_replay, "WINNERS", {(Api.GRAPH_POINTWISE, "fp16"): 0.004, (Api.COPY, "fp16"): 0.00001})
    db = test_replay.transformer_db(tmp_path / "silu.db", model, 4, None)
    p = plan_model(model, db, 4, FP16, cache=False)
    chain = [s for s in p.steps if set(s.names) == {"sigmoid", "mul"}]
    assert len(chain) == 1, [(s.kind, s.names) for s in p.steps]
    step = chain[0]
    assert (step.kind, step.fusion, step.note) == (gen.StepKind.GRAPH_POINTWISE, Fusion.POINTWISE.value,
                                                   ana.ROOFLINE_NOTE)
    assert step.measured_ms == pytest.approx(0.004) and step.charged_ms < step.measured_ms
