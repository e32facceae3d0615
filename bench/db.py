"""Timing of the performance database at a realistic size.

100 000 results = 300 layers x 4 precisions x ~84 algorithms/engine configs, written
the way the runner writes them (one transaction per job) and in one batch; then the
planner's ``measured`` predicate and the analyzer's best latency per layer of a
300-layer model.  Run: PYTHONPATH=. python bench/db.py [--results N]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from benanza.records import JobKey, Result
from benanza.store import db as perfdb

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
SYSTEM = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0", "cuda_driver": "13.0",
          "cuda_runtime": "13.0", "cudnn_version": "9.19.0", "cublas_version": "13.1.0"}


def synthetic(n_results: int, n_layers: int, seed: int = 0) -> list[list[Result]]:
    """Results grouped per job (layer x precision), with a realistic mix of statuses."""
    rng = random.Random(seed)
    per_job = -(-n_results // (n_layers * len(PRECISIONS)))
    jobs, made = [], 0
    for layer in range(n_layers):
        for dtype in PRECISIONS:
            job = []
            for algo in range(per_job):
                if made == n_results:
                    break
                status = rng.choices(("ok", "not_supported", "check_failed"), (0.8, 0.17, 0.03))[0]
                median = rng.lognormvariate(-3, 1) if status != "not_supported" else None
                job.append(Result(f"layer{layer:04d}", "cudnn_frontend::graph::conv_fprop", f"eng{algo}_k2=1",
                                  dtype, "tensor_op", "none", status, median_ms=median, min_ms=median,
                                  max_ms=median, repetitions=100 if median else 0, workspace_bytes=algo * 4096))
                made += 1
            if job:
                jobs.append(job)
    return jobs


def timed(label: str, func, *args):
    start = time.perf_counter()
    value = func(*args)
    print(f"{label:<58} {1e3 * (time.perf_counter() - start):9.1f} ms")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--layers", type=int, default=300)
    args = parser.parse_args()
    jobs = synthetic(args.results, args.layers)
    flat = [r for job in jobs for r in job]
    with tempfile.TemporaryDirectory() as tmp:
        db = perfdb.open_db(Path(tmp) / "perf.db")
        sid = perfdb.upsert_system(db, SYSTEM)

        def per_job() -> None:
            for job in jobs:
                first = job[0]
                key = JobKey.of({"layer_key": first.layer_key, "api": first.api, "dtype": first.dtype}, "warm")
                perfdb.record_job(db, sid, key, "bench_graph_conv", "ok", "", job)

        timed(f"insert {len(flat)} results, one transaction per job ({len(jobs)})", per_job)
        db2 = perfdb.open_db(Path(tmp) / "batch.db")
        sid2 = perfdb.upsert_system(db2, SYSTEM)
        timed(f"insert {len(flat)} results in one transaction", perfdb.insert_results, db2, sid2, flat)
        timed(f"insert the same {len(flat)} again (all ignored)", perfdb.insert_results, db2, sid2, flat)

        model = {"name": "resnet-like", "batch": 1,
                 "layers": [{"name": f"node{i}", "key": f"layer{i:04d}", "index": i} for i in range(args.layers)],
                 "edges": [[i, i + 1] for i in range(args.layers - 1)]}
        perfdb.store_manifest_models(db, [model])
        measured = timed("build the planner's measured() predicate", perfdb.measured, db, sid)
        hits = timed(f"measured() on all {len(flat)} keys", lambda: sum(map(measured, flat)))
        assert hits == len(flat)
        best = timed("best latency per layer, one model, any precision", perfdb.best_latency_per_layer,
                     db, sid, "resnet-like", 1)
        timed("best latency per layer, one model, fp16", perfdb.best_latency_per_layer,
              db, sid, "resnet-like", 1, "fp16")
        print(f"layers with a best latency: {len(best)} of {args.layers}; "
              f"database size {(Path(tmp) / 'perf.db').stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
