"""Run one benchmark campaign across many GPUs and hosts on Dask (``benanza run --cluster``).

Dask (``distributed``, with ``dask-cuda`` for one worker per GPU) does the scheduling;
this module only cuts the work and keeps the database:

- each worker is probed once: its GPU's fingerprint merged with an executable's
  "system" line gives its system id, exactly as the single-process runner computes it;
  workers are grouped by system, and every system measures the jobs the database
  lacks for it (heterogeneous GPUs land as separate systems, resume skips per system);
- the work unit is a shard, (executable, job indices), pinned to one worker of its
  system that the client picks (of its own executables first, ``next_shard``); the
  worker runs it with the runner's own crash/hang-isolating ``Runner`` (its database a
  private in-memory scratch) and streams every finished job back as a Dask event;
- ONE writer, the client, commits each job as its event arrives (SQLite is not shared
  across hosts). A worker that dies loses its in-flight job only: the client puts its
  shards back in the backlog, and the new attempt skips the jobs the shard's "done"
  topic on the scheduler lists. A job reported twice (a retry racing an event) is
  written once.
"""

from __future__ import annotations

import contextlib
import math
import queue
import time
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.library import L2
from benanza.measure import runner
from benanza.measure.cluster_worker import Shard, await_children, close_children, probe_worker, run_shard
from benanza.records import JobKey, Result

INSTALL_HINT = "pip install 'benanza[dask]'"
SHARDS_PER_WORKER = 4  # shards per worker of a system: late shards even out uneven jobs
IN_FLIGHT_PER_WORKER = 2  # shards submitted per worker at a time: one running, one waiting (cluster._Submitted)
MAX_SHARD_JOBS = 64  # a dead worker re-queues a shard; smaller shards spread better
MIN_SHARD_JOBS = 4  # the smallest of the shards a campaign drains with (make_shards)
PROBE_TIMEOUT_S = 120.0  # a worker's first executable must print its system line within this
WORKERS_TIMEOUT_S = 60.0  # how long to wait for the first worker of an existing cluster
LOST_AFTER_S = 120.0  # a system none of whose workers is alive this long has its shards failed
POLL_S = 0.2
CLOSE_CHILDREN_TIMEOUT_S = 60.0  # a started cluster's workers reap their benchmark processes within this
_SHARD_ENDED: dict[str, Any] = {}  # put in the event queue when a shard's future ends: top up at once


def require_dask(local: bool = False) -> None:
    """One-line error when the optional Dask dependencies are missing (``local``: dask-cuda too)."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        raise BenanzaError(f"--cluster needs Dask's distributed package ({exc.name} is not installed): "
                           f"{INSTALL_HINT}") from None
    if local:
        try:
            from dask_cuda import LocalCUDACluster  # noqa: F401
        except ImportError as exc:
            raise BenanzaError(f"--cluster local needs dask-cuda ({exc.name} is not installed): "
                               f"{INSTALL_HINT}") from None


# ---------------------------------------------------------------- shards


def shard_size(pending: int, workers: int, shard_jobs: int | None = None) -> int:
    """Jobs per shard: ``SHARDS_PER_WORKER`` shards per worker (every GPU busy until the end), at most
    ``MAX_SHARD_JOBS`` (a shard is the unit put back when its worker dies), or ``shard_jobs`` when given."""
    if shard_jobs:
        return max(1, shard_jobs)
    return max(1, min(MAX_SHARD_JOBS, math.ceil(pending / max(1, workers * SHARDS_PER_WORKER))))


def _cuts(n: int, size: int, drain: bool) -> list[int]:
    """Shard lengths for ``n`` jobs: ``size`` each; with ``drain``, the last ``2 * size`` jobs halving
    until at most ``2 * MIN_SHARD_JOBS`` are left, which make the last shard."""
    if not drain:
        return [min(size, n - start) for start in range(0, n, size)]
    cuts, left = [], n
    while left > 0:
        cut = size if left > 2 * size else left if left <= 2 * MIN_SHARD_JOBS else math.ceil(left / 2)
        cuts.append(min(cut, size))
        left -= cuts[-1]
    return cuts


def make_shards(jobs: Mapping[str, list[runner.ScheduledJob]], size: int, drain: bool = False) -> list[Shard]:
    """Cut each executable's jobs (in job order) into shards of ``size``; a shard never spans executables.

    ``drain`` (several workers, default sizing): each executable ends in halving shards, and the list
    runs largest first, the order Dask starts them in, so a campaign ends on small shards of every
    executable instead of one worker's long one. With equal shards, 4 H100s ran 180 to 456 of 1 261
    jobs each (docs/RESULTS.md §11): the wall was the busiest worker's."""
    out = []
    for exe, todo in jobs.items():
        start = 0
        for cut in _cuts(len(todo), size, drain):
            out.append(Shard(exe, tuple(j.index for j in todo[start:start + cut])))
            start += cut
    if drain:
        out.sort(key=lambda shard: -len(shard.indices))  # stable: job order among shards of one length
    return out


