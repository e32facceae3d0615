"""Seeded mutations of the shipped profile bundles, and the oracle that judges a command's answer.

Each mutation is one thing a broken tool, a careless edit or an attacker can leave in a bundle:
impossible or wrongly typed meta.json fields, Kineto / ORT trace events without times or with
absurd ones, cut or garbage cuDNN/cuBLAS logs, decompression bombs, missing parts, hostile
directory names. ``mutants(seed, n)`` yields ``Mutant``s; ``Mutant.make(root)`` writes one as a
real bundle directory; ``run_commands`` puts it through analyze, bundles, compare and
``profile --map-only`` (tests/test_fuzz_bundles.py, bench/fuzz_bundles.py) and ``judge`` says
whether each answer was a clean refusal, a sound analysis, or a failure (traceback, hang, a
wrong answer: BR > 1, a negative or non-finite figure, exit 0 with no layer mapped).
"""

from __future__ import annotations

import functools
import json
import lzma
import math
import random
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from click.testing import CliRunner

from benanza.paths import perfdb_dir
from benanza.plain_text import one_line
from benanza.profile.parse_cache import CACHE_DIR

SHIPPED = perfdb_dir() / "bundles"
BASES = (SHIPPED / "vgg19_b1_ort_fp32", SHIPPED / "vgg19_b1_torch_fp32")  # the smallest logs; ORT and PyTorch
MODEL = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_vgg19.onnx"
TIMEOUT_S = 60.0  # a command past this is a hang

HOSTILE_TEXT = ("[/]", "[bold red]x", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "line\nerror: fine", "nul\x00",
                "\u202eevil", "", "x" * 5000)
HOSTILE_VALUES: tuple[Any, ...] = (-1, 0, -0.0, 1e30, -1e30, 2**70, math.nan, math.inf, -math.inf, "abc", "64", None,
                                   True, False, [], {}, [1, 2], {"a": {"b": {"c": {}}}}, *HOSTILE_TEXT)
META_PATHS = (("framework",), ("framework_version",), ("model",), ("batch",), ("dtype",), ("latency_ms",),
              *(("latency_ms", k) for k in ("runs", "median", "mean", "p90", "min", "max")), ("system",),
              ("system", "gpu"), ("system", "cudnn_version"), ("extra",), ("extra", "use_tf32"), ("extra", "seq_len"),
              ("schema",), ("timestamp",), ("model_sha256",))
HOSTILE_NAMES = ("\x1b]0;pwned\x07b", "\x1b[1;31mb", "[bold red]b", "[blink]b", "b\nerror: all is fine", "b\tc",
                 "b\u202e", "b" * 200)
LOGS = ("cudnn_api.log.xz", "cublas_api.log.xz", "cublaslt_api.log.xz")
TRACES = ("torch_trace.json.xz", "ort_profile.json.xz")


