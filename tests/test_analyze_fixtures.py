"""Small real models (layer IR + the model processor's graph builder) and measurements for the
analyzer and report tests.

The latencies below are TEST INPUTS chosen so that every metric can be computed by hand
in the tests; they are not measurements of any GPU.
"""

from __future__ import annotations

from benanza.analyze import Ceilings, Inputs
from benanza.library import PRECISIONS, Activation, Api, Fusion, Precision
from benanza.model.graph import build_graph
from benanza.model.layer import FusionCandidate, Layer, Model, Tensor
from benanza.records import ExecutedCall, KernelSpan, LayerProfile, OverheadKind, Profile, Result, UnmappedWork

NASTY = '<script>alert("pool")</script>&\'"</td>'
F32 = "float32"


def t(name: str, *shape: int, const: bool = False) -> Tensor:
    return Tensor(name, tuple(shape), F32, const)


def _layer(index: int, name: str, op: str, ins: list[Tensor], outs: list[Tensor], attrs: dict,
           flops: int = 0, bytes_read: int = 0, bytes_written: int = 0) -> Layer:
    return Layer(name, op, ins, outs, attrs, flops=flops, bytes_read=bytes_read, bytes_written=bytes_written,
                 index=index)


def branchy_layers() -> list[Layer]:
    """conv1 -> relu1 -> {conv2 | pool} -> concat -> flatten -> gemm -> mystery (unknown op)."""
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1}
    return [
        _layer(0, "conv1", "Conv", [t("x", 1, 16, 8, 8), t("w1", 16, 16, 3, 3, const=True), t("b1", 16, const=True)],
               [t("t0", 1, 16, 8, 8)], conv, flops=400_000_000, bytes_read=300_000, bytes_written=100_000),
        _layer(1, "relu1", "Relu", [t("t0", 1, 16, 8, 8)], [t("t1", 1, 16, 8, 8)], {},
               flops=1024, bytes_read=4096, bytes_written=4096),
        _layer(2, "conv2", "Conv", [t("t1", 1, 16, 8, 8), t("w2", 16, 16, 1, 1, const=True)],
               [t("t2", 1, 16, 8, 8)], {**conv, "kernel_shape": [1, 1], "pads": [0, 0, 0, 0]},
               flops=32_768, bytes_read=5120, bytes_written=4096),
        _layer(3, NASTY, "MaxPool", [t("t1", 1, 16, 8, 8)], [t("t3", 1, 16, 8, 8)],
               {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]},
               flops=9216, bytes_read=4096, bytes_written=4096),
        _layer(4, "concat", "Concat", [t("t2", 1, 16, 8, 8), t("t3", 1, 16, 8, 8)], [t("t4", 1, 32, 8, 8)],
               {"axis": 1}, bytes_read=8192, bytes_written=8192),
        _layer(5, "flatten", "Flatten", [t("t4", 1, 32, 8, 8)], [t("t5", 1, 2048)], {"axis": 1},
               bytes_read=8192, bytes_written=8192),
        _layer(6, "gemm", "Gemm", [t("t5", 1, 2048), t("wg", 10, 2048, const=True), t("bg", 10, const=True)],
               [t("t6", 1, 10)], {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1},
               flops=40_970, bytes_read=90_000, bytes_written=40),
        _layer(7, "mystery", "FooBar", [t("t6", 1, 10)], [t("t7", 1, 10)], {}, bytes_read=40, bytes_written=40),
    ]


def fusions(layers: list[Layer]) -> list[FusionCandidate]:
    return [
        FusionCandidate(Fusion.CONV_BIAS_ACT.value, (0, 1), (layers[0].key, layers[1].key), Activation.RELU.value),
        FusionCandidate(Fusion.CONV_BIAS.value, (2,), (layers[2].key,), ""),
    ]


def branchy_model() -> Model:
    layers = branchy_layers()
    return Model("branchy", "branchy.onnx", 1, layers, build_graph(layers), fusions(layers))


def chain_model() -> Model:
    """conv1 -> relu1 -> conv2: the same layers without the parallel branch."""
    layers = branchy_layers()[:3]
    return Model("chain", "chain.onnx", 1, layers, build_graph(layers), fusions(layers)[:1])


def R(key: str, api: Api, algo: str, dtype: str, ms: float | None, rank: int | None = None,
      fusion: str = "none", status: str = "ok", l2: str = "warm") -> Result:
    return Result(layer_key=key, api=api.value, algorithm=algo, dtype=dtype,
                  math=PRECISIONS[Precision(dtype)].math.value, fusion=fusion, status=status, l2=l2,
                  median_ms=ms, heuristic_rank=rank)


PRECOMP = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM"
IGEMM = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM"
GEMM = "CUDNN_CONVOLUTION_FWD_ALGO_GEMM"


