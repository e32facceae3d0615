"""The cold-weights / warm check of tests/test_cold_weights.py, repeated with two harnesses: the
C++ harness of git revision ``--old`` and the working tree's (docs/RESULTS.md at 83e8fcb, §9, session 10).

Why: that test failed 2 of 3 times on the H100 in session 9. The cause was a warm row whose
"median" was a single first call (24-79 ms for a 0.42 ms graph-API conv; a first call over
20 ms could decide its race alone, one-off costs included). This counts, per run, the warm rows
timed from one call ("slow call") and the engine configs whose cold-weights row is more than 5 %
faster than their warm row.

    python bench/first_call_check.py [--old 7a09d64 [--old-context FILE]] [--reps 4]     # needs a GPU; about 3 min
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_cold_weights import large_weights_model, rows

from benanza.generate import codegen
from benanza.generate.plan import plan
from benanza.library import L2, Api, Precision
from benanza.measure import runner
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink


def build(out: Path, context_h: str | None) -> Path:
    """Generate the test's project into ``out``, with ``context_h`` as its harness's context.h."""
    model = large_weights_model()
    codegen.generate(plan([model], [Precision.FP32], apis=[Api.GRAPH_CONV, Api.GEMM_EX, Api.ACTIVATION]), out,
                     "bench/first_call_check.py")
    if context_h is not None:
        (out / "csrc" / "benanza" / "context.h").write_text(context_h)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run(["cmake", "-S", str(out), "-B", str(out / "build"), "-G", "Ninja", "-DCMAKE_CUDA_ARCHITECTURES=90",
                    f"-DCMAKE_CUDA_COMPILER={nvcc}"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(out / "build")], check=True, capture_output=True)
    return out


def check(project: Path, db_path: Path) -> tuple[int, int, list[str]]:
    """One cold-weights run and one warm run: (pairs, warm rows from one call, configs > 5 % faster cold)."""
    keys = {layer.key for layer in large_weights_model().layers}
    db = perfdb.open_db(db_path)
    options = {"build_dir": project / "build", "timeout_s": 300.0, "max_reps": 30}
    cold = runner.run(project, DatabaseSink(db), l2=L2.COLD_WEIGHTS.value, **options)
    warm = runner.run(project, DatabaseSink(db), **options)
    by_call = {(r.layer_key, r.algorithm): r for r in rows(db, warm.system_id, keys, L2.WARM) if r.ok}
    one_call = sum(1 for r in by_call.values() if r.notes.get("coarse") == "slow call")
    pairs = [(c, by_call[(c.layer_key, c.algorithm)]) for c in rows(db, cold.system_id, keys, L2.COLD_WEIGHTS)
             if c.ok and (c.layer_key, c.algorithm) in by_call]
    low = [f"{c.algorithm[:40]}: cold {c.median_ms * 1e3:.1f} µs, warm {w.median_ms * 1e3:.1f} µs "
           f"({w.repetitions} rep, coarse {w.notes.get('coarse')})"
           for c, w in pairs if c.median_ms < 0.95 * w.median_ms]
    return len(pairs), one_call, low


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default="7a09d64", help="git revision of the harness to compare with")
    ap.add_argument("--old-context", type=Path,
                    help="that revision's csrc/benanza/context.h as a file (where the checkout has no .git)")
    ap.add_argument("--reps", type=int, default=4, help="runs of each harness, alternated")
    ap.add_argument("--out", type=Path, default=Path("build/first_call_check"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    old = args.old_context.read_text() if args.old_context else subprocess.run(
        ["git", "show", f"{args.old}:csrc/benanza/context.h"], capture_output=True, text=True, check=True).stdout
    projects = {f"old ({args.old})": build(args.out / "old", old), "working tree": build(args.out / "new", None)}
    print("| harness | run | pairs | warm rows from one call | configs > 5 % faster cold |\n|---|---|---|---|---|")
    for i in range(args.reps):
        for n, (name, project) in enumerate(projects.items()):
            pairs, one_call, low = check(project, args.out / f"run{i}_{n}.db")
            print(f"| {name} | {i + 1} | {pairs} | {one_call} | {len(low)} {'; '.join(low)} |", flush=True)


if __name__ == "__main__":
    main()
