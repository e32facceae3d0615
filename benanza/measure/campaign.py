"""Timing a whole campaign from a part of it: a project that keeps every N-th job of each executable,
the campaign's wall time scaled from that sample, and the harness options a campaign sets
(bench/campaign.py runs them; docs/GENERATOR.md describes the options)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from benanza.measure.runner import load_manifest


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
