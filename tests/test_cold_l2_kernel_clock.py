"""``benanza run --l2 cold`` on a GPU times each call by its kernels' CUPTI durations (``timing``
"cupti"), the measure a framework's profile gives its library calls, instead of events around one
call. Two cuBLAS GEMMs through the runner into a real database: a long one (fp32 4096^3, about
3 ms), where L2 state and the events' own microseconds do not matter, so the two clocks must agree;
and ViT-B/16's QKV projection at batch 1 (197 x 768 -> 2304, about 10 us), where they differ."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import builds_and_runs_on_a_gpu

from benanza.generate import codegen
from benanza.generate.plan import plan
from benanza.library import L2, Api, Precision
from benanza.measure import runner
from benanza.model.graph import build_graph
from benanza.model.layer import Layer, Model, Tensor
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink

F32 = "float32"


def fc(name: str, index: int, rows: int, k: int, n: int) -> Layer:
    return Layer(name, "Gemm", [Tensor(f"{name}_x", (rows, k), F32), Tensor(f"{name}_w", (n, k), F32, True)],
                 [Tensor(f"{name}_y", (rows, n), F32)], {"alpha": 1.0, "beta": 0.0, "transA": 0, "transB": 1},
                 index=index)


@builds_and_runs_on_a_gpu
def test_cold_l2_calls_are_timed_by_their_kernels_on_a_gpu(tmp_path: Path,
                                                          cmake_build: Callable[[Path], Path]) -> None:
    long_fc, qkv = fc("long", 0, 4096, 4096, 4096), fc("qkv", 1, 197, 768, 2304)
    model = Model("two_gemms", "two_gemms.onnx", 1, [long_fc, qkv], build_graph([long_fc, qkv]), [])
    p = plan([model], [Precision.FP32], apis=[Api.GEMM_EX])
    out = tmp_path / "project"
    codegen.generate(p, out, "pytest tests/test_cold_l2_kernel_clock.py")
    build = cmake_build(out)
    db = perfdb.open_db(tmp_path / "perf.db")
    options = {"build_dir": build, "timeout_s": 300.0, "max_reps": 30}
    cold = runner.run(out, DatabaseSink(db), l2=L2.COLD.value, **options)
    warm = runner.run(out, DatabaseSink(db), **options)
    assert cold.errors == [] and warm.errors == []
    got = {(r.layer_key, r.algorithm, r.l2): r for rs in perfdb.results_for(db, cold.system_id,
                                                                             {long_fc.key, qkv.key}).values()
           for r in rs if r.ok and r.algorithm == "CUBLAS_GEMM_DEFAULT"}
    for layer in (long_fc, qkv):
        c = got[(layer.key, "CUBLAS_GEMM_DEFAULT", L2.COLD.value)]
        assert c.timing == "cupti", (c.timing, c.notes)
        # one GEMM kernel per call, named as the library names it: the flush's memset is no kernel of it
        assert c.notes["kernels_per_call"] >= 1 and "memset" not in c.notes["kernel"].lower(), c.notes
    long_cold = got[(long_fc.key, "CUBLAS_GEMM_DEFAULT", L2.COLD.value)]
    long_warm = got[(long_fc.key, "CUBLAS_GEMM_DEFAULT", L2.WARM.value)]
    print("long GEMM ms, cold (CUPTI) / warm (events):", long_cold.median_ms, long_warm.median_ms)
    assert abs(long_cold.median_ms / long_warm.median_ms - 1) < 0.05
    short = got[(qkv.key, "CUBLAS_GEMM_DEFAULT", L2.COLD.value)]
    print("QKV GEMM us, cold (CUPTI):", 1e3 * short.median_ms, short.notes["kernel"])
    assert 0.002 < short.median_ms < 0.1