# ---------------------------------------------------------------- host threads


def plan_threads_split(workers: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The harness's ``--plan-threads`` for each worker that shares CPUs with another worker of its host.

    ``workers``: probe results (``name``, ``host``, ``cpus``: the CPUs its processes may run on). A CPU
    that k workers of a host may run on counts 1/k to each; a worker's threads are its share, minus
    one for its GPU thread, at least 1. Without this, each benchmark process of a host starts one
    plan thread per CPU of its affinity (the harness's default): 4 workers on 64 shared CPUs started
    63 each (issue 35). A worker alone on its CPUs (one GPU; or pinned apart) is left out: the
    harness's default (its CPUs - 1) holds, as in the single-process runner.
    """
    by_host: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for worker in workers:
        if worker.get("cpus"):
            by_host[str(worker["host"])].append(worker)
    out: dict[str, int] = {}
    for peers in by_host.values():
        users = Counter(cpu for worker in peers for cpu in set(worker["cpus"]))
        for worker in peers:
            cpus = set(worker["cpus"])
            if any(users[cpu] > 1 for cpu in cpus):
                share = sum(1 / users[cpu] for cpu in cpus)
                out[str(worker["name"])] = max(1, math.floor(share + 1e-9) - 1)
    return out


PlanThreads = Callable[[Sequence[Mapping[str, Any]]], dict[str, int]]  # probe results -> worker name -> N


def plan_threads_each(n: int) -> PlanThreads:
    """A policy that gives every worker ``--plan-threads n`` (to measure a count against the split)."""
    if n < 1:
        raise BenanzaError(f"--plan-threads must be at least 1, not {n}")
    return lambda workers: {str(worker["name"]): n for worker in workers}


# Named plan-thread policies: the split (run_campaign's default), or the harness's own default for every
# worker (its CPUs - 1: 63 each for 4 workers on 64 cores; on 4 H200s: 53.4 s against the split's 49.6 s).
PLAN_THREADS: dict[str, PlanThreads] = {"split": plan_threads_split, "default": lambda workers: {}}


def plan_threads_policy(spec: str) -> PlanThreads:
    """``split``, ``default`` (``PLAN_THREADS``) or a number N (``plan_threads_each``)."""
    if spec in PLAN_THREADS:
        return PLAN_THREADS[spec]
    try:
        return plan_threads_each(int(spec))
    except ValueError:
        raise BenanzaError(f"--plan-threads takes {', '.join(PLAN_THREADS)} or a number, not {spec!r}") from None


# ---------------------------------------------------------------- client side


@dataclass
class WorkerReport:
    """One worker (one GPU) of a campaign: who it is and what it ran."""

    name: str
    host: str
    gpu: str
    system_id: str
    pid: int = 0  # the worker process that sent the latest job (a nanny restarts a dead one)
    summary: runner.RunSummary = field(default_factory=runner.RunSummary)


@dataclass
class CampaignSummary:
    """A campaign's totals, per worker and per system; ``duplicates``: jobs measured twice (a
    retried shard that re-ran a job whose report had not reached the scheduler), written once."""

    total: runner.RunSummary = field(default_factory=runner.RunSummary)
    workers: dict[str, WorkerReport] = field(default_factory=dict)
    systems: dict[str, dict[str, Any]] = field(default_factory=dict)
    shards: int = 0
    probe_s: float = 0.0  # seconds spent learning the workers' systems (one executable start each)
    plan_threads: dict[str, int] = field(default_factory=dict)  # worker name -> --plan-threads (plan_threads_split)
    worker_cpus: dict[str, int] = field(default_factory=dict)  # worker name -> the CPUs its processes may run on
    duplicates: int = 0
    errors: list[str] = field(default_factory=list)


CampaignProgress = Callable[[runner.JobOutcome, WorkerReport], None]


@dataclass
class Cluster:
    """A Dask client and whatever this process started for it (closed together)."""

    client: Any
    started: Any = None

    def close(self) -> str | None:
        """Close the client and the cluster this process started. The workers first reap their benchmark
        processes (``await_children``): a worker whose children's CUDA contexts were still going down
        outlived Dask's 5 s to exit, and the close raised TimeoutError after every job was written (4
        H200s, docs/RESULTS.md §11). A close that fails all the same is a line returned, not an error:
        the campaign is in the database."""
        if self.started is not None:
            with contextlib.suppress(Exception):  # a worker already gone has nothing to reap
                self.client.run(await_children, CLOSE_CHILDREN_TIMEOUT_S)
        self.client.close()
        if self.started is None:
            return None
        try:
            self.started.close()
        except Exception as exc:  # Dask's close raises what its event loop met (TimeoutError, OSError, ...)
            return f"the local Dask cluster did not close cleanly ({type(exc).__name__}: {str(exc) or 'no message'})"
        return None


def local_cuda_cluster() -> Cluster:
    """``--cluster local``: a LocalCUDACluster, one single-threaded worker pinned to each visible GPU."""
    require_dask(local=True)
    from dask_cuda import LocalCUDACluster
    from dask_cuda.utils import get_n_gpus
    from distributed import Client

    try:
        gpus = get_n_gpus()
    except Exception as exc:  # pynvml raises its own errors without a driver
        raise BenanzaError(f"--cluster local: no NVIDIA GPU visible ({exc})") from None
    if not gpus:
        raise BenanzaError("--cluster local: no NVIDIA GPU visible (CUDA_VISIBLE_DEVICES empty?)")
    started = LocalCUDACluster(threads_per_worker=1, dashboard_address=None)
    return Cluster(Client(started), started)


def connect(address: str | None = None, scheduler_file: Path | None = None,
            timeout_s: float = WORKERS_TIMEOUT_S) -> Cluster:
    """``local``, a scheduler address or a scheduler file: a client with at least one worker."""
    require_dask()
    if address == "local":
        return local_cuda_cluster()
    from distributed import Client

    where = str(scheduler_file) if scheduler_file else str(address)
    try:
        client = (Client(scheduler_file=str(scheduler_file), timeout=timeout_s) if scheduler_file
                  else Client(address, timeout=timeout_s))
    except (OSError, TimeoutError, ValueError) as exc:
        raise BenanzaError(f"{where}: cannot reach the Dask scheduler ({exc})") from None
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError:
        client.close()
        raise BenanzaError(f"{where}: no Dask worker joined within {timeout_s:g} s "
                           "(start one per GPU with: dask cuda worker SCHEDULER)") from None
    return Cluster(client)


class _Writer:
    """The one writer: commits job messages from any worker, each job once."""

    def __init__(self, sink: runner.Sink, jobs: Mapping[str, list[runner.ScheduledJob]], force: bool,
                 summary: CampaignSummary, progress: CampaignProgress | None) -> None:
        self.sink, self.force, self.summary, self.progress = sink, force, summary, progress
        self.by_index = {exe: {j.index: j for j in todo} for exe, todo in jobs.items()}
        self.written: set[tuple[str, JobKey]] = set()
        self.streamed: set[tuple[str, JobKey]] = set()

    def commit(self, msg: Mapping[str, Any], streamed: bool = True) -> None:
        """Write one job message; ``streamed`` False for a finished shard's copy of what it streamed."""
        sid = str(msg["system_id"])
        job = self.by_index[msg["executable"]][int(msg["index"])]
        if streamed:  # two attempts that both streamed a job: it was measured twice
            self.summary.duplicates += (sid, job.key) in self.streamed
            self.streamed.add((sid, job.key))
        if (sid, job.key) in self.written:
            return
        if sid not in self.summary.systems:
            self.summary.systems[sid] = dict(msg["system"])
            if self.sink.upsert_system(msg["system"]) != sid:
                raise BenanzaError(f"worker {msg['sender']['name']}: system {sid} does not match its fields")
        outcome = runner.JobOutcome(job, str(msg["status"]), str(msg["message"]),
                                    [Result.from_dict(r) for r in msg["results"]], dict(msg.get("phases", {})))
        self.sink.record_job(sid, job.key, job.executable, outcome.status, outcome.message, outcome.results,
                             force=self.force)
        self.written.add((sid, job.key))
        who = msg["sender"]
        report = self.summary.workers.setdefault(
            str(who["name"]), WorkerReport(str(who["name"]), who["host"], str(msg["system"].get("gpu", "?")), sid))
        report.pid = int(who["pid"])
        report.summary.count(outcome)
        self.summary.total.count(outcome)
        if self.progress:
            self.progress(outcome, report)


