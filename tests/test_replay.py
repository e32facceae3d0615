"""``benanza replay`` (issue 37, docs/REPLAY.md): the plan is the headline bound's execution, call for
call, against the shipped H100 database; the generator refuses what it cannot run in one line naming
the layer and the API; no model text reaches the C++; the program builds against the real headers
(``compile``, in the shared project) and, on a GPU, runs ResNet-50 with every step checked."""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
import subprocess
from collections import Counter
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GPU, LIGHT, NVCC, SharedBuild, program_in_the_shared_build

from benanza.analyze import replay as ana
from benanza.apis import REGISTRY, job_table
from benanza.cli.main import main
from benanza.errors import BenanzaError
from benanza.generate import replay as gen
from benanza.library import Api, Precision
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model
from benanza.workflows.replay import plan_model

FP16 = (Precision.FP16,)


def light(stem: str) -> Path:
    return LIGHT / f"light_{'bvlc_alexnet' if stem == 'alexnet' else stem}.onnx"


@functools.cache
def plan(stem: str = "resnet50", batch: int = 64, precisions: tuple[Precision, ...] = FP16) -> gen.ReplayPlan:
    """One plan per argument set and test session (the shipped data are read-only)."""
    return plan_model(light(stem), shipped_db(), batch, precisions)


def test_the_plan_is_the_headline_execution() -> None:
    """Same bound as ``benanza analyze``; every layer computed by exactly one step, aliased, or folded."""
    p = plan()
    report = analyze_model(light("resnet50"), shipped_db(), batch=64, precisions=FP16)[0]
    assert p.lbl_seq_ms == pytest.approx(report.summary.lbl_seq_ms)
    assert p.lbl_par_ms == pytest.approx(report.summary.lbl_par_ms)
    model_layers = len(report.model["layer shapes"])
    computed = [i for s in p.steps if not s.names[0].endswith("(bias)") for i in s.layers]
    aliased = {b.tensor for b in p.buffers if b.alias >= 0}
    assert len(computed) == len(set(computed))  # no layer twice
    assert len(set(computed)) + len(aliased) == model_layers  # ResNet-50: the Flatten is its one alias
    assert {s.kind for s in p.steps} >= {gen.StepKind.CONV_BIAS_ACT, gen.StepKind.GRAPH_CONV, gen.StepKind.POOLING,
                                         gen.StepKind.GEMM_EX, gen.StepKind.SOFTMAX}


def test_every_step_makes_a_measured_call_as_its_benchmark_did() -> None:
    """Each step's (api, algorithm, dtype, fusion, layout) is an ok warm row of its key with that median
    (our own SQL, not the code under test), and its row is what the API's builder gives the benchmark."""
    p = plan()
    db = sqlite3.connect(shipped_db())
    for s in p.steps:
        if s.kind in gen.OWN_KERNEL_STEPS:  # benanza's own kernel: no library call (test_roofline_pools_...)
            assert (s.api, s.algorithm, s.measured_ms) == ("", gen.KERNEL_ALGORITHM, None)
            continue
        got = db.execute("SELECT median_ms FROM benchmarks WHERE layer_key = ? AND api = ? AND algorithm = ? AND "
                         "dtype = ? AND fusion = ? AND layout = ? AND status = 'ok' AND l2 = 'warm'",
                         (s.row["key"], s.api, s.algorithm, s.dtype, s.fusion,
                          s.layout if s.api.startswith("cudnn") else "")).fetchall()
        assert [m for (m,) in got] == [pytest.approx(s.measured_ms)], (s.index, s.api, s.algorithm)
        spec = REGISTRY[Api(s.api)]
        assert {c.name for c in spec.columns} <= set(s.row) | {"precision"}


def test_every_step_reads_what_an_earlier_step_wrote() -> None:
    p = plan()
    ready = {b.id for b in p.buffers if b.input}
    for s in p.steps:
        roots = {p.buffers[r].alias if p.buffers[r].alias >= 0 else r for r in s.reads}
        assert roots <= ready, s.index
        ready.add(s.writes)
        ready |= {b.id for b in p.buffers if b.alias == s.writes}
    assert set(p.outputs) <= ready | {b.id for b in p.buffers if b.alias in ready}


