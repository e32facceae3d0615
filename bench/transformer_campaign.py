"""Today's transformers end to end on one GPU, in one call: export, benchmark, profile, analyze.

    python bench/transformer_campaign.py [--out build/tcamp] [--budget-s 500] [--max-engines 4] \\
        [--models bert_base:dynamo,gpt2_small:dynamo,vit_b_16:ts] [--batch 1,32] [--dtype fp16,fp32,tf32] \\
        [--dry-run] [--export-only]

Steps, each timed, stopping cleanly when the time budget is spent (the JSON says what was skipped):

1. export BERT-base and GPT-2 small (seq 128) and ViT-B/16 with random weights, offline
   (``bench/exports.py``'s exporters);
2. plan, generate and build every layer's and fusion candidate's benchmarks at each batch in
   fp32, tf32 and fp16 (with the ceilings benchmark) and run them into one SQLite database
   (``--max-engines`` caps the engine configs per graph-API job to fit the budget);
3. profile each (model, batch, dtype) in PyTorch (``benanza profile --framework torch``), and in
   ONNX Runtime too when ``import onnxruntime`` offers the CUDAExecutionProvider;
4. measure the library calls the captured bundles logged that the database lacks
   (``plan_executed``, as ``benanza generate --from-profile``: ORT's MatMul + bias Add as its
   beta = 1 cublasGemmEx among them), warm, and for the batch-1 bundles under
   ``--l2 cold-weights`` and ``--l2 cold`` too (``--l2 LIST`` sets the states for every bundle);
   one generated project, built once, run into the same database;
5. analyze each bundle against that database and print one row per bundle: layers mapped,
   kernel time mapped, layers charged a roofline for want of a benchmark, BR_seq against the
   kernel-only GPU time, as-executed / measured, the library-call check (its cold-L2 figure at
   batch 1, its warm one otherwise; the cold-weights one beside it), and the attention fusion gap the analyzer
   reports beside what the framework ran for the attention cores (their kernels, their time).

Writes under ``$OUT`` (else ``--out``): ``campaign.json``, ``campaign.md``, ``perf.db.gz`` and
the bundles as ``bundles-<n>.tar`` of one ``<bundle>.tar.gz`` each (every file under 16 MB, at most 5).
Needs a GPU, torch, transformers, onnxscript, onnx2torch (and onnxruntime-gpu for ORT rows).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import sys
import tarfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/exports.py

from benanza.analyze.headline import library_call_ratio
from benanza.errors import BenanzaError
from benanza.generate import codegen
from benanza.generate.plan import plan, plan_executed
from benanza.library import L2, Fusion, Precision
from benanza.measure import runner, system
from benanza.model.onnx_import import load_model
from benanza.profile.bundle import model_digest
from benanza.profile.capture import capture
from benanza.profile.mapping import kernel_time_mapped, summary
from benanza.store.db import DatabaseSink, open_db
from benanza.store.systems import held_in_states
from benanza.workflows.analysis import analyze_model
from benanza.workflows.measure import profile_calls

SEQ = 128
# The executed-calls step (4.) starts only with this much budget left: its build (the harness's
# kernels and a few executables, about 1-2 min on 16 cores) and run (tens of jobs, 1-3 s each),
# plus --analyze-s per bundle for step 5.
EXECUTED_MIN_S = 150.0
MAX_FILE = 15 * 2**20  # per returned archive (the device returns files up to 16 MB)
MAX_ARCHIVES = 5
FRAMEWORKS = {"torch": "pytorch", "ort": "onnxruntime"}
# The L2 states step 4 measures the batch-1 bundles' calls in: the library-call check at batch 1 is
# read against cold weights and cold L2 (docs/METRICS.md), warm is the as-executed policy's.
BATCH1_STATES = (L2.WARM, L2.COLD_WEIGHTS, L2.COLD)
# --tiny: two-layer, 32-wide text models (a CPU check of the whole script; never for RESULTS)
TINY = {"bert_base": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
        "gpt2_small": {"n_embd": 32, "n_layer": 2, "n_head": 2}}


class Clock:
    """The campaign's time budget: each step asks whether it may still start."""

    def __init__(self, budget_s: float) -> None:
        self.start, self.budget_s = time.monotonic(), budget_s

    def used(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.used()


def ort_cuda() -> bool:
    try:
        import onnxruntime
    except ImportError:
        return False
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def export_models(specs: list[tuple[str, str]], out: Path, log: list[str], tiny: bool = False) -> dict[str, Path]:
    """<name>_<exporter> -> exported ONNX file; a model that fails to export is logged and left out."""
    import exports  # bench/exports.py

    exports.CONFIG_OVERRIDES.update(TINY if tiny else {})
    found = {}
    for name, exporter in specs:
        path = out / f"{name}_{exporter}.onnx"
        try:
            found[path.stem] = path if path.exists() else exports.export(name, exporter, out)
        except Exception as exc:  # an exporter's failure is a logged row, not the end of the campaign
            log.append(f"export {name} ({exporter}) failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    return found


def benchmark(models: dict[str, Path], batches: list[int], dtypes: list[str], project: Path, db_path: Path,
              max_engines: int | None, clock: Clock, timeout_s: float, dry_run: bool, max_reps: int,
              max_ms: float, race: float) -> dict[str, Any]:
    loaded = [load_model(path, b, SEQ) for path in models.values() for b in batches]
    p = plan(loaded, dtypes, ceilings=True)
    manifest = codegen.generate(p, project, "python bench/transformer_campaign.py")
    counts = {exe: spec["num_jobs"] for exe, spec in manifest.executables.items()}
    out: dict[str, Any] = {"jobs": len(p.jobs), "per executable": counts, "dropped": p.drop_reasons()}
    print(f"[{clock.used():.0f} s] {len(p.jobs)} jobs: {counts}", flush=True)
    if dry_run:
        return out
    build = runner.build(project, jobs=os.cpu_count())
    print(f"[{clock.used():.0f} s] built", flush=True)
    fingerprint = system.fingerprint(bandwidth=True)
    if not fingerprint["usable"]:
        raise BenanzaError(f"no usable NVIDIA GPU ({fingerprint['reason']})")
    s = runner.run(project, DatabaseSink(open_db(db_path)), timeout_s=timeout_s, build_dir=build, system=fingerprint,
                   max_engines=max_engines, max_reps=max_reps,
                   harness_args=("--max-ms", str(max_ms), "--race", str(race)))
    out.update({"results": s.results, "ok": s.ok, "check_failed": s.check_failed, "errors": s.errors,
                "max_engines": max_engines, "max_reps": max_reps, "max_ms": max_ms, "race": race,
                "gpu": fingerprint.get("gpu")})
    print(f"[{clock.used():.0f} s] ran: {s.ok} ok of {s.results}, {s.check_failed} check_failed", flush=True)
    return out


def measure_executed(bundles: list[tuple[Path, Path]], project: Path, db_path: Path, clock: Clock, timeout_s: float,
                     max_reps: int, max_ms: float, race: float, analyze_s: float,
                     states: tuple[L2, ...] | None = None) -> dict[str, Any]:
    """Step 4: the calls the bundles' logs show that the database lacks, warm, and for the batch-1
    bundles also under cold weights and cold L2 (``BATCH1_STATES``: the library-call check's rows at
    batch 1), or in ``states`` when given. ``bundles`` are (bundle, its model). One project for all
    (the runner skips per L2 what it holds)."""
    out: dict[str, Any] = {}
    reserve = analyze_s * len(bundles)
    if clock.left() < EXECUTED_MIN_S + reserve:
        return {"skipped": f"time budget: {clock.left():.0f} s left, {EXECUTED_MIN_S + reserve:.0f} s needed"}
    calls = [c for bundle, model in bundles for c in profile_calls(model, (bundle,))]
    if states is None:
        states = BATCH1_STATES if any(read_batch(bundle) == 1 for bundle, _ in bundles) else (L2.WARM,)
    p = plan_executed(calls, skip=held_in_states(db_path, states))
    out.update({"calls": len(calls), "jobs": len(p.jobs), "dropped": p.drop_reasons()})
    print(f"[{clock.used():.0f} s] executed calls: {len(calls)} logged, {len(p.jobs)} job(s) to measure", flush=True)
    if not p.jobs:
        return out
    codegen.generate(p, project, "python bench/transformer_campaign.py (the bundles' executed calls)")
    build = runner.build(project, jobs=os.cpu_count())
    out["built (s)"] = clock.used()
    print(f"[{clock.used():.0f} s] built the executed calls", flush=True)
    fingerprint = system.fingerprint()
    if not fingerprint["usable"]:
        raise BenanzaError(f"no usable NVIDIA GPU ({fingerprint['reason']})")
    for l2 in states:
        left = clock.left() - reserve
        if left < 20:
            out[l2.value] = "skipped: time budget spent"
            continue
        s = runner.run(project, DatabaseSink(open_db(db_path)), timeout_s=min(timeout_s, left), build_dir=build,
                       system=fingerprint, l2=l2.value, max_reps=max_reps,
                       harness_args=("--max-ms", str(max_ms), "--race", str(race)))
        out[l2.value] = {"results": s.results, "ok": s.ok, "check_failed": s.check_failed, "errors": s.errors,
                         "done at (s)": clock.used()}
        print(f"[{clock.used():.0f} s] executed calls {l2.value}: {s.ok} ok of {s.results}, "
              f"{s.check_failed} check_failed", flush=True)
    return out


def attention_ran(report: Any, mapping: Any, model: Any) -> dict[str, Any]:
    """The analyzer's attention fusion gap and what the framework ran for the attention cores."""
    pattern = next((r for r in report.tables["fusion patterns"].rows if r["pattern"] == Fusion.ATTENTION.value), {})
    cores = [f for f in model.fusions if f.pattern == Fusion.ATTENTION.value]
    members = {i for f in cores for i in f.layers}
    kernels: dict[str, int] = {}
    ms = 0.0
    for i in members:
        lp = mapping.profile.layers.get(i)
        if lp is None:
            continue
        ms += lp.gpu_ms or 0.0
        for k in lp.kernels:
            kernels[k.name[:60]] = kernels.get(k.name[:60], 0) + 1
    fused = [k for k in kernels if any(s in k.lower() for s in ("fmha", "flash", "attention", "sdpa"))]
    return {"cores": len(cores), "analyzer unfused (ms)": pattern.get("unfused (ms)"),
            "analyzer fused SDPA (ms)": pattern.get("fused (ms)"), "analyzer fusion gap (ms)": pattern.get("gap (ms)"),
            "framework GPU time on the cores (ms)": ms, "framework ran a fused attention kernel": bool(fused),
            "framework kernels on the cores": dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:6])}


