"""Issue 32's figures in one script: how long benanza takes to give its answer, against the floor.

Each part is one run of at most 10 minutes on an H100 and writes OUT/<part>.json; ``table`` prints
every part's rows together and writes OUT/speed.json. A row is one figure: the wall time, the floor
(what the GPU itself must do, plus what cannot overlap), wall / floor and the target.

    # profile capture, ResNet-50 at batch 32 in fp32: the module natively, the zoo file through
    # onnx2torch (and ONNX Runtime with --cells ...,ort)
    python bench/speed.py profile --out OUT

    # one command, first answer: `benanza pipeline MODEL --profile-with torch` on unseen torchvision
    # models (exported here, random weights), each with an empty database, batch 1, three precisions;
    # the first with an empty build cache, the next ones with what the earlier ones built
    python bench/speed.py pipeline --out OUT --models regnet_y_400mf,swin_t
    # the same, a first answer over the heuristics' first 8 graph-API engine configs per job
    python bench/speed.py pipeline --out OUT8 --models regnet_y_400mf,swin_t --max-engines 8
    # again into another OUT, both runs with BENANZA_BUILD_CACHE_DIR set to one directory: nothing is
    # compiled, and the runtime-compiled plans kept above are loaded (the plan cache)
    BENANZA_BUILD_CACHE_DIR=BC python bench/speed.py pipeline --out OUT8b --models regnet_y_400mf,swin_t --max-engines 8

    # the zoo campaign (9 models x batches 1/8/64/256 x fp32/tf32/fp16, every engine) estimated from
    # two disjoint 1/N samples; their spread is the sampling error
    python bench/speed.py campaign --out OUT --sample 40 --offsets 0,20

    # nothing measured gets worse: racing vs exhaustive timing on 40 jobs of each multi-algorithm
    # executable of the campaign's zoo project (bench/race_check.py; after `campaign`)
    python bench/speed.py race --out OUT
    # and the campaign's sample databases against the shipped one: the per-layer minima the bound's
    # validation cells are computed from (bench/db_agreement.py; no GPU needed)
    python bench/speed.py agreement --out OUT

    # build once (no GPU needed): a project built cold, the same project again, then ten
    # `generate --from-profile` projects of the shipped bundles built in turn into one cache
    python bench/speed.py build --out OUT

    python bench/speed.py table OUT

Floors:
  profile    one child's start-up (interpreter, framework import, model build: paid once at least)
             + both runs' GPU phases (warm-ups, timed runs, the trace written);
  pipeline   the profile's floor + the timed repetitions of every measured job (the harness's timed GPU);
             its build cache is $BENANZA_BUILD_CACHE_DIR, else OUT/build-cache, its plan cache the harness's
             ($BENANZA_PLAN_CACHE_DIR, else ~/.cache/benanza/plans); the row says what each held;
  campaign   the timed repetitions + each executable's process start and library handles (once each);
  build      none (the target is the wall of a build whose executables were built before);
  race, agreement: none (their targets are shares, not seconds: wall is the raced run's, or none).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TARGETS = {"profile": 15.0, "pipeline": 120.0, "build": 5.0, "campaign": 600.0}
EFFICIENCY_TARGET = 0.60
RACE_TARGET = 0.97  # of jobs whose raced fastest median is within 3 % of the exhaustive one
PROFILE_CELLS = {
    "module": ["--torch-module", "natives:resnet50"],
    "onnx2torch": ["{zoo}/resnet50.onnx", "--framework", "torch"],
    "ort": ["{zoo}/resnet50.onnx", "--framework", "onnxruntime"],
}
# phase names inside a capture child (benanza.profile.capture_child): its start-up and its GPU work
START_UP = ("interpreter", "import", "build the module", "to the GPU", "session")
GPU_WORK = ("warm-up", "timed runs", "write the trace")
ONCE = ("process_start", "handles")  # campaign phases paid once per executable, sampled or not


def _env() -> dict[str, str]:
    """bench/ on PYTHONPATH: the natives factories."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(BENCH), os.environ.get("PYTHONPATH"))))}


