"""Racing must not change the answer: the fastest implementation per job, raced vs exhaustive.

    benanza generate models/zoo --batch 1,64 --api conv_fwd,conv_bias_act,gemm_ex,lt_matmul,graph_conv --out PROJECT
    python bench/race_check.py PROJECT [--build-dir DIR] [--jobs-per-exe 60] [--race 1.3] [--out FILE]

Runs the same jobs of a built project's multi-algorithm executables (legacy convolutions, conv +
bias + activation, cublasGemmEx, cublasLt, the graph API) twice, straight through the harness:
exhaustively (``--race 0 --job-budget-s 0 --plan-threads 0``: every algorithm timed to the usual
precision, the graph API's host work and plan builds on the GPU thread, in order) and with the
harness's defaults but ``--race R`` (an algorithm estimated >= R x the job's best so far gets a
coarse median; the default job budget applies too; graph-API host work done ahead on host threads).
Per job it compares the fastest ok median of the two runs and prints how many agree within 3 %,
the jobs whose results differ in algorithms or statuses (neither racing nor host threads may change
them), the worst ratios, and the time each
run took (the racing run second, so that clocks and caches are warm for both; run it twice to see
the order does not matter). Needs a GPU. Results: docs/RESULTS.md §12.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benanza.measure import runner

# Executables whose jobs measure several algorithms (one-algorithm APIs have nothing to race).
RACED_EXECUTABLES = ("bench_conv_fwd", "bench_conv_bias_act", "bench_gemm_ex", "bench_lt_matmul", "bench_graph_conv",
                     "bench_graph_matmul")
AGREE = 0.03


def fastest(lines: list[dict[str, Any]]) -> dict[int, tuple[float, str]]:
    """job -> (fastest ok median, its algorithm) of one harness run."""
    best: dict[int, tuple[float, str]] = {}
    for d in lines:
        if d.get("event") == "result" and d.get("status") == "ok" and d.get("median_ms") is not None:
            m = float(d["median_ms"])
            if d["job"] not in best or m < best[d["job"]][0]:
                best[d["job"]] = (m, str(d["algorithm"]))
    return best


def statuses(lines: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    """job -> {algorithm: status} of one harness run."""
    out: dict[int, dict[str, str]] = {}
    for d in lines:
        if d.get("event") == "result":
            out.setdefault(d["job"], {})[str(d["algorithm"])] = str(d["status"])
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How the compared jobs agree: within AGREE, read faster or slower raced, and slower raced with another
    algorithm (racing's choice cost more than AGREE; a slower one with the same algorithm is timing noise)."""
    out = {"jobs": len(rows), "agree": 0, "faster": 0, "slower": 0, "slower_by_choice": 0}
    for r in rows:
        key = "agree" if abs(r["ratio"] - 1) <= AGREE else "faster" if r["ratio"] < 1 else "slower"
        out[key] += 1
        out["slower_by_choice"] += key == "slower" and r["raced_algorithm"] != r["exhaustive_algorithm"]
    return out