def workers_of(client: Any) -> dict[str, dict[str, Any]]:
    """Address -> info of every worker (some distributed versions list 5 unless asked for all)."""
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # a version without n_workers lists them all
        return client.scheduler_info()["workers"]


def probe(client: Any, build_dir: Path, jobs: Mapping[str, list[runner.ScheduledJob]], l2: str,
          timeout_s: float = PROBE_TIMEOUT_S) -> tuple[list[dict[str, Any]], list[str]]:
    """Each worker's identity and system (``probe_worker``), and the workers that could not run."""
    exe, todo = next((e, t) for e, t in jobs.items() if t)
    addresses = list(workers_of(client))
    futures = [client.submit(probe_worker, str(build_dir), exe, todo[0].index, l2, timeout_s, workers=[a],
                             allow_other_workers=False, pure=False, key=f"benanza-probe-{uuid.uuid4().hex}")
               for a in addresses]
    found, errors = [], []
    for future in futures:
        info = future.result()
        (errors.append(info["error"]) if "error" in info else found.append(info))
    return found, errors


def run_campaign(project_dir: str | Path, sink: runner.Sink, client: Any, timeout_s: float = 120.0, force: bool = False,
                 l2: str = L2.WARM.value, build_dir: str | Path | None = None, max_reps: int | None = None,
                 max_engines: int | None = None, shard_jobs: int | None = None,
                 progress: CampaignProgress | None = None,
                 on_planned: Callable[[int], None] | None = None,
                 plan_threads: PlanThreads = plan_threads_split, prestart: int = 0) -> CampaignSummary:
    """Run a built project's pending jobs on every worker of ``client``'s cluster into ``sink`` (the
    database's ``store.db.DatabaseSink``).

    Every system among the workers measures the jobs ``sink`` lacks for it (all of them with
    ``force``); its workers share them as shards. ``on_planned`` gets the number of jobs to
    run once it is known (a progress bar's total). ``plan_threads`` gives each worker its harness
    ``--plan-threads`` from the probe results (``plan_threads_split``; ``plan_threads_policy``).
    ``prestart``: how many processes each worker starts at a time in the background from its first shard
    on, one for every other executable of the campaign (``cluster_worker.prestart``); 0 (the
    default): a worker starts an executable's process when it meets it. All at once was worse: on 4 H200s
    every worker started 16 and 34 of the 64 ever ran a job, and first jobs waited 40.5 GPU-s in all
    (docs/RESULTS.md §11); one or two at a time is not measured yet.
    """
    project = Path(project_dir)
    manifest = runner.load_manifest(project)
    if l2 not in {x.value for x in L2}:
        raise BenanzaError(f"--l2 must be one of {', '.join(x.value for x in L2)}, not {l2!r}")
    every = runner.manifest_jobs(manifest, l2, str(project / runner.MANIFEST))
    jobs = runner.jobs_to_run(every, l2)
    out = (Path(build_dir) if build_dir else project / "build").resolve()
    summary = CampaignSummary()
    summary.total.jobs = sum(len(j) for j in every.values())
    summary.total.weightless = summary.total.jobs - sum(len(j) for j in jobs.values())
    if not any(jobs.values()):
        return summary
    sink.store_manifest(manifest)

    started = time.monotonic()
    found, summary.errors = probe(client, out, jobs, l2)
    summary.probe_s = time.monotonic() - started
    if not found:
        summary.errors.append("no Dask worker could run the project's executables: nothing was run")
        return summary
    groups: dict[str, list[dict[str, Any]]] = {}
    for info in found:
        groups.setdefault(info["system_id"], []).append(info)
    summary.plan_threads = plan_threads(found)
    summary.worker_cpus = {str(info["name"]): len(info.get("cpus", ())) for info in found}
    writer = _Writer(sink, jobs, force, summary, progress)
    topic = f"benanza-{uuid.uuid4().hex}"
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    client.subscribe_topic(topic, lambda event: events.put(event[1]))
    submitted = _Submitted(client, str(out), l2, timeout_s, max_reps, max_engines, topic, writer.by_index,
                           summary.plan_threads, prestart)
    try:
        plans: list[tuple[str, list[dict[str, Any]], list[Shard]]] = []
        for sid, workers in groups.items():
            summary.systems[sid] = workers[0]["system"]
            sink.upsert_system(workers[0]["system"])
            done = set() if force else sink.completed_jobs(sid)
            pending = {exe: [j for j in todo if j.key not in done] for exe, todo in jobs.items()}
            summary.total.skipped += sum(len(t) for t in jobs.values()) - sum(len(t) for t in pending.values())
            size = shard_size(sum(len(t) for t in pending.values()), len(workers), shard_jobs)
            plans.append((sid, workers, make_shards(pending, size, drain=not shard_jobs and len(workers) > 1)))
        if on_planned:
            on_planned(sum(len(s.indices) for _, _, shards in plans for s in shards))
        for sid, workers, shards in plans:
            submitted.addresses[sid] = [w["address"] for w in workers]
            submitted.names[sid] = {w["name"] for w in workers}
            submitted.backlog[sid] = deque(shards)
            if prestart > 0:
                submitted.executables[sid] = tuple(dict.fromkeys(shard.executable for shard in shards))
            summary.shards += len(shards)
        submitted.top_up()
        _collect(submitted, events, writer, summary)
    finally:
        client.unsubscribe_topic(topic)
        for future in submitted.pending:
            future.release()
        end_children(client)
    return summary


