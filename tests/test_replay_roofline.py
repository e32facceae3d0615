"""A fused chain the bound charges by the copy benchmark (its bytes at the roofline, no call of it) runs as
a roofline chain. EfficientNet-B0's SiLUs (Sigmoid -> Mul) at batch 64 on the H100: the copy row was the
fastest charge of the fused candidate, and the replay refused ("its bound is a roofline charge has no replay
step yet") where it should run what a roofline chain runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_replay
from onnx import helper, numpy_helper

from benanza.analyze import replay as ana
from benanza.generate import replay as gen
from benanza.library import Api, Fusion, Precision
from benanza.workflows.replay import plan_model

FP16 = (Precision.FP16,)


def silu_model(path: Path) -> Path:
    """x -> Conv 1x1 -> y; y * Sigmoid(y): a conv and the SiLU chain a fusion candidate covers whole."""
    import numpy as np

    w = numpy_helper.from_array(np.zeros((32, 32, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
             helper.make_node("Sigmoid", ["y"], ["s"], name="sigmoid"),
             helper.make_node("Mul", ["y", "s"], ["z"], name="mul")]
    return test_replay.save_model(path, "silu", nodes, [w], ["batch", 32, 28, 28], {"z": ["batch", 32, 28, 28]})


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


def residual_model(path: Path) -> Path:
    """x -> Conv 3x3 (pads 1) -> y; y + x: a residual Add that a measured in-place cudnnAddTensor can charge."""
    import numpy as np

    w = numpy_helper.from_array(np.zeros((32, 32, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["y", "x"], ["z"], name="add")]
    return test_replay.save_model(path, "residual", nodes, [w], ["batch", 32, 28, 28], {"z": ["batch", 32, 28, 28]})


def test_an_add_charged_its_in_place_call_writes_a_buffer_of_its_own(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """EfficientNet-B0 b64 fp32 on the H100: a residual Add's fastest charge was its measured cudnnAddTensor
    (C += A), and the program refused the plan ("a bias add runs in place"): the step read one input and wrote
    another buffer. The Add now runs benanza's chain kernel on both inputs, noted as such."""
    model = residual_model(tmp_path / "residual.onnx")
    monkeypatch.setattr(test_replay, "WINNERS", {(Api.ADD_TENSOR, "fp32"): 1e-7, (Api.CONV_BIAS_ACT, "fp32"): 5.0,
                                                 (Api.GRAPH_CONV, "fp32"): 5.0})
    db = test_replay.transformer_db(tmp_path / "residual.db", model, 4, None)
    p = plan_model(model, db, 4, (Precision.FP32,), cache=False)
    assert all(s.reads == (s.writes,) for s in p.steps if s.kind in gen.IN_PLACE_KINDS)
    (add,) = [s for s in p.steps if "add" in s.names]
    conv = next(s for s in p.steps if "conv" in s.names)
    assert (add.kind, add.note) == (gen.StepKind.CHAIN, ana.IN_PLACE_NOTE)
    assert add.measured_ms is None and add.charged_ms == pytest.approx(1e-7)
    assert sorted(add.reads) == sorted((conv.writes, conv.reads[0]))
