"""``benanza generate --from-profile``: benchmarks of exactly the calls a framework made.

Real data: the PyTorch and ONNX Runtime bundles recorded on the H100 (perfdb/bundles),
whose cuDNN logs name engine configs past the first twelve of the heuristics.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.apis import NAMED_CONFIG_APIS, job_table
from benanza.apis.engine_config import engine_config_name
from benanza.apis.graph import with_named_configs
from benanza.cli.main import main
from benanza.generate import codegen
from benanza.generate.plan import ALREADY_MEASURED, UNNAMED, plan_executed
from benanza.library import Api, Precision
from benanza.model.layer import Model, bias_add
from benanza.model.onnx_import import load_model
from benanza.paths import perfdb_dir
from benanza.profile.bundle import read_bundle
from benanza.profile.mapping import executed_calls
from benanza.records import ExecutedCall

BUNDLES = perfdb_dir() / "bundles"


def calls_of(name: str, stem: str) -> tuple[Model, list[tuple[Model, str, ExecutedCall]]]:
    bundle = read_bundle(BUNDLES / name)
    model = load_model(LIGHT / f"light_{stem}.onnx", batch=bundle.meta.batch)
    return model, [(model, key, call) for key, call in executed_calls(model, bundle)]


@pytest.fixture(scope="module")
def vgg_torch() -> tuple[Model, list[tuple[Model, str, ExecutedCall]]]:
    return calls_of("vgg19_b64_torch_fp32", "vgg19")


def test_graph_calls_become_jobs_of_exactly_the_logged_engine_configs(vgg_torch) -> None:
    _, calls = vgg_torch
    logged: dict[tuple[str, str], set[str]] = {}
    for _m, key, call in calls:
        if Api(call.api) in NAMED_CONFIG_APIS:
            logged.setdefault((call.key or key, call.precision), set()).add(call.algorithm)
    assert any(name.startswith("eng3_kMULTIPLY") for names in logged.values() for name in names)  # FFT, past 12
    # a TF32-allowed config is measured in fp32 too: an FMA engine computes in fp32
    expected = {**logged, **{(k, "fp32"): names for (k, prec), names in logged.items() if prec == "tf32"}}
    assert len(expected) > len(logged)
    p = plan_executed(calls)
    graph = [j for j in p.jobs if j.api in NAMED_CONFIG_APIS]
    assert {(j.key, j.precision.value): set(j.fields.algorithms) for j in graph} == expected
    for j in graph:  # the row carries each config as numbers, and they spell its name again
        names = [engine_config_name(e["id"], dict(e["knobs"])) for e in j.fields.row["engines"]]
        assert names == list(j.fields.algorithms) == sorted(j.fields.algorithms)
    assert [j.index for j in graph] == list(range(len(graph)))


def test_what_the_database_holds_is_left_out(vgg_torch) -> None:
    _, calls = vgg_torch
    first = plan_executed(calls)
    job = next(j for j in first.jobs if j.api is Api.GRAPH_CONV)
    held = {b.name() for b in job.benchmarks()}
    again = plan_executed(calls, skip=held)
    assert job.key not in {j.key for j in again.jobs if j.precision is job.precision}
    assert any(d.key == job.key and d.reason == ALREADY_MEASURED for d in again.dropped)
    # a job of two configs, one measured: only the other is planned
    two = with_named_configs(job.fields, ["eng0", "eng28_kTILE_SIZE=4_kUSE_TEX=0"])
    assert two.row["engines"] == [{"id": 0, "knobs": []}, {"id": 28, "knobs": [["TILE_SIZE", 4], ["USE_TEX", 0]]}]


def test_cublaslt_calls_say_their_configuration_cannot_be_named(vgg_torch) -> None:
    _, calls = vgg_torch
    lt = [c for _m, _k, c in calls if c.api == Api.LT_MATMUL.value]
    assert lt
    p = plan_executed(calls, skip=lambda b: True)
    assert not p.jobs
    assert {d.api for d in p.dropped if d.reason == UNNAMED} == {Api.LT_MATMUL.value}


def test_ort_bias_adds_are_planned_under_the_bias_add_key() -> None:
    model, calls = calls_of("resnet50_b64_ort_fp32", "resnet50")
    adds = [(key, c) for _m, key, c in calls if c.api == Api.ADD_TENSOR.value]
    assert adds and all(c.key for _k, c in adds)
    biases = {bias_add(layer).key for layer in model.layers if layer.op == "Conv"}
    assert {c.key for _k, c in adds} <= biases
    p = plan_executed(calls)
    assert {j.key for j in p.jobs if j.api is Api.ADD_TENSOR} == {c.key for _k, c in adds}
    assert {j.precision for j in p.jobs if j.api is Api.ADD_TENSOR} == {Precision.FP32}


def test_named_configs_reach_the_job_table_never_the_source(vgg_torch, tmp_path: Path) -> None:
    _, calls = vgg_torch
    p = plan_executed(calls)
    manifest = codegen.generate(p, tmp_path, "benanza generate --from-profile test")
    source = (tmp_path / "src" / "bench_graph_conv.cu").read_text()
    assert "MULTIPLY" not in source and "TILE_SIZE" not in source  # the source is the template's alone
    _, columns, rows = job_table.read((tmp_path / "src" / "bench_graph_conv.jobs").read_text())
    engines = [row[columns.index("engines")].split(" ") for row in rows]
    assert ["3,MULTIPLY=2"] in engines or any("0,IDX_MODE=0,TILE_SIZE=4" in e for e in engines), engines
    named = {b["algorithm"] for b in manifest.benchmarks if b["executable"] == "bench_graph_conv"}
    assert named == {a for j in p.jobs if j.api is Api.GRAPH_CONV for a in j.fields.algorithms}


def test_cli_refuses_a_bundle_of_another_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["generate", str(LIGHT / "light_resnet50.onnx"), "--out", str(tmp_path / "p"),
                                       "--from-profile", str(BUNDLES / "vgg19_b1_ort_fp32")])
    assert result.exit_code != 0
    assert "vgg19_b1_ort_fp32" in result.output and "another model" in result.output
    assert len(result.output.strip().splitlines()) == 1
