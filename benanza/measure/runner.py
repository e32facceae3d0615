"""Build a generated benchmark project and run it into the performance database.

Each executable runs as a child process in its own process group and speaks the
line protocol of ``benanza/records.py``: a "system" line, then per job "start",
result lines and "end". Whatever a job does — finish, crash, hang, print garbage —
ends in exactly one ``completed_jobs`` row, written in the same transaction as the
job's results, so a runner killed at any moment and started again loses nothing
measured and duplicates nothing. An executable that dies or hangs is restarted
with the jobs it did not reach.
"""

# Over ~450 lines on purpose (issue 14 left it whole):
# runner.py is reworked in parallel (robustness, a Dask runner): split it along build /
# line protocol / scheduling once that lands.

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benanza.apis import has_weights, job_table
from benanza.errors import BenanzaError
from benanza.library import L2, Status
from benanza.measure import build_cache, plan_cache
from benanza.measure.system import merge_system, system_id
from benanza.records import MANIFEST, MANIFEST_SCHEMA, JobKey, Result, checked_result

MAX_LINE_BYTES = 1 << 20  # a longer "line" is garbage, not something to buffer forever
MESSAGE_CHARS = 240  # how much of a garbage line or of stderr a status message keeps

# Environment variables passed to CMake as -D definitions when set (the generated
# CMakeLists reads these to find cuDNN, cuBLAS and cudnn-frontend).
CMAKE_ENV_DEFINES = (
    "CUDNN_INCLUDE_DIR", "CUDNN_LIBRARY_DIR", "CUBLAS_INCLUDE_DIR", "CUBLAS_LIBRARY_DIR",
    "CUDNN_FRONTEND_INCLUDE_DIR", "CUDAToolkit_ROOT", "CMAKE_CUDA_COMPILER", "CMAKE_CUDA_ARCHITECTURES",
)  # fmt: skip

# Job-level statuses: how a job's process ended (its results carry their own status).
# FAILED: the harness printed an "error" event for the job (then its end, or it exited).
JOB_STATUSES = (Status.OK, Status.FAILED, Status.CRASHED, Status.TIMEOUT, Status.GARBAGE)
EVENTS = ("system", "start", "result", "end", "error", "ready")  # "ready": a --serve process's list is done
# Fields of the system line that describe the process, not the machine.
PROCESS_FIELDS = ("event", "api", "l2", "schema")
_RESULT_STATUSES = frozenset(s.value for s in Status)
# A result's notes.plan_cache (csrc/benanza/cudnn_graph.h) -> the RunSummary count it adds to.
_PLAN_CACHE_FIELDS = {"hit": "plans_loaded", "kept": "plans_kept"}

# ---------------------------------------------------------------- build


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def cmake_defines(env: Mapping[str, str] | None = None) -> list[str]:
    """``-D`` arguments from the environment (``CMAKE_ENV_DEFINES``, plus ``BENANZA_CMAKE_ARGS`` split like a shell)."""
    env = os.environ if env is None else env
    args = [f"-D{name}={env[name]}" for name in CMAKE_ENV_DEFINES if env.get(name)]
    return args + shlex.split(env.get("BENANZA_CMAKE_ARGS", ""))


def build(project_dir: str | Path, build_dir: str | Path | None = None, jobs: int | None = None,
          cache: bool | None = None) -> Path:
    """Build a generated project (``build_project``); returns the build directory."""
    return build_project(project_dir, build_dir, jobs, cache).out


def build_project(project_dir: str | Path, build_dir: str | Path | None = None, jobs: int | None = None,
                  cache: bool | None = None) -> build_cache.BuildOutcome:
    """Build a generated project: executables the build cache holds are copied into place, CMake
    (configured once, Ninja) builds the others, which are then stored. ``cache`` False (``--no-build-cache``)
    or ``BENANZA_NO_BUILD_CACHE=1`` builds everything with CMake, as before the cache."""
    t0 = time.perf_counter()
    project = Path(project_dir)
    lists = project / "CMakeLists.txt"
    if not lists.is_file():
        raise BenanzaError(f"{lists}: no such file (not a generated benchmark project)")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BenanzaError(f"{lists}: cmake is not on PATH (needed to build the benchmarks)")
    out = Path(build_dir) if build_dir else project / "build"
    outcome = build_cache.BuildOutcome(out)
    defines = cmake_defines()
    chain = None
    if build_cache.enabled(cache) and (project / "benchmarks.cmake").is_file():
        outcome.note = build_cache.unusable()  # a cache that cannot be used costs time, never the build
        chain = None if outcome.note else build_cache.toolchain(project, defines)
    keys = _from_cache(project, out, chain, outcome) if chain is not None else {}
    if chain is not None and not outcome.compiled:  # every executable was built before: no CMake at all
        install_tables(project, out)
        outcome.seconds = time.perf_counter() - t0
        return outcome
    steps = []
    if not (out / "build.ninja").is_file():
        outcome.configured = True
        steps.append(("configure", [cmake, "-S", str(project), "-B", str(out), "-G", "Ninja",
                                    "-DCMAKE_BUILD_TYPE=Release", *defines]))
    targets = ["--target", *outcome.compiled] if chain is not None else []
    steps.append(("build", [cmake, "--build", str(out), *(["-j", str(jobs)] if jobs else []), *targets]))
    outcome.cmake_ran = True
    for step, argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BenanzaError(f"{lists}: {step} failed (exit {done.returncode})",
                               detail=_tail(done.stdout + done.stderr))
        if step == "configure" and chain is not None:
            build_cache.stamp(out, chain)
    if chain is not None:
        _to_cache(out, chain, keys, outcome)
    install_tables(project, out)
    outcome.seconds = time.perf_counter() - t0
    return outcome