@functools.cache
def newline_bomb(megabytes: int = 256, line: bytes = b"\n") -> bytes:
    """An .xz of ``megabytes`` MiB of ``line`` repeated: a few KB to write, minutes to read naively."""
    comp = lzma.LZMACompressor(preset=0)
    chunk = line * ((1 << 20) // len(line))
    return b"".join([*(comp.compress(chunk) for _ in range(megabytes)), comp.flush()])


def _xz(data: bytes) -> bytes:
    return lzma.compress(data, preset=0)


def _set_path(obj: Any, path: tuple[str, ...], value: Any, delete: bool = False) -> None:
    for key in path[:-1]:
        if not isinstance(obj, dict) or key not in obj:
            return
        obj = obj[key]
    if isinstance(obj, dict):
        if delete:
            obj.pop(path[-1], None)
        else:
            obj[path[-1]] = value


def _events(data: Any) -> list[dict[str, Any]]:
    events = data.get("traceEvents") if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


# ---------------------------------------------------------------- mutations: (label, edit of a bundle dir)

Edit = Callable[[Path], None]


def meta_mutations(rng: random.Random) -> tuple[str, Edit]:
    kind = rng.choice(("set", "set", "set", "delete", "scale", "batch", "text"))
    path = rng.choice(META_PATHS)
    value = rng.choice(HOSTILE_VALUES)
    factor = rng.choice((-1.0, 0.0, 1e-3, 1e3, 1e12))
    batch = rng.choice((0, 2, 4, 64, 1000, 4096, 1 << 20))
    text = rng.choice(("", "{", "[]", "null", "{\"framework\": ", "\ufeff{}", "[" * 100_000, "{\"a\": NaN}"))

    def edit(bundle: Path) -> None:
        file = bundle / "meta.json"
        if kind == "text":
            file.write_text(text)
            return
        meta = json.loads(file.read_text())
        if kind == "set":
            _set_path(meta, path, value)
        elif kind == "delete":
            _set_path(meta, path, None, delete=True)
        elif kind == "scale":
            for key in ("median", "mean", "p90", "min", "max"):
                meta["latency_ms"][key] *= factor
        else:
            meta["batch"] = batch
        file.write_text(json.dumps(meta))

    detail = {"set": f"{'.'.join(path)}={value!r:.30}", "delete": ".".join(path), "scale": f"latency x{factor:g}",
              "batch": f"batch={batch}", "text": f"text {text[:20]!r}"}[kind]
    return f"meta {kind} {detail}", edit


def trace_mutations(rng: random.Random) -> tuple[str, Edit]:
    part = rng.choice(TRACES)
    kind = rng.choice(("event", "event", "event", "all-dur", "truncate", "garbage", "missing", "bomb", "shapes"))
    key = rng.choice(("ts", "dur", "args", "name", "cat", "tid"))
    value = rng.choice(HOSTILE_VALUES)
    share = rng.choice((0.001, 0.1, 1.0))
    factor = rng.choice((0.0, 1e-6, 1e3, 1e18))
    cut = rng.random()
    seed = rng.randrange(1 << 30)

    def edit(bundle: Path) -> None:
        file = bundle / part
        if not file.exists():
            return
        if kind == "missing":
            file.unlink()
            return
        if kind == "garbage":
            file.write_bytes(random.Random(seed).randbytes(4096))
            return
        if kind == "bomb":
            file.write_bytes(newline_bomb(64, b" "))
            return
        raw = lzma.decompress(file.read_bytes())
        if kind == "truncate":
            file.write_bytes(_xz(raw[: int(len(raw) * cut)]))
            return
        data = json.loads(raw)
        events = _events(data)
        pick = random.Random(seed)
        if kind == "event":
            for e in pick.sample(events, max(1, int(len(events) * share))):
                if value is None:
                    e.pop(key, None)
                else:
                    e[key] = value
        elif kind == "all-dur":
            for e in events:
                if e.get("cat") in ("kernel", "Node") and isinstance(e.get("dur"), int | float):
                    e["dur"] = e["dur"] * factor
        else:  # shapes: ORT tensor shapes and Kineto input dims of hostile values
            for e in pick.sample(events, max(1, len(events) // 10)):
                args = e.get("args")
                if isinstance(args, dict):
                    for name in ("input_type_shape", "output_type_shape", "Input Dims", "grid", "block"):
                        if name in args:
                            args[name] = [[value, 3]] if name == "Input Dims" else [{"float": [value, 3]}]
        file.write_bytes(_xz(json.dumps(data).encode()))

    detail = {"event": f"{key}={value!r:.30} on {share:g}", "all-dur": f"x{factor:g}", "truncate": f"at {cut:.2f}",
              "garbage": "", "missing": "", "bomb": "", "shapes": f"{value!r:.30}"}[kind]
    return f"trace {part} {kind} {detail}", edit


def log_mutations(rng: random.Random) -> tuple[str, Edit]:
    part = rng.choice(LOGS)
    kind = rng.choice(("truncate", "truncate", "cut-bytes", "garbage", "missing", "bomb", "line-bomb", "inject"))
    cut = rng.random() * 0.3  # cut early: the rest of the log is parsed, and parsing is the slow part
    seed = rng.randrange(1 << 30)
    text = rng.choice(HOSTILE_TEXT)

    def edit(bundle: Path) -> None:
        file = bundle / part
        if kind == "missing":
            file.unlink()
        elif kind == "garbage":
            file.write_bytes(random.Random(seed).randbytes(8192))
        elif kind == "bomb":
            file.write_bytes(newline_bomb())
        elif kind == "line-bomb":
            file.write_bytes(newline_bomb(64, b"i! x: type=int; val=1;\n"))
        elif kind == "cut-bytes":
            raw = file.read_bytes()
            file.write_bytes(raw[: int(len(raw) * cut)])
        else:
            raw = lzma.decompress(file.read_bytes())[: 3_000_000]  # the first records are enough to mutate
            if kind == "truncate":
                raw = raw[: int(len(raw) * cut)]
            else:
                lines = raw.split(b"\n")
                pick = random.Random(seed)
                for _ in range(20):
                    lines.insert(pick.randrange(len(lines) + 1), text.encode("utf-8", "replace"))
                raw = b"\n".join(lines)
            file.write_bytes(_xz(raw))

    return f"log {part} {kind} {cut:.2f}" if kind in ("truncate", "cut-bytes") else f"log {part} {kind}", edit


@dataclass(frozen=True)
class Mutant:
    label: str
    base: Path
    name: str  # the bundle directory's name (hostile in some mutants)
    edit: Edit

    def make(self, root: Path) -> Path:
        """Write the mutant as a fresh bundle directory under ``root``."""
        target = root / self.name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.base, target, ignore=shutil.ignore_patterns(CACHE_DIR))
        self.edit(target)
        return target


def mutants(seed: int, n: int) -> Iterator[Mutant]:
    """``n`` seeded mutants: meta.json 40%, traces 30%, logs 20%, a hostile name on an intact bundle 10%."""
    rng = random.Random(seed)
    for i in range(n):
        base = BASES[i % len(BASES)]
        draw = rng.random()
        if draw < 0.4:
            label, edit = meta_mutations(rng)
        elif draw < 0.7:
            label, edit = trace_mutations(rng)
        elif draw < 0.9:
            label, edit = log_mutations(rng)
        else:
            label, edit = "name only", lambda _: None
        name = rng.choice(HOSTILE_NAMES) if draw >= 0.9 or rng.random() < 0.1 else f"m{i}"
        yield Mutant(f"#{i} {base.name}: {label}", base, name, edit)


# ---------------------------------------------------------------- running and judging


class Hang(BaseException):
    """A command ran past TIMEOUT_S (a BaseException: CliRunner catches Exception only)."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


RATIOS = ("Benanza ratio", "BR_seq vs end-to-end", "BR_par vs end-to-end", "BR_seq vs GPU busy", "BR_par vs GPU busy")


def wrong_answer(summary: dict[str, Any]) -> str | None:
    """What is wrong with an analysis that exited 0, or None: BR outside (0, 1], a negative or
    non-finite figure in ms, no end-to-end latency, no layer mapped."""
    for key, value in summary.items():
        if isinstance(value, float) and not math.isfinite(value):
            return f"{key} = {value}"
        if "(ms)" in key and isinstance(value, int | float) and value < 0 and "-" not in key and "gap" not in key:
            return f"{key} = {value}"
    for key in RATIOS:
        value = summary.get(key)
        if value is None or not 0 < value <= 1:
            return f"{key} = {value}"
    if not summary.get("measured end-to-end (ms)") or not summary.get("GPU busy (ms)"):
        return "no end-to-end latency or GPU time"
    if not summary.get("mapped layers (measured and as-executed)"):
        return "exit 0 with no layer mapped"
    return None


@dataclass
class Outcome:
    command: str
    verdict: str  # refused, analyzed, ok, traceback, hang, wrong, dirty
    detail: str = ""
    seconds: float = 0.0


def _invoke(argv: list[str]) -> tuple[Any, float, bool]:
    runner = CliRunner()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
    started = time.perf_counter()
    try:
        from benanza.cli import main

        return runner.invoke(main, argv), time.perf_counter() - started, False
    except Hang:
        return None, time.perf_counter() - started, True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def judge(command: str, argv: list[str], bundle: Path, report: Path | None = None, db: Path | None = None
          ) -> Outcome:
    """Run one command and say what its answer was (see the module doc). A refusal must name the
    bundle, or the database (a batch no row of it has) or the model it was given."""
    names = [p for p in (bundle, db, MODEL) if p is not None]
    result, seconds, hung = _invoke(argv)
    if hung:
        return Outcome(command, "hang", f"past {TIMEOUT_S:.0f} s", seconds)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return Outcome(command, "traceback", repr(result.exception)[:300], seconds)
    output = result.output
    controls = [c for c in output if (ord(c) < 32 and c not in "\n") or 0x7f <= ord(c) <= 0x9f]
    if controls:
        return Outcome(command, "dirty", f"control characters in the output: {controls[:5]!r}", seconds)
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    if result.exit_code != 0:
        if result.exit_code == 1 and len(errors) == 1 and any(one_line(p) in errors[0] for p in names):
            return Outcome(command, "refused", errors[0][:300], seconds)
        return Outcome(command, "dirty", f"exit {result.exit_code}, error lines: {errors[:3]!r}", seconds)
    if errors:
        return Outcome(command, "dirty", f"exit 0 with {errors[0][:200]!r}", seconds)
    if report is not None:
        summary = json.loads(report.read_text())["summary"]
        problem = wrong_answer(summary)
        if problem:
            return Outcome(command, "wrong", problem, seconds)
        return Outcome(command, "analyzed", "", seconds)
    return Outcome(command, "ok", "", seconds)


def run_commands(mutant: Mutant, bundle: Path, work: Path, db: Path, full: bool) -> list[Outcome]:
    """analyze (with a JSON report to judge its figures) and bundles, and with ``full`` compare
    against the intact base and ``profile --map-only`` too."""
    report = work / "report.json"
    report.unlink(missing_ok=True)
    out = [judge("analyze", ["analyze", str(MODEL), "--profile", str(bundle), "--db", str(db), "--json", str(report),
                             "--force"], bundle, report, db),
           judge("bundles", ["bundles", str(bundle.parent)], bundle)]
    if full:
        out.append(judge("compare", ["compare", str(bundle), str(mutant.base), "--model", str(MODEL), "--db", str(db)],
                         bundle, db=db))
        out.append(judge("map-only", ["profile", str(MODEL), "--map-only", "--out", str(bundle)], bundle))
    return out


BAD = ("traceback", "hang", "wrong", "dirty")