def measurements(model: Model) -> dict[str, list[Result]]:
    layers = branchy_layers()  # a sub-model's results are a subset of these; extra keys are harmless
    L = {layer.index: layer.key for layer in layers}
    F = [f.key for f in fusions(layers)]
    m: dict[str, list[Result]] = {
        L[0]: [R(L[0], Api.CONV_FWD, IGEMM, "fp32", 0.30, 1), R(L[0], Api.CONV_FWD, PRECOMP, "fp32", 0.20, 0),
               R(L[0], Api.CONV_FWD, "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD", "fp32", None, status="not_supported"),
               R(L[0], Api.CONV_FWD, "CUDNN_CONVOLUTION_FWD_ALGO_FFT", "fp32", 0.05, l2="cold"),
               R(L[0], Api.CONV_FWD, "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT", "fp32", 0.01, status="check_failed"),
               R(L[0], Api.GRAPH_CONV, "eng0", "fp32", 0.25, 0),
               R(L[0], Api.CONV_FWD, PRECOMP, "tf32", 0.12, 0),
               R(L[0], Api.GRAPH_CONV, "eng1", "tf32", 0.10, 0), R(L[0], Api.GRAPH_CONV, "eng2", "tf32", 0.08, 1),
               R(L[0], Api.CONV_FWD, IGEMM, "fp16", 0.15, 0), R(L[0], Api.GRAPH_CONV, "eng3", "fp16", 0.0075, 0)],
        L[1]: [R(L[1], Api.ACTIVATION, "CUDNN_ACTIVATION_RELU", "fp32", 0.01),
               R(L[1], Api.ACTIVATION, "CUDNN_ACTIVATION_RELU", "fp16", 0.006)],
        L[2]: [R(L[2], Api.CONV_FWD, GEMM, "fp32", 0.10, 0), R(L[2], Api.CONV_FWD, IGEMM, "fp32", 0.09, 1),
               R(L[2], Api.GRAPH_CONV, "eng0", "fp32", 0.06, 0), R(L[2], Api.CONV_FWD, GEMM, "tf32", 0.05, 0)],
        L[3]: [R(L[3], Api.POOLING, "CUDNN_POOLING_MAX", "fp32", 0.02)],
        L[6]: [R(L[6], Api.GEMM_EX, "CUBLAS_GEMM_DEFAULT", "fp32", 0.03, 0),
               R(L[6], Api.LT_MATMUL, "algo5", "fp32", 0.025, 0),
               R(L[6], Api.GEMM_EX, "CUBLAS_GEMM_DEFAULT_TENSOR_OP", "tf32", 0.02, 0)],
        F[0]: [R(F[0], Api.CONV_BIAS_ACT, PRECOMP, "fp32", 0.15, 0, fusion=Fusion.CONV_BIAS_ACT.value),
               R(F[0], Api.GRAPH_CONV, "eng9", "tf32", 0.07, 0, fusion=Fusion.CONV_BIAS_ACT.value)],
    }
    m[F[1]] = [R(F[1], Api.CONV_BIAS_ACT, GEMM, "tf32", 0.2, 0, fusion=Fusion.CONV_BIAS.value)]
    return m


CEILINGS = Ceilings(bandwidth_gbs=2000.0, flops={Precision.FP32: 50e12, Precision.TF32: 400e12})
SYSTEM = {"gpu": "test system (no GPU: hand-made inputs)", "cudnn_version": "9.19.0", "cublas_version": "13.1.0"}


def profile() -> Profile:
    """A framework run: ORT-like as-executed calls, kernel spans and unmapped work (test inputs)."""
    return Profile(
        layers={
            0: LayerProfile(0.11, 1, ExecutedCall(Api.GRAPH_CONV.value, "eng1", "tf32"),
                            kernels=(KernelSpan("sm90_xmma_fprop", 10.0, 100.0),)),
            1: LayerProfile(0.012, 1, None, kernels=(KernelSpan("ort_relu", 112.0, 12.0),)),
            2: LayerProfile(0.105, 2, ExecutedCall(Api.CONV_FWD.value, GEMM, "fp32"),
                            kernels=(KernelSpan("im2col", 130.0, 40.0), KernelSpan("sgemm", 170.0, 65.0))),
            3: LayerProfile(0.021, 1, ExecutedCall(Api.POOLING.value, "CUDNN_POOLING_MAX", "fp32"),
                            kernels=(KernelSpan("pooling_fw", 130.0, 21.0),)),
            4: LayerProfile(0.004, 1, None),
            6: LayerProfile(0.031, 1, ExecutedCall(Api.LT_MATMUL.value, "algo99", "fp32")),
        },
        e2e_ms=0.9, gpu_busy_ms=0.35, kernel_count=9,
        unmapped=(UnmappedWork("cast_kernel", 0.01), UnmappedWork("memcpy HtoD", 0.02, OverheadKind.COPY),
                  UnmappedWork("transpose NCHW->NHWC", 0.015, OverheadKind.EXTRA_LAYER),
                  UnmappedWork("transpose NCHW->NHWC", 0.015, OverheadKind.EXTRA_LAYER)),
        framework="onnxruntime (test inputs)")


def branchy_inputs(**changes: object) -> Inputs:
    model = branchy_model()
    base = {"model": model, "measurements": measurements(model), "system": SYSTEM, "ceilings": CEILINGS,
            "profile": profile()}
    base.update(changes)
    return Inputs(**base)  # type: ignore[arg-type]
