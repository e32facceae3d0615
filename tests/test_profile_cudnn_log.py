"""cuDNN API log reader, on real cuDNN 9.19 logs from an H100 (PyTorch 2.11 and ONNX Runtime 1.31)."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import onnx
import pytest

from benanza.apis.engine_config import engine_config_name, parse_engine_config_name
from benanza.errors import BenanzaError
from benanza.library import Api
from benanza.profile import cudnn_log
from benanza.profile.cudnn_log import (
    cudnn_version_string,
    read_cudnn_log,
)
from benanza.profile.cudnn_records import RecordReader, Wanted

SAMPLES = Path(__file__).parent / "data" / "samples"
TORCH_LOG = SAMPLES / "torch2.11_conv3x3_cudnn_api.log.gz"
ZFNET_LOG = SAMPLES / "ort1.31_zfnet512_cudnn_api.log.gz"
ZFNET_ONNX = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_zfnet512.onnx"
TORCH_KNOBS = {"CUDNN_KNOB_TYPE_TILE_SIZE": 8, "CUDNN_KNOB_TYPE_TILEK": 1, "CUDNN_KNOB_TYPE_STAGES": 4,
               "CUDNN_KNOB_TYPE_IDX_MODE": 0, "CUDNN_KNOB_TYPE_LDGC": 0, "CUDNN_KNOB_TYPE_SPECFILT": 0}


def _raw_lines(path: Path) -> list[str]:
    return gzip.open(path, "rt").read().splitlines()


def _execute_call_headers(lines: list[str]) -> int:
    """Independent count: cudnnBackendExecute records that carry an execution plan (not the status return)."""
    return sum(1 for i, line in enumerate(lines)
               if line.endswith("function cudnnBackendExecute() called:") and "handle:" in lines[i + 1])


def _model_convs() -> list[dict]:
    model = onnx.shape_inference.infer_shapes(onnx.load(ZFNET_ONNX))
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
              for v in [*model.graph.value_info, *model.graph.input, *model.graph.output]}
    convs = []
    for node in model.graph.node:
        if node.op_type == "Conv":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            convs.append({"x": shapes[node.input[0]], "w": shapes[node.input[1]], "y": shapes[node.output[0]],
                          "strides": tuple(attrs["strides"]), "pads": tuple(attrs["pads"])})
    return convs


def test_torch_conv_executes_engine_knobs_notes_tf32():
    log = read_cudnn_log(TORCH_LOG)
    assert log.version == "9.19.0" and log.versions == ("9.19.0",)
    assert not log.truncated and log.notes == ()
    assert log.device is not None and log.device.name == "NVIDIA H100 80GB HBM3"
    assert log.device.sm_count == 132 and log.device.compute_capability == "9.0"
    executes = log.executes()
    assert len(executes) == _execute_call_headers(_raw_lines(TORCH_LOG)) == 3  # README: 3 calls
    for call in executes:
        assert call.api == Api.GRAPH_CONV.value
        assert call.engine_id == 38
        assert call.knobs == TORCH_KNOBS
        assert call.numerical_notes == ("CUDNN_NUMERICAL_NOTE_TENSOR_CORE",) and call.tensor_core
        assert call.behavior_notes == ()
        assert call.enable_tf32 is True
        assert call.status == "CUDNN_STATUS_SUCCESS" and not call.during_heuristic
        assert call.end_us is not None and call.end_us >= call.time_us
        assert call.engine_config == "eng38_kIDX_MODE=0_kLDGC=0_kSPECFILT=0_kSTAGES=4_kTILEK=1_kTILE_SIZE=8"
        (op,) = call.operations
        assert op.kind == "CONVOLUTION_FORWARD" and op.mode == "CROSS_CORRELATION"
        assert op.tensor("xDesc").dims == (1, 64, 56, 56) and op.tensor("xDesc").strides == (200704, 3136, 56, 1)
        assert op.tensor("wDesc").dims == (64, 64, 3, 3)
        assert op.tensor("yDesc").dims == (1, 64, 56, 56) and op.tensor("yDesc").dtype == "CUDNN_DATA_FLOAT"
        assert (op.pre_padding, op.post_padding, op.strides, op.dilations) == ((1, 1), (1, 1), (1, 1), (1, 1))
        assert op.compute_type == "CUDNN_DATA_FLOAT"
    assert [c.time_us for c in executes] == sorted(c.time_us for c in executes)


def test_torch_heuristic_query_ranks_the_executed_config_first():
    log = read_cudnn_log(TORCH_LOG)
    (query,) = log.heuristics
    assert query.mode == "INSTANT"
    assert query.requested == len(query.engine_configs) == 38
    assert query.engine_configs[0] == log.executes()[0].engine_config
    assert query.graph["finalizeMode"] == "CONV_FORWARD"
    assert query.end_us is not None and query.end_us > query.time_us


def test_zfnet_one_execute_per_conv_per_run_with_model_shapes():
    log = read_cudnn_log(ZFNET_LOG)
    convs = _model_convs()
    assert len(convs) == 5
    everything = log.executes(include_heuristic_probes=True)
    assert len(everything) == _execute_call_headers(_raw_lines(ZFNET_LOG))
    executes = log.executes()
    assert len(executes) == 5 * 3  # 5 convs x 3 runs; the rest are probes inside mode-B heuristics
    for i, call in enumerate(executes):
        conv = convs[i % 5]
        (op,) = call.operations
        assert op.tensor("xDesc").dims == conv["x"]
        assert op.tensor("wDesc").dims == conv["w"]
        assert op.tensor("yDesc").dims == conv["y"]
        assert op.strides == conv["strides"]
        half = len(conv["pads"]) // 2  # ONNX pads: all begins, then all ends
        assert op.pre_padding == conv["pads"][:half] and op.post_padding == conv["pads"][half:]
        assert call.enable_tf32 is True
    # the as-executed engine config of each conv is the same in runs 2 and 3
    assert [c.engine_config for c in executes[5:10]] == [c.engine_config for c in executes[10:15]]


def test_zfnet_heuristics_mode_b_and_probe_executes_inside_them():
    log = read_cudnn_log(ZFNET_LOG)
    assert [q.mode for q in log.heuristics] == ["B"] * 5
    for query, call in zip(log.heuristics, log.executes()[5:10], strict=True):
        assert call.engine_config in query.engine_configs
        assert call.operations[0].tensor("wDesc").dims == tuple(query.graph["tensors"][0]["dim"])
        assert call.engine_config not in query.unsupported
    probes = [c for c in log.calls if c.during_heuristic]
    assert probes
    for probe in probes:
        assert any(q.time_us <= probe.time_us <= (q.end_us or 0) for q in log.heuristics)


def test_zfnet_legacy_calls_descriptors():
    log = read_cudnn_log(ZFNET_LOG)
    counts = Counter(c.function for c in log.calls if c.engine_id is None)
    assert counts == {"cudnnAddTensor": 15, "cudnnPoolingForward": 9, "cudnnLRNCrossChannelForward": 6}
    pool = next(c for c in log.calls if c.function == "cudnnPoolingForward")
    assert pool.api == Api.POOLING.value
    assert pool.descriptors["poolingDesc"]["mode"] == "CUDNN_POOLING_MAX"
    assert pool.descriptors["poolingDesc"]["windowDimA"] == "[3,3]"
    assert [t.dims for t in pool.tensors] == [(1, 96, 109, 109), (1, 96, 54, 54)]
    lrn = next(c for c in log.calls if c.function == "cudnnLRNCrossChannelForward")
    assert lrn.descriptors["normDesc"]["lrnN"] == "5" and lrn.args["lrnMode"] == "CUDNN_LRN_CROSS_CHANNEL_DIM1"
    add = next(c for c in log.calls if c.function == "cudnnAddTensor")
    assert [t.role for t in add.tensors] == ["biasDesc", "srcDestDesc"] and add.args["beta"] == "1.000000"


def test_engine_config_name_is_canonical():
    a = engine_config_name(38, {"CUDNN_KNOB_TYPE_TILE_SIZE": 8, "CUDNN_KNOB_TYPE_STAGES": 4})
    b = engine_config_name(38, {"STAGES": 4, "TILE_SIZE": 8})
    assert a == b == "eng38_kSTAGES=4_kTILE_SIZE=8"
    assert engine_config_name(5, {}) == "eng5"
    assert parse_engine_config_name(a) == (38, {"STAGES": 4, "TILE_SIZE": 8})
    assert parse_engine_config_name("eng41_kSPLIT_K_BUF=-1_kTILE_SIZE=8") == (41, {"SPLIT_K_BUF": -1, "TILE_SIZE": 8})
    with pytest.raises(ValueError):
        engine_config_name(1, {"TILE SIZE; rm -rf": 1})
    with pytest.raises(ValueError):
        engine_config_name(-1, {})
    with pytest.raises(ValueError):
        parse_engine_config_name("engine38")


def test_version_strings():
    assert cudnn_version_string(91900) == "9.19.0"
    assert cudnn_version_string(90100) == "9.1.0"
    assert cudnn_version_string(8906) == "8.9.6"


def test_truncated_log_keeps_complete_records(tmp_path):
    lines = _raw_lines(TORCH_LOG)
    last_exec = max(i for i, line in enumerate(lines) if line.endswith("function cudnnBackendExecute() called:")
                    and "handle:" in lines[i + 1])
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines[: last_exec + 20]) + "\n")  # ends inside the third execute record
    log = read_cudnn_log(cut)
    assert log.truncated
    assert len(log.executes()) == 2
    assert any("cut short" in note for note in log.notes)


def test_truncated_gzip_stream(tmp_path):
    data = TORCH_LOG.read_bytes()
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    log = read_cudnn_log(cut)
    assert log.truncated
    assert len(log.executes()) < 3


def test_other_version_records_are_reported(tmp_path):
    lines = _raw_lines(TORCH_LOG)
    last_exec = max(i for i, line in enumerate(lines) if line.endswith("function cudnnBackendExecute() called:")
                    and "handle:" in lines[i + 1])
    mixed = [line.replace("(v91900 56)", "(v90100 56)") if i >= last_exec else line for i, line in enumerate(lines)]
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(mixed) + "\n")
    log = read_cudnn_log(path)
    assert log.versions == ("9.19.0", "9.1.0")
    assert [c.cudnn_version for c in log.executes()] == ["9.19.0", "9.19.0", "9.1.0"]
    assert any("several cuDNN versions" in note for note in log.notes)


def test_not_a_cudnn_log(tmp_path):
    with pytest.raises(BenanzaError, match="not a cuDNN API log") as err:
        read_cudnn_log(SAMPLES / "ort1.31_zfnet512_cublas_api.log.gz")
    assert "ort1.31_zfnet512_cublas_api.log.gz" in str(err.value)
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(BenanzaError, match=r"empty\.log"):
        read_cudnn_log(empty)
    with pytest.raises(BenanzaError, match="cannot open"):
        read_cudnn_log(tmp_path / "missing.log")


def test_record_reader_nesting():
    records = iter(RecordReader(TORCH_LOG))
    first_with_handle = next(r for r in records if r.function == "cudnnSetStream")
    handle = first_with_handle.root.get("handle")
    assert handle is not None and handle.type == "cudnnHandle_t"
    assert handle.get("deviceProp").get("multiProcessorCount").val == "132"
    assert first_with_handle.context["Process"] == "776"
    assert first_with_handle.time == "2026-11-22T16:39:16.927967"


def test_asymmetric_pads_map_lower_to_pre_and_upper_to_post(tmp_path):
    """The real records have symmetric pads; make one asymmetric to pin lowerPadA=begin, upperPadA=end."""
    text = gzip.open(TORCH_LOG, "rt").read()
    first = text.index("function cudnnBackendExecute() called:\ni!     handle:")
    old = "upperPadA: type=int; val=[1,1];"
    upper = text.index(old, first)
    path = tmp_path / "asym.log"
    path.write_text(text[:upper] + "upperPadA: type=int; val=[2,3];" + text[upper + len(old):])
    op = read_cudnn_log(path).executes()[0].operations[0]
    assert op.pre_padding == (1, 1) and op.post_padding == (2, 3)


INSERTED = {  # a record no reader reads, put between a heuristic query's results and their configs
    "a descriptor's creation": "I! CuDNN (v91900 56) function cudnnBackendCreateDescriptor() called:",
    "a warning": "W! CuDNN (v91900 56) function cudnnBackendFinalizeEngineCfgVisualize() called:",
    "another version's record": "I! CuDNN (v90100) function cudnnBackendDestroyDescriptor() called:",
}


@pytest.mark.parametrize("inserted", sorted(INSERTED))
def test_the_records_the_reader_skips_change_nothing_it_reads(tmp_path, monkeypatch, inserted):
    """read_cudnn_log has the reader skip the records it does not read (RecordReader.wanted): what it returns
    is what it returns when the reader hands over every record, on the samples, and where a skipped record
    ends a heuristic query's results (the configs logged after it are no results) or brings a version, and
    where a config logged as a warning (not read) does not end them."""
    lines = _raw_lines(ZFNET_LOG)
    first = next(i for i, line in enumerate(lines) if line.endswith("cudnnBackendFinalizeEngineCfgVisualize() called:"))
    path = tmp_path / "inserted.log"
    path.write_text("\n".join([*lines[:first], INSERTED[inserted], "i!     x: type=int; val=1;",
                               "i! Time: 2026-11-22T16:39:10.406000 (0d+0h+0m+0s since start)",
                               "i! Process=739; Thread=739; GPU=NULL; Handle=NULL; StreamId=NULL.", "", "",
                               *lines[first:]]) + "\n")
    logs = [TORCH_LOG, ZFNET_LOG, path]
    skipped = [read_cudnn_log(log) for log in logs]
    monkeypatch.setattr(cudnn_log, "WANTED", Wanted({}, ("",)))  # every record handed over
    assert [read_cudnn_log(log) for log in logs] == skipped
    original, changed = skipped[1], skipped[2]
    configs = [len(q.engine_configs) for q in original.heuristics]
    ends = inserted != "a warning"  # a config logged as a warning is not read, but ends nothing
    assert [len(q.engine_configs) for q in changed.heuristics] == [0 if ends else configs[0], *configs[1:]]
    assert configs[0] > 0
    assert changed.versions == (("9.19.0", "9.1.0") if "version" in inserted else ("9.19.0",))