def test_a_step_the_replay_cannot_make_is_refused_naming_the_layer_and_the_api(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A chosen call with no replay step (here the graph-API matmul taken out of the supported set: ShuffleNet's
    classifier at batch 64 in fp16) is one line naming the layer and the API, never a silent skip."""
    monkeypatch.delitem(gen.REPLAY_KINDS, Api.GRAPH_MATMUL)
    with pytest.raises(BenanzaError) as err:
        plan_model(light("shufflenet"), shipped_db(), 64, FP16)
    message = str(err.value)
    assert "\n" not in message and "docs/REPLAY.md" in message
    assert "'n201' (Gemm)" in message and Api.GRAPH_MATMUL.value in message


# (model, batch, precision, a pool cuDNN refused: the model's asymmetric pads, ceil-mode sizes)
REFUSED_POOLS = (("alexnet", 1, Precision.FP32, "n14"), ("inception_v1", 64, Precision.FP16, "n138"),
                 ("inception_v2", 1, Precision.FP16, "n7"))


@pytest.mark.parametrize("cell", REFUSED_POOLS, ids=lambda c: f"{c[0]}-b{c[1]}-{c[2].value}")
def test_roofline_pools_run_benanzas_pooling_kernel(cell: tuple[str, int, Precision, str]) -> None:
    """A pool the bound charges a roofline and no library call of which ran ok runs benanza's pooling kernel
    with the model's own window, pads (begin and end apart) and output size. AlexNet's, Inception-v1's and
    Inception-v2's pools that cuDNN refused made the whole plan refuse before (the parent failed here with
    "layer 'n14' (MaxPool): the bound charges it a roofline and no measured call of it ran ok"). A pool
    cuDNN ran keeps its fastest measured call (on the H100 faster than benanza's kernel)."""
    stem, batch, dtype, refused = cell
    p = plan(stem, batch, (dtype,))
    pools = [s for s in p.steps if s.kind == gen.StepKind.POOL]
    step = next(s for s in pools if s.names == (refused,))
    d = step.row["dims"]
    assert (d[6], d[7]) != (d[8], d[9])  # asymmetric: pad_top, pad_left != pad_bottom, pad_right
    x, y = p.buffers[step.reads[0]], p.buffers[step.writes]
    assert (x.shape[2:], y.shape[2:]) == ((d[2], d[3]), (d[12], d[13]))
    assert step.row["format"] == f"CUDNN_TENSOR_{step.layout}" and step.layout in (x.layout or "NCHW", "NCHW")
    assert all(s.note == ana.POOL_NOTE and s.charged_ms > 0 for s in pools)
    measured = {s.names for s in p.steps if s.kind == gen.StepKind.POOLING}
    assert measured and all(s.names not in measured for s in pools)
    assert all(s.note == ana.ROOFLINE_NOTE for s in p.steps if s.kind == gen.StepKind.POOLING)


def test_elementwise_chains_run_as_one_fused_pass() -> None:
    """DenseNet-121's BatchNormalization -> Mul -> Add -> Relu chains (the bound charges each one pass at the
    copy roofline) run as one step of benanza's fused kernel each: one buffer read, one written, the BN as a
    per-channel scale and shift, the Mul and Add by their per-channel constants. Before, each member ran its
    fastest library call (cudnnBatchNormalizationForwardInference, cudnnOpTensor, cudnnActivationForward),
    four passes over memory where the bound charges one (the parent has no chain step kind)."""
    p = plan("densenet121", 1, FP16)  # the 62 chains of batch 64 too, one plan fewer (CI time)
    chains = [s for s in p.steps if s.kind == gen.StepKind.CHAIN]
    assert len(chains) == 62
    for s in chains:
        assert s.row["ops"] == ["Affine", "Mul", "Add", "Relu"] and len(s.reads) == 1
        assert s.row["a"] == [0, 1, 2, 3]  # each op reads the one before it (register 0: the input)
        channels = p.buffers[s.reads[0]].shape[1]
        assert s.row["consts"] == [channels] * 4 and s.row["dims"] == list(p.buffers[s.writes].shape)
        assert s.note == ana.CHAIN_NOTE and s.charged_ms > 0
        assert s.layout == (p.buffers[s.reads[0]].layout or "NCHW")  # as its input is: no transform for it
    stand_ins = {gen.StepKind.BATCHNORM, gen.StepKind.ACTIVATION, gen.StepKind.OP_TENSOR}
    assert not stand_ins & {s.kind for s in p.steps}


def test_a_chain_without_a_kernel_op_runs_its_members_measured_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where benanza has no kernel for a member (here: none for Relu), the chain falls back to each member's
    fastest measured call, and with no own kernels at all the plan is the library stand-ins' of before."""
    without_relu = {op: d for op, d in gen.CHAIN_OPS.items() if op != "Relu"}
    monkeypatch.setattr(ana, "CHAIN_OPS", without_relu)
    p = plan_model(light("densenet121"), shipped_db(), 1, FP16)
    kinds = {s.kind for s in p.steps}
    assert gen.StepKind.CHAIN not in kinds and gen.StepKind.POOLING in kinds
    assert {gen.StepKind.BATCHNORM, gen.StepKind.ACTIVATION} <= kinds
    monkeypatch.setattr(ana, "KERNEL_KINDS", {})
    p = plan_model(light("densenet121"), shipped_db(), 1, FP16)
    assert not {s.kind for s in p.steps} & gen.OWN_KERNEL_STEPS
    assert set(STAND_INS) <= {s.kind for s in p.steps}
    for s in p.steps:
        reads, write = _io_elements(s)
        assert [p.buffers[b].elements for b in s.reads] == reads and p.buffers[s.writes].elements == write
        if s.kind in gen.IN_PLACE_KINDS:  # a stand-in cudnnAddTensor writes a buffer of its own (the H200 failure)
            assert s.reads == (s.writes,) and s.names[0].endswith("(bias)"), (s.index, s.names)


def test_a_bias_measured_in_another_layout_follows_a_transform() -> None:
    """ShuffleNet at batch 1 in fp16: conv n169 (graph API, NCHW) has its bias add measured NHWC only. The
    plan transforms the conv's output first (a step the bound does not charge) and adds the bias in place
    on that copy, which its consumers then read (the parent refused: "its bias add runs NHWC, its conv
    wrote NCHW")."""
    b = plan("shufflenet", 1, FP16)
    bias = next(s for s in b.steps if s.names == ("n169 (bias)",))
    conv, transform = b.steps[bias.index - 2], b.steps[bias.index - 1]
    assert (conv.kind, conv.layout, transform.kind, bias.kind) == (gen.StepKind.GRAPH_CONV, "NCHW",
                                                                   gen.StepKind.TRANSFORM, gen.StepKind.ADD_TENSOR)
    assert transform.reads == (conv.writes,) and bias.reads == (transform.writes,) == (bias.writes,)
    assert (transform.row["src"], transform.row["dst"], bias.layout) == ("CUDNN_TENSOR_NCHW", "CUDNN_TENSOR_NHWC",
                                                                         "NHWC")
    # the transform checks the fp16 bias add with it (replay.h, TransformStep::absorb_bias): its tolerance, not an
    # exact copy's 0 (the H100 run failed it with 4.8e-5, session 20)
    assert transform.tolerance == bias.tolerance > 0
    # ... and the program checks with the plan's tolerance: the H100 failed it again at 2.4e-4 while
    # the program's table of tolerances still said 0 for every transform (session 21)
    _, header, rows = job_table.read(gen.tables(b, "test")[f"{gen.EXECUTABLE}{job_table.SUFFIX}"])
    assert float(rows[transform.index][header.index("tolerance")]) == transform.tolerance
    readers = [s for s in b.steps[bias.index + 1:] if conv.writes in s.reads or bias.writes in s.reads]
    assert readers and all(conv.writes not in s.reads for s in readers)  # the biased copy is the tensor now


def test_an_in_place_call_only_adds_a_convs_bias() -> None:
    """cudnnAddTensor adds into its first input (C += A). DenseNet-121's BN→Mul→Add chains are roofline
    groups whose members run their fastest measured call; where that was cudnnAddTensor, the step wrote a
    buffer of its own and the program failed on the H200 ("a bias add runs in place"). A stand-in call now
    writes a buffer of its own; an add-tensor step only adds a conv's bias on that conv's output."""
    for stem, batch, dtype in CELLS:  # their add-tensor steps: a conv's bias, after a transform too; the stand-ins'
        for s in plan(stem, batch, (dtype,)).steps:  # plan: test_a_chain_without_a_kernel_op_runs_its_members_...
            if s.kind in gen.IN_PLACE_KINDS:
                assert s.reads == (s.writes,) and s.names[0].endswith("(bias)"), (stem, dtype, s.index, s.names)


# Cells whose plans hold every step kind between them (the CPU tests plan each once per session).
# One cell per kind: ShuffleNet b1 fp16 holds what its b1 fp32 and b64 fp16 cells held (add-tensor, permute,
# graph-API matmul, transform; their op-tensor steps are stand-ins, planned by the chain test).
CELLS = (("resnet50", 64, Precision.FP16), ("zfnet512", 64, Precision.FP16), ("densenet121", 1, Precision.FP16),
         ("shufflenet", 1, Precision.FP16), ("alexnet", 1, Precision.FP32))
# Step kinds only a transformer's plan holds (test_a_transformer_plans_with_the_graph_api_steps).
TRANSFORMER_KINDS = {gen.StepKind.GRAPH_NORM, gen.StepKind.GRAPH_POINTWISE, gen.StepKind.GRAPH_SDPA}


# Library calls that stand in for an elementwise chain only where benanza's fused kernel cannot run it (on
# the zoo: none; test_a_chain_without_a_kernel_op_runs_its_members_measured_calls makes them).
STAND_INS = (gen.StepKind.BATCHNORM, gen.StepKind.ACTIVATION, gen.StepKind.OP_TENSOR)


def test_more_of_the_zoo_plans() -> None:
    """Step kinds beyond ResNet-50 fp16's: cuBLASLt with its epilogue, LRN, copies for Concat, a layout
    transform before a Flatten of NHWC data, an add-tensor bias add, benanza's fused chains and pools,
    ShuffleNet's channel shuffle as a strided copy, its classifier in fp16 as a graph-API matmul."""
    kinds = {s.kind for stem, batch, dtype in CELLS for s in plan(stem, batch, (dtype,)).steps}
    # (ResNet-50 and DenseNet-121 fp32 at b64 have conv_fwd; the transformer's plans the rest)
    assert kinds >= set(gen.STEP_KINDS) - {gen.StepKind.CONV_FWD, *STAND_INS} - TRANSFORMER_KINDS


def test_the_supported_set_is_a_table_of_the_apis_columns() -> None:
    for api, kind in gen.REPLAY_KINDS.items():
        assert [c.name for c in gen.kind_columns(kind)] == [*(c.name for c in REGISTRY[api].columns), "algorithm"]
    assert set(gen.STEP_KINDS) == {*gen.REPLAY_KINDS.values(), *gen.COPY_KINDS.values(), *gen.VIEW_KINDS.values(),
                                   gen.StepKind.TRANSFORM, *gen.KERNEL_KINDS.values()}
    assert len(set(gen.STEP_KINDS)) == len(gen.STEP_KINDS)  # each once: the C++ enum and the jobs' kind column
    assert set(gen.KERNEL_KINDS) - set(gen.CHAIN_OPS) == {"MaxPool", "AveragePool", "GlobalAveragePool",
                                                          "GlobalMaxPool"}
    assert set(gen.CHAIN_OPS) <= {op for op, kind in gen.KERNEL_KINDS.items() if kind == gen.StepKind.CHAIN}


def test_every_chain_op_is_a_kernel_op() -> None:
    """The chain vocabulary's words are exactly the kernel's enumerators (csrc/benanza/kernels.h ChainOp)."""
    import re

    from benanza import paths

    header = (paths.csrc_dir() / "benanza" / "kernels.h").read_text()
    enum = re.search(r"enum class ChainOp : int \{([^}]*)\}", header)
    assert enum is not None
    assert {w.strip() for w in enum.group(1).split(",")} == set(gen.CHAIN_OP.names)


@pytest.mark.parametrize("cell", (("resnet50", 64, Precision.FP16), ("densenet121", 1, Precision.FP16)),
                         ids=lambda c: c[0])
def test_model_text_never_reaches_the_cpp(tmp_path: Path, cell: tuple[str, int, Precision]) -> None:
    """The source and every table are the same whatever the layers and tensors are called (names are in
    plan.json only); the source is the same for every model (its plan is read at run time). DenseNet-121's
    tables hold its chains: op names of the kernel's vocabulary, operand codes, constant counts."""
    p = plan(cell[0], cell[1], (cell[2],))
    evil = '"); system("rm -rf /"); //\n#include </etc/passwd>'
    renamed = dataclasses.replace(
        p, steps=tuple(dataclasses.replace(s, names=tuple(evil for _ in s.names)) for s in p.steps),
        buffers=tuple(dataclasses.replace(b, tensor=evil) for b in p.buffers), model=evil)
    gen.write_project(p, tmp_path / "a", "benanza replay a")
    gen.write_project(renamed, tmp_path / "b", "benanza replay a")
    for f in sorted((tmp_path / "a" / "src").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / "src" / f.name).read_bytes(), f.name
    assert "rm -rf" not in "".join(f.read_text() for f in (tmp_path / "b" / "src").iterdir())
    assert json.loads((tmp_path / "b" / gen.PLAN_JSON).read_text())["model"] == evil
    assert gen.render_source("x") == gen.render_source("x")  # no plan in it


def test_the_tables_hold_the_plan(tmp_path: Path) -> None:
    p = plan()
    gen.write_project(p, tmp_path, "benanza replay")
    api, columns, rows = job_table.read((tmp_path / "src" / "replay.jobs").read_text())
    assert (api, columns) == ("replay", [c.name for c in gen.STEPS_COLUMNS])
    assert [r[0] for r in rows] == [s.kind for s in p.steps]
    _, _, buffers = job_table.read((tmp_path / "src" / "replay.buffers").read_text())
    assert len(buffers) == len(p.buffers)


def test_cli_generate_only(tmp_path: Path) -> None:
    out = tmp_path / "r50"
    result = CliRunner().invoke(main, ["replay", str(light("resnet50")), "--batch", "64", "--dtype", "fp16",
                                       "--generate-only", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "57 steps" in result.output and "LBL_seq" in result.output
    assert json.loads((out / gen.PLAN_JSON).read_text())["batch"] == 64
    # a model the database holds nothing of (every zoo cell plans since the graph-API steps): one line
    bert = Path(__file__).parent / "data" / "exports" / "tinybert_ts17.onnx"
    refused = CliRunner().invoke(main, ["replay", str(bert), "--batch", "1", "--seq-len", "16", "--dtype", "fp16",
                                        "--generate-only", "--out", str(tmp_path / "s")])
    errors = [line for line in refused.output.splitlines() if line.startswith("error:")]
    assert refused.exit_code == 1 and len(errors) == 1 and "tinybert_ts17" in errors[0], refused.output
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- a transformer

EXPORTS = Path(__file__).parent / "data" / "exports"
VIT = EXPORTS / "tinyvit_dynamo18.onnx"  # patch conv, cls-token Concat, LayerNorm, attention, Erf-GELU
SEQ = 16  # the exports' symbolic sequence length (ViT has none: its image is 32 x 32)
# (api, dtype) -> median of every row of that API in that precision; every other row 1 ms. The graph
# API wins each layer it measures in fp16 (SDPA fuses the attention cores), cuBLASLt in fp32.
WINNERS = {(Api.GRAPH_MATMUL, "fp16"): 0.002, (Api.GRAPH_SDPA, "fp16"): 0.001, (Api.GRAPH_NORM, "fp16"): 0.003,
           (Api.GRAPH_POINTWISE, "fp16"): 0.003, (Api.LT_MATMUL, "fp32"): 0.002, (Api.GRAPH_NORM, "fp32"): 0.003,
           (Api.GRAPH_POINTWISE, "fp32"): 0.003}


def transformer_db(out: Path, model: Path, batch: int, seq_len: int | None) -> Path:
    """A real SQLite database written by the library's own sink (``DatabaseSink.record_job``), with the
    shipped H100 system and ceilings and one ok row per benchmark the planner plans for ``model`` in fp16
    and fp32, shaped like the harness's result lines (a graph API's engine config "eng0", cuBLASLt's
    configuration a name of its kind). The medians are no measurements (``WINNERS``): they only decide
    which call the best execution picks, so that the planner's wiring of every graph-API step is checked
    on a real transformer; the GPU test measures the real ones."""
    from benanza.apis.ceilings import CEILING_KEY
    from benanza.generate import plan as planner
    from benanza.model.onnx_import import load_model
    from benanza.records import JobKey, checked_result
    from benanza.store import db as perfdb
    from benanza.store.db import DatabaseSink

    shipped = perfdb.open_db(shipped_db(), readonly=True)
    system = perfdb.systems(shipped)[0]
    ceilings = perfdb.results_for(shipped, system["id"], [CEILING_KEY])[CEILING_KEY]
    fields = {k: v for k, v in system.items() if k not in ("id", "details", "first_seen")}
    sink = DatabaseSink(perfdb.open_db(out))
    sid = sink.upsert_system({**fields, **json.loads(system.get("details") or "{}")})
    assert sid == system["id"]
    perfdb.insert_results(sink.db, sid, ceilings)
    p = planner.plan([load_model(model, batch, seq_len)], ("fp16", "fp32"))
    named = {Api.LT_MATMUL.value: "a1_t4_s0_c0_r0_w0_k0"}
    for job in p.jobs:
        lines = [{"event": "result", "layer_key": b.layer_key, "api": b.api, "dtype": b.dtype, "math": b.math,
                  "fusion": b.fusion, "layout": b.layout, "status": "ok", "repetitions": 20,
                  "algorithm": b.algorithm if b.algorithm != "*" else named.get(b.api, "eng0"),
                  "median_ms": WINNERS.get((job.api, b.dtype), 1.0)} for b in job.benchmarks()]
        key = JobKey.of({"layer_key": job.key, "api": job.api.value, "dtype": job.precision.value,
                         "fusion": job.fusion.value, "layout": job.layout, "algorithms": list(job.fields.algorithms)},
                        "warm")
        sink.record_job(sid, key, job.executable, "ok", "", [checked_result(line) for line in lines])
    return out


@pytest.fixture(scope="module")
def vit_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return transformer_db(tmp_path_factory.mktemp("vit") / "vit.db", VIT, 2, None)


def test_a_transformer_plans_with_the_graph_api_steps(vit_db: Path) -> None:
    """tinyvit at batch 2 in fp16, the graph API fastest: the GEMMs (weights and Q K^T / P V alike) are
    graph-API matmuls of exactly the chosen engine config, each LayerNorm a graph norm, each GELU chain
    one graph pointwise op graph, each attention core one fused SDPA reading Q, K and V [b, h, s, d]; K
    comes from the model's K^T by one strided copy; the class token is a buffer of its own."""
    p = plan_model(VIT, vit_db, 2, FP16, cache=False)
    kinds = Counter(s.kind for s in p.steps)
    assert kinds[gen.StepKind.GRAPH_SDPA] == 2 and kinds[gen.StepKind.GRAPH_NORM] == 5
    assert kinds[gen.StepKind.GRAPH_POINTWISE] == 2 and kinds[gen.StepKind.GRAPH_MATMUL] == 12
    assert set(kinds) >= TRANSFORMER_KINDS | {gen.StepKind.GRAPH_MATMUL, gen.StepKind.CONCAT, gen.StepKind.PERMUTE}
    for s in p.steps:
        if "engines" in s.row:
            assert s.row["engines"] == ["0"] and s.algorithm == "eng0", s.index  # exactly the chosen config
    sdpa = [s for s in p.steps if s.kind == gen.StepKind.GRAPH_SDPA]
    for s in sdpa:
        b, h, _, s_kv, d_qk, _ = s.row["dims"]
        k = p.buffers[s.reads[1]]
        assert k.shape == (b, h, s_kv, d_qk)
        copy = next(c for c in p.steps if c.writes == k.id)
        src = p.buffers[copy.reads[0]].shape  # K [b, s, h, d]: K^T is its [0, 2, 3, 1], swapped to [0, 2, 1, 3]
        whole = np.arange(prod(src)).reshape(src)
        assert copy.kind == gen.StepKind.PERMUTE
        assert np.array_equal(_window(whole, copy.row), whole.transpose(0, 2, 1, 3))
    cls = next(s for s in p.steps if s.kind == gen.StepKind.CONCAT)
    assert p.buffers[cls.reads[0]].input  # the constant class token: random, like a model input
    _check_the_wiring(p)


def test_a_transformer_in_fp32_replays_its_batched_gemms_with_cublaslt(vit_db: Path) -> None:
    """In fp32 (no fused SDPA) the attention's Q K^T and P V are cuBLASLt matmuls of two activations: the
    step reads both (B no constant of its own); the projections read their activation alone (the weights are
    the step's own, the bias Add folded into them at no charge)."""
    p = plan_model(VIT, vit_db, 2, (Precision.FP32,), cache=False)
    lt = [s for s in p.steps if s.kind == gen.StepKind.LT_MATMUL]
    both = [s for s in lt if not s.row["b_constant"]]
    assert len(both) == 4 and all(len(s.reads) == 2 for s in both)
    assert len(lt) - len(both) == 12 and all(len(s.reads) == 1 for s in lt if s.row["b_constant"])
    assert not {s.kind for s in p.steps} & {gen.StepKind.GRAPH_SDPA, gen.StepKind.GEMM_EX}
    _check_the_wiring(p)


def test_a_layer_the_replay_cannot_make_in_a_transformer_is_refused_in_one_line(tmp_path: Path) -> None:
    """tinybert's embedding lookup (a Gather of the word table by token ids) has no library call and no
    replay step: the refusal names the model, the layer and what it lacks, in one line."""
    bert = EXPORTS / "tinybert_dynamo18.onnx"
    db = transformer_db(tmp_path / "bert.db", bert, 2, SEQ)
    with pytest.raises(BenanzaError) as err:
        plan_model(bert, db, 2, FP16, seq_len=SEQ, cache=False)
    message = str(err.value)
    assert "\n" not in message and message.startswith("tinybert_dynamo18: layer ") and "docs/REPLAY.md" in message


def _check_the_wiring(p: gen.ReplayPlan) -> None:
    """Every step reads buffers an earlier step wrote (or model inputs), of the sizes its row says."""
    ready = {b.id for b in p.buffers if b.input}
    for s in p.steps:
        roots = {p.buffers[r].alias if p.buffers[r].alias >= 0 else r for r in s.reads}
        assert roots <= ready, s.index
        ready.add(s.writes)
        _check_sizes(p, s, "")


# ---------------------------------------------------------------- views: Gather, Slice, Split


def _window(source: np.ndarray, row: dict[str, Any]) -> np.ndarray:
    """What a permute step's strided copy selects from ``source`` (packed), by its row alone."""
    flat = np.ascontiguousarray(source).reshape(-1)
    return np.lib.stride_tricks.as_strided(flat[row["offset"]:], row["dims"],
                                           [st * flat.itemsize for st in row["strides"]]).copy()


def save_model(out: Path, name: str, nodes: list, inits: list, x_shape: list, outputs: dict[str, list | None]) -> Path:
    """An opset-17 model of ``nodes`` reading one float input ``x`` of ``x_shape``, its ``outputs`` (name ->
    shape, None where shape inference fills it in), written to ``out``."""
    import onnx
    from onnx import TensorProto, helper

    values = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in outputs.items()]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], values,
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)
    return out


