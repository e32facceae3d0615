"""bench/validate.py's transformer cells: the fp16 copy ONNX Runtime runs (bench/onnx_fp16.py) on the
checked-in tiny exports, the feeds, the fused-attention reading of a trace, and that the measuring
side imports nothing from benanza. No torch needed (the GPU run is the lead's, docs/RESULTS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

BENCH = Path(__file__).resolve().parent.parent / "bench"
EXPORTS = Path(__file__).parent / "data" / "exports"
sys.path.insert(0, str(BENCH))

import onnx_fp16  # noqa: E402
import validate  # noqa: E402


def _cpu_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED  # see validate.cpu_output
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("stem", ["tinybert_dynamo18", "tinygpt2_dynamo18", "tinyvit_ts17"])
def test_fp16_copy_of_a_real_export_runs_and_agrees_with_fp32(stem: str) -> None:
    model = onnx.load(str(EXPORTS / f"{stem}.onnx"))
    half = onnx_fp16.to_fp16(model, stem)
    assert all(t.data_type != TensorProto.FLOAT for t in half.graph.initializer)
    assert all(o.type.tensor_type.elem_type == TensorProto.FLOAT16 for o in half.graph.output)
    if "vit" in stem:
        feeds = {"pixel_values": np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    else:  # token ids; BERT's mask hides the last 4 tokens (the mask's float32 minimum, clipped, in use)
        names = [i.name for i in model.graph.input]
        feeds = validate.transformer_feeds(names, 2, 16, 64)
        if "attention_mask" in feeds:
            feeds["attention_mask"][:, -4:] = 0
    full, cast = _cpu_run(model, feeds), _cpu_run(half, validate.half_feeds(feeds))
    assert cast.dtype == np.float16 and np.isfinite(cast).all()
    assert np.abs(full - cast.astype(np.float32)).max() < 0.01 * np.abs(full).max()


def _mask_graph() -> onnx.ModelProto:
    """HF's additive mask, (1 - mask) * float32.min + scores, with the constants as exporters write them."""
    nodes = [helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32))),
             helper.make_node("Sub", ["one", "m"], ["keep"]),
             helper.make_node("Mul", ["keep", "fmin"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["out"])]
    graph = helper.make_graph(
        nodes, "mask", [helper.make_tensor_value_info("mask", TensorProto.INT64, [2]),
                        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "fmin")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_fp16_copy_clips_the_mask_minimum_instead_of_making_nan() -> None:
    half = onnx_fp16.to_fp16(_mask_graph(), "mask")
    fmin = numpy_helper.to_array(next(t for t in half.graph.initializer if t.name == "fmin"))
    assert fmin.dtype == np.float16 and float(fmin) == -65504.0  # a plain astype gives -inf: 0 * -inf = NaN
    cast_to = next(a.i for n in half.graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to")
    assert cast_to == TensorProto.FLOAT16
    out = _cpu_run(half, {"mask": np.array([1, 0], np.int64), "scores": np.array([0.5, 0.25], np.float16)})
    assert out.tolist() == [0.5, -65504.0]


def test_fp16_copy_refuses_what_it_does_not_cover_in_one_line() -> None:
    model = _mask_graph()
    model.graph.node.append(helper.make_node("RandomNormal", [], ["noise"], name="drop<me>", shape=[2]))
    with pytest.raises(onnx_fp16.Fp16Error) as err:
        onnx_fp16.to_fp16(model, "m.onnx")
    assert str(err.value) == "m.onnx: RandomNormal node 'drop<me>': not covered by the fp16 cast"
    model = _mask_graph()
    model.graph.node[1].CopyFrom(helper.make_node("Constant", [], ["one"], value_float=1.0))
    with pytest.raises(onnx_fp16.Fp16Error, match=r"^m\.onnx: Constant node 'one': value_float attribute"):
        onnx_fp16.to_fp16(model, "m.onnx")


def test_feeds_follow_the_export_inputs() -> None:
    feeds = validate.transformer_feeds(["input_ids", "attention_mask"], 3, 128, 30522)
    assert list(feeds) == ["input_ids", "attention_mask"]
    assert feeds["input_ids"].dtype == np.int64 and feeds["input_ids"].shape == (3, 128)
    assert 0 <= feeds["input_ids"].min() and feeds["input_ids"].max() < 30522
    assert (feeds["attention_mask"] == 1).all()
    image = validate.transformer_feeds(["input"], 2, 128, None)["input"]
    assert image.shape == (2, 3, 224, 224) and image.dtype == np.float32
    assert validate.half_feeds({"input": image})["input"].dtype == np.float16
    with pytest.raises(ValueError, match="no feed for model input"):
        validate.transformer_feeds(["input_ids", "token_type_ids"], 1, 8, 10)


def test_kernel_names_per_iteration_and_the_fused_attention_ones(tmp_path: Path) -> None:
    flash = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4> >(Flash_fwd_params)"
    events = [{"cat": "user_annotation", "name": validate.ITER_RANGE, "ts": 0, "dur": 100},
              {"cat": "user_annotation", "name": validate.ITER_RANGE, "ts": 200, "dur": 100}]
    for start in (0, 200):
        events += [{"cat": "kernel", "name": "sm90_xmma_gemm_f16f16", "ts": start + 1, "dur": 10},
                   {"cat": "kernel", "name": "sm90_xmma_gemm_f16f16", "ts": start + 5, "dur": 10},  # overlaps
                   {"cat": "kernel", "name": flash, "ts": start + 20, "dur": 30},
                   {"cat": "kernel", "name": "cunn_SoftMaxForward", "ts": start + 60, "dur": 5},
                   {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": start + 70, "dur": 4}]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    kern, copy, count, names = validate.kernel_times(trace)
    assert kern == [0.049, 0.049] and copy == [0.004, 0.004] and count == [4, 4]
    assert names == {"sm90_xmma_gemm_f16f16": 2, flash: 1, "cunn_SoftMaxForward": 1}
    assert validate.fused_attention(names) == {flash: 1}
    cell = {"seq_len": 128, "fused_attention_kernels": validate.fused_attention(names)}
    assert validate.fused_column(cell) == "yes (void pytorch_flash::flash_fwd_kernel x1)"
    assert validate.fused_column({**cell, "fused_attention_kernels": {}}) == "no"
    assert validate.fused_column({"fused_attention_kernels": {}}) == "–"  # a CNN cell


def test_the_measuring_side_imports_nothing_from_benanza() -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import validate, exports, onnx_fp16; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'benanza'))")
    done = subprocess.run([sys.executable, "-c", code, str(BENCH)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    helped = subprocess.run([sys.executable, str(BENCH / "validate.py"), "measure", "--help"],
                            capture_output=True, text=True)
    assert helped.returncode == 0 and "--transformers" in helped.stdout and "--attn" in helped.stdout


def test_analyze_model_takes_the_sequence_length_a_bundle_free_cell_needs() -> None:
    from benanza.errors import BenanzaError
    from benanza.store.shipped import shipped_db
    from benanza.workflows.analysis import analyze_model

    model = EXPORTS / "tinybert_dynamo18.onnx"
    with pytest.raises(BenanzaError, match="dynamic dimension 'seq' at axis 1 with no value"):
        analyze_model(model, shipped_db(), batch=1, cache=False)
    # with seq_len the model loads: the database guard (no H100 rows for the tiny layers) speaks next
    with pytest.raises(BenanzaError, match="holds measurements of none of the 16 library layers of tinybert_dynamo18"):
        analyze_model(model, shipped_db(), batch=1, cache=False, seq_len=16)