def run(exe: Path, jobs: list[int], extra: list[str], timeout_s: float) -> tuple[list[dict[str, Any]], float]:
    t0 = time.perf_counter()
    done = subprocess.run([str(exe), "--jobs", ",".join(map(str, jobs)), *extra], capture_output=True, text=True,
                          timeout=timeout_s, cwd=exe.parent)
    wall = time.perf_counter() - t0
    lines = []
    for line in done.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    if done.returncode != 0:
        print(f"{exe.name}: exit {done.returncode}: {done.stderr[-500:]}", file=sys.stderr)
    return lines, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--build-dir", type=Path)
    parser.add_argument("--jobs-per-exe", type=int, default=60,
                        help="N jobs of each raced executable, evenly spread over its jobs")
    parser.add_argument("--race", type=float, default=1.3)
    parser.add_argument("--max-engines", type=int, default=0, help="graph API: engine configs per job (0: all)")
    parser.add_argument("--timeout", type=float, default=3000.0, help="seconds per executable run")
    parser.add_argument("--out", type=Path, help="write the per-job comparison here (JSON)")
    parser.add_argument("--build-jobs", type=int)
    args = parser.parse_args()
    build = runner.build(args.project, args.build_dir, args.build_jobs).resolve()  # incremental: nothing when built
    manifest = json.loads((args.project / "manifest.json").read_text())
    common = ["--max-engines", str(args.max_engines)] if args.max_engines else []
    rows: list[dict[str, Any]] = []
    walls = {"exhaustive": 0.0, "raced": 0.0}
    coarse = 0
    differ: list[dict[str, Any]] = []  # jobs whose results differ in algorithms or statuses
    for exe in RACED_EXECUTABLES:
        if exe not in manifest["executables"] or not (build / exe).is_file():
            continue
        every = [j["job"] for j in manifest["jobs"] if j["executable"] == exe]
        jobs = every[::max(1, len(every) // args.jobs_per_exe)][:args.jobs_per_exe]  # spread over models, batches
        # exhaustive: racing and the job budget off, 1 ms timed launches, everything on the GPU thread (the
        # careful measurement before issue 17's defaults); raced: the harness's defaults but --race R
        full, w_full = run(build / exe, jobs, [*common, "--race", "0", "--job-budget-s", "0", "--launch-ms", "1",
                                               "--plan-threads", "0"], args.timeout)
        raced, w_raced = run(build / exe, jobs, [*common, "--race", f"{args.race:g}"], args.timeout)
        walls["exhaustive"] += w_full
        walls["raced"] += w_raced
        coarse += sum(1 for d in raced if d.get("event") == "result" and (d.get("notes") or {}).get("coarse"))
        a, b = fastest(full), fastest(raced)
        sa, sb = statuses(full), statuses(raced)
        differ += [{"executable": exe, "job": job, "exhaustive": sa.get(job), "raced": sb.get(job)}
                   for job in sorted(set(sa) | set(sb)) if sa.get(job) != sb.get(job)]
        for job in sorted(set(a) & set(b)):
            rows.append({"executable": exe, "job": job, "exhaustive_ms": a[job][0], "exhaustive_algorithm": a[job][1],
                         "raced_ms": b[job][0], "raced_algorithm": b[job][1], "ratio": b[job][0] / a[job][0]})
        print(f"{exe}: {len(jobs)} jobs, exhaustive {w_full:.1f} s, raced {w_raced:.1f} s", flush=True)
    counts = summary(rows)
    same = [r for r in rows if r["exhaustive_algorithm"] == r["raced_algorithm"]]
    print(f"jobs compared: {len(rows)}; fastest medians within {AGREE:.0%}: {counts['agree']} "
          f"({counts['agree'] / max(1, len(rows)):.1%}); same fastest algorithm: {len(same)}")
    print(f"outside {AGREE:.0%}: {counts['faster']} faster raced, {counts['slower']} slower, "
          f"{counts['slower_by_choice']} of them with another algorithm (racing's choice)")
    print(f"wall: exhaustive {walls['exhaustive']:.1f} s, raced {walls['raced']:.1f} s; coarse results: {coarse}")
    print(f"jobs whose results differ in algorithms or statuses: {len(differ)}")
    for d in differ[:5]:
        ex, ra = d["exhaustive"] or {}, d["raced"] or {}
        changed = [f"{a[:40]} {ex.get(a, '-')} -> {ra.get(a, '-')}" for a in sorted(set(ex) | set(ra))
                   if ex.get(a) != ra.get(a)]
        print(f"  {d['executable']} job {d['job']}: " + ", ".join(changed[:4]))
    print("worst ratios (raced / exhaustive fastest median):")
    for r in sorted(rows, key=lambda r: -abs(r["ratio"] - 1))[:10]:
        print(f"  {r['ratio']:.3f}  {r['executable']} job {r['job']}: {r['exhaustive_algorithm'][:40]} "
              f"{r['exhaustive_ms']:.4f} ms vs {r['raced_algorithm'][:40]} {r['raced_ms']:.4f} ms")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "walls_s": walls, "coarse_results": coarse, "differ": differ},
                                       indent=1) + "\n")
    return 0 if rows and counts["agree"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