def views_model(out: Path, slice_step: int = 1) -> Path:
    """A ViT block's packed attention projection as TorchScript exports torchvision's nn.MultiheadAttention
    (ViT-B/16: MatMul, Reshape, Unsqueeze, Transpose, Squeeze, then a Gather of Q, K and V by one index each),
    with a strided Slice, a Split, a Transpose, a Gather on axis 1 (the class token) and a clamped Slice of
    the end (ends INT64_MAX); ``slice_step`` -1 makes that last Slice run backwards (refused)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w_qkv", (16, 48)), ("w1", (16, 16)), ("w2", (8, 16)), ("w3", (4, 16)),
                                 ("w4", (12, 16)), ("w5", (16, 10)), ("w6", (16, 8)))]
    ints = {"shape": [2, 8, 3, 16], "zero": [0], "three": [3], "i0": 0, "i1": 1, "i_last": -1, "starts": [1],
            "ends": [8], "axes1": [1], "steps2": [2], "split": [4, 12],
            "starts2": [-6 if slice_step > 0 else -1], "ends2": [2**63 - 1 if slice_step > 0 else -7],
            "steps2b": [slice_step]}
    inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), k) for k, v in ints.items()]
    node = helper.make_node
    nodes = [node("MatMul", ["x", "w_qkv"], ["qkv"], name="in_proj"),
             node("Reshape", ["qkv", "shape"], ["r"], name="unflatten"),
             node("Unsqueeze", ["r", "zero"], ["u"], name="unsqueeze"),
             node("Transpose", ["u"], ["t"], perm=[3, 1, 2, 0, 4], name="transpose"),
             node("Squeeze", ["t", "three"], ["sq"], name="squeeze"),
             node("Gather", ["sq", "i0"], ["q"], axis=0, name="gather_q"),
             node("Gather", ["sq", "i1"], ["k"], axis=0, name="gather_k"),
             node("Gather", ["sq", "i_last"], ["v"], axis=0, name="gather_v"),
             node("Slice", ["q", "starts", "ends", "axes1", "steps2"], ["qs"], name="slice_q"),
             node("Split", ["v", "split"], ["v1", "v2"], axis=2, name="split_v"),
             node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="transpose_k"),
             node("MatMul", ["qs", "w1"], ["o1"], name="mm1"),
             node("MatMul", ["kt", "w2"], ["o2"], name="mm2"),
             node("MatMul", ["v1", "w3"], ["o3"], name="mm3"),
             node("MatMul", ["v2", "w4"], ["o4"], name="mm4"),
             node("Gather", ["o4", "i0"], ["cls"], axis=1, name="gather_cls"),
             node("MatMul", ["cls", "w5"], ["o5"], name="mm5"),
             node("Slice", ["o3", "starts2", "ends2", "axes1", "steps2b"], ["tail"], name="slice_tail"),
             node("MatMul", ["tail", "w6"], ["o6"], name="mm6")]
    return save_model(out, "views", nodes, inits, [2, 8, 16], dict.fromkeys(("o1", "o2", "o5", "o6")))


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The views model and a database written by the library's sink with a row per call it plans."""
    model = views_model(tmp_path_factory.mktemp("views") / "views.onnx")
    return model, transformer_db(model.with_suffix(".db"), model, 2, None)


