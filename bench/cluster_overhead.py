"""What the Dask machinery costs per job and per shard, without a GPU: the fake harness of
tests/data/fake_bench (real processes, jobs that take no time) run by the single-process runner
and by a distributed.LocalCluster of W worker processes; the scheduler-overhead term of the
scaling model in docs/CLUSTER.md.

    PYTHONPATH=. python bench/cluster_overhead.py [--jobs 2000] [--workers 2] [--shard-jobs 0]

--shard-jobs 0: the default sizing (cluster.shard_size). Prints one line per run and the
difference per job and per shard.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benanza.measure import cluster, runner
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink

FAKE = Path(__file__).resolve().parent.parent / "tests" / "data" / "fake_bench"


def fake_project(root: Path, jobs: int) -> Path:
    """A manifest of ``jobs`` zero-time jobs of one executable, and the plan file the fake reads."""
    project = root / "project"
    project.mkdir()
    lines, specs = [], []
    for i in range(jobs):
        key = f"layer{i:05d}"
        lines.append(f"{i} ok {key} cudnnConvolutionForward fp32 fma none 2")
        specs.append({"executable": "bench_fake", "job": i, "layer_key": key, "api": "cudnnConvolutionForward",
                      "dtype": "fp32", "fusion": "none", "algorithms": ["*"]})
    (project / "bench_fake.plan").write_text("\n".join(lines) + "\n")
    manifest = {"schema": runner.MANIFEST_SCHEMA, "executables": {"bench_fake": {"num_jobs": jobs}}, "jobs": specs}
    (project / runner.MANIFEST).write_text(json.dumps(manifest))
    return project


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-jobs", type=int, default=0)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    root = Path(tempfile.mkdtemp(prefix="benanza-overhead-"))
    try:
        src = root / "fake_src"
        shutil.copytree(FAKE, src)
        build = runner.build(src, src / "build")
        project = fake_project(root, args.jobs)
        os.environ["FAKE_BENCH_PLAN"] = str(project)  # the workers inherit it

        start = time.perf_counter()
        alone = runner.run(project, DatabaseSink(perfdb.open_db(root / "single.db")), build_dir=build)
        single_s = time.perf_counter() - start
        print(f"single process:   {args.jobs} jobs in {single_s:6.2f} s = {alone.ran / single_s:7.0f} jobs/s")

        up = time.perf_counter()
        local = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                             dashboard_address=None)
        client = Client(local)
        up_s = time.perf_counter() - up
        try:
            begin = time.perf_counter()
            summary = cluster.run_campaign(project, DatabaseSink(perfdb.open_db(root / "cluster.db")), client,
                                           build_dir=build,
                                           shard_jobs=args.shard_jobs or None)
            cluster_s = time.perf_counter() - begin
        finally:
            client.close()
            local.close()
        assert summary.total.ran == args.jobs and not summary.errors, summary
        print(f"{args.workers} Dask workers:   {args.jobs} jobs in {cluster_s:6.2f} s = "
              f"{args.jobs / cluster_s:7.0f} jobs/s over {summary.shards} shards (probe {summary.probe_s:.2f} s "
              f"included; cluster start {up_s:.1f} s not)")
        # the single process is the work; the rest of the cluster's wall is the machinery
        # (probe, tasks, events, one writer), here with W workers sharing this machine's cores
        run_s = cluster_s - summary.probe_s
        print(f"after the probe: {1000 * run_s / args.jobs:.2f} ms per job of wall, "
              f"{1000 * (run_s - single_s) / summary.shards:.0f} ms per shard more than the single process "
              f"({1000 * single_s / args.jobs:.2f} ms per job single-process)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