def analyze_bundle(model_path: Path, db_path: Path, bundle: Path) -> dict[str, Any]:
    report, mapping = analyze_model(model_path, db_path, bundle)
    s, rs = summary(mapping), report.summary
    share, copy_ms = kernel_time_mapped(mapping.profile)
    mapped = s["with node"] + s["fused into another"]
    model = load_model(model_path, read_batch(bundle), SEQ)
    return {"layers": s["layers"], "layers mapped (%)": 100.0 * mapped / max(s["layers"], 1),
            "kernel time mapped (%)": None if share is None else 100.0 * share,
            "memcpy/memset (ms)": copy_ms,
            "layers charged a roofline (no benchmark)": rs.roofline_layers,
            "LBL_seq (ms)": rs.lbl_seq_ms, "GPU busy (ms)": rs.gpu_busy_ms, "BR_seq vs GPU busy": rs.br_seq_busy,
            "as-executed / measured": rs.mapped.ratio, "mapped layers (as-executed check)": rs.mapped.layers,
            "as-executed / measured, library calls": rs.library_calls.ratio,
            "library-call layers (as-executed check)": rs.library_calls.layers,
            "as-executed cold weights / measured, library calls": rs.library_calls_cold_weights.ratio,
            "library-call layers, cold weights": rs.library_calls_cold_weights.layers,
            "as-executed cold L2 / measured, library calls": rs.library_calls_cold_l2.ratio,
            "library-call layers, cold L2": rs.library_calls_cold_l2.layers,
            "fusion gap (ms)": rs.fusion_gap_ms, "attention": attention_ran(report, mapping, model),
            "ops of the missing table": sorted({r.get("op", "") for r in report.tables["missing"].rows})[:20]}


