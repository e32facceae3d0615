"""cuDNN graph-API benchmarks (cudnn-frontend): builders, engine-config names, and a real build.

The name a graph-API benchmark prints must be the one the cuDNN log reader gives the same
engine config (``engine_config_name``), so the C++ naming code is compiled and fed the
knob sets of real H100 logs and random ones, against the knob enum read from the real
cuDNN 9.19 header.  The generated sources for all nine zoo models are built against the
real cuDNN, cuBLAS and cudnn-frontend headers; the GPU test runs them.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import networkx as nx
import onnx
import pytest
from conftest import LIGHT, NVCC, SharedBuild, builds_and_runs_on_a_gpu, compiled_in_the_shared_build, listed_jobs

from benanza import paths
from benanza.apis import job_table
from benanza.apis.base import Unsupported
from benanza.apis.engine_config import engine_config_name, parse_engine_config_name
from benanza.apis.graph import GRAPH_POINTWISE, graph_conv_job, graph_matmul_job
from benanza.generate import codegen
from benanza.generate.plan import Plan, plan, plan_executed
from benanza.library import Activation, Api, Fusion, Precision
from benanza.model.graph import build_graph, find_fusions
from benanza.model.layer import FusionCandidate, Layer, Model, Tensor
from benanza.model.onnx_import import load_model
from benanza.profile.cudnn_log import read_cudnn_log
from benanza.records import ExecutedCall, Result

SAMPLES = Path(__file__).parent / "data" / "samples"
SITE = Path(onnx.__file__).parent.parent
CUDNN_INCLUDE = SITE / "nvidia" / "cudnn" / "include"
CUDA_INCLUDE = Path("/usr/local/cuda/include")
CXX = shutil.which("g++") or shutil.which("c++")
NAMES_H = paths.csrc_dir() / "benanza" / "cudnn_graph_names.h"


# ---------------------------------------------------------------- the cuDNN header's enums


def header_enum(name: str, prefix: str) -> dict[int, str]:
    """value -> spelling without ``prefix`` of one typedef enum in the real cudnn_graph.h."""
    text = (CUDNN_INCLUDE / "cudnn_graph.h").read_text()
    body = re.search(r"typedef enum \{([^}]*)\}\s*" + name + ";", text)
    assert body, name
    out = {}
    for spelling, value in re.findall(rf"{prefix}(\w+)(?:\s+CUDNN_DEPRECATED_ENUM)?\s*=\s*(\d+)", body.group(1)):
        out[int(value)] = spelling
    return out


def cpp_table(name: str) -> list[str]:
    """The strings of one ``kXxx[] = {...}`` table in cudnn_graph_names.h, in order."""
    body = re.search(name + r"\[\] = \{(.*?)\};", NAMES_H.read_text(), re.S)
    assert body, name
    return re.findall(r'"([^"]*)"', re.sub(r"//[^\n]*", "", body.group(1)))


needs_cudnn = pytest.mark.skipif(not (CUDNN_INCLUDE / "cudnn_graph.h").is_file(), reason="needs the cuDNN headers")


@needs_cudnn
def test_knob_table_is_the_cudnn_enum_in_order() -> None:
    enum = header_enum("cudnnBackendKnobType_t", "CUDNN_KNOB_TYPE_")
    count = next(v for v, s in enum.items() if s == "COUNTS")
    del enum[count]
    assert sorted(enum) == list(range(count))  # dense: index = value
    assert cpp_table("kKnobNames") == [enum[v] for v in range(count)]
    assert enum[22] == "LDGC" and enum[2] == "TILE_SIZE"  # a deprecated one the H100 still reports


@needs_cudnn
@pytest.mark.parametrize(("table", "enum", "prefix"), [
    ("kNumericalNoteNames", "cudnnBackendNumericalNote_t", "CUDNN_NUMERICAL_NOTE_"),
    ("kBehaviorNoteNames", "cudnnBackendBehaviorNote_t", "CUDNN_BEHAVIOR_NOTE_"),
])
def test_note_tables_are_the_cudnn_enums(table: str, enum: str, prefix: str) -> None:
    values = header_enum(enum, prefix)
    count = next(v for v, s in values.items() if s == "TYPE_COUNT")
    assert cpp_table(table) == [values[v] for v in range(count)]


# ---------------------------------------------------------------- engine-config names, C++ vs Python

NAMES_MAIN = r"""
#include <cstdio>
#include "benanza/cudnn_graph_names.h"
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) std::printf("%s\n", bz::canonical_engine_name(argv[i]).c_str());
  return 0;
}
"""


@pytest.fixture(scope="module")
def names_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    headers = (CUDNN_INCLUDE / "cudnn_graph.h", CUDA_INCLUDE / "cuda_runtime_api.h")
    if CXX is None or not all(h.is_file() for h in headers):
        pytest.skip("needs a C++ compiler and the cuDNN / CUDA headers")
    out = tmp_path_factory.mktemp("names")
    (out / "main.cpp").write_text(NAMES_MAIN)
    (out / "benanza").mkdir()
    (out / "benanza" / codegen.NAME_PARTS_H).write_text(codegen.name_parts_header())  # codegen writes it too
    done = subprocess.run([CXX, "-std=c++17", "-Wall", "-Werror", f"-I{paths.csrc_dir()}", f"-I{out}",
                           f"-I{CUDNN_INCLUDE}", f"-I{CUDA_INCLUDE}", str(out / "main.cpp"), "-o", str(out / "names")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out / "names"


def cpp_names(tool: Path, tags: list[str]) -> list[str]:
    done = subprocess.run([str(tool), *tags], capture_output=True, text=True, check=True)
    return done.stdout.split("\n")[:len(tags)]


def frontend_tag(engine_id: int, knobs: dict[str, int], values: dict[str, int]) -> str:
    """The plan name cudnn-frontend prints (get_engine_tag): knobs by numeric type, sorted by type."""
    typed = sorted((values[k.removeprefix("CUDNN_KNOB_TYPE_")], v) for k, v in knobs.items())
    return f"eng{engine_id}" + "".join(f"_k{t}={v}" for t, v in typed)


@needs_cudnn
@pytest.mark.parametrize("log", ["torch2.11_conv3x3_cudnn_api.log.gz", "ort1.31_zfnet512_cudnn_api.log.gz"])
def test_names_of_configs_seen_in_real_h100_logs(names_tool: Path, log: str) -> None:
    values = {s: v for v, s in header_enum("cudnnBackendKnobType_t", "CUDNN_KNOB_TYPE_").items()}
    parsed = read_cudnn_log(SAMPLES / log)
    executes = parsed.executes(include_heuristic_probes=True)
    assert executes
    tags = [frontend_tag(c.engine_id, c.knobs, values) for c in executes]
    assert cpp_names(names_tool, tags) == [c.engine_config for c in executes]
    if log.startswith("torch"):
        first = "eng38_kIDX_MODE=0_kLDGC=0_kSPECFILT=0_kSTAGES=4_kTILEK=1_kTILE_SIZE=8"  # PyTorch's 3x3 conv
        assert cpp_names(names_tool, [tags[0]]) == [first]
    # every config a heuristic query handed out names the same both ways
    heuristic = [name for q in parsed.heuristics for name in q.engine_configs]
    tags = [frontend_tag(i, {f"CUDNN_KNOB_TYPE_{k}": v for k, v in knobs.items()}, values)
            for i, knobs in map(parse_engine_config_name, heuristic)]
    assert cpp_names(names_tool, tags) == heuristic


@needs_cudnn
def test_random_knob_sets_name_alike(names_tool: Path) -> None:
    enum = header_enum("cudnnBackendKnobType_t", "CUDNN_KNOB_TYPE_")
    enum.pop(max(enum))  # COUNTS
    rng = random.Random(4)
    tags, expected = [], []
    for _ in range(300):
        engine = rng.randrange(0, 200)
        types = rng.sample(sorted(enum), rng.randrange(0, 9))
        knobs = {t: rng.choice([-1, 0, 1, 2, 8, 64, 1 << 40]) for t in types}
        tags.append(f"eng{engine}" + "".join(f"_k{t}={v}" for t, v in sorted(knobs.items())))
        expected.append(engine_config_name(engine, {enum[t]: v for t, v in knobs.items()}))
    assert cpp_names(names_tool, tags) == expected
    # a knob type newer than the table gets a name the log reader still parses
    (name,) = cpp_names(names_tool, ["eng3_k99=5_k2=1"])
    assert name == "eng3_kKNOB99=5_kTILE_SIZE=1"
    assert parse_engine_config_name(name) == (3, {"KNOB99": 5, "TILE_SIZE": 1})
    # what the frontend prints for a config it cannot read is not a name
    assert cpp_names(names_tool, ["INVALID_ENGINE_NAME_IDX", "eng", "eng3_k2", "eng3_kx=1", "eng3_k2=1x"]) == [""] * 5


# ---------------------------------------------------------------- builders


def zoo(name: str, batch: int = 1) -> Model:
    return load_model(LIGHT / f"light_{name}.onnx", batch=batch)


@functools.cache
def zoo_at_batch_1() -> list[Model]:
    return [load_model(p, batch=1) for p in sorted(LIGHT.glob("light_*.onnx"))]


@pytest.fixture(scope="module")
def zoo_models() -> list[Model]:
    return zoo_at_batch_1()


def test_plain_conv_job_keeps_pads_apart() -> None:
    model = zoo("resnet50")
    conv = next(layer for layer in model.layers if layer.op == "Conv")
    job = graph_conv_job(conv, model, Precision.FP16)
    row = job.row
    assert row["dims"][:7] == [1, 3, 224, 224, 64, 7, 7] and row["dims"][7:11] == [3, 3, 3, 3]
    assert (row["bias"], row["alpha2"], row["has_act"]) == (False, 0.0, False)
    assert job.algorithms == ("*",) and job.layout == "NHWC" and job.shapes["graph"] == ["conv_fprop"]
    assert graph_conv_job(conv, model, Precision.FP32).layout == "NCHW"
    asym = Layer("asym", "Conv", [Tensor("x", (1, 8, 9, 9), "float32"), Tensor("w", (4, 8, 3, 3), "float32", True)],
                 [Tensor("y", (1, 4, 8, 8), "float32")],
                 {"pads": [0, 0, 1, 1], "strides": [1, 1], "dilations": [1, 1], "kernel_shape": [3, 3]})
    assert graph_conv_job(asym, model, Precision.FP32).row["dims"][7:11] == [0, 0, 1, 1]  # not dropped


def test_conv_fusion_jobs_of_resnet50() -> None:
    model = zoo("resnet50")
    by_pattern = {f.pattern: f for f in model.fusions}
    res = graph_conv_job(by_pattern[Fusion.CONV_BIAS_ADD_ACT.value], model, Precision.FP32)
    assert (res.row["bias"], res.row["alpha2"], res.row["has_act"], res.row["pointwise"]) == (True, 1.0, True,
                                                                                               "RELU_FWD")
    assert res.shapes["graph"] == ["conv_fprop", "add_bias", "add_z", "relu_fwd"]
    bn = graph_conv_job(by_pattern[Fusion.CONV_BN.value], model, Precision.FP32)
    assert (bn.row["bias"], bn.row["alpha2"], bn.row["has_act"]) == (True, 0.0, False)
    assert bn.shapes["graph"] == ["conv_fprop", "add_bias"]
    with pytest.raises(Unsupported):
        graph_conv_job(next(layer for layer in model.layers if layer.op == "Relu"), model, Precision.FP32)


def chain(act_op: str, attrs: dict) -> tuple[Model, FusionCandidate]:
    """conv -> Add(bias) -> act_op, a small real model for activations the zoo lacks."""
    x = Tensor("x", (1, 8, 16, 16), "float32")
    conv = Layer("conv", "Conv", [x, Tensor("w", (16, 8, 3, 3), "float32", True)],
                 [Tensor("c", (1, 16, 16, 16), "float32")],
                 {"pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1], "kernel_shape": [3, 3]}, index=0)
    add = Layer("add", "Add", [conv.outputs[0], Tensor("b", (16, 1, 1), "float32", True)],
                [Tensor("s", (1, 16, 16, 16), "float32")], {}, index=1)
    act = Layer("act", act_op, [add.outputs[0]], [Tensor("y", (1, 16, 16, 16), "float32")], attrs, index=2)
    layers = [conv, add, act]
    fusions = find_fusions(layers, {"y"})
    model = Model("chain", "chain.onnx", 1, layers, build_graph(layers), fusions)
    assert len(fusions) == 1 and fusions[0].pattern == Fusion.CONV_BIAS_ACT.value
    return model, fusions[0]


def test_activations_map_to_pointwise_modes() -> None:
    model, f = chain("Clip", {"min": 0.0, "max": 6.0})
    row = graph_conv_job(f, model, Precision.FP16).row
    assert (row["pointwise"], row["act"], row["upper_clip"], row["coef"]) == ("RELU_FWD",
                                                                              Activation.CLIPPED_RELU.value, 6.0, 6.0)
    model, f = chain("Sigmoid", {})
    row = graph_conv_job(f, model, Precision.FP16).row
    assert (row["pointwise"], row["upper_clip"]) == ("SIGMOID_FWD", math.inf)
    model, f = chain("Clip", {"min": -1.0, "max": 1.0})
    with pytest.raises(Unsupported, match="min"):
        graph_conv_job(f, model, Precision.FP16)
    assert set(GRAPH_POINTWISE) == set(Activation)


def test_matmul_jobs() -> None:
    model = zoo("vgg19")
    gemm = next(layer for layer in model.layers if layer.op == "Gemm")
    job = graph_matmul_job(gemm, model, Precision.TF32)
    # VGG-19's first FC: Y[1, 4096] = X[1, 25088] W^T + C, W stored 4096 x 25088
    assert job.row["dims"][:10] == [1, 1, 4096, 25088, 0, 1, 0, 0, 1, 4096]
    assert (job.row["alpha"], job.row["beta"], job.row["bias"], job.row["relu"]) == (1.0, 1.0, False, False)
    assert job.shapes["graph"] == ["matmul", "add_c"] and job.layout == ""
    fused = next(f for f in model.fusions if f.pattern == Fusion.GEMM_BIAS_ACT.value)
    row = graph_matmul_job(fused, model, Precision.FP16).row
    assert row["relu"] and row["dims"][8:10] == [1, 4096]
    tanh = FusionCandidate(fused.pattern, fused.layers, fused.layer_keys, Activation.TANH.value)
    with pytest.raises(Unsupported, match="ReLU only"):
        graph_matmul_job(tanh, model, Precision.FP16)


def test_zoo_plan_covers_every_conv_gemm_and_fusion(zoo_models: list[Model]) -> None:
    precisions = [Precision.FP32, Precision.TF32, Precision.FP16]
    p = plan(zoo_models, precisions, apis=[Api.GRAPH_CONV, Api.GRAPH_MATMUL])
    got = {(j.key, j.api, j.precision) for j in p.jobs}
    convs = {layer.key for m in zoo_models for layer in m.layers if layer.op == "Conv"}
    gemms = {layer.key for m in zoo_models for layer in m.layers if layer.op in ("Gemm", "MatMul")}
    conv_fusions = {f.key for m in zoo_models for f in m.fusions if f.pattern.startswith("conv")}
    gemm_fusions = {f.key for m in zoo_models for f in m.fusions if f.pattern.startswith("gemm")}
    for prec in precisions:
        assert {(k, Api.GRAPH_CONV, prec) for k in convs | conv_fusions} <= got
        assert {(k, Api.GRAPH_MATMUL, prec) for k in gemms | gemm_fusions} <= got
    assert not [d for d in p.dropped if d.reason != "API not requested"]
    assert {j.executable for j in p.jobs} == {"bench_graph_conv", "bench_graph_matmul"}
    assert all(j.fields.algorithms == ("*",) and j.math for j in p.jobs)


# ---------------------------------------------------------------- generated sources: build and list


def handmade() -> Model:
    """Convs and chains the zoo lacks: asymmetric pads, dilation, groups, depthwise, clip and sigmoid."""
    def conv(name: str, x: tuple, k: int, r: int, pads: list[int], dil: int = 1, group: int = 1, i: int = 0) -> Layer:
        n, c, h, w = x
        p = (h + pads[0] + pads[2] - dil * (r - 1) - 1) + 1
        q = (w + pads[1] + pads[3] - dil * (r - 1) - 1) + 1
        return Layer(name, "Conv", [Tensor(name + "x", x, "float32"),
                                    Tensor(name + "w", (k, c // group, r, r), "float32", True)],
                     [Tensor(name + "y", (n, k, p, q), "float32")],
                     {"group": group, "pads": pads, "strides": [1, 1], "kernel_shape": [r, r],
                      "dilations": [dil, dil]}, index=i)
    layers = [conv('bad"name\n', (2, 16, 20, 20), 32, 3, [0, 0, 1, 1], i=0),
              conv("dil", (2, 16, 20, 20), 32, 3, [2, 2, 2, 2], dil=2, i=1),
              conv("grp", (2, 32, 14, 14), 64, 3, [1, 1, 1, 1], group=4, i=2),
              conv("dw", (1, 64, 28, 28), 64, 3, [1, 1, 1, 1], group=64, i=3)]
    return Model("hand", "hand.onnx", 2, layers, nx.DiGraph())


# Engine configs a job names (generate --from-profile): a general engine, one with a knob type
# cudnn-frontend no longer names (USE_TEX, so built from backend descriptors), one that does not exist.
NAMED = ("eng0", "eng28_kTILE_SIZE=4_kUSE_TEX=0", "eng9999")


@compiled_in_the_shared_build("graph")
def graph_project_plan() -> Plan:
    """Both graph APIs for the zoo, the hand-made convs and chains in three precisions, plus named engine configs."""
    zoo_models = zoo_at_batch_1()
    models = [*zoo_models, handmade(), chain("Clip", {"min": 0.0, "max": 6.0})[0], chain("Sigmoid", {})[0]]
    p = plan(models, [Precision.FP32, Precision.TF32, Precision.FP16], apis=[Api.GRAPH_CONV, Api.GRAPH_MATMUL])
    conv = next(layer for layer in zoo_models[0].layers if layer.op == "Conv")
    named = plan_executed([(zoo_models[0], conv.key, ExecutedCall(Api.GRAPH_CONV.value, n, "fp32")) for n in NAMED])
    count = Counter(j.executable for j in p.jobs)  # appended after the enumerated jobs of the same executables
    jobs = [*p.jobs, *(replace(j, index=count[j.executable] + j.index) for j in named.jobs)]
    return Plan(jobs, p.dropped, models)


@pytest.fixture(scope="module")
def graph_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, codegen.Manifest]:
    out = tmp_path_factory.mktemp("graph")
    return out, codegen.generate(graph_project_plan(), out, "benanza generate zoo --api graph")


def test_generated_sources_hold_no_model_text(graph_project: tuple[Path, codegen.Manifest]) -> None:
    out, manifest = graph_project
    assert set(manifest.executables) == {"bench_graph_conv", "bench_graph_matmul"}
    for exe in manifest.executables:
        assert 'bad"name' not in (out / "src" / f"{exe}.cu").read_text()
        assert 'bad"name' not in (out / "src" / f"{exe}.jobs").read_text()
    conv = (out / "src" / "bench_graph_conv.cu").read_text()
    for mode in ("RELU_FWD", "SIGMOID_FWD", "IDENTITY"):  # the vocabulary the table's names map to
        assert f"fe::PointwiseMode_t::{mode}," in conv or f"fe::PointwiseMode_t::{mode} }}" in conv
    _, columns, rows = job_table.read((out / "src" / "bench_graph_conv.jobs").read_text())
    cells = [dict(zip(columns, row, strict=True)) for row in rows]
    assert {c["pointwise"] for c in cells} >= {"RELU_FWD", "SIGMOID_FWD", "IDENTITY"}
    # Clip(0, 6): coef and upper clip 6; elsewhere no upper clip (inf)
    assert any((c["coef"], c["upper_clip"], c["elu_alpha"]) == ("6.0", "6.0", "1.0") for c in cells)
    assert any(c["upper_clip"] == "inf" for c in cells)
    assert (out / "csrc" / "benanza" / "cudnn_graph.h").is_file() and (out / "csrc" / "benanza" /
                                                                        "cudnn_graph_names.h").is_file()




@pytest.mark.compile
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_graph_benchmarks_build_and_list(shared_build: SharedBuild) -> None:
    build, manifest = shared_build.build, shared_build.manifest
    assert shared_build.executables["graph"] == {"bench_graph_conv", "bench_graph_matmul"}
    assert [j for j in manifest.jobs if j["algorithms"] != ["*"]]  # the named engine configs are built too
    for exe in sorted(shared_build.executables["graph"]):
        spec = manifest.executables[exe]
        lines, jobs = listed_jobs(build, exe, manifest.jobs)
        assert [d["job"] for d in lines] == list(range(spec["num_jobs"]))
        assert [(d["layer_key"], d["dtype"], d["fusion"]) for d in lines] == \
            [(j["layer_key"], j["dtype"], j["fusion"]) for j in jobs]
        bad = subprocess.run([str(build / exe), "--max-engines", "x"], capture_output=True, text=True)
        assert bad.returncode == 2 and "--max-engines" in bad.stderr
    conv = [json.loads(line) for line in subprocess.run([str(build / "bench_graph_conv"), "--list"],
                                                        capture_output=True, text=True).stdout.splitlines()]
    asym = [d for d in conv if d["dims"]["pad_top"] != d["dims"]["pad_bottom"]]
    assert asym and all(d["dims"]["pad_bottom"] == 1 and d["dims"]["pad_top"] == 0 for d in asym)


@builds_and_runs_on_a_gpu
def test_graph_benchmarks_run_on_a_gpu(graph_project: tuple[Path, codegen.Manifest],
                                       cmake_build: Callable[[Path], Path]) -> None:
    out, manifest = graph_project
    build = out / "build" if (out / "build" / "bench_graph_conv").exists() else cmake_build(out)
    for exe in manifest.executables:
        jobs = [j for j in manifest.jobs if j["executable"] == exe and j["algorithms"] == ["*"]]
        picked = {(j["dtype"], j["fusion"]): j["job"] for j in jobs}  # one job per precision and pattern
        run = subprocess.run([str(build / exe), "--jobs", ",".join(str(i) for i in sorted(picked.values())),
                              "--max-engines", "6", "--max-ms", "50"], capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        assert lines[0]["event"] == "system"
        assert sum(d["event"] == "end" for d in lines) == len(picked)
        results = [Result.from_dict(d) for d in lines if d["event"] == "result"]
        assert any(r.ok for r in results), [r.message for r in results][:10]
        for r in results:
            if r.algorithm == "heuristic":
                continue
            engine, knobs = parse_engine_config_name(r.algorithm)
            assert r.notes["engine_id"] == engine and r.notes["knobs"] == knobs
            if r.ok:
                assert r.median_ms > 0 and r.max_rel_error <= r.tolerance and r.workspace_bytes is not None
                assert r.notes["build_ms"] >= 0 and r.notes["heuristics"]
            tc = "TENSOR_CORE" in r.notes.get("numerical_notes", [])
            if r.dtype == "fp32" and tc:
                assert r.status == "not_supported" and "tf32" in r.message
            if r.notes["heuristics"].get("A") is not None:
                assert r.heuristic_rank == r.notes["heuristics"]["A"]


@builds_and_runs_on_a_gpu
def test_runtime_compiled_plans_are_kept_and_the_next_process_loads_them(
        graph_project: tuple[Path, codegen.Manifest], cmake_build: Callable[[Path], Path], tmp_path: Path) -> None:
    """The plan cache (csrc/benanza/plan_store.h, cudnn_graph.h PlanCache): a process keeps the plans
    of runtime-compiled engines it built; the next process, on the same jobs, loads them instead of
    compiling (each such result says which), with the same configs, statuses and checks; with the
    cache turned off nothing is kept or loaded. Prints the build and median times of both runs."""
    out, manifest = graph_project
    build = out / "build" if (out / "build" / "bench_graph_conv").exists() else cmake_build(out)
    jobs = [j for j in manifest.jobs if j["executable"] == "bench_graph_conv" and j["algorithms"] == ["*"]
            and j["dtype"] == "fp16"]
    picked = sorted({j["fusion"]: j["job"] for j in jobs}.values())  # one fp16 job per fusion pattern

    def results(cache: str) -> dict[tuple[int, str], Result]:
        env = {**os.environ, "BENANZA_PLAN_CACHE_DIR": cache}
        run = subprocess.run([str(build / "bench_graph_conv"), "--jobs", ",".join(map(str, picked)), "--max-ms", "20"],
                             capture_output=True, text=True, timeout=900, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        return {(d["job"], d["algorithm"]): Result.from_dict(d) for d in lines if d["event"] == "result"}

    store = tmp_path / "plans"
    first, second, off = results(str(store)), results(str(store)), results("off")
    kept = {k for k, r in first.items() if r.notes.get("plan_cache") == "kept"}
    assert kept, "no runtime-compiled engine among the fp16 jobs' configs"
    assert all("RUNTIME_COMPILATION" in first[k].notes["behavior_notes"] for k in kept)
    assert len(list(store.rglob("*.plan"))) == len(kept)
    assert {k for k, r in second.items() if r.notes.get("plan_cache") == "hit"} == kept
    assert not any("plan_cache" in r.notes for r in off.values())
    assert set(first) == set(second) == set(off)
    for k in first:
        assert first[k].status == second[k].status == off[k].status, (k, first[k].message, second[k].message)
    for k in kept:
        assert second[k].ok and second[k].max_rel_error <= second[k].tolerance, second[k].message
    built, loaded = (sum(run[k].notes["build_ms"] for k in kept) for run in (first, second))
    ratio = sorted(second[k].median_ms / first[k].median_ms for k in kept if first[k].ok)
    print(f"{len(kept)} runtime-compiled plans: built in {built:.0f} ms, loaded in {loaded:.0f} ms; "
          f"median loaded/built {ratio[len(ratio) // 2]:.3f} (range {ratio[0]:.3f}-{ratio[-1]:.3f})")


@builds_and_runs_on_a_gpu
def test_named_engine_configs_run_on_a_gpu(graph_project: tuple[Path, codegen.Manifest],
                                           cmake_build: Callable[[Path], Path]) -> None:
    out, manifest = graph_project
    build = out / "build" if (out / "build" / "bench_graph_conv").exists() else cmake_build(out)
    job = next(j for j in manifest.jobs if j["algorithms"] != ["*"])
    assert sorted(job["algorithms"]) == sorted(NAMED)
    run = subprocess.run([str(build / job["executable"]), "--jobs", str(job["job"]), "--max-engines", "1",
                          "--max-ms", "50"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = {r.algorithm: r for r in (Result.from_dict(json.loads(line)) for line in run.stdout.splitlines()
                                        if json.loads(line)["event"] == "result")}
    assert sorted(results) == sorted(NAMED)  # every named config, --max-engines notwithstanding
    for name in NAMED[:2]:
        r = results[name]
        assert r.ok, r.message
        assert r.notes["named"] and r.heuristic_rank is None and r.max_rel_error <= r.tolerance
        assert (r.notes["engine_id"], r.notes["knobs"]) == parse_engine_config_name(name)
    assert results["eng9999"].status in ("not_supported", "failed") and results["eng9999"].message
