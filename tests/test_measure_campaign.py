"""benanza.measure.campaign (bench/campaign.py --sample): the sampled project keeps every N-th job of
each executable (so the estimate spreads over models, batches and precisions) and the rest of the
manifest as it is."""

from __future__ import annotations

import json
from pathlib import Path

from benanza.measure.campaign import sampled_project, scaled_wall


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
