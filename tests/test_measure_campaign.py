"""benanza.measure.campaign (bench/campaign.py --sample): the sampled project keeps every N-th job of
each executable (so the estimate spreads over models, batches and precisions) and the rest of the
manifest as it is."""

from __future__ import annotations

import json
from pathlib import Path

from benanza.measure.campaign import JOB_PHASES, job_phases, sampled_project, scaled_wall
from benanza.records import Result


def test_sample_keeps_every_nth_job_per_executable(tmp_path: Path) -> None:
    project = tmp_path / "zoo"
    project.mkdir()
    jobs = [{"executable": exe, "job": i} for exe, n in (("bench_a", 7), ("bench_b", 3)) for i in range(n)]
    (project / "manifest.json").write_text(json.dumps({"schema": 1, "layers": {"k": 1}, "jobs": jobs}))
    sampled = sampled_project(project, 3)
    manifest = json.loads((sampled / "manifest.json").read_text())
    assert [(j["executable"], j["job"]) for j in manifest["jobs"]] == [
        ("bench_a", 0), ("bench_a", 3), ("bench_a", 6), ("bench_b", 0)]
    assert manifest["layers"] == {"k": 1} and sampled != project


def test_estimate_scales_the_jobs_not_the_process_start() -> None:
    exe = {"wall_s": 2.5, "phases_s": {"process_start": 0.5}}
    assert scaled_wall(exe, 40) == 2.0 * 40 + 0.5


def test_two_offsets_give_disjoint_samples(tmp_path: Path) -> None:
    """The sampling error is the spread of two samples' estimates: they must not share a job."""
    project = tmp_path / "zoo"
    project.mkdir()
    jobs = [{"executable": "bench_a", "job": i} for i in range(9)]
    (project / "manifest.json").write_text(json.dumps({"schema": 1, "jobs": jobs}))
    first, second = (json.loads((sampled_project(project, 4, k) / "manifest.json").read_text())["jobs"]
                     for k in (0, 2))
    assert [j["job"] for j in first] == [0, 4, 8] and [j["job"] for j in second] == [2, 6]


def test_a_jobs_phases_from_its_end_line_or_an_older_harnesses_build_notes() -> None:
    """bench/campaign.py and bench/cluster_scaling.py read a job's phases the same way: plan build is the
    GPU thread's wait for plans (harness "plan_wait"), or, from a harness that printed none, its results'
    build_ms notes, taken out of its setup; host prep is the wait for the job's host work, not the work."""
    end = {"handles": 40.0, "warmup": 2.5, "timed": 120.0, "timed_gpu": 90.0, "check": 1.5, "plan_wait": 7.0,
           "prep_wait": 6.0, "host_prep": 45.0, "inputs_gpu": 0.0, "alloc": 3.0, "setup": 30.0, "wall": 200.0,
           "process_start": 300.0, "db_write": 0.5}
    assert job_phases(end) == {"process_start": 300.0, "handles": 40.0, "plan_build": 7.0, "host_prep": 6.0,
                               "setup": 30.0, "alloc": 3.0, "warmup": 2.5, "timed": 120.0, "check": 1.5,
                               "db_write": 0.5}
    assert tuple(job_phases(end)) == JOB_PHASES
    built = [Result(layer_key="k", api="cudnn_graph", algorithm=f"e{i}", dtype="fp16", math="default",
                     fusion="none", status="ok", notes={"build_ms": 4.0})
             for i in range(3)]
    older = job_phases({"setup": 20.0, "timed": 5.0}, built)
    assert (older["plan_build"], older["setup"], older["timed"]) == (12.0, 8.0, 5.0)
    assert job_phases({}) == dict.fromkeys(JOB_PHASES, 0.0)  # no phases at all (the oldest harnesses)
