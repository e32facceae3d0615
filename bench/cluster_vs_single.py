"""One small project measured on this machine's GPU by the single-process runner (twice: the noise
floor) and by ``--cluster local`` (one Dask worker per visible GPU); prints whether the rows match
and what the cluster costs, and the numbers of the scaling model in docs/CLUSTER.md.

    PYTHONPATH=. python bench/cluster_vs_single.py [--model squeezenet] [--dtype fp32] [--batch 1]
                                          [--max-engines 12] [--out DIR]

Writes DIR/campaign.json and the three databases (DIR defaults to $OUT, else ./campaign-bench;
the project is built under the temporary directory). Needs a GPU and
benanza[dask] (distributed, dask-cuda); without dask-cuda it says so and falls back to a
distributed.LocalCluster of one worker process (the same single-GPU case).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx

from benanza.errors import BenanzaError
from benanza.measure import cluster, runner, system
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink
from benanza.workflows.measure import generate_project

ZOO_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
NOISE = (0.05, 0.10)  # relative median differences counted in the table


def rows(db: Any, sid: str) -> dict[tuple, tuple[str, float | None]]:
    """Benchmark key -> (status, median ms) of one system."""
    cols = ", ".join(perfdb.RESULT_KEY)
    return {tuple(r[:-2]): (r[-2], r[-1]) for r in
            db.execute(f"SELECT {cols}, status, median_ms FROM benchmarks WHERE system_id = ?", (sid,))}


def compare(a: dict, b: dict) -> dict[str, Any]:
    """Same keys? Same statuses? Relative differences of the medians both measured."""
    both = [k for k in a if k in b]
    rel = sorted(abs(b[k][1] / a[k][1] - 1) for k in both
                 if a[k][0] == b[k][0] == "ok" and a[k][1] and b[k][1])
    pick = (lambda q: rel[min(len(rel) - 1, int(q * len(rel)))]) if rel else (lambda q: float("nan"))
    return {"keys_a": len(a), "keys_b": len(b), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a)),
            "status_differs": sum(a[k][0] != b[k][0] for k in both), "medians": len(rel),
            "rel_median": statistics.median(rel) if rel else float("nan"),
            "rel_p90": pick(0.9), "rel_max": rel[-1] if rel else float("nan"),
            **{f"over_{int(t * 100)}pct": sum(r > t for r in rel) for t in NOISE}}


def single(project: Path, build: Path, db_path: Path, fp: dict, max_engines: int | None) -> tuple[float, Any]:
    db = perfdb.open_db(db_path)
    start = time.perf_counter()
    summary = runner.run(project, DatabaseSink(db), system=fp, build_dir=build, max_engines=max_engines)
    return time.perf_counter() - start, summary


def start_cluster() -> tuple[cluster.Cluster, str]:
    try:
        return cluster.connect("local"), "dask_cuda.LocalCUDACluster"
    except Exception as exc:  # dask-cuda missing or failing to start: the one-GPU case without it
        if isinstance(exc, BenanzaError) and "no NVIDIA GPU" in str(exc):
            raise
        print(f"note: --cluster local failed ({exc!r}); using distributed.LocalCluster(n_workers=1) instead",
              file=sys.stderr)
        from distributed import Client, LocalCluster

        local = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
        return cluster.Cluster(Client(local), local), "distributed.LocalCluster (1 worker)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="squeezenet")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--max-engines", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "campaign-bench")))
    args = parser.parse_args()
    fp = system.fingerprint(bandwidth=True)
    if not fp["usable"]:
        print(f"no usable NVIDIA GPU ({fp['reason']}): nothing measured", file=sys.stderr)
        return 1
    work = Path(tempfile.gettempdir()) / "benanza-campaign-bench"  # the build stays out of --out
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    project = generate_project([ZOO_DIR / f"light_{args.model}.onnx"], work / "project", (args.dtype,), args.batch)
    build = runner.build(project, jobs=os.cpu_count())
    build_s = time.perf_counter() - start
    jobs = sum(len(j) for j in runner.manifest_jobs(runner.load_manifest(project), "warm").values())
    print(f"{args.model} {args.dtype} batch {args.batch}: {jobs} jobs, generate + build {build_s:.0f} s", flush=True)

    single_s, one = single(project, build, work / "single.db", fp, args.max_engines)
    again_s, _ = single(project, build, work / "single2.db", fp, args.max_engines)
    print(f"single process: {single_s:.1f} s and {again_s:.1f} s", flush=True)

    up = time.perf_counter()
    dask, kind = start_cluster()
    up_s = time.perf_counter() - up
    try:
        db = perfdb.open_db(work / "cluster.db")
        begin = time.perf_counter()
        campaign = cluster.run_campaign(project, DatabaseSink(db), dask.client, build_dir=build,
                                        max_engines=args.max_engines)
        cluster_s = time.perf_counter() - begin
        workers = len(cluster.workers_of(dask.client))
    finally:
        dask.close()
    sid = one.system_id
    a = rows(perfdb.open_db(work / "single.db"), sid)
    noise = compare(a, rows(perfdb.open_db(work / "single2.db"), sid))
    versus = compare(a, rows(db, sid))
    per_job = single_s / max(1, one.ran)
    overhead_per_shard = (cluster_s - campaign.probe_s - single_s) / max(1, campaign.shards)
    result = {"model": args.model, "dtype": args.dtype, "batch": args.batch, "jobs": jobs, "gpu": fp.get("gpu"),
              "cluster": kind, "workers": workers, "systems": sorted(campaign.systems),
              "same_system": sorted(campaign.systems) == [sid], "single_s": single_s, "single_again_s": again_s,
              "cluster_start_s": up_s, "cluster_run_s": cluster_s, "probe_s": campaign.probe_s,
              "shards": campaign.shards,
              "overhead_pct": 100 * (cluster_s / single_s - 1), "single_jobs_per_s": one.ran / single_s,
              "overhead_per_shard_s": overhead_per_shard, "errors": campaign.errors + one.errors,
              "single_vs_single": noise, "single_vs_cluster": versus}
    (args.out / "campaign.json").write_text(json.dumps(result, indent=2, default=str))
    for name in ("single.db", "single2.db", "cluster.db"):  # the backup API: WAL contents included
        with sqlite3.connect(work / name) as src, sqlite3.connect(args.out / name) as dst:
            src.backup(dst)

    print(f"\n{kind}: {workers} worker(s), start {up_s:.1f} s, run {cluster_s:.1f} s (probe {campaign.probe_s:.1f} s "
          f"included) over {campaign.shards} shards ({result['overhead_pct']:+.1f} % vs single process; "
          f"{overhead_per_shard * 1000:+.0f} ms/shard after the probe)")
    print(f"same system id as the single-process runner: {result['same_system']} ({sid})")
    print("\n| comparison | keys | only left | only right | status differs | medians | rel. diff median | p90 "
          "| max | > 5 % | > 10 % |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for label, c in (("single vs single (noise)", noise), ("single vs --cluster local", versus)):
        print(f"| {label} | {c['keys_a']}/{c['keys_b']} | {c['only_a']} | {c['only_b']} | {c['status_differs']} | "
              f"{c['medians']} | {c['rel_median']:.2%} | {c['rel_p90']:.2%} | {c['rel_max']:.2%} | "
              f"{c['over_5pct']} | {c['over_10pct']} |")
    print(f"\nscaling model inputs: {result['single_jobs_per_s']:.2f} jobs/s per GPU ({per_job * 1000:.0f} ms/job), "
          f"{overhead_per_shard * 1000:.0f} ms overhead per shard, probe {campaign.probe_s:.1f} s, "
          f"cluster start {up_s:.1f} s")
    for gpus in (1, 2, 4, 8, 16):
        shards = min(jobs, gpus * cluster.SHARDS_PER_WORKER)
        predicted = up_s + campaign.probe_s + jobs * per_job / gpus + shards * max(0.0, overhead_per_shard) / gpus
        print(f"  predicted wall for {jobs} jobs on {gpus:>2} GPU(s): {predicted:.1f} s")
    ok = (result["same_system"] and not result["errors"] and versus["only_a"] == versus["only_b"] == 0
          and versus["status_differs"] <= noise["status_differs"])
    print(f"\nrows match (same keys and statuses): {ok}; wrote {args.out / 'campaign.json'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