def _reference(model: Path, tensors: list[str]) -> dict[str, np.ndarray]:
    """``tensors`` as ONNX's own reference evaluator computes them for one random ``x`` [2, 8, 16]."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    x = np.random.default_rng(1).standard_normal((2, 8, 16)).astype(np.float32)
    return dict(zip(tensors, ReferenceEvaluator(onnx.load(model)).run(tensors, {"x": x}), strict=True))


def _check_copies(p: gen.ReplayPlan, model: Path) -> list[gen.Step]:
    """Each permute step's window of its source (dims, strides, offset) selects exactly what the reference
    evaluator computes for the tensor it writes, the last of its chain; the bound charges none of them."""
    permutes = [s for s in p.steps if s.kind == gen.StepKind.PERMUTE]
    values = _reference(model, sorted({p.buffers[b].tensor for s in permutes for b in (*s.reads, s.writes)}))
    for s in permutes:
        src, out = p.buffers[s.reads[0]], p.buffers[s.writes]
        assert (s.charged_ms, s.measured_ms, s.tolerance, s.note) == (0.0, None, 0.0, ana.VIEW_NOTE)
        assert src.elements == values[src.tensor].size and out.shape == values[out.tensor].shape
        assert np.array_equal(_window(values[src.tensor], s.row), values[out.tensor]), s.names
    return permutes


def test_gather_slice_and_split_views_replay_as_strided_copies(views: tuple[Path, Path]) -> None:
    """Each chain of views read by a step (the TorchScript Transpose -> Squeeze -> Gather of Q, K and V by one
    index, then a strided Slice, a Split's parts or a Transpose of it; the class token's Gather on axis 1; a
    clamped Slice of the end) is one permute step whose window of the chain's source selects exactly what
    ONNX's own reference evaluator computes for the chain's output; the bound charges them nothing."""
    model, db = views
    p = plan_model(model, db, 2, FP16, cache=False)
    permutes = _check_copies(p, model)
    qkv = ("transpose", "squeeze")
    assert Counter(s.names for s in permutes) == {
        (*qkv, "gather_q", "slice_q"): 1, (*qkv, "gather_v", "split_v"): 2, (*qkv, "gather_k", "transpose_k"): 1,
        ("gather_cls",): 1, ("slice_tail",): 1}
    offsets = {p.buffers[s.writes].tensor: s.row["offset"] for s in permutes}
    assert offsets["v2"] == 2 * 16 + 4 and offsets["qs"] == 1 * 48  # V is index -1 of 3 x 16; part 2; row 1 of Q
    sources = {p.buffers[s.reads[0]] for s in permutes if s.names[0] == "transpose"}  # the Unsqueeze of QKV
    assert {(b.tensor, p.buffers[b.alias].tensor) for b in sources} == {("u", "qkv")}
    _check_the_wiring(p)


def chains_model(out: Path) -> Path:
    """Q of a packed QKV projection, split into heads, as a chain of views (Reshape, Transpose, Gather, Reshape,
    Transpose) read by a MatMul; and a select (Gather of index 1 on axis 0) of a [3, 2, 8, 8] stack, flattened
    (Reshape), read by another: the second is contiguous."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w_qkv", (16, 48)), ("w_h", (8, 8)), ("w_s", (16, 24)), ("w_o", (8, 4)))]
    ints = {"shape": [2, 8, 3, 16], "heads": [2, 8, 2, 8], "stack": [3, 2, 8, 8], "rows": [16, 8], "i0": 0, "i1": 1}
    inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), k) for k, v in ints.items()]
    node = helper.make_node
    nodes = [node("MatMul", ["x", "w_qkv"], ["qkv"], name="in_proj"),
             node("Reshape", ["qkv", "shape"], ["r"], name="unflatten"),
             node("Transpose", ["r"], ["t"], perm=[2, 0, 1, 3], name="transpose"),
             node("Gather", ["t", "i0"], ["q"], axis=0, name="gather_q"),
             node("Reshape", ["q", "heads"], ["qh"], name="split_heads"),
             node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3], name="transpose_q"),
             node("MatMul", ["qt", "w_h"], ["o1"], name="mm1"),
             node("MatMul", ["x", "w_s"], ["s"], name="stack_proj"),
             node("Reshape", ["s", "stack"], ["st"], name="stack"),
             node("Gather", ["st", "i1"], ["sel"], axis=0, name="select"),
             node("Reshape", ["sel", "rows"], ["flat"], name="flatten"),
             node("MatMul", ["flat", "w_o"], ["o2"], name="mm2")]
    return save_model(out, "chains", nodes, inits, [2, 8, 16], dict.fromkeys(("o1", "o2")))