def reuse_db(source: Path, db_path: Path) -> None:
    """A previous call's database as this call's, unpacked when gzipped."""
    if not source.is_file():
        sys.exit(f"--db: {source}: no such file")
    if source.suffix == ".gz":
        with gzip.open(source, "rb") as src, open(db_path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    elif source.resolve() != db_path.resolve():
        shutil.copyfile(source, db_path)


def read_batch(bundle: Path) -> int:
    return int(json.loads((bundle / "meta.json").read_text())["batch"])


def archives(bundles: list[Path], results: Path) -> list[str]:
    """The bundles as tar.gz archives of at most MAX_FILE bytes each; a bundle too large alone is left out."""
    blobs = []
    for b in bundles:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
            tar.add(b, arcname=b.name)
        blobs.append((b.name, buf.getvalue()))
    written, size = [], 0
    groups: list[list[tuple[str, bytes]]] = [[]]
    for name, blob in blobs:
        if len(blob) > MAX_FILE:
            print(f"bundle {name} is {len(blob) / 2**20:.1f} MB compressed: left out", flush=True)
            continue
        if size + len(blob) > MAX_FILE:
            groups.append([])
            size = 0
        groups[-1].append((name, blob))
        size += len(blob)
    for n, group in enumerate(g for g in groups if g):
        if n == MAX_ARCHIVES:
            print(f"{len(groups) - n} more bundle archive(s) left out (file count)", flush=True)
            break
        path = results / f"bundles-{n}.tar"  # a tar of the bundles' own .tar.gz
        with tarfile.open(path, "w") as tar:
            for name, blob in group:
                info = tarfile.TarInfo(f"{name}.tar.gz")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
        written.append(path.name)
    return written


def _with_layers(value: Any, layers: Any) -> str:
    return "" if value is None else f"{value:.3g} ({layers})"


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| model | batch | dtype | framework | layers | mapped | kernel time mapped | roofline-only layers | "
            "BR_seq vs GPU busy | as-executed / measured | as-executed / measured, library calls (layers); "
            "batch 1: cold L2, else warm | library calls, cold weights (layers) | attention gap (analyzer, ms) | "
            "framework ran |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        a = r.get("analysis") or {}
        att = a.get("attention") or {}

        def f(v: Any, spec: str = ".3g") -> str:
            return "" if v is None else format(v, spec) if isinstance(v, float) else str(v)

        ran = "" if not att else ("fused kernel" if att.get("framework ran a fused attention kernel") else
                                  f"unfused ({f(att.get('framework GPU time on the cores (ms)'))} ms)")
        lib, lib_layers = library_call_ratio(r["batch"], a)
        cold_weights = _with_layers(a.get("as-executed cold weights / measured, library calls"),
                                    a.get("library-call layers, cold weights"))
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['framework']} | "
                     + (f"{r['error']} | | | | | | | | | |" if "error" in r else
                        f"{a['layers']} | {f(a['layers mapped (%)'], '.1f')} % | "
                        f"{f(a['kernel time mapped (%)'], '.1f')} % | "
                        f"{a['layers charged a roofline (no benchmark)']} | "
                        f"{f(a['BR_seq vs GPU busy'])} | "
                        f"{f(a['as-executed / measured'])} | {f(lib)} ({lib_layers}) | "
                        f"{cold_weights} | "
                        f"{f(att.get('analyzer fusion gap (ms)'))} | {ran} |"))
    return "\n".join(lines)


