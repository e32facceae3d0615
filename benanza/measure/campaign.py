"""Timing a whole campaign from a part of it: a project that keeps every N-th job of each executable,
the campaign's wall time scaled from that sample, where a job's time went (its phases), and the
harness options a campaign sets (bench/campaign.py and bench/cluster_scaling.py run them;
docs/GENERATOR.md describes the options)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benanza.measure.runner import load_manifest
from benanza.records import Result

# A job's wall time, phase by phase (bench/campaign.py's docstring says what each one is); a campaign's
# "other" (its wall that no job's phase claims) is the caller's, from its own clock.
JOB_PHASES = ("process_start", "handles", "plan_build", "host_prep", "setup", "alloc", "warmup", "timed", "check",
              "db_write")
PHASE_LABELS = {"process_start": "process start", "plan_build": "plan build", "host_prep": "host prep",
                "warmup": "warm-up", "db_write": "db write"}


def job_phases(phases_ms: Mapping[str, float], results: Iterable[Result] = ()) -> dict[str, float]:
    """One job's ``JOB_PHASES`` in ms from the runner's ``JobOutcome.phases`` (the harness's end line and
    the runner's own clocks). Plan build is the GPU thread's wait for plans built ahead of it (harness
    "plan_wait"); an older harness built every plan on that thread and printed none: the sum of the
    results' ``build_ms`` notes, then taken out of its setup. Host prep is the GPU thread's wait for a
    job's host work ("prep_wait"); the work's own time ("host_prep") is not wall of this job. Alloc: the
    GPU thread's device allocations and frees (a harness before it counted them in setup)."""
    p = phases_ms
    plan_ms = p["plan_wait"] if "plan_wait" in p else sum(
        float(r.notes.get("build_ms", 0) or 0) for r in results if isinstance(r.notes, dict))
    return {"process_start": p.get("process_start", 0.0), "handles": p.get("handles", 0.0),
            "plan_build": plan_ms, "host_prep": p.get("prep_wait", 0.0),
            "setup": max(0.0, p.get("setup", 0.0) - (0.0 if "plan_wait" in p else plan_ms)),
            "alloc": p.get("alloc", 0.0), "warmup": p.get("warmup", 0.0), "timed": p.get("timed", 0.0),
            "check": p.get("check", 0.0), "db_write": p.get("db_write", 0.0)}


def sampled_project(project: Path, every: int, offset: int = 0) -> Path:
    """A project directory beside ``project`` whose manifest holds every ``every``-th job of each executable
    (spread over its models, batches and precisions), from its ``offset``-th on; it runs with ``project``'s
    build directory. Two offsets give two disjoint samples: their estimates' spread is the sampling error."""
    if not 0 <= offset < every:
        raise ValueError(f"sample offset {offset} must be in 0..{every - 1}")
    manifest = load_manifest(project)
    position: dict[str, int] = defaultdict(int)
    kept = []
    for job in manifest["jobs"]:
        n = position[job["executable"]]
        position[job["executable"]] += 1
        if n % every == offset:
            kept.append(job)
    out = project.parent / (f"{project.name}.sample{every}" + (f"+{offset}" if offset else ""))
    out.mkdir(exist_ok=True)
    (out / "manifest.json").write_text(json.dumps({**manifest, "jobs": kept}))
    return out


def scaled_wall(exe_totals: dict[str, Any], every: int) -> float:
    """An executable's whole-campaign wall from its 1/``every`` sample: ``every`` x its jobs' time, but its
    process start once (a process runs all of an executable's jobs, sampled or not)."""
    start = exe_totals["phases_s"]["process_start"]
    return (exe_totals["wall_s"] - start) * every + start


def harness_options(race: float | None = None, job_budget_s: float | None = None,
                    plan_threads: int | None = None) -> list[str]:
    """The harness options a campaign sets, as separate words: the harness reads ``--race 1.5``, not
    ``--race=1.5``; an option left None is not passed (the harness's default holds)."""
    words: list[str] = []
    for name, value in (("race", race), ("job_budget_s", job_budget_s), ("plan_threads", plan_threads)):
        if value is not None:
            words += [f"--{name.replace('_', '-')}", f"{value:g}"]
    return words
