"""What a Dask worker runs for a campaign (``benanza run --cluster``, ``benanza/measure/cluster.py``):
probe its GPU's system, and run one shard through the runner, streaming every finished job
back as an event.  Split from the client side (cluster.py: shards, the one writer) because
these functions execute in the worker processes and import only what they need there.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benanza.measure import runner
from benanza.measure.system import fingerprint, merge_system, system_id
from benanza.records import JobKey


@dataclass(frozen=True)
class Shard:
    """One work unit: some jobs of one executable, run by one process on one worker's GPU."""

    executable: str
    indices: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.executable}:{runner.job_ranges(self.indices)}"



# ---------------------------------------------------------------- worker side

_HOST_SYSTEM: dict[str, Any] | None = None
# This worker's benchmark processes between shards (the harness's --serve), until the campaign ends.
_POOL = runner.ChildPool()
# The campaigns (their event topics) whose processes this worker has prestarted: once per campaign.
_PRESTARTED: set[str] = set()
_PRESTART_LOCK = threading.Lock()


def close_children() -> int:
    """Run on every worker when a campaign ends: its idle benchmark processes are killed (their GPU
    memory goes back, and a rebuilt executable is never served by an old process) and reaped in the
    background, so that neither the campaign nor the worker's event loop waits for them. Returns how many."""
    return _POOL.close(wait=False)


def await_children(timeout_s: float) -> bool:
    """Run on every worker before a cluster this process started closes: its benchmark processes are
    ended and reaped (``close_children``'s background reaps included) within ``timeout_s``, so that the
    worker then exits within Dask's time for it. True when none is left."""
    _POOL.close(wait=False)
    return _POOL.join_reapers(timeout_s)


def _host_system() -> dict[str, Any] | None:
    """This worker's GPU fingerprint, as ``benanza run`` takes it (measured once per worker process);
    None without a usable GPU: the executable's own system line then describes the system."""
    global _HOST_SYSTEM
    if _HOST_SYSTEM is None:
        _HOST_SYSTEM = fingerprint(bandwidth=True)
    return _HOST_SYSTEM if _HOST_SYSTEM.get("usable") else None


