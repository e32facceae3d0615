"""A campaign's executed-calls step and table (bench/transformer_campaign.py), without a GPU: what it
may skip (``store.systems.held_in_states`` over a real SQLite database written by
``db.insert_results``) and which library-call ratio it shows (``analyze.headline.library_call_ratio``)."""

from __future__ import annotations

from pathlib import Path

from benanza.analyze.headline import library_call_ratio
from benanza.generate.plan import Benchmark
from benanza.library import L2, Api
from benanza.records import checked_result
from benanza.store import db as perfdb
from benanza.store.systems import held_in_states

BATCH1_STATES = (L2.WARM, L2.COLD_WEIGHTS, L2.COLD)  # a batch-1 bundle's calls: every L2 state
SYSTEM = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0", "cuda_driver": "13.0",
          "cudnn_version": "9.19.0", "cublas_version": "13.1"}


def _bench(key: str, api: str) -> Benchmark:
    return Benchmark(key, api, "CUBLAS_GEMM_DEFAULT", "fp16", "fp16", "gemm+bias", "")


def test_executed_skip_keeps_what_batch_one_lacks_cold(tmp_path: Path) -> None:
    db = perfdb.open_db(tmp_path / "perf.db")
    sid = perfdb.upsert_system(db, SYSTEM)
    line = {"event": "result", "api": Api.GEMM_EX.value, "algorithm": "CUBLAS_GEMM_DEFAULT", "dtype": "fp16",
            "math": "fp16", "fusion": "gemm+bias", "status": "ok", "median_ms": 0.01, "repetitions": 10}
    norm = {**line, "layer_key": "norm", "api": Api.GRAPH_NORM.value}
    perfdb.insert_results(db, sid, [checked_result({**line, "layer_key": "warm-only"}),
                                    checked_result({**line, "layer_key": "both"}),
                                    checked_result({**line, "layer_key": "both", "l2": L2.COLD_WEIGHTS.value}),
                                    checked_result({**line, "layer_key": "all", "l2": L2.WARM.value}),
                                    checked_result({**line, "layer_key": "all", "l2": L2.COLD_WEIGHTS.value}),
                                    checked_result({**line, "layer_key": "all", "l2": L2.COLD.value}),
                                    checked_result(norm), checked_result({**norm, "l2": L2.COLD.value})])
    warm = held_in_states(tmp_path / "perf.db", (L2.WARM,))
    assert warm(_bench("warm-only", Api.GEMM_EX.value)) and not warm(_bench("new", Api.GEMM_EX.value))
    cold_weights = held_in_states(tmp_path / "perf.db", (L2.WARM, L2.COLD_WEIGHTS))
    assert not cold_weights(_bench("warm-only", Api.GEMM_EX.value))  # its cold-weights row is still to measure
    assert cold_weights(_bench("both", Api.GEMM_EX.value))
    assert cold_weights(_bench("norm", Api.GRAPH_NORM.value))  # no weights: --l2 cold-weights never runs it
    batch1 = held_in_states(tmp_path / "perf.db", BATCH1_STATES)
    assert not batch1(_bench("both", Api.GEMM_EX.value))  # no cold-L2 row yet
    assert batch1(_bench("all", Api.GEMM_EX.value))
    assert batch1(_bench("norm", Api.GRAPH_NORM.value))  # --l2 cold runs every API: its cold row is there


def test_the_table_shows_cold_l2_at_batch_one_and_warm_otherwise() -> None:
    a = {"as-executed / measured, library calls": 0.9, "library-call layers (as-executed check)": 97,
         "as-executed cold weights / measured, library calls": 0.97, "library-call layers, cold weights": 90,
         "as-executed cold L2 / measured, library calls": 1.01, "library-call layers, cold L2": 95}
    assert library_call_ratio(1, a) == (1.01, 95)
    assert library_call_ratio(32, a) == (0.9, 97)