def install_tables(project: Path, out: Path) -> None:
    """Put each executable's job table (``src/<exe>.jobs``) beside it in ``out``, where it reads it by
    default: CMake's configure_file does the same, but a build the cache served runs no CMake."""
    lists = build_cache.cmake_lists((project / "benchmarks.cmake").read_text()) \
        if (project / "benchmarks.cmake").is_file() else {}
    for exe in lists.get("BENANZA_EXECUTABLES", []):
        source, target = project / "src" / f"{exe}{job_table.SUFFIX}", out / f"{exe}{job_table.SUFFIX}"
        try:
            data = source.read_bytes()
            if not target.is_file() or target.read_bytes() != data:
                build_cache.write_atomic(target, data, 0o644)
        except OSError as exc:
            raise BenanzaError(f"{target}: cannot put the job table there ({exc.strerror}: {exc.filename})") from None


def _from_cache(project: Path, out: Path, chain: build_cache.Toolchain,
                outcome: build_cache.BuildOutcome) -> dict[str, str]:
    """Copy each executable the cache holds into ``out`` (``outcome.cached``; the others go to
    ``outcome.compiled``); returns every executable's key."""
    outcome.cache_used = True
    try:
        keys = build_cache.executable_keys(project, chain)
    except OSError as exc:
        raise BenanzaError(f"{project}: cannot read the generated sources ({exc.strerror}: {exc.filename})") \
            from None
    for exe, key in keys.items():
        try:
            hit = build_cache.fetch(key, out / exe)
        except OSError as exc:
            raise BenanzaError(f"{out / exe}: cannot write ({exc.strerror})") from None
        (outcome.cached if hit else outcome.compiled).append(exe)
    # in a build directory this toolchain configured (or none yet), Ninja must make what this key builds,
    # whatever an old hit left there; one configured otherwise stores nothing and builds as before the cache
    if not (out / "build.ninja").is_file() or not build_cache.check_build_dir(out, chain):
        for exe in outcome.compiled:
            with contextlib.suppress(FileNotFoundError):
                (out / exe).unlink()
    return keys


def _to_cache(out: Path, chain: build_cache.Toolchain, keys: Mapping[str, str],
              outcome: build_cache.BuildOutcome) -> None:
    """Store what CMake built, when ``out`` was configured under ``chain`` (else ``outcome.note`` says why not)."""
    outcome.note = build_cache.check_build_dir(out, chain)
    try:
        for exe in [] if outcome.note else outcome.compiled:
            build_cache.store(keys[exe], out / exe)
        build_cache.prune()
    except OSError as exc:  # a full or read-only cache costs the next build time, never this one
        outcome.note = f"{build_cache.root()}: cannot store the executables ({exc.strerror})"


# ---------------------------------------------------------------- manifest


class Sink(Protocol):
    """Where measurements go: the runner and the cluster hand every finished job to one (the
    database's is ``benanza.store.db.DatabaseSink``; a cluster worker keeps a ``MemorySink``)."""

    def store_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Keep the manifest's layers and models (what the jobs measure)."""

    def upsert_system(self, system: Mapping[str, Any]) -> str:
        """Keep a system (``benanza.measure.system.normalize``d fields); returns its ``system_id``."""

    def completed_jobs(self, system: str) -> set[JobKey]:
        """The jobs finished on ``system`` (whatever their status): a run skips them unless forced."""

    def record_job(self, system: str, job: JobKey, executable: str, status: str, message: str,
                   results: list[Result], force: bool = False) -> int:
        """Keep one job's results and mark it finished, at once; returns the results kept."""


class MemorySink:
    """A sink that keeps only which jobs finished (a cluster worker streams its results to the client,
    which alone writes the database)."""

    def __init__(self) -> None:
        self.done: dict[str, set[JobKey]] = {}

    def store_manifest(self, manifest: Mapping[str, Any]) -> None:
        pass

    def upsert_system(self, system: Mapping[str, Any]) -> str:
        return system_id(system)

    def completed_jobs(self, system: str) -> set[JobKey]:
        return set(self.done.get(system, ()))

    def record_job(self, system: str, job: JobKey, executable: str, status: str, message: str,
                   results: list[Result], force: bool = False) -> int:
        self.done.setdefault(system, set()).add(job)
        return len(results)


@dataclass(frozen=True)
class ScheduledJob:
    """A job the runner runs: where it is (an executable's job index, from the manifest's
    ``records.ManifestJob``) and the identity the database records it under.  (``plan.Job`` is
    the planned job that codegen renders; this is its run-time handle.)"""

    executable: str
    index: int
    key: JobKey