def guarded(row: dict[str, Any], step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One bundle's step; a failure is the row's error and None (the campaign goes on), else its
    result (True for a step that returns nothing)."""
    try:
        got = step(*args, **kwargs)
        return True if got is None else got
    except BenanzaError as exc:
        row["error"] = str(exc).splitlines()[0][:200]
    except Exception as exc:  # keep the campaign going; the row says what broke
        traceback.print_exc()
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return None


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("build/tcamp"), help="work directory")
    ap.add_argument("--models", default="bert_base:dynamo,gpt2_small:dynamo,vit_b_16:ts",
                    help="name:exporter pairs (bench/exports.py names; ts or dynamo)")
    ap.add_argument("--batch", type=ints, default=[1, 32])
    ap.add_argument("--dtype", default="fp16,fp32,tf32", help="in the order they are profiled")
    ap.add_argument("--framework", default="torch,ort", help="ort only where onnxruntime has the CUDA EP")
    ap.add_argument("--max-engines", type=int, default=4, help="engine configs per graph-API job (0: all)")
    ap.add_argument("--max-reps", type=int, default=50, help="timed repetitions per benchmark at most")
    ap.add_argument("--max-ms", type=float, default=100.0, help="time budget of one benchmark's repetitions")
    ap.add_argument("--race", type=float, default=1.5,
                    help="time coarsely the algorithms this much slower than a job's best (harness --race; 0: off)")
    ap.add_argument("--budget-s", type=float, default=500.0, help="stop starting new steps after this many seconds")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per profile")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per benchmark executable")
    ap.add_argument("--l2", type=lambda text: tuple(L2(v) for v in text.split(",") if v),
                    help="L2 states step 4 measures the logged calls in (default: warm, and at batch 1 also "
                         "cold-weights and cold)")
    ap.add_argument("--analyze-s", type=float, default=20.0,
                    help="seconds the budget keeps per bundle for its analysis (step 5)")
    ap.add_argument("--db", type=Path, help="analyze against this database (.db or .db.gz) and skip the benchmarks "
                    "(a previous call's perf.db.gz: profiles then fit in their own call)")
    ap.add_argument("--dry-run", action="store_true", help="export and generate only (no GPU needed)")
    ap.add_argument("--export-only", action="store_true", help="export only")
    ap.add_argument("--tiny", action="store_true", help="tiny text-model configs (a CPU check of the script)")
    args = ap.parse_args()
    clock = Clock(args.budget_s)
    work = args.out.resolve()
    work.mkdir(parents=True, exist_ok=True)
    results = Path(os.environ["OUT"]).resolve() if os.environ.get("OUT") else work
    results.mkdir(parents=True, exist_ok=True)
    dtypes = [Precision(d).value for d in args.dtype.split(",") if d]
    specs = [tuple(s.split(":", 1)) for s in args.models.split(",") if s]
    if bad := [s for s in specs if len(s) != 2 or s[1] not in ("ts", "dynamo")]:
        sys.exit(f"--models: expected name:ts or name:dynamo, got {bad}")
    # a bundle already under --out is analyzed whether or not its framework can run here
    frameworks = [f for f in args.framework.split(",") if f in FRAMEWORKS]
    runnable = {f for f in frameworks if f != "ort" or ort_cuda()}
    log: list[str] = []
    record: dict[str, Any] = {"argv": sys.argv, "frameworks": frameworks, "log": log, "rows": []}

    (work / "exports").mkdir(exist_ok=True)
    models = export_models(specs, work / "exports", log, args.tiny)
    print(f"[{clock.used():.0f} s] exported {sorted(models)}; {log or 'no failures'}", flush=True)
    if args.export_only or not models:
        (results / "campaign.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
        return
    record["exports"] = {name: {"file": path.name, "sha256": model_digest(path)} for name, path in models.items()}
    db_path = work / "perf.db"
    if args.db:
        reuse_db(args.db, db_path)
        record["benchmarks"] = {"reused": str(args.db)}
    else:
        try:
            record["benchmarks"] = benchmark(models, args.batch, dtypes, work / "project", db_path,
                                             args.max_engines or None, clock, args.timeout, args.dry_run,
                                             args.max_reps, args.max_ms, args.race)
        except BenanzaError as exc:
            record["benchmarks"] = {"error": str(exc)}
            print(f"benchmarks: {exc}", flush=True)
    bundles: list[Path] = []
    captured: list[tuple[dict[str, Any], Path, Path]] = []  # (row, bundle, model)
    if not args.dry_run and db_path.exists():
        for dtype in dtypes:
            for batch in args.batch:
                for name, path in models.items():
                    for fw in frameworks:
                        row: dict[str, Any] = {"model": name, "batch": batch, "dtype": dtype, "framework": fw}
                        record["rows"].append(row)
                        if clock.left() < 40 + args.analyze_s * (len(captured) + 1):
                            row["error"] = "skipped: time budget spent"
                            continue
                        bundle = work / "bundles" / f"{name}_b{batch}_{fw}_{dtype}"
                        if not bundle.exists() and fw not in runnable:
                            row["error"] = f"skipped: no {FRAMEWORKS[fw]} CUDA provider here"
                            continue
                        if bundle.exists() or guarded(row, capture, path, FRAMEWORKS[fw], batch, dtype, bundle,
                                                      runs=args.runs, warmup=3, profiled_runs=3, seq_len=SEQ):
                            bundles.append(bundle)
                            captured.append((row, bundle, path))
                        print(f"[{clock.used():.0f} s] {name} b{batch} {dtype} {fw}: "
                              f"{row.get('error') or 'captured'}", flush=True)
        if captured:
            try:
                record["executed calls"] = measure_executed([(b, m) for _, b, m in captured], work / "executed",
                                                            db_path, clock, args.timeout, args.max_reps, args.max_ms,
                                                            args.race, args.analyze_s, args.l2)
            except BenanzaError as exc:
                record["executed calls"] = {"error": str(exc)}
                print(f"executed calls: {exc}", flush=True)
        for row, bundle, path in captured:
            if (analysis := guarded(row, analyze_bundle, path, db_path, bundle)) is not None:
                row["analysis"] = analysis
            print(f"[{clock.used():.0f} s] {row['model']} b{row['batch']} {row['dtype']} {row['framework']}: "
                  f"{row.get('error') or 'analyzed'}", flush=True)
    text = markdown(record["rows"])
    print("\n" + text, flush=True)
    record["seconds"] = clock.used()
    (results / "campaign.md").write_text(text + "\n")
    (results / "campaign.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    if db_path.exists():
        with open(db_path, "rb") as src, gzip.open(results / "perf.db.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    record["archives"] = archives(bundles, results)
    (results / "campaign.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"[{clock.used():.0f} s] wrote {sorted(p.name for p in results.iterdir())}", flush=True)


if __name__ == "__main__":
    main()