def end_children(client: Any) -> None:
    """Every worker's benchmark processes kept between shards exit (``cluster_worker.close_children``);
    a worker that is gone has none left."""
    with contextlib.suppress(Exception):  # a dead worker or a closing cluster: nothing to end there
        client.run(close_children)


def next_shard(shards: deque[Shard], job_ms: Mapping[str, Sequence[float]], served: Set[str] = frozenset(),
               given: Set[str] = frozenset()) -> Shard:
    """Take the next shard for a worker out of ``shards``: of those whose executable it serves already
    (``served``: it has that executable's process), else of all, the one expected to run longest (jobs x
    its executable's mean job wall so far).

    Longest first, so that the campaign ends on short shards (a graph-API shard of 8 jobs can take
    seconds, a pooling one milliseconds). Its own executables first, so that a process is started for
    an executable on another worker only once this worker has none of its own left: met as they came,
    4 GPUs started 47 processes for 16 executables (0.48 s each, docs/RESULTS.md §11), and each new
    process also loads its kernels and creates its handles again. An executable that no worker has been
    given yet (``given``) and with no finished job comes first, which learns its cost early; one that
    another worker is still learning comes last. Ties keep the order ``make_shards`` gave."""

    def cost(shard: Shard) -> float:
        total, count = job_ms.get(shard.executable, (0.0, 0))
        if count:
            return len(shard.indices) * total / count
        return math.inf if shard.executable in served or shard.executable not in given else 0.0

    own = [i for i, shard in enumerate(shards) if shard.executable in served]
    best = max(own or range(len(shards)), key=lambda i: (cost(shards[i]), -i))
    shard = shards[best]
    del shards[best]
    return shard


