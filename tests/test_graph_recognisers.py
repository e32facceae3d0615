"""A graph-API call's Api comes from its whole op graph, not its first operation.

The log text below is written by hand in the format of the real cuDNN 9.19 logs of
perfdb/bundles/*/cudnn_api.log.xz (a ``cudnnBackendExecute`` record whose execution plan's
engine holds the ``opGraph``, then its return record): an SDPA graph starts with the MATMUL of
Q and K^T, which a first-operation lookup files as a GEMM.
"""

from __future__ import annotations

import pytest

from benanza.apis import REGISTRY
from benanza.library import Api
from benanza.profile.cudnn_log import read_cudnn_log
from benanza.profile.signatures import call_signature

_PAD = "i!" + " " * 21  # an operation's level: 1 + 4 spaces a level, as in a real log
_HEAD = """I! CuDNN (v91900 56) function cudnnBackendExecute() called:
i!     handle: type=cudnnHandle_t:
i!         streamId: type=cudaStream_t; streamId=(nil) (defaultStream);
i!     executionPlan: type=CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
i!         engcfg: type=CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
i!             engine: type=CUDNN_BACKEND_ENGINE_DESCRIPTOR:
i!                 opGraph: type=CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
"""
_TAIL = """i!                 engine_id: type=int; val={engine};
i!                 knobDesc: type=cudnnBackendDescriptor_t:
i!                     CUDNN_KNOB_TYPE_KERNEL_CFG: type=int; val=3;
i!                 numericalNotes: type=cudnnBackendDescriptor_t; val=NULL_PTR;
i!                 behaviorNotes: type=cudnnBackendDescriptor_t; val=NULL_PTR;
i! Time: 2026-11-23T12:49:47.{t:06d} (0d+0h+0m+0s since start)
i! Process=1963; Thread=1963; GPU=0; Handle=0x2dd7bd30; StreamId=(nil) (defaultStream).


I! CuDNN (v91900 56) function cudnnBackendExecute() called:
i!     status: type=cudnnStatus_t; val=CUDNN_STATUS_SUCCESS (0);
i! Time: 2026-11-23T12:49:47.{t2:06d} (0d+0h+0m+0s since start)
i! Process=1963; Thread=1963; GPU=NULL; Handle=NULL; StreamId=NULL.


"""


def _tensor(role: str, dims: list[int], uid: int, virtual: bool = False) -> str:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    lines = [f"{role}: type=CUDNN_BACKEND_TENSOR_DESCRIPTOR:",
             "    type: type=cudnnDataType_t; val=CUDNN_DATA_HALF (2);",
             f"    nbDims: type=int; val={len(dims)};", f"    dimA: type=int; val=[{','.join(map(str, dims))}];",
             f"    strideA: type=int; val=[{','.join(map(str, strides))}];", f"    uid: type=int64_t; val={uid};",
             f"    isVirtual: type=bool; val={'true' if virtual else 'false'};"]
    return "".join(f"{_PAD}    {line}\n" for line in lines)


def _operation(kind: str, desc: str, setting: str, tensors: list[tuple[str, list[int]]]) -> str:
    """One ``operation`` of an op graph: its tensors, then its descriptor holding one ``name=VALUE`` setting."""
    text = f"i!                     operation: type=CUDNN_BACKEND_OPERATION_{kind}_DESCRIPTOR:\n"
    for uid, (role, dims) in enumerate(tensors):
        text += _tensor(role, dims, 100 + uid, virtual=role not in ("xDesc", "aDesc", "bDesc", "wDesc"))
    if desc:
        text += f"{_PAD}    {desc}: type=CUDNN_BACKEND_{desc.removesuffix('Desc').upper()}_DESCRIPTOR:\n"
        name, value = setting.split("=")
        text += f"{_PAD}        {name}: type=int; val={value} (0);\n"
    return text


def _execute(ops: list[str], engine: int, t: int) -> str:
    return _HEAD + "".join(ops) + _TAIL.format(engine=engine, t=t, t2=t + 900)


S = [2, 12, 128, 128]  # scores: batch, heads, queries, keys
QKV = [2, 12, 128, 64]


