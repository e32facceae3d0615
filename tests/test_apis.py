"""benanza.apis: one definition per Api, and every template renders from its builder's rows."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from conftest import LIGHT
from tiny_transformers import bert_block, gpt2_block

from benanza.apis import REGISTRY, ApiDef, ApiFamily, cublas_api, job_table
from benanza.apis.log_side import NO_LOG_SIDE, LogSide
from benanza.generate import codegen
from benanza.generate.plan import plan
from benanza.library import OP_APIS, Api, Fusion
from benanza.model.onnx_import import load_model
from benanza.paths import templates_dir
from benanza.profile.signatures import CALL_SIGNATURES, LAYER_SIGNATURES

# Api -> the ONNX ops it serves.
OP_APIS_OF = {api: [op for op, apis in OP_APIS.items() if api in apis] for api in Api}


def test_registry_covers_every_api_once() -> None:
    assert list(REGISTRY) == list(Api)  # every Api, in Api order (the order jobs are numbered in)
    assert all(d.api is api for api, d in REGISTRY.items())
    executables = [d.executable for d in REGISTRY.values()]
    assert len(set(executables)) == len(executables) and all(e.startswith("bench_") for e in executables)
    assert all((templates_dir() / d.template).is_file() for d in REGISTRY.values())
    assert [api for api, d in REGISTRY.items() if d.builder is None] == [Api.CEILING]  # planned on its own


def test_every_api_has_every_part_its_log_side_included() -> None:
    """An API whose log side is forgotten would be silently unmapped in every profile: each states
    every part, a library call recognised in framework logs, a non-library one NO_LOG_SIDE by name."""
    for api, d in REGISTRY.items():
        assert d.executable and d.template and d.library and d.columns, api
        assert isinstance(d.log, LogSide), api
        assert (d.log is NO_LOG_SIDE) == (d.family is ApiFamily.NONE), f"{api.value}: log side against family"
        if d.log is NO_LOG_SIDE:
            continue
        log = d.log
        recognisers = [log.cudnn_call, log.graph_recogniser is not None, log.cublas_call is not None]
        assert sum(recognisers) == 1, f"{api.value}: recognised in logs {sum(recognisers)} ways, not one"
        assert (log.layer_signature is None) == (log.call_signature is None), f"{api.value}: half a signature"
        if d.family is ApiFamily.LEGACY:  # legacy cuDNN and cuBLAS calls are linked to layers by shape
            assert log.call_signature is not None and not log.graph_fusions and not log.contrib_fusions, api
        else:  # a graph is linked by shape, or charged inside a framework's fused node, or is a fusion only
            assert log.call_signature is not None or log.contrib_fusions or not OP_APIS_OF[api], api
            assert log.fusion is Fusion.NONE and log.algorithm is None, api
        for op in OP_APIS_OF[api]:
            if log.layer_signature is not None:
                assert LAYER_SIGNATURES[op] is log.layer_signature, f"{api.value}: {op}'s signature"
        if log.cudnn_call:
            assert CALL_SIGNATURES[api.value] is log.call_signature


def test_an_api_without_its_log_side_is_refused() -> None:
    """Omission is an error at definition time: ``log`` and every part of a LogSide are required."""
    d = REGISTRY[Api.COPY]
    with pytest.raises(TypeError, match="log"):
        ApiDef(d.api, d.executable, d.template, d.family, d.library, d.builder)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="contrib_ops"):
        LogSide(cudnn_call=False, graph_recogniser=None, cublas_call=None, layer_signature=None,  # type: ignore[call-arg]
                call_signature=None, algorithm=None, fusion=Fusion.NONE, graph_fusions=(), contrib_fusions=())


@pytest.mark.parametrize(("function", "kind", "api"), [
    ("cublasLtMatmul", "gemm", Api.LT_MATMUL), ("cublasSgemv_v2", "gemv", Api.SGEMV),
    ("cublasSgemm_v2", "gemm", Api.GEMM_EX), ("cublasGemmStridedBatchedEx", "gemm", Api.GEMM_EX),
    ("cublasGemmEx", "gemm", Api.GEMM_EX)])
def test_each_cublas_line_is_one_apis_call(function: str, kind: str, api: Api) -> None:
    assert cublas_api(function, kind) is api


def _transformer_blocks(out: Path) -> list:
    """LayerNormalization (GRAPH_NORM) and attention cores (GRAPH_SDPA), which no vision model has."""
    paths = []
    for proto in (bert_block(), gpt2_block()):
        paths.append(out / f"{proto.graph.name}.onnx")
        onnx.save(proto, paths[-1])
    return [load_model(path) for path in paths]


@pytest.fixture(scope="module")
def zoo_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[Api, list]:
    models = [load_model(path, batch=1) for path in sorted(LIGHT.glob("light_*.onnx"))]
    models += _transformer_blocks(tmp_path_factory.mktemp("transformers"))
    jobs: dict[Api, list] = {}
    for job in plan(models, ["fp32", "fp16"], ceilings=True).jobs:
        jobs.setdefault(job.api, []).append(job)
    return jobs


@pytest.mark.parametrize("api", list(Api), ids=lambda a: a.name)
def test_every_template_renders_from_its_builders_rows(api: Api, zoo_jobs: dict[Api, list]) -> None:
    """The light zoo and two transformer blocks have a layer for every API; StrictUndefined fails
    on any field a row lacks."""
    jobs = zoo_jobs.get(api)
    assert jobs, f"the light zoo and the transformer blocks plan no job for {api.value}"
    source = codegen.render_source(codegen.environment(), api, "benanza generate test")
    assert source.startswith("// generated by benanza") and f"\"{api.value}\"" in source
    named, columns, rows = job_table.read(codegen.render_table(jobs, "benanza generate test"))
    assert named == api.value and columns == [c.name for c in REGISTRY[api].columns]
    assert [job_table.decode_text(row[0]) for row in rows] == [job.key for job in jobs]  # one line per job