def load_manifest(project_dir: str | Path) -> dict[str, Any]:
    path = Path(project_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise BenanzaError(f"{path}: no such file (not a generated benchmark project)") from exc
    except (OSError, ValueError) as exc:
        raise BenanzaError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
        raise BenanzaError(f"{path}: manifest schema {manifest.get('schema') if isinstance(manifest, dict) else '?'}"
                           f", this benanza reads {MANIFEST_SCHEMA}")
    return manifest


def manifest_jobs(manifest: Mapping[str, Any], l2: str, where: str = MANIFEST) -> dict[str, list[ScheduledJob]]:
    """Jobs per executable, in job order."""
    executables = manifest.get("executables", {})
    out: dict[str, list[ScheduledJob]] = {name: [] for name in executables}
    for n, spec in enumerate(manifest.get("jobs", [])):
        try:
            exe, index = str(spec["executable"]), int(spec["job"])
            key = JobKey.of(spec, l2)
        except (KeyError, TypeError, ValueError) as exc:
            raise BenanzaError(f"{where}: job {n} is malformed (missing or bad {exc})") from exc
        if exe not in out:
            raise BenanzaError(f"{where}: job {n} names executable {exe!r}, which 'executables' does not list")
        out[exe].append(ScheduledJob(exe, index, key))
    for jobs in out.values():
        jobs.sort(key=lambda j: j.index)
    return out


def jobs_to_run(jobs: Mapping[str, list[ScheduledJob]], l2: str) -> dict[str, list[ScheduledJob]]:
    """The jobs an ``--l2`` setting measures. Cold-weights measures only the jobs of APIs with
    weights (``apis.ApiDef.weights``): for the others, weights cold and warm are one state,
    so their warm rows stand for them (the analyzer's cold-weights check takes those)."""
    if l2 != L2.COLD_WEIGHTS.value:
        return dict(jobs)
    return {exe: [j for j in todo if has_weights(j.key.api)] for exe, todo in jobs.items()}


def job_ranges(indices: Iterable[int]) -> str:
    """``--jobs`` argument: 0,3,5-9 (sorted, consecutive runs collapsed)."""
    parts: list[str] = []
    run: list[int] = []
    for i in sorted(set(indices)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(parts)


# ---------------------------------------------------------------- outcomes


@dataclass
class JobOutcome:
    job: ScheduledJob
    status: str  # a JOB_STATUSES value, or "skipped" (already in the database)
    message: str = ""
    results: list[Result] = field(default_factory=list)
    # where the job's time went, in ms (bench/campaign.py): the harness's "phases_ms" of its end line
    # (absent from older executables), "process_start" (its process's start to the system line, on the
    # first job of a process; a process that ChildPool.prestart started with others at once: what the
    # job waited for its system line) and "db_write" (recording the outcome)
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class RunSummary:
    """What one run did. Job counts and result (benchmark) counts are kept apart:

    - jobs: jobs in the manifest; skipped: already completed for this system (not run);
      ran: jobs run to an outcome this time = completed + crashed + timeout + garbage;
      weightless: jobs ``--l2 cold-weights`` leaves out, their APIs having no weights
      (their warm rows stand for them; ``jobs_to_run``).
    - completed: jobs whose executable printed their "end" with only valid lines;
      job_errors: jobs the harness reported an "error" event for (then ended them);
      crashed / timeout / garbage: jobs whose process died / hung / printed a bad line.
    - results: result lines stored; ok, not_supported, out_of_memory, failed,
      check_failed: those results by their own status.
    - plans_loaded / plans_kept: graph-API plans the harness loaded from / compiled and kept in its
      plan cache (runtime-compiled engines only).
    - restarts: executable processes started again after a crash or hang; processes: every
      process started (a --serve process taken from a pool is not started again).
    - errors: executables that could not run at all (nothing recorded for their jobs).
    """

    jobs: int = 0
    skipped: int = 0
    weightless: int = 0
    ran: int = 0
    completed: int = 0
    job_errors: int = 0
    crashed: int = 0
    timeout: int = 0
    garbage: int = 0
    results: int = 0
    ok: int = 0
    not_supported: int = 0
    out_of_memory: int = 0
    failed: int = 0
    check_failed: int = 0
    restarts: int = 0
    plans_loaded: int = 0  # runtime-compiled plans the harness loaded from its plan cache (notes.plan_cache "hit")
    plans_kept: int = 0  # ... and compiled, then kept there ("kept")
    processes: int = 0  # benchmark processes started (a cluster worker's prestarted ones too: cluster_worker)
    timed_gpu_s: float = 0.0  # the GPU seconds of the jobs' timed repetitions (harness "timed_gpu"): the floor
    phases_ms: dict[str, float] = field(default_factory=dict)  # JobOutcome.phases summed over the jobs run
    system_id: str | None = None
    errors: list[str] = field(default_factory=list)

    def count(self, outcome: JobOutcome) -> None:
        if outcome.status == "skipped":
            self.skipped += 1
            return
        self.ran += 1
        self.timed_gpu_s += float(outcome.phases.get("timed_gpu", 0.0)) / 1e3
        for phase, ms in outcome.phases.items():
            self.phases_ms[phase] = self.phases_ms.get(phase, 0.0) + float(ms)
        job_field = {Status.OK.value: "completed", Status.FAILED.value: "job_errors", Status.CRASHED.value: "crashed",
                     Status.TIMEOUT.value: "timeout", Status.GARBAGE.value: "garbage"}[outcome.status]
        setattr(self, job_field, getattr(self, job_field) + 1)
        for result in outcome.results:
            self.results += 1
            cached = result.notes.get("plan_cache") if isinstance(result.notes, dict) else None
            if cached in _PLAN_CACHE_FIELDS:
                setattr(self, _PLAN_CACHE_FIELDS[cached], getattr(self, _PLAN_CACHE_FIELDS[cached]) + 1)
            if hasattr(self, result.status) and result.status in _RESULT_STATUSES:
                setattr(self, result.status, getattr(self, result.status) + 1)


Progress = Callable[[JobOutcome, RunSummary], None]


# ---------------------------------------------------------------- one child process


class _Timeout(Exception):
    pass


# ---------------------------------------------------------------- no stray processes


def _die_with_parent(parent: int) -> Callable[[], None]:
    """preexec_fn for a child: Linux kills it (SIGKILL) when the runner dies, even by SIGKILL."""

    def arm() -> None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return  # not Linux: the group kill on exit and on SIGTERM still applies
        if os.getppid() != parent:  # the runner died before prctl: nobody will read this child
            os._exit(1)

    return arm


_LIVE_GROUPS: set[int] = set()


def _kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(pgid)


@contextlib.contextmanager
def _groups_killed_on_exit() -> Iterator[None]:
    """While the runner runs: SIGTERM (and SIGHUP) exit through the ``finally`` that kills each
    benchmark's process group, as SIGINT (KeyboardInterrupt) already does; ``atexit`` covers the rest."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    old = {sig: signal.signal(sig, terminate) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        _kill_live_groups()


atexit.register(_kill_live_groups)


class _Child:
    """A benchmark executable in its own process group, read line by line with a deadline
    (``serve``: its stdin a pipe that takes job lists, the harness's ``--serve``)."""

    def __init__(self, argv: list[str], cwd: Path, serve: bool = False) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE if serve else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=self.stderr, start_new_session=True,
                                     preexec_fn=_die_with_parent(os.getpid()))
        _LIVE_GROUPS.add(self.proc.pid)
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.buffer = b""
        self.eof = False

    def readline(self, deadline: float) -> bytes | None:
        """The next line (without newline); None at end of output; _Timeout past the deadline."""
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line, self.buffer = self.buffer[:newline], self.buffer[newline + 1:]
                return line
            if len(self.buffer) > MAX_LINE_BYTES or (self.eof and self.buffer):
                line, self.buffer = self.buffer, b""
                return line
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout
            if self.selector.select(left):
                chunk = os.read(self.fd, 1 << 16)
                if chunk:
                    self.buffer += chunk
                else:
                    self.eof = True

    def send(self, line: str) -> None:
        """Write one line to a serving process's stdin; a process gone meanwhile is not written to, and
        its reader then sees it exit."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def signal_group(self) -> None:
        """SIGKILL the whole group, even when its leader has exited: a forked child may hold stdout."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def kill(self) -> None:
        """Kill the whole group and wait for its leader."""
        self.signal_group()
        self.proc.wait()
        _LIVE_GROUPS.discard(self.proc.pid)

    def close(self) -> None:
        self.kill()
        self.selector.close()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.stderr.close()

    def exit_text(self) -> str:
        rc = self.proc.wait()
        if rc < 0:
            try:
                how = f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                how = f"killed by signal {-rc}"
        else:
            how = f"exited with code {rc}"
        self.stderr.seek(0)
        err = self.stderr.read().decode("utf-8", "replace").strip()
        return f"{how}; stderr: {err[-MESSAGE_CHARS:]}" if err else how


@dataclass
class _Served:
    """A ``--serve`` process between job lists: its system line, and its start (ms) while no job has
    been charged with it."""

    child: _Child
    system: dict[str, Any]
    start_ms: float | None = None


@dataclass
class Prestarted:
    """What ``ChildPool.prestart`` did: processes queued to start (in the background, ``at_once`` at a time;
    each one's system line read on a thread of its own)."""

    queued: int = 0


@dataclass
class _Starting:
    """A prestarted process whose system line may not have come yet: ``line`` resolves to
    ``_first_line``'s answer (read on a thread of its own)."""

    child: _Child
    line: Future[tuple[dict[str, Any], str]]


def _first_line(child: _Child, deadline: float) -> tuple[dict[str, Any], str]:
    """A new process's system line, or why there is none ("" when there is): anything else printed
    first (the harness's "error" line without a GPU), its exit, or silence past ``deadline``."""
    try:
        raw = child.readline(deadline)
        while raw is not None and not raw.strip():
            raw = child.readline(deadline)
    except _Timeout:
        return {}, "printed no system line in time"
    if raw is None:
        return {}, f"{child.exit_text()} before its system line"
    event, data = _parse(raw.decode("utf-8", "replace").strip())
    return data, system_line_problem(data) if event == "system" else f"printed {event!r} before its system line"


def _read_first_line(child: _Child, deadline: float, line: Future[tuple[dict[str, Any], str]]) -> None:
    """``_first_line`` on a thread of its own, into ``line`` (an unexpected error too: ``take`` raises it)."""
    try:
        line.set_result(_first_line(child, deadline))
    except BaseException as exc:
        line.set_exception(exc)


class ChildPool:
    """Benchmark processes kept between job lists (the harness's ``--serve``), one per executable and
    arguments. A cluster worker runs many shards of each executable; a process per shard paid its
    start, library handles, lazily loaded kernels and runtime-compiled engines each time, and more
    shards (more GPUs) paid more (docs/RESULTS.md §11). ``close`` ends them all."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, ...], _Served] = {}
        self._starting: dict[tuple[str, ...], _Starting] = {}  # prestarted, not yet taken
        # to prestart, in order: argv -> (its working directory, seconds to its system line, how many at once)
        self._queued: dict[tuple[str, ...], tuple[Path, float, int]] = {}
        self._generation = 0  # close() moves it on: the starter starts nothing of a batch it took before
        self._spawned = 0  # processes the pool started itself, not yet counted (spawned_since)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # the starter waits on it for queued processes
        self._starter: threading.Thread | None = None
        self._reapers: list[threading.Thread] = []  # close(wait=False)'s threads, until join_reapers
        self.failed: list[str] = []  # why each prestarted process that was taken could not serve

    def take(self, argv: Sequence[str]) -> _Served | None:
        """The idle process started with ``argv``, if it is still alive (it leaves the pool); a prestarted
        one once its system line is in (its wait is the start charged to its first job), None if it
        printed something else, exited or stayed silent (why: ``failed``). One still queued to prestart
        leaves the queue: None, and the caller starts it now."""
        key = tuple(argv)
        with self._lock:
            served = self._idle.pop(key, None)
            starting = self._starting.pop(key, None) if served is None else None
            self._queued.pop(key, None)
        if starting is not None:
            waited = time.perf_counter()
            system, why = starting.line.result()
            if why:
                starting.child.close()
                self.failed.append(f"{Path(argv[0]).name}: {why}")
                return None
            served = _Served(starting.child, system, (time.perf_counter() - waited) * 1e3)
        if served is not None and served.child.proc.poll() is not None:  # died while idle
            served.child.close()
            return None
        return served

    def keep(self, argv: Sequence[str], served: _Served) -> None:
        with self._lock:
            old, self._idle[tuple(argv)] = self._idle.get(tuple(argv)), served
        if old is not None and old is not served:
            old.child.close()

    def prestart(self, argvs: Sequence[Sequence[str]], cwd: Path, timeout_s: float, at_once: int) -> Prestarted:
        """Queue a ``--serve`` process for each of ``argvs`` that has none here and return at once: a thread
        starts them in order, ``at_once`` at a time (the next ones once those printed their system lines),
        and ``take`` waits for one only when a job list needs that executable; one not started yet by then
        the job list's runner starts itself. Started when met, the starts (0.45 s each on an H200) were paid
        in turn (docs/RESULTS.md §11). All at once, they slowed each other: a worker's first job waited for
        the slowest of 16 (3.0 s on one H200, 5.3 s on each of two) and, each job waiting for its own, on 4
        H200s (64 processes, 34 of them ever used) first jobs still waited 40.5 GPU-s in all.

        One that fails (cannot start, prints anything else first, exits, stays silent past ``timeout_s``
        from its start) is closed when taken, not served: the runner that needs it starts one as usual, and
        reports what goes wrong then as it always did. The start charged to a prestarted process's first job
        (``_Served.start_ms``, ``process_start``) is what that job waited for it."""
        with self._lock:
            wanted = [argv for argv in dict.fromkeys(tuple(a) for a in argvs)
                      if argv not in self._idle and argv not in self._starting and argv not in self._queued]
            self._queued.update(dict.fromkeys(wanted, (cwd, timeout_s, max(1, at_once))))
            if wanted and (self._starter is None or not self._starter.is_alive()):
                self._starter = threading.Thread(target=self._start_queued, name="benanza-prestart", daemon=True)
                self._starter.start()
            self._work.notify()
        return Prestarted(len(wanted))

    def _start_queued(self) -> None:
        """The pool's starter thread: it starts the queued processes, each batch's ``at_once`` at a time, and
        lives as long as the pool's process, since a child dies with the thread that started it (Linux's
        PR_SET_PDEATHSIG, ``_die_with_parent``). A process that cannot start is a line in ``failed`` (its
        runner will say why too)."""
        while True:
            with self._work:
                while not self._queued:
                    self._work.wait()
                generation = self._generation
                queued = list(self._queued.items())
                batch = queued[:queued[0][1][2]]  # they stay queued (``queued``) until registered
            deadline = time.monotonic() + batch[0][1][1]
            reading: list[Future[tuple[dict[str, Any], str]]] = []
            for argv, (cwd, _, _) in batch:
                line: Future[tuple[dict[str, Any], str]] = Future()
                # spawned and registered under one lock: a close() either finds it (and ends it) or comes
                # first, and then it never starts; so does one whose runner met it and started its own
                with self._lock:
                    if generation != self._generation or self._queued.pop(argv, None) is None:
                        continue
                    try:
                        child = _Child(list(argv), cwd, serve=True)
                    except OSError as exc:
                        self.failed.append(f"{Path(argv[0]).name}: cannot start ({exc.strerror})")
                        continue
                    self._starting[argv] = _Starting(child, line)
                    self._spawned += 1
                # each line read on a thread of its own: a job waits for its own process alone
                threading.Thread(target=_read_first_line, args=(child, deadline, line), name="benanza-start",
                                 daemon=True).start()
                reading.append(line)
            wait(reading)  # the batch's system lines (each by its deadline) before the next batch starts

    @property
    def queued(self) -> int:
        """Processes queued to prestart that are not started yet."""
        with self._lock:
            return len(self._queued)

    def spawned_since(self) -> int:
        """Processes the pool started itself since the last call (a cluster worker counts its starts)."""
        with self._lock:
            spawned, self._spawned = self._spawned, 0
        return spawned

    def close(self, wait: bool = True) -> int:
        """End every idle process (prestarted ones not taken too; a queued one never starts); returns how
        many. ``wait`` False: signal them and reap them on a thread of their own (a CUDA context takes a while
        to go down: 16 processes kept a one-GPU campaign's end 1.0 s, 34 on four GPUs 2.6 s)."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
            starting, self._starting = list(self._starting.values()), {}
            self._queued.clear()
            self._generation += 1
        for one in (*idle, *starting):  # all signalled first: their contexts go down together, not in turn
            one.child.signal_group()

        def reap() -> None:
            for served in idle:
                served.child.close()
            for start in starting:  # its reader sees the exit first: the child is closed after it is done
                start.line.result()
                start.child.close()

        if wait:
            reap()
        else:
            reaper = threading.Thread(target=reap, name="benanza-reap", daemon=True)
            reaper.start()
            with self._lock:
                self._reapers.append(reaper)
        return len(idle) + len(starting)

    def join_reapers(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the processes ``close(wait=False)`` signalled to be reaped; True
        when all are. A process that exits with its GPU children still going down outlasts Dask's
        5 s for a worker to close (64 processes on 4 H200s did, docs/RESULTS.md §11)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            reapers, self._reapers = self._reapers, []
        for reaper in reapers:
            reaper.join(max(0.0, deadline - time.monotonic()))
        left = [r for r in reapers if r.is_alive()]
        with self._lock:
            self._reapers.extend(left)
        return not left


@dataclass
class _Open:
    """The job a process is running: its results so far and its first problem."""

    job: ScheduledJob
    results: list[Result] = field(default_factory=list)
    status: str = Status.OK.value
    message: str = ""
    phases: dict[str, float] = field(default_factory=dict)  # JobOutcome.phases

    def problem(self, status: Status, message: str) -> None:
        if self.status == Status.OK.value:
            self.status, self.message = status.value, message


def _phases(end: Mapping[str, Any]) -> dict[str, float]:
    """The numeric "phases_ms" of a harness's end line (older harnesses print none: empty)."""
    given = end.get("phases_ms")
    if not isinstance(given, Mapping):
        return {}
    return {str(k): float(v) for k, v in given.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _complain(current: _Open | None, stray: list[str], why: str) -> None:
    """A protocol violation: the open job's status becomes garbage, or the next job's if none is open."""
    if current is not None:
        current.problem(Status.GARBAGE, why)
    else:
        stray.append(why)


def _parse(line: str) -> tuple[str, dict[str, Any]]:
    """(event, data); event "garbage" with data["why"] for anything not in the protocol."""
    try:
        data = json.loads(line)
    except ValueError:
        return "garbage", {"why": f"not JSON: {line[:MESSAGE_CHARS]}"}
    if not isinstance(data, dict) or data.get("event") not in EVENTS:
        return "garbage", {"why": f"unknown line: {line[:MESSAGE_CHARS]}"}
    return str(data["event"]), data


def system_line_problem(data: Mapping[str, Any]) -> str:
    """Why a "system" line cannot be stored ("" when it can): every value a scalar SQLite holds."""
    for key, value in data.items():
        if isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            continue
        if isinstance(value, float) and math.isfinite(value):
            continue
        return f"'{key}' = {str(value)[:40]} is not text or a finite number"
    return ""


# ---------------------------------------------------------------- the runner


class _ExecutableFailed(Exception):
    pass


class Runner:
    """Runs one generated project's executables into one sink (see ``run``)."""

    def __init__(self, sink: Sink, build_dir: Path, timeout_s: float, force: bool, l2: str,
                 system_id: str | None, system: Mapping[str, Any] | None, progress: Progress | None,
                 max_reps: int | None, max_engines: int | None = None, harness_args: Sequence[str] = (),
                 pool: ChildPool | None = None) -> None:
        self.sink, self.build_dir, self.timeout_s, self.force, self.l2 = sink, build_dir, timeout_s, force, l2
        self.system_id, self.system, self.progress, self.max_reps = system_id, system, progress, max_reps
        self.max_engines, self.harness_args, self.pool = max_engines, tuple(harness_args), pool
        self.fixed_system = system_id is not None
        self.summary = RunSummary(system_id=system_id)

    def _emit(self, outcome: JobOutcome) -> None:
        self.summary.count(outcome)
        if self.progress:
            self.progress(outcome, self.summary)

    def _finish(self, open_job: _Open, status: str | None = None, message: str = "") -> None:
        assert self.system_id is not None
        outcome = JobOutcome(open_job.job, status or open_job.status, message or open_job.message, open_job.results,
                             dict(open_job.phases))
        t0 = time.perf_counter()
        self.sink.record_job(self.system_id, open_job.job.key, open_job.job.executable, outcome.status,
                          outcome.message, outcome.results, force=self.force)
        outcome.phases["db_write"] = (time.perf_counter() - t0) * 1e3
        self._emit(outcome)

    def _skip_completed(self, todo: list[ScheduledJob], finished: set[int]) -> list[ScheduledJob]:
        if self.system_id is None or self.force:
            return todo
        done = self.sink.completed_jobs(self.system_id)
        for job in todo:
            if job.key in done:
                finished.add(job.index)
                self._emit(JobOutcome(job, "skipped"))
        return [j for j in todo if j.key not in done]

    def run_executable(self, name: str, jobs: list[ScheduledJob]) -> None:
        path = self.build_dir / name
        finished: set[int] = set()
        abnormal = False
        while True:
            todo = self._skip_completed([j for j in jobs if j.index not in finished], finished)
            if not todo:
                return
            self.summary.restarts += abnormal
            abnormal = self._run_process(path, todo, finished)

    def _on_system(self, data: dict[str, Any], todo: list[ScheduledJob]) -> bool:
        """Learn the system from a "system" line; True when the process must restart (jobs already done)."""
        if self.fixed_system:
            return False
        merged = merge_system(self.system, {k: v for k, v in data.items() if k not in PROCESS_FIELDS})
        sid = system_id(merged)
        if sid != self.system_id:
            self.system_id = self.summary.system_id = self.sink.upsert_system(merged)
            done = self.sink.completed_jobs(sid)
            return not self.force and any(j.key in done for j in todo)
        return False

    def process_argv(self, path: Path, jobs: Iterable[int] | None = None) -> list[str]:
        """The command line of a process of executable ``path``: a ``--jobs`` run of ``jobs``, or, ``jobs``
        None, a ``--serve`` one. The one place it is built: a ``ChildPool`` finds an idle process only
        under this argv (``cluster_worker`` prestarts a worker's processes with it)."""
        head = ["--serve"] if jobs is None else ["--jobs", job_ranges(jobs)]
        limits = [arg for flag, value in (("--max-reps", self.max_reps), ("--max-engines", self.max_engines))
                  if value for arg in (flag, str(value))]
        return [str(path), *head, "--l2", self.l2, *limits, *self.harness_args]

    def prestart(self, names: Iterable[str], at_once: int) -> Prestarted:
        """Start the ``--serve`` processes of these executables in the background into the pool, ``at_once``
        at a time (``ChildPool.prestart``), under the argv ``_run_process`` looks them up by."""
        assert self.pool is not None, "only a runner with a pool keeps processes"
        argvs = [self.process_argv(self.build_dir / name) for name in names]
        return self.pool.prestart(argvs, self.build_dir, self.timeout_s, at_once)

    def _run_process(self, path: Path, todo: list[ScheduledJob], finished: set[int]) -> bool:
        """Run one process over ``todo``; True when it ended abnormally (crash, hang, early exit).

        With a pool, the process is a ``--serve`` one: taken from the pool if one is idle, handed
        ``todo`` as a job list on its stdin, and kept in the pool again once it says "ready"."""
        by_index = {j.index: j for j in todo}
        serving = self.pool is not None
        argv = self.process_argv(path, None if serving else by_index)
        served = self.pool.take(argv) if self.pool is not None else None
        if served is not None:
            child = served.child
        else:
            try:
                child = _Child(argv, self.build_dir, serve=serving)
            except OSError as exc:
                raise _ExecutableFailed(f"{path}: cannot start ({exc.strerror})") from exc
            self.summary.processes += 1
        kept = False  # back in the pool: not closed on the way out

        def keep(system: dict[str, Any], start_ms: float | None) -> None:
            nonlocal kept
            assert self.pool is not None
            self.pool.keep(argv, _Served(child, system, start_ms))
            kept = True

        current: _Open | None = None
        stray: list[str] = []  # garbage printed outside any job: charged to the next job
        errors: list[str] = []  # "error" events outside any job (e.g. no usable CUDA device)
        # a process that ran jobs before: a hang or exit before this list's first job restarts it
        started = served is not None
        spawned, process_start_ms = time.perf_counter(), None
        system_line: dict[str, Any] = {}
        deadline = time.monotonic() + self.timeout_s
        if served is not None:
            system_line, process_start_ms = served.system, served.start_ms
            if self._on_system(system_line, todo):
                keep(system_line, process_start_ms)
                return False  # some of its jobs are already measured: hand it the others
            child.send(job_ranges(by_index))  # a process gone meanwhile reads as one that exited
        try:
            while True:
                try:
                    raw = child.readline(deadline)
                except _Timeout:
                    child.kill()
                    if current is None and not started:
                        raise _ExecutableFailed(f"{path.name}: printed no job start within {self.timeout_s:g} s") \
                            from None
                    if current is None:
                        # hung between jobs or on the way out: no job to blame, and this process
                        # finished at least one job, so a restart with the rest makes progress
                        return any(j.index not in finished for j in todo)
                    finished.add(current.job.index)
                    self._finish(current, Status.TIMEOUT.value,
                                 f"job {current.job.index} printed nothing for {self.timeout_s:g} s")
                    return True
                if raw is None:
                    text = child.exit_text()
                    if current is not None:
                        finished.add(current.job.index)
                        said = f" after: {current.message}" if current.message else ""
                        self._finish(current, Status.CRASHED.value, f"job {current.job.index}: {text}{said}")
                    elif not started:
                        said = f" ({'; '.join(errors)})" if errors else ""
                        raise _ExecutableFailed(f"{path.name}: {text} before starting a job{said}")
                    return any(j.index not in finished for j in todo)
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                event, data = _parse(line)
                if event == "error":
                    message = str(data.get("message", ""))[:MESSAGE_CHARS]
                    if current is not None and data.get("job", current.job.index) == current.job.index:
                        current.problem(Status.FAILED, message)
                    else:
                        errors.append(message)
                    continue
                if event == "system":
                    why = system_line_problem(data)
                    if why:
                        raise _ExecutableFailed(f"{path.name}: bad system line ({why})")
                    process_start_ms = (time.perf_counter() - spawned) * 1e3
                    system_line = data
                    if self._on_system(data, todo):
                        if serving:
                            keep(data, process_start_ms)
                        return False  # some of its jobs are already measured: start again without them
                    if serving:
                        child.send(job_ranges(by_index))
                    continue
                if self.system_id is None:
                    raise _ExecutableFailed(f"{path.name}: printed {line[:80]!r} before its system line")
                if event == "start":
                    index = data.get("job")
                    if current is not None or not isinstance(index, int) or index not in by_index \
                            or index in finished:
                        _complain(current, stray, f"unexpected start of job {index}")
                        continue
                    current, started = _Open(by_index[index]), True
                    if process_start_ms is not None:  # charged to the process's first job
                        current.phases["process_start"], process_start_ms = process_start_ms, None
                    for why in stray:
                        current.problem(Status.GARBAGE, why)
                    stray.clear()
                    deadline = time.monotonic() + self.timeout_s
                elif event == "result":
                    why = self._add_result(current, data) if current else "result line outside a job"
                    if why:
                        _complain(current, stray, why)
                    # a job with many algorithms (graph-API engine configs) makes progress per
                    # result: the timeout bounds silence, not the whole job
                    deadline = time.monotonic() + self.timeout_s
                elif event == "ready" and serving:
                    if current is not None:  # a job with no end line
                        finished.add(current.job.index)
                        self._finish(current, Status.GARBAGE.value, f"job {current.job.index}: no end line")
                        current = None
                    left = [j for j in todo if j.index not in finished]
                    if len(left) == len(todo):  # it refused the list: another would fare no better
                        said = f" ({'; '.join(errors)})" if errors else ""
                        raise _ExecutableFailed(f"{path.name}: ran none of jobs {job_ranges(by_index)}{said}")
                    keep(system_line, process_start_ms)
                    return bool(left)  # jobs the list did not reach: run again
                elif event == "end":
                    if current is None or data.get("job") != current.job.index:
                        _complain(current, stray, f"unexpected end of job {data.get('job')}")
                        continue
                    finished.add(current.job.index)
                    current.phases.update(_phases(data))
                    self._finish(current)
                    current = None
                    deadline = time.monotonic() + self.timeout_s
                else:  # garbage, or "ready" from a process not serving
                    _complain(current, stray, data.get("why", f"unexpected {event} line"))
        finally:
            if not kept:
                child.close()

    @staticmethod
    def _add_result(current: _Open, data: dict[str, Any]) -> str:
        """Append a result line to the open job; returns why it is garbage, or ""."""
        if data.get("job", current.job.index) != current.job.index:
            return f"result of job {data.get('job')} inside job {current.job.index}"
        try:
            result = checked_result(data)
        except (TypeError, ValueError) as exc:
            return f"bad result line ({exc})"
        key = current.job.key
        if (result.layer_key, result.api) != (key.layer_key, key.api):
            return f"result for {result.layer_key}/{result.api} inside job {current.job.index}"
        current.results.append(result)
        return ""


def run(project_dir: str | Path, sink: Sink, system_id: str | None = None, timeout_s: float = 120.0,
        force: bool = False, l2: str = L2.WARM.value, progress: Progress | None = None,
        build_dir: str | Path | None = None, system: Mapping[str, Any] | None = None,
        max_reps: int | None = None, max_engines: int | None = None, harness_args: Sequence[str] = ()
        ) -> RunSummary:
    """Run every pending job of a built project into ``sink`` (a database: ``store.db.DatabaseSink``);
    returns what happened.

    ``system_id`` None: the system is what each executable's "system" line says,
    merged with ``system`` (e.g. ``benanza.measure.system.fingerprint()``), and stored
    (``Sink.upsert_system``). Jobs the sink has completed for that system are skipped unless
    ``force`` (which re-runs them and replaces their rows). ``l2`` cold-weights runs only the
    jobs of APIs with weights (``jobs_to_run``; ``RunSummary.weightless`` counts the others).
    ``harness_args`` go to every executable as given (e.g. ``--race 1.5 --job-budget-s 10``).
    """
    project = Path(project_dir)
    manifest = load_manifest(project)
    if l2 not in {x.value for x in L2}:
        raise BenanzaError(f"--l2 must be one of {', '.join(x.value for x in L2)}, not {l2!r}")
    every = manifest_jobs(manifest, l2, str(project / MANIFEST))
    jobs = jobs_to_run(every, l2)
    # absolute: each executable runs with its build directory as the working directory
    out = (Path(build_dir) if build_dir else project / "build").resolve()
    missing = [name for name, todo in jobs.items() if todo and not os.access(out / name, os.X_OK)]
    if missing:
        raise BenanzaError(f"{out}: no executable {', '.join(missing)} (build the project first)")
    sink.store_manifest(manifest)
    with contextlib.suppress(OSError):  # the harness's plan cache within its bound (a failure costs disk only)
        plan_cache.prune()
    runner = Runner(sink, out, timeout_s, force, l2, system_id, system, progress, max_reps, max_engines, harness_args)
    runner.summary.jobs = sum(len(j) for j in every.values())
    runner.summary.weightless = runner.summary.jobs - sum(len(j) for j in jobs.values())
    with _groups_killed_on_exit():
        for name, todo in jobs.items():
            try:
                runner.run_executable(name, todo)
            except _ExecutableFailed as exc:
                runner.summary.errors.append(str(exc))
    return runner.summary