def _benanza(*args: str, log: Path, env: dict[str, str] | None = None,
             timeout_s: float = 600) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run one benanza command as a user would; its output goes to ``log``."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "benanza", *args], capture_output=True, text=True,
                              env=env or _env(), timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        done = subprocess.CompletedProcess(exc.cmd, 124, str(exc.stdout or ""), f"timed out after {timeout_s:g} s")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ benanza {' '.join(args)}\n{done.stdout}\n--- stderr\n{done.stderr}")
    return time.perf_counter() - t0, done


def _row(figure: str, wall: float | None, floor: float | None, target: float | None, **extra: Any) -> dict[str, Any]:
    return {"figure": figure, "wall_s": None if wall is None else round(wall, 2),
            "floor_s": None if floor is None else round(floor, 2),
            "wall_over_floor": None if not floor or wall is None else round(wall / floor, 2), "target_s": target,
            "met": None if target is None or wall is None or "error" in extra else wall <= target, **extra}


def _sum(phases: dict[str, Any], prefixes: tuple[str, ...]) -> float:
    return sum(v for k, v in phases.items() if isinstance(v, (int, float)) and k.startswith(prefixes))


def profile_floor(capture_s: dict[str, Any]) -> float:
    """One child's start-up (the shorter) + both runs' GPU work, from a bundle's ``extra.capture_s``."""
    children = [capture_s.get("latency child, inside", {}), capture_s.get("profiled child, inside", {})]
    return min(_sum(c, START_UP) for c in children) + sum(_sum(c, GPU_WORK) for c in children)


