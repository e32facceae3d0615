"""The code generator: rendered sources, manifest, safety of model text, and a real CMake build."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import networkx as nx
import pytest
from conftest import LIGHT, NVCC, SharedBuild, builds_and_runs_on_a_gpu, compiled_in_the_shared_build, listed_jobs

from benanza.apis import job_table
from benanza.apis.base import JobFields
from benanza.errors import BenanzaError
from benanza.generate import codegen
from benanza.generate.plan import Plan, plan
from benanza.library import Api, ConvFwdAlgo
from benanza.model.layer import Layer, Model, Tensor
from benanza.model.onnx_import import load_model
from benanza.records import Result

NASTY = 'conv "quoted" \\back\\slash\nnew line */ /* ??= `$(rm -rf /)`'


def conv_layer(name: str, x: tuple[int, ...], k: int, r: int, pads: list[int], stride: int = 1, dil: int = 1,
               group: int = 1, index: int = 0) -> Layer:
    n, c, h, w = x
    p = (h + pads[0] + pads[2] - dil * (r - 1) - 1) // stride + 1
    q = (w + pads[1] + pads[3] - dil * (r - 1) - 1) // stride + 1
    return Layer(name, "Conv", [Tensor(name + ":x", x, "float32"),
                                Tensor(name + ":w", (k, c // group, r, r), "float32", True)],
                 [Tensor(name + ":y", (n, k, p, q), "float32")],
                 {"group": group, "pads": pads, "strides": [stride, stride], "kernel_shape": [r, r],
                  "dilations": [dil, dil]}, index=index)


def handmade() -> Model:
    """Convs the zoo lacks: a hostile node name, asymmetric pads, dilation, groups, depthwise."""
    layers = [conv_layer(NASTY, (2, 16, 20, 20), 32, 3, [1, 1, 1, 1], index=0),
              conv_layer("nodeAsym", (2, 16, 20, 20), 32, 3, [0, 0, 1, 1], index=1),
              conv_layer("nodeDilated", (2, 16, 20, 20), 32, 3, [2, 2, 2, 2], dil=2, index=2),
              conv_layer("nodeGrouped", (2, 32, 14, 14), 64, 3, [1, 1, 1, 1], stride=2, group=4, index=3),
              conv_layer("nodeDepthwise", (1, 64, 28, 28), 64, 3, [1, 1, 1, 1], group=64, index=4)]
    return Model(NASTY, "hand/made.onnx", 2, layers, nx.DiGraph())


@compiled_in_the_shared_build("codegen")
def codegen_plan() -> Plan:
    """Every API (default) for two zoo models and the hand-made convs, fp32 and fp16."""
    models = [load_model(LIGHT / "light_squeezenet.onnx", batch=1), load_model(LIGHT / "light_resnet50.onnx", batch=1),
              handmade()]
    return plan(models, ["fp32", "fp16"])


@pytest.fixture(scope="module")
def zoo_plan() -> Plan:
    return codegen_plan()


@pytest.fixture(scope="module")
def project(zoo_plan: Plan, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, codegen.Manifest]:
    out = tmp_path_factory.mktemp("bench")
    return out, codegen.generate(zoo_plan, out, "benanza generate zoo --out bench\n// evil \\")


def test_project_layout_and_manifest(project: tuple[Path, codegen.Manifest], zoo_plan: Plan) -> None:
    out, _ = project
    for name in ("CMakeLists.txt", "benchmarks.cmake", "manifest.json", "src/bench_conv_fwd.cu",
                 "src/bench_conv_bias_act.cu", "csrc/benanza/bench.h", "csrc/benanza/kernels.cu"):
        assert (out / name).is_file(), name
    data = json.loads((out / "manifest.json").read_text())
    assert data["schema"] == 1 and data["generated_by"].startswith("benanza generate zoo")
    assert data["executables"]["bench_conv_fwd"]["api"] == Api.CONV_FWD.value
    counts = {exe: spec["num_jobs"] for exe, spec in data["executables"].items()}
    assert counts == {exe: len(jobs) for exe, jobs in zoo_plan.executables().items()}
    assert len(data["jobs"]) == len(zoo_plan.jobs)
    assert len(data["benchmarks"]) == sum(len([a for a in j["algorithms"] if a != "*"]) for j in data["jobs"])
    job = next(j for j in data["jobs"] if j["executable"] == "bench_conv_fwd")
    assert set(job) >= {"executable", "job", "layer_key", "api", "dtype", "math", "fusion", "layout", "shapes",
                        "algorithms"}
    assert job["algorithms"] == [a.value for a in ConvFwdAlgo]
    # each executable's job table (src/<exe>.jobs) has one line per job, in job order
    source = (out / "src" / "bench_conv_fwd.cu").read_text()
    # kPrecisions: {"dtype", "math", "layout", ...,\n CUDNN_TENSOR_<layout>, ...}, fp16 in NHWC and NCHW
    table = re.findall(r'\{"(\w+)", "\w+", "(\w+)", [^\n]*\n\s+CUDNN_TENSOR_(\w+),', source)
    assert all(layout == fmt for _, layout, fmt in table)
    index = [(dtype, layout) for dtype, layout, _ in table]
    assert {("fp16", "NHWC"), ("fp16", "NCHW"), ("fp32", "NCHW")} <= set(index)
    assert data["executables"]["bench_conv_fwd"]["table"] == "src/bench_conv_fwd.jobs"
    api, columns, rows = job_table.read((out / "src" / "bench_conv_fwd.jobs").read_text())
    assert api == Api.CONV_FWD.value and columns == ["key", "precision", "dims"]
    jobs = [j for j in data["jobs"] if j["executable"] == "bench_conv_fwd"]
    assert [(r[0], int(r[1])) for r in rows] == [(j["layer_key"], index.index((j["dtype"], j["layout"])))
                                                 for j in jobs]
    assert {m["name"] for m in data["models"]} == {"light_squeezenet", "light_resnet50", NASTY}
    assert len({layer["key"] for layer in data["layers"]}) == len(data["layers"])


def test_generated_files_hold_no_model_text(project: tuple[Path, codegen.Manifest]) -> None:
    out, _ = project
    for path in [*out.glob("src/*.cu"), *out.glob("src/*.jobs"), out / "benchmarks.cmake"]:
        text = path.read_text()
        assert text.startswith("// generated by benanza, do not edit: ") or text.startswith("# generated by benanza")
        first = text.splitlines()[0]
        assert "\\" not in first and "evil" in first  # the command stays on its comment line
        for fragment in (NASTY, "quoted", "back\\slash", "*/ /*", "rm -rf", "nodeAsym", "nodeDepthwise", "gpu_0/"):
            assert fragment not in text, (path, fragment)


def test_regenerating_writes_nothing(project: tuple[Path, codegen.Manifest], zoo_plan: Plan) -> None:
    out, first = project
    assert len(first.written) >= 10
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and "build" not in p.parts}
    again = codegen.generate(zoo_plan, out, "benanza generate zoo --out bench\n// evil \\")
    assert again.written == []
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_missing_table_field_raises(zoo_plan: Plan) -> None:
    job = zoo_plan.jobs[0]
    broken = replace(job, fields=JobFields({"not_dims": [1]}, {}, job.fields.algorithms, job.layout))
    with pytest.raises(BenanzaError, match="'dims': the job's row has no such field"):
        codegen.render_table([broken], "cmd")
    short = replace(job, fields=replace(job.fields, row={"dims": [1, 2, 3]}))
    with pytest.raises(BenanzaError, match="3 items, the column takes 18 to 18"):
        codegen.render_table([short], "cmd")


def test_model_text_reaches_the_table_encoded_never_the_source(zoo_plan: Plan) -> None:
    job = zoo_plan.jobs[0]
    evil = 'x"; system("id"); //\n{}\\'
    table = codegen.render_table([replace(job, key=evil)], "cmd")
    assert evil not in table and '"' not in table and "\\" not in table
    assert [row[0] for row in job_table.read(table)[2]] == [job_table.encode_text(evil)]
    assert job_table.decode_text(job_table.read(table)[2][0][0]) == evil
    # the source is the template's alone: jobs with other keys and shapes render the same text
    env = codegen.environment()
    assert codegen.render_source(env, job.api, "cmd") == codegen.render_source(env, Api.CONV_FWD, "cmd")
    with pytest.raises(BenanzaError, match="does not compile in"):
        codegen.render_table([replace(job, fields=replace(job.fields, algorithms=("CUDNN_EVIL",)))], "cmd")


def test_c_helpers() -> None:
    assert codegen.c_comment("a\nb\\c\u00e9*/") == "a?b?c?*/"
    assert codegen.c_number(float("inf")) == "HUGE_VAL" and codegen.c_number(2) == "2"
    assert codegen.c_number(0.5) == "0.5"
    with pytest.raises(ValueError):
        codegen.c_number(float("nan"))




@pytest.mark.compile
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_project_builds_against_real_cudnn_and_cublas(shared_build: SharedBuild) -> None:
    build, manifest = shared_build.build, shared_build.manifest
    for exe in sorted(shared_build.executables["codegen"]):
        spec = manifest.executables[exe]
        binary = build / exe
        assert binary.is_file()
        lines, jobs = listed_jobs(build, exe, manifest.jobs)
        assert [d["job"] for d in lines] == list(range(spec["num_jobs"]))
        assert [d["layer_key"] for d in lines] == [j["layer_key"] for j in jobs]
        assert [d["dtype"] for d in lines] == [j["dtype"] for j in jobs]
        bad = subprocess.run([str(binary), "--jobs", str(spec["num_jobs"])], capture_output=True, text=True)
        assert bad.returncode == 2 and "usage" in bad.stderr
        cold_w = subprocess.run([str(binary), "--list", "--l2", "cold-weights"], capture_output=True, text=True)
        assert cold_w.returncode == 0 and len(cold_w.stdout.splitlines()) == spec["num_jobs"]
        bad = subprocess.run([str(binary), "--list", "--l2", "tepid"], capture_output=True, text=True)
        assert bad.returncode == 2 and "--l2 warm|cold|cold-weights" in bad.stderr
        for clash in (["--jobs", "0"], ["--list"]):  # --serve takes its job lists from stdin
            bad = subprocess.run([str(binary), "--serve", *clash], capture_output=True, text=True)
            assert bad.returncode == 2 and "[--serve]" in bad.stderr


@builds_and_runs_on_a_gpu
def test_benchmarks_run_on_a_gpu(project: tuple[Path, codegen.Manifest],
                                 cmake_build: Callable[[Path], Path]) -> None:
    out, manifest = project
    build = out / "build" if (out / "build" / "bench_conv_fwd").exists() else cmake_build(out)
    names = {layer.key: layer.name for layer in handmade().layers}
    hand = [j for j in manifest.jobs if j["executable"] == "bench_conv_fwd" and j["layer_key"] in names]
    run = subprocess.run([str(build / "bench_conv_fwd"), "--jobs", ",".join(str(j["job"]) for j in hand),
                          "--max-ms", "100"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[0]["event"] == "system" and lines[0]["sm_count"] > 0
    results = [Result.from_dict(d) for d in lines if d["event"] == "result"]
    assert len(results) == len(ConvFwdAlgo) * len(hand)
    for r in results:
        name = names[r.layer_key]
        assert r.dtype in {j["dtype"] for j in hand if j["layer_key"] == r.layer_key}
        if name == "nodeAsym":
            assert r.status == "not_supported" and "asymmetric" in r.message
        elif r.status == "ok":
            assert r.median_ms > 0 and r.max_rel_error <= r.tolerance and r.timing in ("graph", "stream")
    for key, name in names.items():
        if name != "nodeAsym":
            assert any(r.ok for r in results if r.layer_key == key), name


@builds_and_runs_on_a_gpu
def test_a_serving_benchmark_runs_its_job_lists_as_one_jobs_run(project: tuple[Path, codegen.Manifest],
                                                                cmake_build: Callable[[Path], Path]) -> None:
    """--serve (a cluster worker's process kept between shards): one system line, a "ready" after each
    list, and the rows a --jobs run of the same jobs gives."""
    out, manifest = project
    build = out / "build" if (out / "build" / "bench_conv_fwd").exists() else cmake_build(out)
    names = {layer.key for layer in handmade().layers}
    ids = [j["job"] for j in manifest.jobs if j["executable"] == "bench_conv_fwd" and j["layer_key"] in names]
    lists = [ids[:2], ids[2:]]
    binary = str(build / "bench_conv_fwd")
    served = subprocess.run([binary, "--serve", "--max-ms", "50"], capture_output=True, text=True, timeout=600,
                            input="".join(",".join(map(str, jobs)) + "\n" for jobs in lists))
    direct = subprocess.run([binary, "--jobs", ",".join(map(str, ids)), "--max-ms", "50"], capture_output=True,
                            text=True, timeout=600)
    assert served.returncode == 0 and direct.returncode == 0, served.stderr + direct.stderr
    lines = [json.loads(line) for line in served.stdout.splitlines()]
    events = [d["event"] for d in lines]
    assert events[0] == "system" and events.count("system") == 1 and events.count("ready") == 2
    first_ready = events.index("ready")
    assert [d["job"] for d in lines[:first_ready] if d["event"] == "start"] == lists[0]
    assert [d["job"] for d in lines[first_ready:] if d["event"] == "start"] == lists[1]

    def rows(text: str) -> set[tuple[str, str, str]]:
        return {(d["layer_key"], d["algorithm"], d["status"]) for d in map(json.loads, text.splitlines())
                if d["event"] == "result"}

    assert rows(served.stdout) == rows(direct.stdout)


def test_cli_generate(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from benanza.cli import main

    runner = CliRunner()
    out = tmp_path / "proj"
    done = runner.invoke(main, ["generate", str(LIGHT / "light_squeezenet.onnx"), "--out", str(out), "--batch", "1,2",
                                "--dtype", "fp32,fp16", "--api", "conv_fwd"])
    assert done.exit_code == 0, done.output
    data = json.loads((out / "manifest.json").read_text())
    assert list(data["executables"]) == ["bench_conv_fwd"]
    squeeze = load_model(LIGHT / "light_squeezenet.onnx", batch=1)
    convs = len({layer.key for layer in squeeze.layers if layer.op == "Conv"})
    # two batches; fp32 and fp16, each in NCHW and NHWC
    assert data["executables"]["bench_conv_fwd"]["num_jobs"] == 2 * 2 * 2 * convs
    assert data["generated_by"].startswith("benanza generate ") and "--api conv_fwd" in data["generated_by"]
    assert "bench_conv_fwd" in done.output and "not generated" in done.output
    bad = runner.invoke(main, ["generate", str(LIGHT / "light_squeezenet.onnx"), "--out", str(out), "--dtype", "fp8"])
    assert bad.exit_code == 1 and "--dtype: unknown fp8" in bad.output
    bad = runner.invoke(main, ["generate", str(LIGHT / "light_squeezenet.onnx"), "--out", str(out), "--api", "nope"])
    assert bad.exit_code == 1 and "--api: unknown nope" in bad.output
    assert "MODEL" in runner.invoke(main, ["generate", "--help"]).output


def test_cli_generate_skips_what_the_database_holds(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from benanza.cli import main
    from benanza.store import db as perfdb

    model = LIGHT / "light_squeezenet.onnx"
    full = plan([load_model(model, batch=1)], ["fp32"], apis=[Api.CONV_FWD])
    database = perfdb.open_db(tmp_path / "perf.db")
    system = perfdb.upsert_system(database, {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0",
                                             "cuda_driver": "13.0", "cuda_runtime": "13.0",
                                             "cudnn_version": "9.19.0", "cublas_version": "13.1.0"})
    first = full.jobs[0]
    perfdb.insert_results(database, system, [
        Result(b.layer_key, b.api, b.algorithm, b.dtype, b.math, b.fusion, "ok", layout=b.layout, median_ms=0.01)
        for b in first.benchmarks()])
    out = tmp_path / "proj"
    done = CliRunner().invoke(main, ["generate", str(model), "--out", str(out), "--api", "conv_fwd",
                                     "--db", str(tmp_path / "perf.db")])
    assert done.exit_code == 0, done.output
    data = json.loads((out / "manifest.json").read_text())
    assert data["executables"]["bench_conv_fwd"]["num_jobs"] == len(full.jobs) - 1
    assert (first.key, first.layout) not in {(j["layer_key"], j["layout"]) for j in data["jobs"]}
    assert "already in the database" in done.output
    # everything measured: a second run of the campaign has nothing to do, and that is success
    perfdb.insert_results(database, system, [
        Result(b.layer_key, b.api, b.algorithm, b.dtype, b.math, b.fusion, "ok", layout=b.layout, median_ms=0.01)
        for job in full.jobs[1:] for b in job.benchmarks()])
    again = CliRunner().invoke(main, ["generate", str(model), "--out", str(tmp_path / "proj2"), "--api", "conv_fwd",
                                      "--db", str(tmp_path / "perf.db")])
    assert again.exit_code == 0, again.output
    assert f"already holds all {len(full.jobs)} job(s)" in again.output.replace("\n", "")
    assert not (tmp_path / "proj2" / "manifest.json").exists()
