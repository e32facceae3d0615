"""Seeded output-path fuzzer (issue 38): every writing command against hostile targets.

Why: an output path is the one place where benanza writes over something a user has. Each mutant
is one command (``analyze --json/--html/--csv/--trace``, ``compare --csv/--html``, ``db export
--csv``, ``generate --out``) pointed at one target (a device node, a full disk, a place that refuses
writes, a path under a file, the command's own input, a user's file, an earlier output, a directory,
symlinks, hostile names, stdout). The oracles: no traceback; exit 0 or 1, exit 1 with exactly one
``error:`` line; the inputs byte-identical; a user's file untouched without ``--force``; an output that
was written is whole (a benanza output of its kind); no temporary file left beside the target.

``run(n, seed)`` returns the counts; tests/test_fuzz_outputs.py runs a subset, bench/fuzz_outputs.py
the full run.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from benanza.atomic import SIGNATURES
from benanza.cli import main
from benanza.paths import perfdb_dir

ROOT = Path(__file__).resolve().parent.parent
SQUEEZENET = "light_squeezenet.onnx"  # analyze's model: the shipped database measured it
SHIPPED_MODEL = "light_vgg19.onnx"  # the model of the two shipped bundles compare takes
BUNDLES = ("vgg19_b1_ort_fp32", "vgg19_b1_torch_fp32")


@dataclass(frozen=True)
class Command:
    name: str
    kind: str  # the output's kind (atomic.SIGNATURES), or "dir" for a project directory
    args: Callable[[Path, str], list[str]]  # (work dir, target) -> argv


def _db(work: Path) -> str:
    return str(work / "small.db")


COMMANDS = (
    Command("analyze --json", "json", lambda w, t: ["analyze", str(w / "m.onnx"), "--json", t]),
    Command("analyze --html", "html", lambda w, t: ["analyze", str(w / "m.onnx"), "--html", t]),
    Command("analyze --csv", "csv", lambda w, t: ["analyze", str(w / "m.onnx"), "--csv", t]),
    Command("analyze --trace", "trace", lambda w, t: ["analyze", str(w / "m.onnx"), "--trace", t]),
    Command("compare --csv", "csv", lambda w, t: ["compare", *(str(perfdb_dir() / "bundles" / b) for b in BUNDLES),
                                                  "--model", str(w / "vgg19.onnx"), "--csv", t]),
    Command("db export --csv", "csv", lambda w, t: ["db", "export", _db(w), "--csv", t]),
    Command("generate --out", "dir", lambda w, t: ["generate", str(w / "m.onnx"), "--out", t]),
)


def _make(work: Path, name: str) -> str:
    """The target path of kind ``name`` inside ``work`` (created as that kind), or a fixed system path."""
    if name == "dev-null":
        return "/dev/null"
    if name == "dev-full":
        return "/dev/full"
    if name == "read-only place":
        return "/sys/benanza-fuzz-out"
    if name == "proc":
        return "/proc/benanza-fuzz-out"
    if name == "under a file":
        (work / "afile").write_text("x")
        return str(work / "afile" / "sub")
    if name == "own input":
        return str(work / "m.onnx")
    if name == "user file":
        (work / "notes.txt").write_text("a user's notes\n")
        return str(work / "notes.txt")
    if name == "directory":
        (work / "adir").mkdir(exist_ok=True)
        return str(work / "adir")
    if name == "symlink to input":
        (work / "link").symlink_to(work / "m.onnx")
        return str(work / "link")
    if name == "dangling symlink":
        (work / "dangling").symlink_to(work / "nowhere" / "x")
        return str(work / "dangling")
    if name == "missing parent":
        return str(work / "no" / "such" / "dir" / "out")
    if name == "hostile name":
        return str(work / "=cmd|' /C calc'!A0\x1b[31m;rm -rf ~\nerror: x")
    if name == "long name":
        return str(work / ("n" * 300))
    if name == "stdout":
        return "-"
    return str(work / "fresh.out")


TARGETS = ("dev-null", "dev-full", "read-only place", "proc", "under a file", "own input", "user file", "directory",
           "symlink to input", "dangling symlink", "missing parent", "hostile name", "long name", "stdout", "fresh")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def _verdict(command: Command, target_name: str, target: str, work: Path, force: bool, before: dict[str, str],
             code: int, output: str, exc: BaseException | None) -> str:
    """The mutant's class: "ok", "refused", or the broken promise."""
    if exc is not None and not isinstance(exc, SystemExit):
        return "traceback"
    if "Traceback" in output:
        return "traceback"
    if code not in (0, 1):
        return f"exit {code}"
    if code == 1 and sum(line.startswith("error:") for line in output.splitlines()) != 1:
        return "not one error line"
    for name, digest in before.items():  # nothing changes but the target itself, and that only with --force
        if force and (work / name).resolve(strict=False) == Path(target).absolute():
            continue
        if _digest(work / name) != digest:
            return f"{name} changed"
    leftovers = [p.name for p in work.rglob("*") if ".tmp" in p.name or p.name.endswith(".creating")]
    if leftovers:
        return "temporary left"
    if code == 0 and target_name in ("fresh", "hostile name") and command.kind != "dir":
        written = Path(target)
        if not written.is_file() or not written.read_bytes().startswith(SIGNATURES[command.kind]):
            return "output not whole"
    return "ok" if code == 0 else "refused"


def _light(name: str) -> Path:
    from benanza.paths import onnx_light_zoo

    return onnx_light_zoo() / name


def check(command: Command, target_name: str, force: bool, small_db: Path) -> str:
    """One mutant in a fresh directory: its verdict."""
    with tempfile.TemporaryDirectory(prefix="bz-fuzz-out-") as tmp:
        work = Path(tmp)
        shutil.copyfile(_light(SQUEEZENET), work / "m.onnx")
        shutil.copyfile(_light(SHIPPED_MODEL), work / "vgg19.onnx")
        shutil.copyfile(small_db, work / "small.db")
        target = _make(work, target_name)
        before = {name: _digest(work / name) for name in ("m.onnx", "vgg19.onnx", "small.db", "notes.txt")
                  if (work / name).exists()}
        args = command.args(work, target) + (["--force"] if force and command.kind != "dir" else [])
        here = Path.cwd()
        os.chdir(work)  # a relative target ("-") lands in the mutant's own directory, where it is seen
        try:
            result = CliRunner().invoke(main, args)
        finally:
            os.chdir(here)
        if target == "-" and (work / "-").exists():
            return "wrote a file or directory named -"
        return _verdict(command, target_name, target, work, force, before, result.exit_code, result.output,
                        result.exception)


def run(n: int, seed: int, small_db: Path, progress: Callable[[str], None] | None = None) -> Counter:
    """``n`` mutants from ``seed``: counts of each verdict, and of each failure with its mutant."""
    rng = random.Random(seed)
    counts: Counter = Counter()
    for i in range(n):
        command, target_name, force = rng.choice(COMMANDS), rng.choice(TARGETS), rng.random() < 0.25
        verdict = check(command, target_name, force, small_db)
        counts[verdict] += 1
        if verdict not in ("ok", "refused"):
            counts[f"{verdict}: #{i} {command.name} -> {target_name}{' --force' if force else ''}"] += 1
        if progress:
            progress(f"{i + 1}/{n} {command.name} -> {target_name}: {verdict}")
    return counts