def part_profile(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for cell in args.cells.split(","):
        out = Path(args.out) / "profile" / cell
        what = [a.format(zoo=args.zoo) for a in PROFILE_CELLS[cell]]
        wall, done = _benanza("profile", *what, "--batch", str(args.batch), "--dtype", args.dtype, "--out", str(out),
                              log=out.with_suffix(".log"))
        if done.returncode:
            rows.append(_row(f"profile {cell} b{args.batch}", wall, None, TARGETS["profile"],
                             error=(done.stderr or done.stdout).strip()[-300:]))
            continue
        capture = json.loads((out / "meta.json").read_text())["extra"]["capture_s"]
        captured = sum(v for v in capture.values() if isinstance(v, (int, float)))
        rows.append(_row(f"profile {cell} b{args.batch} {args.dtype}", wall, profile_floor(capture),
                         TARGETS["profile"], capture_s=round(captured, 2), phases=capture))
    return rows


def _export(name: str, path: Path, batch: int) -> None:
    code = ("import sys; from benanza.profile.capture import export_torch_module; "
            "export_torch_module(sys.argv[1], sys.argv[2], int(sys.argv[3]))")
    subprocess.run([sys.executable, "-c", code, f"natives:{name}", str(path), str(batch)], check=True, env=_env())


def part_pipeline(args: argparse.Namespace) -> list[dict[str, Any]]:
    from benanza.measure import build_cache, plan_cache

    out = Path(args.out) / "pipeline"
    out.mkdir(parents=True, exist_ok=True)
    # this process reads the build cache the pipelines fill (its entries before and after each), as it reads
    # the plan cache: both through their own modules
    os.environ["BENANZA_BUILD_CACHE_DIR"] = os.environ.get("BENANZA_BUILD_CACHE_DIR") or str(
        Path(args.out) / "build-cache")
    env = _env()
    rows = []
    for name in args.models.split(","):
        cached = len(build_cache.entries())  # each executable a pipeline compiles is kept there
        plans = plan_cache.usage()[0] if plan_cache.root() is not None else None
        model = out / f"{name}_b{args.batch}.onnx"
        if not model.exists():
            _export(name, model, args.batch)
        timings = out / f"{name}.timings.json"
        wall, done = _benanza("pipeline", str(model), "--db", str(out / f"{name}.db"), "--batch", str(args.batch),
                              "--dtype", args.dtype, "--profile-with", args.framework,
                              "--project-dir", str(out / f"{name}-project"), "--timings", str(timings),
                              *(["--max-engines", str(args.max_engines)] if args.max_engines else []), env=env,
                              log=out / f"{name}.log", timeout_s=args.timeout)
        held = "empty build cache" if not cached else f"build cache holding {cached} executables"
        held += ", plan cache off" if plans is None else f", plan cache holding {plans} plans" if plans else \
            ", empty plan cache"
        if args.max_engines:
            held += f", --max-engines {args.max_engines}"
        if done.returncode:
            rows.append(_row(f"pipeline {name} ({held})", wall, None, TARGETS["pipeline"],
                             error=(done.stderr or done.stdout).strip()[-300:]))
            continue
        steps = json.loads(timings.read_text())
        meta = json.loads((out / f"{name}-project-bundle" / "meta.json").read_text())
        floor = profile_floor(meta["extra"]["capture_s"]) + steps["timed_gpu_s"]
        rows.append(_row(f"pipeline {name} b{args.batch} {args.dtype} ({held})", wall, floor, TARGETS["pipeline"],
                         steps_s=steps["steps_s"], timed_gpu_s=steps["timed_gpu_s"]))
        measured = {k: v for k, v in steps["steps_s"].items() if k.startswith("measure")}
        gpu, spent = steps["timed_gpu_s"], sum(measured.values())
        rows.append(_row(f"  its campaign ({', '.join(measured)})", spent, gpu, None,
                         efficiency=round(gpu / spent, 3) if spent else None, efficiency_target=EFFICIENCY_TARGET,
                         phases_s=steps.get("job_phases_s", {})))
        build, compiled = steps["steps_s"].get("build", 0.0), len(build_cache.entries()) - cached
        # the target is a build whose executables were all built before: a run that compiled some (its build or
        # the profile's calls') has none
        rows.append(_row(f"  its build ({compiled} compiled; {held})", build, None,
                         None if compiled else TARGETS["build"], compiled=compiled))
    return rows


def _zoo(args: argparse.Namespace) -> Path:
    """``--zoo``, made with ``benanza models zoo`` where it is not there yet."""
    zoo = Path(args.zoo)
    if not zoo.is_dir():
        subprocess.run([sys.executable, "-m", "benanza", "models", "zoo", str(zoo)], check=True)
    return zoo


def part_campaign(args: argparse.Namespace) -> list[dict[str, Any]]:
    from benanza.measure.campaign import scaled_wall

    out = Path(args.out) / "campaign"
    out.mkdir(parents=True, exist_ok=True)
    project = out / "zoo"
    zoo = _zoo(args)
    rows, estimates = [], []
    for k, offset in enumerate(int(x) for x in args.offsets.split(",")):
        report = out / f"sample{args.sample}+{offset}.json"
        generate = ["--generate", str(zoo), "--batch", "1,8,64,256", "--dtype", "fp32,tf32,fp16"] if k == 0 else []
        subprocess.run([sys.executable, str(BENCH / "campaign.py"), str(project), "--db", str(out / f"s{offset}.db"),
                        *generate, "--sample", str(args.sample), "--sample-offset", str(offset), "--json",
                        str(report)], check=True, env=_env())
        data = json.loads(report.read_text())
        exes = data["executables"]
        wall = sum(scaled_wall(t, args.sample) for t in exes.values())
        once = sum(t["phases_s"][p] for t in exes.values() for p in ONCE)
        gpu = data["overall"]["timed_gpu_s"] * args.sample
        estimates.append(wall)
        rows.append(_row(f"zoo campaign from 1/{args.sample} sample +{offset} (runs only)", wall, gpu + once,
                         TARGETS["campaign"], efficiency=round(gpu / wall, 3), efficiency_target=EFFICIENCY_TARGET,
                         jobs_sampled=data["overall"]["jobs"], build_s=round(data["campaign_s"].get("build", 0), 1),
                         phases_s={p: round(v * (1 if p in ONCE else args.sample), 1)
                                   for p, v in data["overall"]["phases_s"].items()}))
    if len(estimates) > 1:
        mean = sum(estimates) / len(estimates)
        rows.append(_row(f"zoo campaign, mean of {len(estimates)} samples", mean, None, TARGETS["campaign"],
                         sampling_error=round((max(estimates) - min(estimates)) / 2 / mean, 3)))
    return rows


def part_race(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Racing must not change the answer: bench/race_check.py on the campaign part's zoo project."""
    from race_check import summary

    project, out = Path(args.out) / "campaign" / "zoo", Path(args.out) / "race"
    figure = f"race check: raced within 3 % of exhaustive ({args.race_jobs} jobs per executable)"
    if not (project / "manifest.json").is_file():
        return [_row(figure, None, None, None, error=f"{project}: no project; run the campaign part first")]
    out.mkdir(parents=True, exist_ok=True)
    report = out / "race_check.json"
    report.unlink(missing_ok=True)
    subprocess.run([sys.executable, str(BENCH / "race_check.py"), str(project), "--jobs-per-exe",
                    str(args.race_jobs), "--out", str(report)], env=_env())  # exit 1: not every job agrees
    if not report.is_file():
        return [_row(figure, None, None, None, error="bench/race_check.py wrote no report")]
    data = json.loads(report.read_text())
    counts = summary(data["rows"])
    share = counts["agree"] / counts["jobs"] if counts["jobs"] else 0.0
    row = _row(figure, data["walls_s"]["raced"], None, None, exhaustive_s=round(data["walls_s"]["exhaustive"], 1),
               agree=f"{counts['agree']}/{counts['jobs']}", share=round(share, 3), share_target=RACE_TARGET,
               faster=counts["faster"], slower=counts["slower"], slower_by_choice=counts["slower_by_choice"],
               differ=len(data["differ"]))
    row["met"] = share >= RACE_TARGET and not data["differ"]
    return [row]


def part_agreement(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The campaign part's sample databases against the reference (the shipped database by default)."""
    from db_agreement import agreement

    from benanza.store.shipped import readable_db, shipped_db

    reference = readable_db(Path(args.reference)) if args.reference else shipped_db()
    rows = []
    for db in sorted((Path(args.out) / "campaign").glob("s*.db")):
        data = agreement(db, reference)
        q = data["ratio_new_over_reference"]
        rows.append(_row(f"{db.name} vs {Path(args.reference or 'the shipped database').name}: fastest median per "
                         "layer group, new / reference", None, None, None, groups=data["groups"],
                         median_ratio=q.get("median"), p10=q.get("p10"), p90=q.get("p90"),
                         within_5pct=data["within_5pct"], status_changed=data["status_changed"],
                         rows_both=data["rows_both"]))
    return rows or [_row("agreement with the reference database", None, None, None,
                         error=f"{Path(args.out) / 'campaign'}: no sample database; run the campaign part first")]


def part_build(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Build once: bench/build_cache.py's pair (a project built cold into an empty cache, the same project
    again) and ten ``--from-profile`` projects of the shipped bundles built in turn into one cache."""
    out = Path(args.out) / "build"
    out.mkdir(parents=True, exist_ok=True)
    zoo = _zoo(args)
    report = out / "build_cache.json"
    subprocess.run([sys.executable, str(BENCH / "build_cache.py"), "--zoo", str(zoo), "--no-overlap", "--json",
                    str(report), "--keep", str(out / "work")], check=True, env=_env())
    data = json.loads(report.read_text())
    rows = [_row("build: a project whose executables were built before", data["warm"]["wall_s"], None,
                 TARGETS["build"], cold_s=round(data["cold"]["wall_s"], 1), compiled=len(data["warm"]["compiled"]))]
    later = [r for r in data.get("from_profile_builds", []) if not r["rest"]][1:]
    built_before = [r for r in later if not r["compiled"]]
    if built_before:  # the target's case: every executable built before
        rows.append(_row(f"build: slowest of {len(built_before)} --from-profile projects built before",
                         max(r["wall_s"] for r in built_before), None, TARGETS["build"]))
    if later:  # the others compiled the executables no project before them had (a new API or data type)
        rows.append(_row(f"build: {len(later)} --from-profile projects after the first, together", sum(
            r["wall_s"] for r in later), None, None, compiled=sum(len(r["compiled"]) for r in later)))
    return rows


def part_table(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for part in ("profile", "pipeline", "campaign", "race", "agreement", "build"):
        path = Path(args.out) / f"{part}.json"
        if path.is_file():
            rows += json.loads(path.read_text())
    (Path(args.out) / "speed.json").write_text(json.dumps(rows, indent=1))
    return rows


EXTRAS = ("efficiency", "sampling_error", "timed_gpu_s", "cold_s", "compiled", "agree", "share", "share_target",
          "slower_by_choice", "differ", "groups", "median_ratio", "p10", "p90", "within_5pct", "status_changed",
          "error")  # the keys a row's "extra" column shows


def print_rows(rows: list[dict[str, Any]]) -> None:
    print(f"{'figure':<72} {'wall s':>8} {'floor s':>8} {'ratio':>6} {'target':>7} {'met':>4}  extra")
    for r in rows:
        extra = ", ".join(f"{k} {r[k]}" for k in EXTRAS if k in r)
        wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.1f}"
        floor = "-" if r["floor_s"] is None else f"{r['floor_s']:.1f}"
        ratio = "-" if r["wall_over_floor"] is None else f"{r['wall_over_floor']:.2f}"
        target = "-" if r["target_s"] is None else f"{r['target_s']:g}"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
        print(f"{r['figure']:<72} {wall:>8} {floor:>8} {ratio:>6} {target:>7} {met:>4}  {extra}")


PARTS = {"profile": part_profile, "pipeline": part_pipeline, "campaign": part_campaign, "race": part_race,
         "agreement": part_agreement, "build": part_build, "table": part_table}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=sorted(PARTS))
    p.add_argument("--out", required=True)
    p.add_argument("--zoo", default=str(ROOT / "models" / "zoo"))
    p.add_argument("--cells", default="module,onnx2torch", help="profile: cells (module, onnx2torch, ort)")
    p.add_argument("--batch", type=int, default=None, help="profile: 32; pipeline: 1")
    p.add_argument("--dtype", default=None, help="profile: fp32; pipeline: fp32,tf32,fp16")
    p.add_argument("--models", default="regnet_y_400mf,swin_t", help="pipeline: torchvision models (bench/natives)")
    p.add_argument("--framework", default="torch", help="pipeline: --profile-with")
    p.add_argument("--sample", type=int, default=40, help="campaign: every N-th job")
    p.add_argument("--offsets", default="0,20", help="campaign: one sample per offset")
    p.add_argument("--race-jobs", type=int, default=40, help="race: jobs per multi-algorithm executable")
    p.add_argument("--reference", help="agreement: the reference database (default: the shipped one)")
    p.add_argument("--timeout", type=float, default=480, help="pipeline: seconds per model before it is stopped")
    p.add_argument("--max-engines", type=int, default=None,
                   help="pipeline: a first answer over the heuristics' first N graph-API engine configs per job")
    args = p.parse_args()
    args.batch = args.batch or (32 if args.part == "profile" else 1)
    args.dtype = args.dtype or ("fp32" if args.part == "profile" else "fp32,tf32,fp16")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = PARTS[args.part](args)
    if args.part != "table":
        (Path(args.out) / f"{args.part}.json").write_text(json.dumps(rows, indent=1))
    print_rows(rows)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
