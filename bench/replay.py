"""Replay the zoo's best executions on this GPU: replay time / LBL_seq per model, batch and precision.

Why: issue 37. LBL is a sum of calls timed alone; the replay runs the same calls as one program (one
CUDA graph, real buffers, every step's output checked), so replay / LBL_seq says how much of the
bound a real execution of exactly the bound's plan reaches, and where it does not (per-step times).

Each cell is planned from DB (``benanza replay``'s plan), generated, built (the program's source is the
same for every cell: the build cache compiles it once) and run; a plan with a call the replay cannot
make yet is a cell with status ``refused`` and the one-line reason. The JSON is rewritten after every
cell and read back by the next run, which skips the cells it holds (``--redo`` runs them again), so a
campaign can be run in pieces (``--only``) under a per-command time limit.

    python bench/replay.py [--db ~/.cache/benanza/h100.db] --models models/zoo \\
        --out perfdb/validation/h100_replay.json [--only resnet50,vgg19] [--batches 1,64] \\
        [--dtypes fp32,fp16] [--work replay_runs] [--redo]

With ``--bundles DIR...`` (profile bundles, e.g. ``perfdb/bundles/*``) each bundle is a pair of cells instead:
its model's best execution and the framework's own calls (the as-executed execution, ``benanza replay
--profile``), both under the run's precisions, then replay(as-executed) - replay(best) beside the joint
gap ``benanza analyze`` prints for the bundle (``Summary.joint_gap_ms``), and where they differ by more
than 20 % the largest per-step differences (``benanza.analyze.replay_compare``); a bundle whose
as-executed plan is refused says why in one line. The bundles' models are found as ``analyze`` finds
them (``profile.catalog.locate_model``).

    python bench/replay.py --bundles perfdb/bundles/* --out perfdb/validation/h100_replay_bundles.json

``--dtypes`` items are the precisions each cell's bound may use, ``+`` joining several (``fp32+tf32``).
Each replayed cell carries ``explanation``: replay_warm - LBL_seq in named parts (roofline stand-ins,
copies the bound does not charge, composition: ``benanza.analyze.replay_explain``), and a cell above
1.15 x LBL_seq prints its one-line reason. With ``--db FILE.db`` every run is also stored in that
database (``replays`` table, what ``benanza analyze`` shows beside LBL; ``--redo`` replaces a stored
run of the same plan); a compressed ``--db`` is only read.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from benanza.analyze.replay_explain import EXPLAIN_ABOVE
from benanza.api import database
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.workflows.replay import replay, store

SCHEMA = 1


def cell(model: Path, db: Path, batch: int, dtype: str, work: Path, command: str, store_in: Path | None = None,
         replace: bool = False) -> dict[str, Any]:
    """One model x batch x precision set (``fp32+tf32``): its replay summary, per-step results and where the
    time beyond LBL_seq goes, or why not; stored in ``store_in`` (a .db) when given."""
    t0 = time.perf_counter()
    base = {"model": model.stem, "batch": batch, "dtype": dtype}
    precisions = [Precision(d) for d in dtype.split("+")]
    try:
        outcome = replay(model, db, work / f"{model.stem}_b{batch}_{dtype}", command, batch, precisions)
    except BenanzaError as exc:
        return {**base, "status": "refused", "message": exc.message, "seconds": time.perf_counter() - t0}
    summary = outcome.summary()
    explanation = outcome.explanation()
    out = {**summary, **base, "storage": summary["dtype"], "model_name": summary["model"],
           "steps_detail": outcome.step_results(),
           "explanation": explanation.to_dict() if explanation is not None else None}
    if store_in is not None and outcome.result:
        try:
            sid, written = store(outcome, store_in, force=replace)
            out["stored"] = f"{store_in} (system {sid})" if written else f"{store_in} held it already (kept)"
        except BenanzaError as exc:  # the JSON keeps the run: nothing is lost
            out["stored"] = f"not stored: {exc.message}"
    return {**out, "seconds": time.perf_counter() - t0}


def bundle_cells(bundle: Path, db: Path, work: Path, command: str, run_it: bool = True) -> dict[str, Any]:
    """One bundle: its best and as-executed replays (each a ``cell``-like record, or why it was refused) and
    replay(as-executed) - replay(best) against the analysis's joint gap (``replay_compare.compare``)."""
    from benanza.analyze.replay_compare import compare
    from benanza.profile.bundle import read_bundle
    from benanza.profile.catalog import locate_model
    from benanza.workflows.analysis import analyze_model

    t0 = time.perf_counter()
    out: dict[str, Any] = {"bundle": bundle.name}
    try:
        model = locate_model(read_bundle(bundle), None)
        summary = analyze_model(model, db, bundle)[0].summary
    except BenanzaError as exc:
        return {**out, "status": "refused", "message": exc.message, "seconds": time.perf_counter() - t0}
    out |= {"model": model.stem, "joint_gap_ms": summary.joint_gap_ms, "lbl_seq_ms": summary.lbl_seq_ms,
            "gpu_busy_ms": summary.gpu_busy_ms, "e2e_ms": summary.e2e_ms}
    for execution in ("best", "as-executed"):
        try:
            outcome = replay(model, db, work / f"{bundle.name}_{execution}", command, bundle=bundle,
                             execution=execution, build_it=run_it, run_it=run_it)
        except BenanzaError as exc:
            out[execution] = {"status": "refused", "message": exc.message}
            continue
        out[execution] = {**outcome.summary(), "steps_detail": outcome.step_results()}
    best, executed = out["best"], out["as-executed"]
    if "steps_detail" in best and "steps_detail" in executed:
        field = "replay_ms" if best.get("replay_warm_ms") and executed.get("replay_warm_ms") else "charged_ms"
        out["comparison"] = compare(best, executed, summary.joint_gap_ms, field).to_dict() | {"by": field}
    return {**out, "seconds": time.perf_counter() - t0}


