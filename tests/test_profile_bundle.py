"""Profile bundle layout: meta.json, lazily parsed parts (plain, .gz or .xz), missing parts, kernels.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benanza import SCHEMA_VERSION
from benanza.errors import BenanzaError
from benanza.profile.bundle import KernelRecord, LatencyStats, read_bundle, read_kernels, write_kernels, write_meta
from benanza.profile.kineto import read_kineto_trace

SAMPLES = Path(__file__).parent / "data" / "samples"
H100 = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159", "cuda": "13.0", "cudnn": "9.19.0",
        "cublas": "13.1.0"}


def _torch_bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "torch_b1"
    write_meta(bundle, framework="pytorch", framework_version="2.11.0", model="smallcnn", batch=1, dtype="fp32",
               latencies_ms=[0.507, 0.413, 1.004], system=H100, timestamp="2026-11-23T09:43:00+00:00")
    shutil.copy(SAMPLES / "torch2.11_smallcnn_b1_trace.json.gz", bundle / "torch_trace.json.gz")
    shutil.copy(SAMPLES / "torch2.11_conv3x3_cudnn_api.log.gz", bundle / "cudnn_api.log.gz")
    return bundle


def test_torch_bundle_roundtrip_and_lazy_parts(tmp_path):
    bundle = read_bundle(_torch_bundle(tmp_path))
    meta = bundle.meta
    assert (meta.framework, meta.framework_version, meta.model, meta.batch, meta.dtype) == (
        "pytorch", "2.11.0", "smallcnn", 1, "fp32")
    assert meta.system == H100 and meta.schema == SCHEMA_VERSION
    assert meta.latency_ms.runs == 3 and meta.latency_ms.median == 0.507 and meta.latency_ms.max == 1.004
    assert "cudnn_log" not in bundle.__dict__  # not parsed until asked for
    assert bundle.cudnn_log is not None and bundle.cudnn_log.executes()[0].engine_id == 38
    assert bundle.torch_trace is not None and len(bundle.torch_trace.kernels) == 30
    assert bundle.cublas_log is None and bundle.ort_profile is None and bundle.kernels is None
    assert any("cublas_api.log" in note for note in bundle.notes)
    assert not any("ort_profile" in note for note in bundle.notes)  # not expected from PyTorch


def test_ort_bundle_plain_and_gz_parts(tmp_path):
    bundle_dir = tmp_path / "ort"
    write_meta(bundle_dir, framework="onnxruntime", framework_version="1.31.1", model="light_zfnet512.onnx", batch=1,
               dtype="fp32", latencies_ms=[2.0], extra={"cudnn_conv_algo_search": "EXHAUSTIVE"})
    shutil.copy(SAMPLES / "ort1.31_zfnet512_cudnn_api.log.gz", bundle_dir / "cudnn_api.log.gz")
    import gzip
    (bundle_dir / "cublas_api.log").write_bytes(gzip.open(SAMPLES / "ort1.31_zfnet512_cublas_api.log.gz").read())
    bundle = read_bundle(bundle_dir)
    assert bundle.meta.extra == {"cudnn_conv_algo_search": "EXHAUSTIVE"}
    assert bundle.meta.latency_ms == LatencyStats(runs=1, median=2.0, mean=2.0, p90=2.0, min=2.0, max=2.0)
    assert len(bundle.cublas_log.calls) == 9
    assert len(bundle.cudnn_log.executes()) == 15
    assert bundle.optimized_model is None
    missing = " ".join(bundle.notes)
    assert "ort_profile.json" in missing and "kernels.json" in missing and "optimized_model.onnx" in missing


def test_xz_parts_read_like_plain_ones(tmp_path):
    import gzip
    import lzma

    bundle_dir = tmp_path / "ort"
    write_meta(bundle_dir, framework="onnxruntime", framework_version="1.31.1", model="light_zfnet512.onnx", batch=1,
               dtype="fp32", latencies_ms=[2.0])
    for name in ("cudnn_api.log", "cublas_api.log"):
        raw = gzip.open(SAMPLES / f"ort1.31_zfnet512_{name}.gz").read()
        (bundle_dir / f"{name}.xz").write_bytes(lzma.compress(raw))
    bundle = read_bundle(bundle_dir)
    assert len(bundle.cublas_log.calls) == 9 and len(bundle.cudnn_log.executes()) == 15
    assert not any("cudnn_api.log" in note for note in bundle.notes)


def test_a_corrupt_xz_part_is_one_line(tmp_path):
    bundle_dir = tmp_path / "ort"
    write_meta(bundle_dir, framework="onnxruntime", framework_version="1.31.1", model="light_zfnet512.onnx", batch=1,
               dtype="fp32", latencies_ms=[2.0])
    (bundle_dir / "ort_profile.json.xz").write_bytes(b"not xz at all")
    with pytest.raises(BenanzaError, match=r"ort_profile.json.xz: cannot read"):
        _ = read_bundle(bundle_dir).ort_profile


def test_kernels_json_roundtrip_from_a_real_trace(tmp_path):
    trace = read_kineto_trace(SAMPLES / "torch2.11_smallcnn_b1_trace.json.gz")
    records = [KernelRecord(name=k.name, start_ns=round(k.start_us * 1000), end_ns=round(k.end_us * 1000),
                            stream=k.stream, correlation=k.correlation, api=k.runtime) for k in trace.kernels]
    path = write_kernels(tmp_path / "kernels.json", records)
    assert read_kernels(path) == records
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"name": "k", "start_ns": 5, "end_ns": 1, "stream": 7}]))
    with pytest.raises(BenanzaError, match="ends before it starts"):
        read_kernels(bad)
    bad.write_text(json.dumps([{"name": "k"}]))
    with pytest.raises(BenanzaError, match="malformed"):
        read_kernels(bad)


def test_latency_stats():
    stats = LatencyStats.from_samples([float(v) for v in range(1, 11)])
    assert (stats.runs, stats.median, stats.mean, stats.min, stats.max) == (10, 5.5, 5.5, 1.0, 10.0)
    assert stats.p90 == pytest.approx(9.1)  # linear interpolation, as numpy's default
    with pytest.raises(ValueError):
        LatencyStats.from_samples([])


def test_bad_bundles(tmp_path):
    with pytest.raises(BenanzaError, match="not found"):
        read_bundle(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BenanzaError, match=r"empty: not a profile bundle \(no meta.json\)"):
        read_bundle(empty)
    bundle = _torch_bundle(tmp_path)
    meta = json.loads((bundle / "meta.json").read_text())
    for change, message in (({"dtype": "int3"}, "unknown dtype"), ({"framework": "tf"}, "unknown framework"),
                            ({"batch": 0}, "batch must be"), ({"latency_ms": {"runs": 3}}, "latency_ms lacks median")):
        (bundle / "meta.json").write_text(json.dumps({**meta, **change}))
        with pytest.raises(BenanzaError, match=message) as err:
            read_bundle(bundle)
        assert "meta.json" in str(err.value)
    del meta["model"]
    (bundle / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(BenanzaError, match="missing field"):
        read_bundle(bundle)
    (bundle / "meta.json").write_text("{")
    with pytest.raises(BenanzaError, match="not valid JSON"):
        read_bundle(bundle)