@pytest.fixture(scope="module")
def view_chains(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The chains model and its database (a row per call it plans)."""
    model = chains_model(tmp_path_factory.mktemp("chains") / "chains.onnx")
    return model, transformer_db(model.with_suffix(".db"), model, 2, None)


def test_a_chain_of_views_is_one_copy_and_a_contiguous_select_none(view_chains: tuple[Path, Path]) -> None:
    """Transpose -> Gather -> Reshape -> Transpose of QKV's alias is one strided copy of one window of it, equal
    to ONNX's reference of the whole chain; the select of a stack, flattened, is contiguous: no step, an alias
    of the stack's root buffer from the selected element on (index 1 of 3 x 128), holding what ONNX computes."""
    model, db = view_chains
    for dtype in (FP16, (Precision.FP32,)):
        p = plan_model(model, db, 2, dtype, cache=False)
        (copy,) = _check_copies(p, model)
        assert copy.names == ("transpose", "gather_q", "split_heads", "transpose_q")
        assert (p.buffers[copy.reads[0]].tensor, p.buffers[copy.writes].tensor) == ("r", "qt")
        mm2 = next(s for s in p.steps if s.names[0] == "mm2")
        flat = p.buffers[mm2.reads[0]]
        root = p.buffers[flat.alias]
        assert (flat.tensor, flat.shape, flat.offset, root.tensor, root.alias) == ("flat", (16, 8), 128, "s", -1)
        values = _reference(model, ["s", "flat"])
        selected = values["s"].reshape(-1)[flat.offset:flat.offset + flat.elements].reshape(flat.shape)
        assert np.array_equal(selected, values["flat"])
        _check_the_wiring(p)


def test_a_window_reshapes_where_its_merged_dims_are_contiguous() -> None:
    """Window.reshaped agrees with numpy's no-copy reshape of the same strided view: the same elements where
    numpy can view them, refused (NotAWindow) where it cannot; Window.contiguous as numpy's C-contiguity."""
    from benanza.analyze.replay_views import NotAWindow, Window

    cases = [(Window((3, 197, 768), (768, 2304, 1), 0), (3, 197, 12, 64)),
             (Window((197, 2, 768), (4608, 2304, 1), 768), (197, 2, 12, 64)),
             (Window((197, 2, 768), (4608, 2304, 1), 768), (197, 1536)),  # merges b (2304) with 768: no
             (Window((2, 8, 16), (384, 48, 1), 16), (2, 8, 2, 8)), (Window((2, 8, 16), (384, 48, 1), 16), (16, 16)),
             (Window((1, 8, 1, 16), (999, 16, 7, 1), 5), (128,)), (Window((4, 1, 6), (1, 3, 4), 2), (2, 2, 6))]
    for w, shape in cases:
        flat = np.arange(w.offset + sum((d - 1) * st for d, st in zip(w.dims, w.strides, strict=True)) + 1)
        view = _window(flat, w.row())
        strided = np.lib.stride_tricks.as_strided(flat[w.offset:], w.dims, [st * flat.itemsize for st in w.strides])
        try:
            numpy_view = strided.view()
            numpy_view.shape = shape
        except AttributeError:
            with pytest.raises(NotAWindow):
                w.reshaped(shape)
            continue
        got = w.reshaped(shape)
        assert np.array_equal(_window(flat, got.row()), view.reshape(shape)), (w, shape)
        assert got.contiguous() == numpy_view.flags.c_contiguous, (w, shape)
    assert Window.packed((3, 4)).contiguous() and not Window((3, 4), (1, 3)).contiguous()


def test_a_view_the_strided_copy_cannot_run_is_refused_in_one_line(views: tuple[Path, Path], tmp_path: Path) -> None:
    """A Slice that runs backwards (step -1) is no window of positive strides: one line naming the layer."""
    db = views[1]
    backwards = views_model(tmp_path / "views.onnx", slice_step=-1)
    with pytest.raises(BenanzaError) as err:
        plan_model(backwards, db, 2, FP16, cache=False)
    message = str(err.value)
    assert "\n" not in message and message.startswith("views: layer 'slice_tail' (Slice): ") and "step -1" in message


def test_every_view_op_has_a_window_rule() -> None:
    """The step kinds' table (VIEW_KINDS) and the planner's rules name the same ops."""
    from benanza.analyze.replay_views import VIEW_RULES

    assert set(VIEW_RULES) == set(gen.VIEW_KINDS)


@program_in_the_shared_build(gen.EXECUTABLE)
def replay_source() -> str:
    """The replay program, built in the shared compile project beside its benchmarks (one harness library)."""
    return gen.render_source("tests/test_replay.py")


@pytest.mark.compile
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_the_replay_program_builds_and_reads_its_plan(shared_build: SharedBuild, tmp_path: Path, vit_db: Path,
                                                      views: tuple[Path, Path], view_chains: tuple[Path, Path]) -> None:
    """The replay program against the real cuDNN/cuBLAS/cudnn-frontend headers, in the shared compile
    project (no warning allowed), then ResNet-50's --check-plan: the C++ reads every table Python wrote; the
    same program reads tinyvit's plan with its graph-API matmul, norm, pointwise and SDPA rows, the views
    model's permute rows of Gathers, Slices and Split parts (dims, strides, offset), and the chains model's
    buffers, one an alias from an element offset on (a contiguous select)."""
    p = plan()
    gen.write_project(p, tmp_path / "r50", "benanza replay (tests)")
    exe = shared_build.build / gen.EXECUTABLE
    checked = subprocess.run([str(exe), "--plan", str(tmp_path / "r50" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    line = json.loads(checked.stdout)
    assert (line["steps"], line["buffers"]) == (len(p.steps), len(p.buffers))
    assert line["graph_conv"] == sum(s.kind == gen.StepKind.GRAPH_CONV for s in p.steps)
    assert line["pooling"] == sum(s.kind == gen.StepKind.POOLING for s in p.steps) > 0
    # DenseNet-121's chains (op names, operand codes, Reals of parameters) and Inception-v2's own pools
    # (NHWC, asymmetric pads) read back too
    dense = plan("densenet121", 1, FP16)
    gen.write_project(dense, tmp_path / "d121", "benanza replay (tests)")
    checked = subprocess.run([str(exe), "--plan", str(tmp_path / "d121" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    line = json.loads(checked.stdout)
    assert line["chain"] == 62
    pools = plan("inception_v2", 64, FP16)
    gen.write_project(pools, tmp_path / "inc2", "benanza replay (tests)")
    checked = subprocess.run([str(exe), "--plan", str(tmp_path / "inc2" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["pool"] == sum(s.kind == gen.StepKind.POOL for s in pools.steps) > 0
    chains = tmp_path / "d121" / "src" / "replay.chain"
    chains.write_text(chains.read_text().replace("Affine Mul", "Affine Mull", 1))
    refused = subprocess.run([str(exe), "--plan", str(tmp_path / "d121" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "replay.chain" in refused.stderr and "ops" in refused.stderr
    broken = tmp_path / "r50" / "src" / "replay.graph_conv"
    broken.write_text(broken.read_text().replace("\tconv+bn+act\t", "\tconv+bn+act\tx\t", 1))
    refused = subprocess.run([str(exe), "--plan", str(tmp_path / "r50" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "replay.graph_conv" in refused.stderr
    vit = plan_model(VIT, vit_db, 2, FP16, cache=False)
    gen.write_project(vit, tmp_path / "vit", "benanza replay (tests)")
    checked = subprocess.run([str(exe), "--plan", str(tmp_path / "vit" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    line = json.loads(checked.stdout)
    assert {k: line[k] for k in TRANSFORMER_KINDS} == {k: sum(s.kind == k for s in vit.steps)
                                                       for k in TRANSFORMER_KINDS}
    windows = plan_model(*views, 2, FP16, cache=False)
    gen.write_project(windows, tmp_path / "views", "benanza replay (tests)")
    checked = subprocess.run([str(exe), "--plan", str(tmp_path / "views" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["permute"] == sum(s.kind == gen.StepKind.PERMUTE for s in windows.steps) == 6
    aliased = plan_model(*view_chains, 2, FP16, cache=False)  # an alias from an element offset on: the buffers' offset
    gen.write_project(aliased, tmp_path / "chains", "benanza replay (tests)")
    checked = subprocess.run([str(exe), "--plan", str(tmp_path / "chains" / "src"), "--check-plan"],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["buffers"] == len(aliased.buffers)
    assert any(b.offset for b in aliased.buffers) and "\toffset\t" in (tmp_path / "chains" / "src" /
                                                                        "replay.buffers").read_text()


@pytest.mark.compile
@pytest.mark.gpu
@pytest.mark.skipif(not GPU or NVCC is None, reason="needs nvcc and an NVIDIA GPU")
@pytest.mark.parametrize("cell", (("resnet50", 1, Precision.FP16), ("densenet121", 1, Precision.FP16),
                                  ("densenet121", 64, Precision.FP32), ("alexnet", 1, Precision.FP32),
                                  ("inception_v1", 1, Precision.FP32), ("inception_v2", 64, Precision.FP16)),
                         ids=lambda c: f"{c[0]}-b{c[1]}-{c[2].value}")
def test_the_zoo_replays_with_every_step_checked(tmp_path: Path, cell: tuple[str, int, Precision]) -> None:
    """On the GPU: built and run; every step's output within its tolerance of the fp32 reference of its
    own inputs, and a warm and a cold time. Beyond ResNet-50: benanza's fused chains (DenseNet-121's BN ->
    Mul -> Add -> Relu, NHWC in fp16 and NCHW in fp32) and its pools with asymmetric pads (AlexNet's and
    Inception-v2's MaxPool, Inception-v1's AveragePool), each checked against its one-op-at-a-time
    reference."""
    from benanza.workflows.replay import replay

    stem, batch, dtype = cell
    outcome = replay(light(stem), shipped_db(), tmp_path / stem, "benanza replay (tests)", batch, (dtype,))
    s = outcome.summary()
    assert s["status"] == "ok", outcome.result
    assert s["replay_warm_ms"] > 0 and s["replay_cold_ms"] > 0
    in_place = sum(st.kind in gen.IN_PLACE_KINDS for st in outcome.plan.steps)
    assert s["failed_steps"] == 0 and s["checked_steps"] == len(outcome.plan.steps) - in_place
    own = [r for r, st in zip(outcome.result["steps"], outcome.plan.steps, strict=True)
           if st.kind in gen.OWN_KERNEL_STEPS]
    assert all(r["checked"] == "ok" and r["median_ms"] > 0 for r in own)
    # ResNet-50 has no group without a library call (its pools run cuDNN's); the other cells need benanza's kernels
    assert bool(own) == (stem != "resnet50"), [st.kind for st in outcome.plan.steps]


# What the best execution of a transformer can pick (the measuring step of the GPU test builds these only).
TRANSFORMER_APIS = (Api.CEILING, Api.CONV_FWD, Api.COPY, Api.OP_TENSOR, Api.SOFTMAX, Api.LT_MATMUL, Api.GRAPH_MATMUL,
                    Api.GRAPH_NORM, Api.GRAPH_POINTWISE, Api.GRAPH_SDPA)


@pytest.mark.compile
@pytest.mark.gpu
@pytest.mark.skipif(not GPU or NVCC is None, reason="needs nvcc and an NVIDIA GPU")
@pytest.mark.parametrize("dtype", [Precision.FP16, Precision.FP32], ids=lambda d: d.value)
def test_a_transformer_measured_here_replays_with_every_step_checked(tmp_path: Path, dtype: Precision) -> None:
    """On the GPU: tinyvit at batch 2 measured here (generate, build, run as ``benanza run`` does, the APIs
    its best execution can pick), planned from that database, built and run: every step's output within its
    tolerance of the fp32 reference of its own inputs. fp16 holds fused SDPA, graph norms and the GELU chain's
    pointwise graph; fp32 the attention's GEMMs of two activations."""
    from benanza.measure import system
    from benanza.workflows import measure
    from benanza.workflows.replay import replay

    db = tmp_path / "vit.db"
    project = measure.generate_project([VIT], tmp_path / "bench", (dtype.value,), 2, apis=list(TRANSFORMER_APIS))
    assert project is not None
    summaries = measure.measure_here([project], db, system.fingerprint(bandwidth=True), timeout_s=300)
    assert not measure.failed(summaries), [s.errors for s in summaries]
    outcome = replay(VIT, db, tmp_path / "replay", "benanza replay (tests)", 2, (dtype,))
    s = outcome.summary()
    assert s["status"] == "ok", outcome.result
    assert s["failed_steps"] == 0 and s["checked_steps"] == len(outcome.plan.steps)
    kinds = {step.kind for step in outcome.plan.steps}
    assert gen.StepKind.GRAPH_NORM in kinds or gen.StepKind.SOFTMAX in kinds, kinds


def _io_elements(s: gen.Step) -> tuple[list[int], int]:
    """(elements of each buffer read, elements written) that the step's C++ class sizes from its row."""
    r = s.row
    if s.kind in (gen.StepKind.CONV_FWD, gen.StepKind.CONV_BIAS_ACT, gen.StepKind.GRAPH_CONV):
        n, c, h, w, k = r["dims"][:5]
        y = n * k * r["dims"][16] * r["dims"][17]
        residual = float(r.get("alpha2", 0.0)) != 0.0
        return [n * c * h * w, *([y] if residual else [])], y
    if s.kind in (gen.StepKind.GEMM_EX, gen.StepKind.LT_MATMUL, gen.StepKind.GRAPH_MATMUL):
        batch, m, n, k = r["dims"][:4]
        stride_a, stride_b = r["dims"][6:8]
        b = [] if r["b_constant"] else [(batch if stride_b else 1) * k * n]
        return [(batch if stride_a else 1) * m * k, *b], batch * m * n
    if s.kind in (gen.StepKind.GRAPH_NORM, gen.StepKind.GRAPH_POINTWISE):
        return [r["rows"] * r["cols"]], r["rows"] * r["cols"]
    if s.kind == gen.StepKind.GRAPH_SDPA:
        b, h, s_q, s_kv, d_qk, d_v = r["dims"]
        return [b * h * s_q * d_qk, b * h * s_kv * d_qk, b * h * s_kv * d_v], b * h * s_q * d_v
    if s.kind in (gen.StepKind.POOLING, gen.StepKind.POOL):
        d = r["dims"]
        return [prod(d[:4])], d[0] * d[1] * d[12] * d[13]
    if s.kind == gen.StepKind.CHAIN:  # elementwise: every input has the output's elements
        return [prod(r["dims"])] * len(s.reads), prod(r["dims"])
    if s.kind == gen.StepKind.PERMUTE:  # a window of its input: the input reaches at least its last element
        return [r["offset"] + sum((d - 1) * st for d, st in zip(r["dims"], r["strides"], strict=True)) + 1], \
            prod(r["dims"])
    if s.kind in (gen.StepKind.SOFTMAX, gen.StepKind.ACTIVATION, gen.StepKind.LRN, gen.StepKind.BATCHNORM,
                  gen.StepKind.TRANSFORM):
        return [prod(r["dims"])], prod(r["dims"])
    if s.kind == gen.StepKind.ADD_TENSOR:
        return [prod(r["c"])], prod(r["c"])
    if s.kind == gen.StepKind.OP_TENSOR:
        return [prod(r["a"]), prod(r["b"])][:len(s.reads)], prod(r["a"])
    assert s.kind == gen.StepKind.CONCAT
    return [r["outer"] * part * r["inner"] for part in r["parts"]], r["outer"] * sum(r["parts"]) * r["inner"]


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c[0]}-b{c[1]}-{c[2].value}")
def test_every_buffer_has_the_size_its_step_reads_and_writes(cell: tuple[str, int, Precision]) -> None:
    """What the program would only find on a GPU: each step's buffers hold exactly the elements its row
    says it reads and writes (the C++ steps refuse a wrong output size; a read would run off the end)."""
    stem, batch, dtype = cell
    p = plan(stem, batch, (dtype,))
    for s in p.steps:
        _check_sizes(p, s, stem)


def _check_sizes(p: gen.ReplayPlan, s: gen.Step, label: str) -> None:
    """The step's buffers hold the elements its row reads and writes (a view's window lies inside its input)."""
    reads, write = _io_elements(s)
    got = [p.buffers[b].elements for b in s.reads]
    if s.kind == gen.StepKind.PERMUTE:
        assert len(got) == 1 and got[0] >= reads[0], (label, s.index, s.kind)
    else:
        assert got == reads, (label, s.index, s.kind)
    assert p.buffers[s.writes].elements == write, (label, s.index, s.kind)