def bundles_main(args: argparse.Namespace, command: str) -> int:
    """``--bundles``: one record per bundle in --out (rewritten after each), a line each on the terminal."""
    records = []
    for bundle in args.bundles:
        r = bundle_cells(bundle, args.db, args.work, command, run_it=not args.plan_only)
        records.append(r)
        head = f"{r['bundle']:34}"
        if r.get("status") == "refused":
            print(f"{head} refused: {r['message']}", flush=True)
        for execution in ("best", "as-executed"):
            c = r.get(execution)
            if c is not None:
                ran = f"replay {c['replay_warm_ms']:.4g} ms, " if c.get("replay_warm_ms") else ""
                text = f"{ran}LBL_seq {c['lbl_seq_ms']:.4g} ms, {c['steps']} steps, {c.get('status') or 'not run'}" \
                    if "steps" in c else f"refused: {c['message']}"
                print(f"{head} {execution:11} {text}", flush=True)
        if "comparison" in r:
            print(f"{'':34} {r['comparison']['reason']} (by {r['comparison']['by']})", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        partial = args.out.with_name(args.out.name + ".partial")
        partial.write_text(json.dumps({"schema": SCHEMA, "command": command, "db": str(args.db), "bundles": records},
                                      indent=1) + "\n")
        partial.replace(args.out)
    compared = [r for r in records if "comparison" in r]
    print(f"{len(compared)} of {len(records)} bundles compared, "
          f"{sum(r['comparison']['within'] for r in compared)} within 20 %; wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, help="performance database whose best executions are replayed: .db, "
                    ".columns.xz or .db.xz (default: the shipped H100 database)")
    ap.add_argument("--models", type=Path, default=Path("models/zoo"), help="directory of .onnx models")
    ap.add_argument("--out", type=Path, required=True, help="JSON to write (rewritten after every cell)")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--work", type=Path, default=Path("replay_runs"), help="where the replay projects go")
    ap.add_argument("--only", help="comma-separated model stems (default: every model in --models)")
    ap.add_argument("--redo", action="store_true", help="run again the cells --out already holds")
    ap.add_argument("--bundles", type=Path, nargs="+", help="profile bundles: replay each one's as-executed and "
                    "best executions and compare their difference with the analysis's joint gap")
    ap.add_argument("--plan-only", action="store_true", help="with --bundles: plan and compare the charges, build and "
                    "run nothing (no GPU)")
    args = ap.parse_args(argv)
    if args.bundles:
        args.db = database(args.db)
        return bundles_main(args, shlex.join(["python", "bench/replay.py", *(argv if argv is not None
                                                                             else sys.argv[1:])]))
    store_in = args.db if args.db is not None and args.db.suffix == ".db" else None  # a compressed one is read only
    args.db = database(args.db)  # the shipped one unpacked once into ~/.cache/benanza
    only = set(args.only.split(",")) if args.only else None
    models = sorted(m for m in args.models.glob("*.onnx") if only is None or m.stem in only)
    if not models:
        print(f"error: no .onnx models in {args.models}", file=sys.stderr)
        return 1
    batches = [int(b) for b in args.batches.split(",")]
    dtypes = ["+".join(Precision(p.strip().lower()).value for p in d.split("+")) for d in args.dtypes.split(",")]
    command = shlex.join(["python", "bench/replay.py", *(argv if argv is not None else sys.argv[1:])])
    cells: list[dict[str, Any]] = json.loads(args.out.read_text())["cells"] if args.out.is_file() else []
    for model in models:
        for batch in batches:
            for dtype in dtypes:
                held = [c for c in cells if (c["model"], c["batch"], c["dtype"]) == (model.stem, batch, dtype)]
                if held and not args.redo:
                    continue
                cells = [c for c in cells if c not in held]
                c = cell(model, args.db, batch, dtype, args.work, command, store_in, args.redo)
                cells.append(c)
                ratio = c.get("replay_over_lbl_seq")
                print(f"{c['model']:14} b{batch:<4} {dtype}: {c['status'] or 'not run':12} "
                      + (f"replay/LBL_seq {ratio:.3f} " if ratio else "") + f"({c['seconds']:.0f} s) "
                      + (c.get("message") or "")[:160], flush=True)
                if ratio and ratio > EXPLAIN_ABOVE and c.get("explanation"):
                    print(f"{'':20}{c['explanation']['reason']}", flush=True)
                if c.get("stored", "").startswith("not stored"):
                    print(f"{'':20}{c['stored']}", flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                partial = args.out.with_name(args.out.name + ".partial")  # renamed into place: a kill
                partial.write_text(json.dumps({"schema": SCHEMA, "command": command, "db": str(args.db),
                                               "cells": cells}, indent=1) + "\n")  # never leaves half a file
                partial.replace(args.out)
    ran = [c for c in cells if c.get("replay_over_lbl_seq")]
    print(f"{len(ran)} of {len(cells)} cells replayed; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