class _Submitted:
    """The campaign's shard futures, each pinned to one worker of its system.

    Shards wait here (``backlog``) and go to Dask ``IN_FLIGHT_PER_WORKER`` per worker at a
    time, the next one as one ends: Dask assigns a task with worker restrictions at once,
    so shards submitted all together were split among the workers up front, and 4 GPUs ran
    380 to 746 of 2 250 jobs each (docs/RESULTS.md §11); now a worker that finishes early
    takes more. The client picks the worker (the one with a free place) and the shard for it
    (``next_shard``: of its own executables first). A worker that dies (or is restarted by its
    nanny under the same name at a new address) has its unfinished shards put back in the
    backlog, for the next worker of the system with a free place; each attempt of a shard
    skips the jobs an earlier one reported (``done_topic``).
    """

    def __init__(self, client: Any, build_dir: str, l2: str, timeout_s: float, max_reps: int | None,
                 max_engines: int | None, topic: str,
                 by_index: Mapping[str, Mapping[int, runner.ScheduledJob]],
                 plan_threads: Mapping[str, int] | None = None, prestart: int = 0) -> None:
        self.client, self.topic, self.by_index, self.prestart = client, topic, by_index, prestart
        self.args = (build_dir, l2, timeout_s, max_reps, max_engines, topic, dict(plan_threads or {}))
        self.addresses: dict[str, list[str]] = {}  # system -> the addresses of its live workers
        self.names: dict[str, set[Any]] = {}  # system -> its workers' names (kept across restarts)
        self.pending: dict[Any, tuple[str, Shard, str]] = {}  # future -> (system, shard, worker address)
        self.backlog: dict[str, deque[Shard]] = {}  # system -> its shards not submitted yet, in order
        self.abandoned: list[tuple[str, Shard]] = []  # backlog of systems lost for good
        self.on_end: Callable[[], None] = lambda: None  # a shard's future ended (from Dask's callback thread)
        self.job_ms: dict[str, list[float]] = {}  # executable -> [sum of its finished jobs' wall ms, count]
        self.executables: dict[str, tuple[str, ...]] = {}  # system -> its executables (a worker prestarts them)
        self.served: dict[str, set[str]] = defaultdict(set)  # worker address -> the executables it was given
        self.given: dict[str, set[str]] = defaultdict(set)  # system -> the executables given to any of its workers

    def top_up(self) -> None:
        """Give each live worker of each system shards (``next_shard``) until it has
        ``IN_FLIGHT_PER_WORKER`` under way: every worker's first place before any worker's second."""
        for sid, shards in self.backlog.items():
            held = Counter(a for f, (s, _, a) in self.pending.items() if s == sid and not f.done())
            for place in range(IN_FLIGHT_PER_WORKER):
                for address in self.addresses[sid]:
                    if shards and held[address] <= place:
                        self.submit(sid, next_shard(shards, self.job_ms, self.served[address], self.given[sid]),
                                    address)
                        held[address] += 1

    def learn(self, msg: Mapping[str, Any]) -> None:
        """A finished job's wall time (the harness's, ms) joins its executable's mean (``next_shard``)."""
        wall = msg.get("phases", {}).get("wall")
        if isinstance(wall, int | float) and not isinstance(wall, bool):
            seen = self.job_ms.setdefault(str(msg["executable"]), [0.0, 0])
            seen[0] += wall
            seen[1] += 1

    def waiting(self) -> bool:
        """Whether any shard is under way or not yet submitted."""
        return bool(self.pending) or any(self.backlog.values())

    def submit(self, sid: str, shard: Shard, address: str) -> None:
        specs = [{"index": i, "key": asdict(self.by_index[shard.executable][i].key)} for i in shard.indices]
        future = self.client.submit(run_shard, shard, specs, *self.args, self.executables.get(sid, ()), self.prestart,
                                    f"{self.topic}:{sid}:{shard.name}", workers=[address],
                                    allow_other_workers=False, pure=False,
                                    key=f"benanza-shard-{sid}-{shard.name}-{uuid.uuid4().hex[:8]}")
        self.pending[future] = (sid, shard, address)
        self.served[address].add(shard.executable)
        self.given[sid].add(shard.executable)
        future.add_done_callback(lambda _: self.on_end())

    def follow_restarts(self, lost_since: dict[str, float]) -> None:
        """Follow the workers that died or that a nanny restarted (same name, new address): the shards
        of a worker no longer alive go back to its system's backlog (the next worker with a free place
        takes them; a worker SIGKILLed 15 s into a 45 s campaign on 4 GPUs once left 3 to finish it:
        +14.3 s); those of a system with no worker alive for ``LOST_AFTER_S`` are cancelled."""
        alive = workers_of(self.client)
        for sid, names in self.names.items():
            self.addresses[sid] = [a for a, w in alive.items() if w.get("name") in names]
            orphans = [(f, shard) for f, (s, shard, a) in self.pending.items()
                       if s == sid and a not in alive and not f.done()]
            if self.addresses[sid]:
                lost_since.pop(sid, None)
                for future, shard in reversed(orphans):  # the new attempt skips the jobs the old one reported
                    del self.pending[future]
                    future.cancel()
                    self.backlog[sid].appendleft(shard)
            elif time.monotonic() - lost_since.setdefault(sid, time.monotonic()) > LOST_AFTER_S:
                for future, _ in orphans:
                    future.cancel()
                self.abandoned += [(sid, shard) for shard in self.backlog.get(sid, ())]
                self.backlog[sid] = deque()