def _cpus() -> list[int]:
    """The CPUs this thread, and so the processes it starts, may run on (empty where unknown)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _worker_identity() -> dict[str, Any]:
    from distributed import get_worker

    worker = get_worker()
    return {"address": worker.address, "name": worker.name, "host": socket.gethostname(), "pid": os.getpid(),
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def probe_worker(build_dir: str, executable: str, index: int, l2: str, timeout_s: float) -> dict[str, Any]:
    """Run on a worker: its identity, the CPUs the processes it starts may run on (``cpus``: dask-cuda
    pins a worker to its GPU's NUMA-local cores) and its system, from the "system" line an executable
    prints before its first job (the process is killed right after that line)."""
    out = {**_worker_identity(), "cpus": _cpus()}
    path = Path(build_dir) / executable
    try:
        child = runner._Child([str(path), "--jobs", str(index), "--l2", l2], Path(build_dir))
    except OSError as exc:
        return {**out, "error": f"{out['host']}: {path}: cannot start ({exc.strerror})"}
    deadline = time.monotonic() + timeout_s
    errors: list[str] = []
    try:
        while True:
            try:
                raw = child.readline(deadline)
            except runner._Timeout:
                return {**out, "error": f"{out['host']}: {path.name} printed no system line within {timeout_s:g} s"}
            if raw is None:
                said = f" ({'; '.join(errors)})" if errors else ""
                return {**out, "error": f"{out['host']}: {path.name}: {child.exit_text()} before its system line"
                                       f"{said}"}
            event, data = runner._parse(raw.decode("utf-8", "replace").strip())
            if event == "error":
                errors.append(str(data.get("message", ""))[:runner.MESSAGE_CHARS])
            elif event == "system":
                merged = merge_system(_host_system(), {k: v for k, v in data.items()
                                                       if k not in runner.PROCESS_FIELDS})
                return {**out, "system": merged, "system_id": system_id(merged)}
    finally:
        child.close()


class _ShardRunner(runner.Runner):
    """The runner, remembering the system line it saw (the client stores that system)."""

    system_line: dict[str, Any] | None = None

    def _on_system(self, data: dict[str, Any], todo: list[runner.ScheduledJob]) -> bool:
        self.system_line = {k: v for k, v in data.items() if k not in runner.PROCESS_FIELDS}
        return super()._on_system(data, todo)


def prestart(shard_runner: runner.Runner, executables: Sequence[str], campaign: str, at_once: int) -> None:
    """On a worker's first shard of ``campaign``: queue the processes of all ``executables`` to start in the
    background, ``at_once`` at a time (``Runner.prestart``; a job waits for its own process alone, and one
    not started yet when met its runner starts itself); nothing on later shards, or with ``at_once`` 0 (the
    pool counts what it starts: ``ChildPool.spawned_since``). Met one by one, each start (0.45 s on an H200)
    was paid in turn by the first shard of its executable on each worker: 47 starts, about 4 s of a 4-GPU
    campaign's 145 s; all 16 at once on each of 4 H200s, first jobs waited 40.5 GPU-s (docs/RESULTS.md §11)."""
    with _PRESTART_LOCK:  # a worker with several threads: one prestart, the others wait for it
        if campaign in _PRESTARTED or not executables or at_once <= 0:
            return
        _PRESTARTED.add(campaign)
        shard_runner.prestart(executables, at_once)


def run_shard(shard: Shard, jobs: list[dict[str, Any]], build_dir: str, l2: str, timeout_s: float,
              max_reps: int | None, max_engines: int | None, topic: str,
              plan_threads: Mapping[str, int] | None = None, executables: Sequence[str] = (),
              prestart_at_once: int = 0, done_topic: str = "") -> dict[str, Any]:
    """Run on a worker: one shard through the runner; every finished job goes out at once as an event.

    ``plan_threads``: worker name -> the harness's ``--plan-threads`` (``cluster.plan_threads_split``:
    workers that share a host's CPUs split them); a worker not named keeps the harness's default.
    ``executables``: the campaign's (its system's) executables, whose processes the worker's first
    shard of the campaign (``topic``) starts in the background, ``prestart_at_once`` at a time, beside
    its own executable's, which it starts itself (``prestart``; 0: none, each started when met); a
    process that fails then is not served, and the shard that needs it starts one as before.
    ``processes`` in the answer: those this shard's runner started, and those the worker's pool started
    since its last shard answered.

    A retry (the client put the shard back after its worker died) skips the jobs an earlier attempt
    reported: each attempt lists them on the scheduler, in ``done_topic`` (the client names it after
    the system and the shard; by default, after this task's Dask key). Returns every job message this
    attempt sent, so that the client misses none even if an event were late.
    """
    from distributed import get_client, get_worker

    worker = get_worker()
    who = _worker_identity()
    done_topic = done_topic or f"{topic}:{worker.get_current_task()}"
    reported = {int(msg["index"]) for _, msg in get_client().get_events(done_topic)}
    todo = [runner.ScheduledJob(shard.executable, int(j["index"]), JobKey(**j["key"])) for j in jobs
            if int(j["index"]) not in reported]
    sent: list[dict[str, Any]] = []
    threads = (plan_threads or {}).get(str(worker.name))

    def stream(outcome: runner.JobOutcome, summary: runner.RunSummary) -> None:
        msg = {"shard": shard.name, "executable": outcome.job.executable, "index": outcome.job.index,
               "status": outcome.status, "message": outcome.message,
               "results": [asdict(r) for r in outcome.results], "phases": dict(outcome.phases),
               "system_id": summary.system_id,
               "system": merge_system(shard_runner.system, shard_runner.system_line), "sender": who}
        worker.log_event(topic, msg)  # the results first: a job marked done is a job sent
        worker.log_event(done_topic, {"index": outcome.job.index})
        sent.append(msg)

    shard_runner = _ShardRunner(sink=runner.MemorySink(), build_dir=Path(build_dir), timeout_s=timeout_s, force=False,
                                l2=l2,
                                system_id=None, system=_host_system(), progress=stream, max_reps=max_reps,
                                max_engines=max_engines,
                                harness_args=() if threads is None else ("--plan-threads", str(threads)),
                                pool=_POOL)
    # the others: this shard's runner starts its own executable's process now, as when met
    prestart(shard_runner, [e for e in executables if e != shard.executable], topic, prestart_at_once)
    error = ""
    if todo:
        try:
            shard_runner.run_executable(shard.executable, todo)
        except runner._ExecutableFailed as exc:
            error = f"{who['host']} ({who['name']}): {exc}"
    return {"messages": sent, "restarts": shard_runner.summary.restarts,
            "processes": _POOL.spawned_since() + shard_runner.summary.processes, "error": error, "worker": who,
            "skipped_retry": len(jobs) - len(todo)}