def _pw(mode: str, dims: list[int], second: bool = True) -> str:
    tensors = [("xDesc", dims), *([("bDesc", [1, 1, 1, 1])] if second else []), ("yDesc", dims)]
    return _operation("POINTWISE", "pwDesc", f"mode=CUDNN_POINTWISE_{mode}", tensors)


def _red(mode: str) -> str:
    return _operation("REDUCTION", "reductionDesc", f"mode=CUDNN_REDUCE_TENSOR_{mode}",
                      [("xDesc", S), ("yDesc", [2, 12, 128, 1])])


def _mm(a: list[int], b: list[int], c: list[int]) -> str:
    tensors = [("aDesc", a), ("bDesc", b), ("cDesc", c)]
    return _operation("MATMUL", "matmulDesc", "computeType=CUDNN_DATA_FLOAT", tensors)


SDPA = [  # what cudnn-frontend's sdpa node lowers to: MATMUL, scale, softmax (max, sub, exp, sum, div), MATMUL
    _mm(QKV, [2, 12, 64, 128], S),
    _pw("MUL", S), _red("MAX"), _pw("SUB", S), _pw("EXP", S, second=False), _red("ADD"), _pw("DIV", S),
    _mm(S, QKV, QKV),
]
GEMM_BIAS_RELU = [_mm([1, 64, 768], [1, 768, 3072], [1, 64, 3072]),
                  _pw("ADD", [1, 64, 3072]), _pw("RELU_FWD", [1, 64, 3072], second=False)]
NORM = [_operation("NORM_FORWARD", "", "", [("xDesc", [64, 768, 1, 1]), ("yDesc", [64, 768, 1, 1])])]


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> list:
    log = tmp_path_factory.mktemp("log") / "cudnn_api.log"
    log.write_text(_execute(SDPA, 7, 1000) + _execute(GEMM_BIAS_RELU, 3, 5000) + _execute(NORM, 11, 9000))
    return read_cudnn_log(log).executes()


def test_an_sdpa_graph_starting_with_matmul_is_filed_as_sdpa(calls: list) -> None:
    sdpa, gemm, norm = calls
    assert sdpa.operations[0].kind == "MATMUL" and len(sdpa.operations) == 8
    assert sdpa.api == Api.GRAPH_SDPA.value  # the first-operation lookup said GRAPH_MATMUL
    assert call_signature(sdpa) is None  # no GEMM signature: it matches no MatMul layer
    assert gemm.api == Api.GRAPH_MATMUL.value and call_signature(gemm)[0] == "gemm"
    assert norm.api == Api.GRAPH_NORM.value


def test_every_graph_is_recognised_by_at_most_one_api(calls: list) -> None:
    from benanza.apis.graph_ops import is_conv_graph, is_matmul_graph, is_norm_graph, is_pointwise_graph, is_sdpa_graph

    recognisers = [d.log.graph_recogniser for d in REGISTRY.values() if d.log.graph_recogniser is not None]
    assert len(recognisers) == 5  # conv, matmul, norm, sdpa, pointwise
    for call in calls:
        ops = [(op.kind, op.mode) for op in call.operations]
        assert sum(r(ops) for r in recognisers) == 1
    conv_relu = [("CONVOLUTION_FORWARD", "CROSS_CORRELATION"), ("POINTWISE", "ADD"), ("POINTWISE", "RELU_FWD")]
    assert is_conv_graph(conv_relu) and not any(r(conv_relu) for r in (is_matmul_graph, is_sdpa_graph, is_norm_graph,
                                                                        is_pointwise_graph))
    gelu = [("POINTWISE", "MUL"), ("POINTWISE", "ERF"), ("POINTWISE", "ADD"), ("POINTWISE", "MUL")]
    assert [r(gelu) for r in recognisers].count(True) == 1 and is_pointwise_graph(gelu)
    # two matmuls without a softmax between them are neither a GEMM nor attention
    assert not any(r([("MATMUL", None), ("POINTWISE", "ADD"), ("MATMUL", None)]) for r in recognisers)