def _finished(submitted: _Submitted, writer: _Writer, summary: CampaignSummary) -> None:
    """Take in the shards that ended: their copies of the jobs they streamed, restarts, errors."""
    for future in [f for f in submitted.pending if f.done()]:
        sid, shard, _ = submitted.pending.pop(future)
        if future.status == "finished":
            done = future.result()
            for msg in done["messages"]:  # normally all streamed already: written once
                writer.commit(msg, streamed=False)
            report = summary.workers.get(str(done["worker"]["name"]))
            if report:
                report.summary.restarts += done["restarts"]
                report.summary.processes += done["processes"]
            summary.total.restarts += done["restarts"]
            summary.total.processes += done["processes"]
            if done["error"]:
                summary.errors.append(done["error"])
        elif future.status == "cancelled":
            summary.errors.append(f"system {sid}: no worker of it alive for {LOST_AFTER_S:g} s; "
                                  f"shard {shard.name} not finished")
        else:
            summary.errors.append(f"shard {shard.name}: {future.exception()!r}")


def _collect(submitted: _Submitted, events: queue.Queue[dict[str, Any]], writer: _Writer,
             summary: CampaignSummary) -> None:
    """Commit job messages as they arrive until every shard has ended."""
    lost_since: dict[str, float] = {}
    next_poll = next_check = time.monotonic()
    submitted.on_end = lambda: events.put(_SHARD_ENDED)  # its worker's next shard goes out at once
    while submitted.waiting():
        try:
            event = events.get(timeout=POLL_S)
            if event is _SHARD_ENDED:
                next_poll = 0.0
            else:
                writer.commit(event)
                submitted.learn(event)
        except queue.Empty:
            pass
        now = time.monotonic()
        if now >= next_poll:  # also while events keep coming
            next_poll = now + POLL_S
            _finished(submitted, writer, summary)
            submitted.top_up()
        if now >= next_check:
            next_check = now + 2.0
            submitted.follow_restarts(lost_since)
    for sid, shard in submitted.abandoned:
        summary.errors.append(f"system {sid}: no worker of it alive for {LOST_AFTER_S:g} s; "
                              f"shard {shard.name} not run")
    while True:  # events still queued: duplicates of returned messages, or late reports
        try:
            event = events.get_nowait()
        except queue.Empty:
            break
        if event is not _SHARD_ENDED:
            writer.commit(event)
