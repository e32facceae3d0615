"""cuBLAS / cuBLASLt log reader, on the real cuBLAS 13.1 log of ONNX Runtime 1.31 running ZFNet-512 on an H100."""

from __future__ import annotations

import gzip
from pathlib import Path

import onnx
import pytest

from benanza.errors import BenanzaError
from benanza.profile.cublas_log import lt_algorithm_name, read_cublas_log

SAMPLES = Path(__file__).parent / "data" / "samples"
CUBLAS_LOG = SAMPLES / "ort1.31_zfnet512_cublas_api.log.gz"
ZFNET_ONNX = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_zfnet512.onnx"


def _model_gemms() -> list[tuple[int, int, int]]:
    """(out features, batch, in features) of each Gemm of the model, from ONNX shape inference."""
    model = onnx.shape_inference.infer_shapes(onnx.load(ZFNET_ONNX))
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
              for v in [*model.graph.value_info, *model.graph.input]}
    out = []
    for node in model.graph.node:
        if node.op_type == "Gemm":
            batch, k = shapes[node.input[0]]
            n_out, k_w = shapes[node.input[1]]  # transB=1: B is [out, in]
            assert k == k_w
            out.append((n_out, batch, k))
    return out


def test_zfnet_gemms_match_the_model_per_run():
    log = read_cublas_log(CUBLAS_LOG)
    assert log.version == "13.1.0" and not log.truncated
    gemms = _model_gemms()
    assert len(gemms) == 3
    assert len(log.calls) == 3 * len(gemms)  # 3 runs
    for i, call in enumerate(log.calls):
        assert (call.m, call.n, call.k) == gemms[i % 3]
        assert call.function == "cublasSgemm_v2" and call.kind == "gemm"
        assert (call.transa, call.transb) == ("T", "N")
        assert call.lda == call.k and call.ldc == call.m
        assert call.a_type == call.c_type == "CUDA_R_32F" and call.compute_type == "CUBLAS_COMPUTE_32F"
        assert call.math_mode == "CUBLAS_TF32_TENSOR_OP_MATH" and call.tf32
        assert call.batch_count == 1 and call.flops == 2 * call.m * call.n * call.k
        assert call.stream.startswith("0x") and call.elapsed_s is not None


def test_truncated_cublas_log(tmp_path):
    lines = gzip.open(CUBLAS_LOG, "rt").read().splitlines()
    last = max(i for i, line in enumerate(lines) if "cublasSgemm_v2(" in line)
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines[: last + 5]) + "\n")
    log = read_cublas_log(cut)
    assert log.truncated and len(log.calls) == 8
    assert "cut short" in log.notes[0]


def test_not_a_cublas_log():
    with pytest.raises(BenanzaError, match="not a cuBLAS/cuBLASLt API log") as err:
        read_cublas_log(SAMPLES / "ort1.31_resnet50light_b1_profile.json.gz")
    assert "ort1.31_resnet50light_b1_profile.json.gz" in str(err.value)


# No real cuBLASLt log was at hand: this one line is written for this test from the documented
# CUBLASLT_LOG_LEVEL format (a ZFNet-like 4096x1x18432 TF32 GEMM with a bias epilogue).
LT_LINE = ("[2026-11-22 16:39:10][cublasLt][739][Api][cublasLtMatmul] A=0x7fe108000000 "
           "Adesc=[type=R_32F rows=18432 cols=4096 ld=18432] B=0x7fe11bdc8000 Bdesc=[type=R_32F rows=18432 cols=1 "
           "ld=18432] C=0x7fe11bd80000 Cdesc=[type=R_32F rows=4096 cols=1 ld=4096] D=0x7fe11bd80000 "
           "Ddesc=[type=R_32F rows=4096 cols=1 ld=4096] computeDesc=[computeType=COMPUTE_32F_FAST_TF32 "
           "scaleType=R_32F transa=OP_T epilogue=EPILOGUE_BIAS] algo=[algoId=21 tile=MATMUL_TILE_128x64 "
           "stages=MATMUL_STAGES_64x3] workSpace=0x0 workSpaceSizeInBytes=0 beta=0 outOfPlace=0 stream=0x3d2b46f0")


def test_cublaslt_matmul_line(tmp_path):
    path = tmp_path / "cublaslt_api.log"
    path.write_text("[2026-11-22 16:39:10][cublasLt][739][Api][cublasLtCreate] lightHandle=0x3d0dad00\n"
                    + LT_LINE + "\n")
    (call,) = read_cublas_log(path).calls
    assert (call.m, call.n, call.k) == (4096, 1, 18432)
    assert (call.transa, call.transb) == ("T", "N")
    assert call.compute_type == "CUBLAS_COMPUTE_32F_FAST_TF32" and call.tf32
    assert call.a_type == "CUDA_R_32F" and call.lda == 18432 and call.ldc == 4096
    assert call.algo == "algoId=21 tile=MATMUL_TILE_128x64 stages=MATMUL_STAGES_64x3"
    assert call.epilogue == "EPILOGUE_BIAS" and call.stream == "0x3d2b46f0"


def test_lt_algorithm_names_from_real_h100_logs_spell_like_the_harness():
    """The log prints only non-default fields; the name fills in the defaults the harness
    (csrc/benanza/cublaslt_names.h) spells, so the as-executed call finds its benchmark."""
    bundles = Path(__file__).parent.parent / "perfdb" / "bundles"
    names = {lt_algorithm_name(c.algo or "") for b in ("resnet50_b64_ort_tf32", "vgg19_b64_torch_fp32")
             for c in read_cublas_log(bundles / b / "cublaslt_api.log.xz").calls}
    assert "algo43_tile128x128_stages32xAUTO_splitk1_rednone_swizzle0_custom0_innerUNDEFINED_cluster1x1x1" in names
    assert "algo20_tile128x64_stages8x5_splitk16_redinplace_swizzle0_custom0_innerUNDEFINED_clusterAUTO" in names
    assert lt_algorithm_name("algoId=43 tile=MATMUL_TILE_128x64 stages=MATMUL_STAGES_32xAUTO "
                             "clusterShape=CLUSTER_SHAPE_1x2x1") == \
        "algo43_tile128x64_stages32xAUTO_splitk1_rednone_swizzle0_custom0_innerUNDEFINED_cluster1x2x1"
    assert lt_algorithm_name("algoId=13 customOption=75") == (  # measured under this name on the H100
        "algo13_tileUNDEFINED_stagesUNDEFINED_splitk1_rednone_swizzle0_custom75_innerUNDEFINED_clusterAUTO")
    assert lt_algorithm_name("customOption=3") is None
