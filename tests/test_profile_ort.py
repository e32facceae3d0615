"""ONNX Runtime profile reader, on the real ORT 1.31 CUDA EP profile of light_resnet50 (35 runs) from an H100."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import onnx
import pytest

from benanza.errors import BenanzaError
from benanza.profile.ort_profile import read_ort_profile

SAMPLES = Path(__file__).parent / "data" / "samples"
PROFILE = SAMPLES / "ort1.31_resnet50light_b1_profile.json.gz"
RESNET_ONNX = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"


def test_resnet50_runs_and_nodes():
    prof = read_ort_profile(PROFILE)
    raw = json.load(gzip.open(PROFILE, "rt"))
    assert len(prof.runs) == sum(1 for e in raw if e.get("name") == "model_run") == 35
    assert prof.unassigned == () and prof.notes == ()
    assert set(prof.session) == {"model_loading_uri", "session_initialization"}
    names = [n.name for n in prof.runs[0].nodes]
    assert len(names) == len(set(names))
    for run in prof.runs:
        assert [n.name for n in run.nodes] == names  # the same graph every run
        assert all(run.ts_us <= n.ts_us <= run.ts_us + run.dur_us for n in run.nodes)
        assert run.executor_dur_us is not None and run.executor_dur_us <= run.dur_us
        assert {n.provider for n in run.nodes} == {"CUDAExecutionProvider"}
    first = prof.runs[1].nodes[0]
    assert first.op == "Conv" and first.name == "n0"
    assert first.inputs[0] == ("float", (1, 3, 224, 224)) and first.outputs == (("float", (1, 64, 112, 112)),)
    assert prof.runs[-1].nodes[-1].op == "Softmax"


def test_node_ops_against_the_model():
    """ORT folded every BatchNormalization into its Conv; every other op of the model is a node per run."""
    model_ops = Counter(n.op_type for n in onnx.load(RESNET_ONNX).graph.node if n.op_type != "ConstantOfShape")
    ops = Counter(read_ort_profile(PROFILE).runs[5].ops())
    assert "BatchNormalization" not in ops
    del model_ops["BatchNormalization"]
    assert ops == model_ops


def test_not_an_ort_profile(tmp_path):
    with pytest.raises(BenanzaError, match="no 'model_run'") as err:
        read_ort_profile(SAMPLES / "torch2.11_smallcnn_b1_trace.json.gz")
    assert "torch2.11_smallcnn_b1_trace.json.gz" in str(err.value)
    with pytest.raises(BenanzaError, match="not valid JSON"):
        read_ort_profile(SAMPLES / "ort1.31_zfnet512_cublas_api.log.gz")
    bad = tmp_path / "p.json"
    bad.write_text('{"a": 1}')
    with pytest.raises(BenanzaError, match="not an ONNX Runtime profile"):
        read_ort_profile(bad)
