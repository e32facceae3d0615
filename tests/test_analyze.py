"""The analyzer's metrics against hand-computed values on small real models.

Latencies are test inputs (tests/test_analyze_fixtures.py), chosen so that each expected
value below can be worked out on paper; the comments show the arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest
from test_analyze_fixtures import (
    CEILINGS,
    GEMM,
    IGEMM,
    NASTY,
    PRECOMP,
    SYSTEM,
    R,
    branchy_inputs,
    chain_model,
    measurements,
    profile,
)

from benanza import SCHEMA_VERSION
from benanza.analyze import (
    ApiFamily,
    Ceilings,
    Choice,
    Constraints,
    Inputs,
    Miss,
    MissingReason,
    Policy,
    Source,
    analyze,
    choose,
)
from benanza.analyze.choose import executed_row
from benanza.analyze.dag import contract, earliest_start, lanes
from benanza.analyze.execution import GroupKind
from benanza.analyze.roofline import bound_ms
from benanza.analyze.summary import Check
from benanza.library import L2, Api, Fusion, Precision
from benanza.model.layer import Layer, bias_add
from benanza.records import ROOFLINE, ExecutedCall, LayerProfile, Profile, Result
from benanza.store import db as perfdb
from benanza.workflows.prepare import ceilings, inputs_from_db

ROOF_CONCAT = 16384 / 2e9  # concat moves 8192 + 8192 bytes at 2000 GB/s = 2e9 B/ms
ROOF_POOL = 8192 / 2e9  # 4096 read + 4096 written
ROOF_RELU = 8192 / 2e9
ROOF_MYSTERY = 80 / 2e9  # an unknown op: charged its bytes, never 0
ROOF_BIAS1 = (4096 + 64 + 4096) / 2e9  # conv1's bias add (no benchmark): output and bias read, output written
FP32 = frozenset({Precision.FP32})


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-12)


@pytest.fixture(scope="module")
def report():
    return analyze(branchy_inputs())


def by_index(table, index: int) -> dict:
    (row,) = [r for r in table.rows if r["#"] == index]
    return row


# --- policies and LBL -----------------------------------------------------------------------

def test_best_policy_picks_fastest_ok_warm_allowed(report):
    layers = report.tables["layers"]
    # conv1: fastest allowed (fp32, tf32) ok warm is graph tf32 eng2 0.08; the cold FFT 0.05 and the
    # check_failed DIRECT 0.01 never count, fp16 0.0075 is not allowed.
    assert by_index(layers, 0)["best (ms)"] == approx(0.08)
    assert "eng2 / tf32" in by_index(layers, 0)["best benchmark"]
    assert by_index(layers, 2)["best (ms)"] == approx(0.05)
    assert by_index(layers, 6)["best (ms)"] == approx(0.02)


def test_lbl_seq_and_par_for_branchy_model(report):
    # layer-wise best: conv1 .08 + relu1 .01 + conv2 .05 + pool .02 + concat (roofline) + flatten 0 + gemm .02
    # + the unknown op (no library mapping: its roofline, never 0)
    seq = 0.08 + 0.01 + 0.05 + 0.02 + ROOF_CONCAT + 0.0 + 0.02 + ROOF_MYSTERY
    par = 0.08 + 0.01 + 0.05 + ROOF_CONCAT + 0.0 + 0.02 + ROOF_MYSTERY  # pool runs beside conv2
    assert report.summary.layerwise_seq_ms == approx(seq)
    assert report.summary.layerwise_par_ms == approx(par)
    assert report.summary.layerwise_par_ms < report.summary.layerwise_seq_ms


def test_the_headline_bound_charges_an_equivalent_execution(report):
    # conv1+bias+relu1 as the fused tf32 call (.07 < .08 + its bias add + relu1's bytes); conv2 .05 (no bias);
    # pool and relu at their bytes (memory-bound), concat and mystery at their bytes (no benchmark:
    # listed, never 0), flatten aliases, gemm .02
    seq = 0.07 + 0.05 + ROOF_POOL + ROOF_CONCAT + 0.0 + 0.02 + ROOF_MYSTERY
    par = seq - ROOF_POOL  # pool beside conv2
    assert report.summary.lbl_seq_ms == approx(seq)
    assert report.summary.lbl_par_ms == approx(par)
    kinds = {r["#"]: r["kind"] for r in report.tables["execution"].rows}
    assert kinds == {0: "fused call", 2: "library call", 3: "memory roofline", 4: GroupKind.UNMEASURED,
                     5: "alias", 6: "library call", 7: GroupKind.UNMEASURED}
    assert report.summary.roofline_layers == 2  # concat, mystery
    charged = [r for r in report.tables["missing"].rows if r["kind"] == "layer (charged its roofline)"]
    assert [r["#"] for r in charged] == [4, 7]
    # the gaps start from the same execution without fused calls: conv1 .08 + its bias add, relu1 at its bytes
    base = 0.08 + ROOF_BIAS1 + ROOF_RELU + 0.05 + ROOF_POOL + ROOF_CONCAT + 0.02 + ROOF_MYSTERY
    assert report.summary.gap_baseline_ms == approx(base)
    assert report.summary.fusion_gap_ms == approx(base - seq)
    assert report.summary.parallelism_gap_ms == approx(ROOF_POOL)


def test_a_conv_bias_is_charged_and_bn_after_a_conv_folds():
    """conv1's bias is never free: with a benchmark of its bias add, unfused conv1 costs conv + add."""
    inputs = branchy_inputs(constraints=Constraints(precisions=FP32))
    m = measurements(inputs.model)
    add = bias_add(inputs.model.layers[0])
    m[add.key] = [R(add.key, Api.ADD_TENSOR, "default", "fp32", 0.004), R(add.key, Api.ADD_TENSOR, "default",
                                                                           "fp16", 0.001)]
    rep = analyze(branchy_inputs(constraints=Constraints(precisions=FP32), measurements=m))
    # fp32: conv1 .20 + bias .004 + relu1 bytes > fused .15: the fused call is charged and saves that much
    assert rep.summary.gap_baseline_ms - rep.summary.lbl_seq_ms == approx(
        0.20 + 0.004 + ROOF_RELU - 0.15)
    cba = {r["pattern"]: r for r in rep.tables["fusion"].rows}[Fusion.CONV_BIAS_ACT.value]
    assert cba["unfused (ms)"] == approx(0.20 + 0.01 + 0.004)  # the fp32 add, not the fp16 one


def test_lbl_par_equals_seq_for_a_chain():
    model = chain_model()
    rep = analyze(Inputs(model, measurements(model), SYSTEM, CEILINGS))
    assert rep.summary.layerwise_seq_ms == approx(0.08 + 0.01 + 0.05)
    assert rep.summary.layerwise_par_ms == approx(rep.summary.layerwise_seq_ms)
    assert rep.summary.parallelism_gap_ms == approx(0.0)


def test_benanza_ratios(report):
    s = report.summary
    assert s.layerwise_br_seq_e2e == approx(s.layerwise_seq_ms / 0.9)
    assert s.layerwise_br_par_e2e == approx(s.layerwise_par_ms / 0.9)
    assert s.layerwise_br_seq_busy == approx(s.layerwise_seq_ms / 0.35)
    assert s.layerwise_br_par_busy == approx(s.layerwise_par_ms / 0.35)
    assert s.layerwise_br_seq_busy <= 1.0


def test_policy_table_lists_each_policy(report):
    rows = {r["policy"]: r for r in report.tables["policies"].rows}
    # heuristic: conv1 fastest of the per-(api, dtype) rank-0 rows is graph tf32 eng1 0.10;
    # conv2: tf32 GEMM 0.05; gemm: tf32 0.02
    assert rows["heuristic"]["LBL_seq (ms)"] == approx(0.10 + 0.01 + 0.05 + 0.02 + ROOF_CONCAT + 0.02)
    # as-executed: conv1 eng1 tf32 .10, conv2 GEMM fp32 .10, pool .02, concat; relu1/gemm lack data
    assert rows["as-executed"]["LBL_seq (ms)"] == approx(0.10 + 0.10 + 0.02 + ROOF_CONCAT)
    assert rows["as-executed"]["layers with data"] == "5/8"


def test_as_executed_picks_the_matching_algorithm_string():
    inputs = branchy_inputs()
    layer = inputs.model.layers[0]
    choice = choose(layer, inputs, Policy.AS_EXECUTED)
    assert isinstance(choice, Choice)
    assert (choice.result.api, choice.result.algorithm, choice.result.dtype) == (Api.GRAPH_CONV.value, "eng1", "tf32")
    assert choice.latency_ms == approx(0.10)  # not the faster eng2
    conv2 = choose(inputs.model.layers[2], inputs, Policy.AS_EXECUTED)
    assert conv2.result.algorithm == GEMM and conv2.result.dtype == "fp32"


def test_as_executed_fused_call_and_fused_member():
    inputs = branchy_inputs()
    fkey = inputs.model.fusions[0].key
    layers = dict(inputs.profile.layers)
    layers[0] = LayerProfile(0.08, 1, ExecutedCall(Api.GRAPH_CONV.value, "eng9", "tf32",
                                                   Fusion.CONV_BIAS_ACT.value, fkey))
    layers[1] = LayerProfile(None, 0, None, fused_into=0)
    inputs = branchy_inputs(profile=Profile(layers, 0.9, 0.35))
    head = choose(inputs.model.layers[0], inputs, Policy.AS_EXECUTED)
    member = choose(inputs.model.layers[1], inputs, Policy.AS_EXECUTED)
    assert head.latency_ms == approx(0.07) and head.result.fusion == Fusion.CONV_BIAS_ACT.value
    assert member == Choice(0.0, Source.FUSED)


def test_as_executed_adds_the_separate_bias_add_but_algorithm_selection_does_not():
    """ORT runs a conv then cudnnAddTensor for its bias: as-executed counts both, the
    algorithm-selection gap only the conv (the bias add is no algorithm choice)."""
    inputs = branchy_inputs()
    conv = inputs.model.layers[0]
    bias = bias_add(conv)
    add = ExecutedCall(Api.ADD_TENSOR.value, "default", "fp32", key=bias.key)
    layers = dict(inputs.profile.layers)
    layers[0] = LayerProfile(0.13, 2, ExecutedCall(Api.GRAPH_CONV.value, "eng1", "tf32"), extra=(add,))
    rows = {**inputs.measurements, bias.key: [R(bias.key, Api.ADD_TENSOR, "default", "fp32", 0.02)]}
    with_bias = branchy_inputs(profile=Profile(layers, 0.9, 0.35), measurements=rows)
    choice = choose(conv, with_bias, Policy.AS_EXECUTED)
    assert choice.latency_ms == approx(0.10 + 0.02) and choice.result.algorithm == "eng1"
    assert choice.describe().endswith(f" + {Api.ADD_TENSOR.value}")
    report = analyze(with_bias)
    assert by_index(report.tables["algorithm"], 0)["gap (ms)"] == approx(0.10 - 0.08)
    assert report.summary.bias_adds_ms == approx(0.02)
    unmeasured = analyze(branchy_inputs(profile=Profile(layers, 0.9, 0.35)))  # no bias benchmark
    assert by_index(unmeasured.tables["layers"], 0)["as-executed (ms)"] == approx(0.10)
    assert any("separate bias adds) have no benchmark" in n and "cudnnAddTensor / default / fp32" in n
               for n in unmeasured.notes)


def test_a_tf32_allowed_call_of_an_fma_engine_counts_as_its_fp32_row():
    """ORT and PyTorch log TF32 as allowed even in fp32 runs; an engine config without the
    TENSOR_CORE note, or measured in fp32 only (fp32 leaves Tensor Core engines out), ran in fp32."""
    inputs = branchy_inputs()
    conv = inputs.model.layers[0]
    fma = {"numerical_notes": ["CUDNN_NUMERICAL_NOTE_FFT"]}
    rows = {conv.key: [replace(R(conv.key, Api.GRAPH_CONV, "eng3_kMULTIPLY=2", "fp32", 0.4), notes=fma),
                       replace(R(conv.key, Api.GRAPH_CONV, "eng5", "fp32", 0.3), notes=fma),
                       replace(R(conv.key, Api.GRAPH_CONV, "eng5", "tf32", 0.3), notes=fma)]}
    for algorithm, ms in (("eng3_kMULTIPLY=2", 0.4), ("eng5", 0.3)):
        layers = {0: LayerProfile(0.5, 1, ExecutedCall(Api.GRAPH_CONV.value, algorithm, "tf32"))}
        choice = choose(conv, branchy_inputs(profile=Profile(layers), measurements=rows), Policy.AS_EXECUTED)
        assert (choice.latency_ms, choice.result.dtype) == (approx(ms), "fp32"), algorithm


# --- the as-executed check under cold L2 ----------------------------------------------------

def with_cold_rows(inputs: Inputs) -> dict[str, list]:
    """Cold rows for conv1's and conv2's as-executed calls, one faster and one slower than its
    warm row so that a leak either way shows, and a cold eng2 faster than anything warm."""
    conv1, conv2 = inputs.model.layers[0].key, inputs.model.layers[2].key
    rows = {k: list(v) for k, v in inputs.measurements.items()}
    rows[conv1] += [R(conv1, Api.GRAPH_CONV, "eng1", "tf32", 0.09, 0, l2="cold"),  # warm .10
                    R(conv1, Api.GRAPH_CONV, "eng2", "tf32", 0.001, 1, l2="cold")]  # warm best .08
    rows[conv2] += [R(conv2, Api.CONV_FWD, GEMM, "fp32", 0.12, 0, l2="cold")]  # warm .10
    return rows


def test_cold_rows_count_in_the_cold_check_only(report):
    inputs = branchy_inputs()
    cold = analyze(branchy_inputs(measurements=with_cold_rows(inputs)))
    s = cold.summary
    # mapped: conv1 (.11), conv2 (.105), pool (.021), concat (.004, roofline); pool has no cold row and
    # concat no call, so the check covers conv1 and conv2: cold eng1 .09 + cold GEMM .12
    assert s.cold_l2.layers == 2 and s.mapped.layers == 4
    assert s.cold_l2.measured_ms == approx(0.11 + 0.105)
    assert s.cold_l2.executed_ms == approx(0.09 + 0.12)
    assert s.cold_l2.ratio == approx((0.09 + 0.12) / (0.11 + 0.105))
    # the library-call check under cold L2: the same two layers' exact calls (their kernels' time)
    assert s.library_calls_cold_l2.layers == 2
    assert s.library_calls_cold_l2.executed_ms == approx(0.09 + 0.12)
    assert report.summary.library_calls_cold_l2 == Check()  # all None
    # everything else (best, heuristic, warm as-executed, gaps, roofline, timeline) is as without them
    assert replace(s, cold_l2=Check(), library_calls_cold_l2=Check()) == report.summary
    assert cold.tables == report.tables and cold.timeline == report.timeline
    assert s.mapped.executed_ms == approx(0.10 + 0.10 + 0.02 + ROOF_CONCAT)


def test_executed_row_takes_the_rows_of_the_l2_asked_for():
    inputs = branchy_inputs(measurements=with_cold_rows(branchy_inputs()))
    call, key = inputs.profile.layers[0].executed, inputs.model.layers[0].key
    assert (executed_row(call, key, inputs).median_ms, executed_row(call, key, inputs).l2) == (0.10, "warm")
    assert (executed_row(call, key, inputs, L2.COLD).median_ms,
            executed_row(call, key, inputs, L2.COLD).l2) == (0.09, "cold")
    pool = inputs.model.layers[3]  # warm rows only
    miss = executed_row(inputs.profile.layers[3].executed, pool.key, inputs, L2.COLD)
    assert isinstance(miss, Miss) and miss.reason is MissingReason.NOT_BENCHMARKED and "cold L2" in miss.detail


def with_conv1_bias_add(inputs: Inputs) -> tuple[Layer, dict[int, LayerProfile]]:
    """conv1's separate bias add (as ORT logs it) and the profile's layers with it as conv1's extra call."""
    bias = bias_add(inputs.model.layers[0])
    layers = dict(inputs.profile.layers)
    layers[0] = replace(layers[0], extra=(ExecutedCall(Api.ADD_TENSOR.value, "default", "fp32", key=bias.key),))
    return bias, layers


def test_cold_check_leaves_out_a_layer_whose_extra_call_has_no_cold_row():
    """conv1's bias add is a call of the layer too: without its cold row the layer is left out."""
    inputs = branchy_inputs()
    bias, layers = with_conv1_bias_add(inputs)
    warm_add = R(bias.key, Api.ADD_TENSOR, "default", "fp32", 0.02)
    rows = with_cold_rows(inputs)
    s = analyze(branchy_inputs(profile=Profile(layers, 0.9, 0.35), measurements={**rows, bias.key: [warm_add]})
                ).summary
    assert s.cold_l2.layers == 1  # conv2 alone
    assert s.cold_l2.executed_ms == approx(0.12)
    assert s.cold_l2.measured_ms == approx(0.105)
    cold_add = R(bias.key, Api.ADD_TENSOR, "default", "fp32", 0.03, l2="cold")
    s = analyze(branchy_inputs(profile=Profile(layers, 0.9, 0.35),
                               measurements={**rows, bias.key: [warm_add, cold_add]})).summary
    assert s.cold_l2.layers == 2
    assert s.cold_l2.executed_ms == approx(0.09 + 0.03 + 0.12)
    assert s.bias_adds_ms == approx(0.02)  # the warm one


def test_no_cold_rows_leave_the_cold_check_out(report):
    # the fixture's only cold row (conv1 FFT) is no as-executed call: no layer has a cold row
    assert report.summary.cold_l2 == Check()  # all None
    assert analyze(branchy_inputs(profile=None)).summary.cold_l2 == Check()


# --- the as-executed check with cold weights, warm activations ---------------------------------

CW = L2.COLD_WEIGHTS.value


def cold_weights_rows(inputs: Inputs) -> list[Result]:
    """Cold-weights rows of conv1's and conv2's as-executed calls (slower than their warm .10 and .10,
    faster than nothing warm), a cold-weights eng2 faster than anything, and one for the pool, whose
    API has no weights: the runner makes none, and the check must take the pool's warm row anyway."""
    conv1, conv2, pool = (inputs.model.layers[i].key for i in (0, 2, 3))
    return [R(conv1, Api.GRAPH_CONV, "eng1", "tf32", 0.13, 0, l2=CW),
            R(conv1, Api.GRAPH_CONV, "eng2", "tf32", 0.001, 1, l2=CW),
            R(conv2, Api.CONV_FWD, GEMM, "fp32", 0.14, 0, l2=CW),
            R(pool, Api.POOLING, "CUDNN_POOLING_MAX", "fp32", 0.5, l2=CW)]


def inputs_through_db(tmp_path, inputs: Inputs, extra: list[Result] = (), profile: Profile | None = None) -> Inputs:
    """The inputs' rows plus ``extra`` stored in a real SQLite database and read back as the CLI does."""
    db = perfdb.open_db(tmp_path / "perf.db")
    system = perfdb.upsert_system(db, {**SYSTEM, "sm_count": 132, "cc": "9.0", "cuda_driver": "13.0",
                                       "cuda_runtime": "13.0"})
    perfdb.insert_results(db, system, [r for rows in inputs.measurements.values() for r in rows] + list(extra))
    (row,) = [s for s in perfdb.systems(db) if s["id"] == system]
    return replace(inputs_from_db(db, inputs.model, row, profile or inputs.profile), ceilings=CEILINGS)


def test_cold_weights_check_takes_cold_weights_rows_for_weights_and_warm_rows_for_the_rest(report, tmp_path):
    inputs = inputs_through_db(tmp_path, branchy_inputs(), cold_weights_rows(branchy_inputs()))
    s = analyze(inputs).summary
    # mapped: conv1 (.11), conv2 (.105), pool (.021), concat (.004, no call of its own). conv1 takes its
    # cold-weights eng1 .13 (not the faster eng2: another engine), conv2 its cold-weights GEMM .14, the
    # pool its warm .02 (pooling has no weights; its .5 cold-weights row is ignored)
    assert s.cold_weights.layers == 3
    assert s.cold_weights.measured_ms == approx(0.11 + 0.105 + 0.021)
    assert s.cold_weights.executed_ms == approx(0.13 + 0.14 + 0.02)
    assert s.cold_weights.ratio == approx((0.13 + 0.14 + 0.02) / (0.11 + 0.105 + 0.021))
    # the library-call check under cold weights takes the same three calls' rows
    assert s.library_calls_cold_weights.layers == 3
    assert s.library_calls_cold_weights.executed_ms == approx(0.13 + 0.14 + 0.02)
    # everything else is as without the rows
    assert replace(s, cold_weights=Check(), library_calls_cold_weights=Check()) == report.summary
    call, key = inputs.profile.layers[0].executed, inputs.model.layers[0].key
    assert (executed_row(call, key, inputs, L2.COLD_WEIGHTS).median_ms,
            executed_row(call, key, inputs, L2.COLD_WEIGHTS).l2) == (0.13, CW)


def test_cold_weights_check_leaves_out_a_layer_whose_weights_call_has_no_row(tmp_path):
    rows = [r for r in cold_weights_rows(branchy_inputs()) if r.api != Api.CONV_FWD.value]  # conv2's goes
    inputs = inputs_through_db(tmp_path, branchy_inputs(), rows)
    s = analyze(inputs).summary
    assert s.cold_weights.layers == 2  # conv1 and the pool
    assert s.cold_weights.executed_ms == approx(0.13 + 0.02)
    assert s.cold_weights.measured_ms == approx(0.11 + 0.021)
    miss = executed_row(inputs.profile.layers[2].executed, inputs.model.layers[2].key, inputs, L2.COLD_WEIGHTS)
    assert isinstance(miss, Miss) and miss.reason is MissingReason.NOT_BENCHMARKED and "cold weights" in miss.detail


def test_cold_weights_check_takes_the_warm_row_of_a_separate_bias_add():
    """cudnnAddTensor reads no weights: conv1's bias add counts with its warm row."""
    inputs = branchy_inputs()
    bias, layers = with_conv1_bias_add(inputs)
    rows = {k: list(v) for k, v in inputs.measurements.items()}
    for r in cold_weights_rows(inputs):
        rows[r.layer_key].append(r)
    rows[bias.key] = [R(bias.key, Api.ADD_TENSOR, "default", "fp32", 0.02)]
    s = analyze(branchy_inputs(profile=Profile(layers, 0.9, 0.35), measurements=rows)).summary
    assert s.cold_weights.layers == 3
    assert s.cold_weights.executed_ms == approx(0.13 + 0.02 + 0.14 + 0.02)


def test_no_cold_weights_rows_leave_the_cold_weights_check_out(report, tmp_path):
    # the pool's warm row alone makes no cold-weights check: without such rows all four are None
    assert report.summary.cold_weights == Check()
    assert analyze(inputs_through_db(tmp_path, branchy_inputs())).summary.cold_weights == Check()
    assert analyze(branchy_inputs(profile=None)).summary.cold_weights == Check()
    # cold-L2 rows are no cold-weights rows
    cold = analyze(branchy_inputs(measurements=with_cold_rows(branchy_inputs()))).summary
    assert cold.cold_l2.layers == 2 and cold.cold_weights == Check()


def test_missing_table_lists_exactly_the_layers_without_data(report):
    missing = {(r["policy"], r["#"]): r["reason"] for r in report.tables["missing"].rows if r["kind"] == "layer"}
    assert set(missing) == {("best", 7), ("heuristic", 7), ("as-executed", 7), ("as-executed", 1),
                            ("as-executed", 6)}
    assert missing[("as-executed", 1)] == MissingReason.NOT_EXECUTED.value
    assert missing[("as-executed", 6)].startswith(MissingReason.NOT_BENCHMARKED.value)
    assert "algo99" in missing[("as-executed", 6)]
    assert missing[("best", 7)].startswith(MissingReason.NO_MAPPING.value)
    assert by_index(report.tables["layers"], 7)["best (ms)"] is None  # never a silent zero


def test_missing_reasons_for_statuses_and_constraints():
    inputs = branchy_inputs()
    conv1 = inputs.model.layers[0]
    only_bad = {conv1.key: [R(conv1.key, Api.CONV_FWD, "x", "fp32", None, status="not_supported"),
                            R(conv1.key, Api.CONV_FWD, "y", "fp32", 0.1, status="timeout")]}
    miss = choose(conv1, branchy_inputs(measurements=only_bad), Policy.BEST)
    assert isinstance(miss, Miss) and miss.reason is MissingReason.NONE_OK
    assert "not_supported x1" in miss.detail and "timeout x1" in miss.detail
    fp16_only = {conv1.key: [R(conv1.key, Api.CONV_FWD, "x", "fp16", 0.1, 0)]}
    miss = choose(conv1, branchy_inputs(measurements=fp16_only), Policy.BEST)
    assert isinstance(miss, Miss) and miss.reason is MissingReason.NONE_ALLOWED
    assert choose(conv1, branchy_inputs(measurements={}), Policy.BEST).reason is MissingReason.NO_RESULTS


def test_constraints_precision_and_api_family():
    inputs = branchy_inputs()
    conv1 = inputs.model.layers[0]
    fp32 = Constraints(precisions=FP32)
    assert choose(conv1, inputs, Policy.BEST, fp32).latency_ms == approx(0.20)
    legacy = Constraints(families=frozenset({ApiFamily.LEGACY}))
    assert choose(conv1, inputs, Policy.BEST, legacy).latency_ms == approx(0.12)
    graph16 = Constraints(precisions=frozenset({Precision.FP16}), families=frozenset({ApiFamily.GRAPH}))
    assert choose(conv1, inputs, Policy.BEST, graph16).latency_ms == approx(0.0075)
    # heuristic under fp32 only: rank-0 rows are legacy PRECOMP .20 and graph eng0 .25
    assert choose(conv1, inputs, Policy.HEURISTIC, fp32).latency_ms == approx(0.20)


def test_non_library_layers_get_roofline_not_zero(report):
    concat, flatten = by_index(report.tables["layers"], 4), by_index(report.tables["layers"], 5)
    assert concat["best (ms)"] == approx(ROOF_CONCAT) and concat["source"] == Source.ROOFLINE.value
    assert flatten["best (ms)"] == 0.0 and flatten["source"] == Source.ROOFLINE.value  # aliasing moves no bytes
    # without a measured bandwidth a copy cannot be bounded: listed as missing, not zero
    rep = analyze(branchy_inputs(ceilings=Ceilings()))
    missing = {r["#"]: r["reason"] for r in rep.tables["missing"].rows if r["policy"] == "best"}
    assert missing[4] == MissingReason.NO_BANDWIDTH.value
    assert 5 not in missing


def test_a_copy_row_counts_only_in_the_runs_storage_type():
    """An fp16 copy of an fp32 model's tensors moves half the bytes: it bounds no fp32 run, layer-wise
    or in the execution bound (the zoo campaign's fp16 copy rows were charged to fp32 bundles)."""
    base = branchy_inputs()
    concat = base.model.layers[4]
    rows = [R(concat.key, Api.COPY, ROOFLINE, "fp16", ROOF_CONCAT / 4), R(concat.key, Api.COPY, ROOFLINE, "fp32",
                                                                      ROOF_CONCAT / 2)]
    inputs = branchy_inputs(measurements={**base.measurements, concat.key: rows})
    assert choose(concat, inputs, Policy.BEST).latency_ms == approx(ROOF_CONCAT / 2)
    fp16 = Constraints(precisions=frozenset({Precision.FP16}))
    assert choose(concat, inputs, Policy.BEST, fp16).latency_ms == approx(ROOF_CONCAT / 4)
    groups = {r["layers"]: r for r in analyze(inputs).tables["execution"].rows}
    assert groups[concat.name]["charged (ms)"] == approx(ROOF_CONCAT / 2)


# --- gaps -------------------------------------------------------------------------------------

def test_algorithm_selection_gap(report):
    """Only the algorithm changes: the API is held at the run's (a faster call of the other API is the
    API table's, which no search setting of the framework reaches)."""
    rows = {r["#"]: r for r in report.tables["algorithm"].rows}
    assert rows[0]["gap (ms)"] == approx(0.10 - 0.08)  # eng1 vs eng2, both graph tf32
    assert rows[2]["gap (ms)"] == approx(0.10 - 0.09)  # legacy GEMM vs legacy IMPLICIT_GEMM, not graph eng0 0.06
    assert rows[3]["gap (ms)"] == approx(0.0)
    assert report.summary.algorithm_gap_ms == approx(0.03)


def test_the_algorithm_fix_follows_the_api_the_run_used():
    """ONNX Runtime's cudnn_conv_algo_search reaches its legacy calls only: where the gap lies in cuDNN
    frontend engines (ORT 1.31 ran the same engines under HEURISTIC and EXHAUSTIVE) it is not the fix."""
    def fix(layers: Mapping[int, LayerProfile]) -> str:
        run = replace(profile(), layers=layers, framework="onnxruntime")
        gaps = {r["step"]: r["fix"] for r in analyze(branchy_inputs(profile=run)).tables["gaps"].rows}
        return gaps["algorithm selection"]

    engines = fix(profile().layers)  # graph eng1 (gap 0.02) outweighs legacy GEMM (0.01)
    assert engines.startswith("no ONNX Runtime option") and "EXHAUSTIVE" not in engines
    legacy = dict(profile().layers)
    legacy[0] = replace(legacy[0], executed=ExecutedCall(Api.CONV_FWD.value, IGEMM, "fp32"))  # 0.30 vs 0.20
    assert fix(legacy) == "cudnn_conv_algo_search = EXHAUSTIVE"


def test_api_gap_per_layer_and_precision(report):
    rows = {(r["#"], r["precision"]): r for r in report.tables["api"].rows}
    assert set(rows) == {(0, "fp32"), (0, "tf32"), (0, "fp16"), (2, "fp32")}
    assert rows[(0, "fp16")]["graph speedup (x)"] == approx(0.15 / 0.0075)  # the graph API wins 20x in fp16
    assert rows[(0, "fp32")]["legacy - graph (ms)"] == approx(0.20 - 0.25)  # and loses in fp32
    totals = {r["precision"]: r for r in report.tables["api totals"].rows}
    assert totals["fp32"]["legacy - graph (ms)"] == approx((0.20 - 0.25) + (0.09 - 0.06))
    assert totals["fp32"]["graph wins"] == 1 and totals["fp32"]["layers"] == 2
    assert report.summary.api_gap_ms["fp16"] == approx(0.1425)


def test_fusion_gap_sign_per_candidate_and_pattern(report):
    rows = {r["pattern"]: r for r in report.tables["fusion"].rows}
    cba = rows[Fusion.CONV_BIAS_ACT.value]
    # unfused: conv1 .08 + relu1 .01 + conv1's bias add (no benchmark: its bytes), fused .07
    assert cba["unfused (ms)"] == approx(0.08 + 0.01 + ROOF_BIAS1) and cba["fused (ms)"] == approx(0.07)
    assert cba["gap (ms)"] == approx(0.02 + ROOF_BIAS1) and cba["gap (ms)"] > 0
    # conv2 has no bias input, but the conv+bias call adds one: unfused is conv2 + a bias add of its shape
    assert rows[Fusion.CONV_BIAS.value]["gap (ms)"] == approx(0.05 + ROOF_BIAS1 - 0.2)  # negative: slower
    fp32 = analyze(branchy_inputs(constraints=Constraints(precisions=FP32)))
    cba32 = {r["pattern"]: r for r in fp32.tables["fusion"].rows}[Fusion.CONV_BIAS_ACT.value]
    assert cba32["gap (ms)"] == approx(0.20 + 0.01 + ROOF_BIAS1 - 0.15)


def test_fusion_without_fused_data_is_missing():
    inputs = branchy_inputs()
    m = {k: v for k, v in measurements(inputs.model).items() if k != inputs.model.fusions[0].key}
    rep = analyze(branchy_inputs(measurements=m))
    fus = [r for r in rep.tables["missing"].rows if r["kind"].startswith("fusion")]
    assert [r["key"] for r in fus] == [inputs.model.fusions[0].key]
    assert fus[0]["reason"] == MissingReason.NO_RESULTS.value


def test_precision_changes_are_what_ifs_never_in_the_headline(report):
    # the run allowed TF32 already: a TF32 what-if changes nothing, so it is not reported
    assert not [r for r in report.tables["what-if"].rows if r["what-if"] == "tf32"]
    assert "Tensor Core gap (ms)" not in report.summary.labelled()
    # an fp32-only run: the headline charges fp32 calls only; TF32 is a what-if whose bound is that of the
    # same model analyzed as a TF32 run (the report above)
    fp32 = analyze(branchy_inputs(constraints=Constraints(precisions=FP32)))
    calls = [r["call"] for r in fp32.tables["execution"].rows if " / " in r["call"]]
    assert calls and not [c for c in calls if "/ tf32" in c]
    (tf32,) = [r for r in fp32.tables["what-if"].rows if r["what-if"] == "tf32"]
    assert tf32["LBL_seq (ms)"] == approx(report.summary.lbl_seq_ms)
    assert tf32["saving vs LBL_seq (ms)"] == approx(fp32.summary.lbl_seq_ms - report.summary.lbl_seq_ms)
    assert fp32.summary.joint_ms == approx(fp32.summary.lbl_par_ms)  # not the TF32 one
    none_asked = analyze(branchy_inputs(constraints=Constraints(precisions=FP32), what_if=()))
    assert not none_asked.tables["what-if"].rows


def test_framework_overhead(report):
    # idle .9 - .35, cast .01, two inserted transposes .015 each; the memcpy (.02) is no kernel, so
    # GPU busy leaves it out and it already lies in the idle time: listed, not added again
    assert report.summary.framework_overhead_ms == approx(0.55 + 0.01 + 0.03)
    rows = {r["component"]: r for r in report.tables["overhead"].rows}
    assert rows["transpose NCHW->NHWC"]["count"] == 2 and rows["transpose NCHW->NHWC"]["kind"] == "extra layer"
    assert rows["memcpy HtoD"]["counted"] is False and rows["cast_kernel"]["counted"] is True


def test_joint_estimate(report):
    # TC allowed, conv1+relu1 fused (.07), conv2 .05 beside pool, concat, flatten, gemm .02, mystery
    joint = 0.07 + 0.05 + ROOF_CONCAT + 0.02 + ROOF_MYSTERY
    assert report.summary.joint_ms == approx(joint)
    assert report.summary.joint_fusions == 1  # the slower conv+bias fusion is not applied
    assert report.summary.speedup_e2e == approx(0.9 / joint)
    assert report.summary.joint_ms <= report.summary.layerwise_par_ms


def test_the_waterfall_holds_the_run_numerics_gaps_with_their_fixes(report):
    rows = report.tables["gaps"].rows
    steps = [r["step"] for r in rows if r["kind"] == "gap"]
    assert steps == ["framework overhead", "algorithm selection", "fusion", "parallelism"]  # no layout call here
    assert all(r["fix"] for r in rows if r["kind"] == "gap")
    assert rows[-1]["step"] == "joint estimate" and rows[-1]["ms"] == approx(report.summary.lbl_par_ms)


# --- roofline -----------------------------------------------------------------------------------

def test_roofline_bound_and_efficiency(report):
    conv1 = by_index(report.tables["roofline"], 0)
    # tf32: 4e8 FLOP / 400e12 FLOP/s = 1e-3 ms; bytes 4e5 / 2e9 B/ms = 2e-4 ms
    assert conv1["bound (ms)"] == approx(1e-3) and conv1["limit"] == "compute"
    assert conv1["efficiency (%)"] == approx(100 * 1e-3 / 0.08)
    assert conv1["intensity (FLOP/B)"] == approx(4e8 / 4e5)
    relu = by_index(report.tables["roofline"], 1)
    assert relu["bound (ms)"] == approx(8192 / 2e9) and relu["limit"] == "memory"
    bench = [r for r in report.tables["benchmarks"].rows if r["#"] == 0 and r["dtype"] == "fp16"]
    assert {r["bound (ms)"] for r in bench} == {None}  # no fp16 peak measured: no bound, no guess
    assert any("fp16" in n for n in report.notes)
    fp32_row = next(r for r in report.tables["benchmarks"].rows
                    if r["#"] == 0 and r["algorithm"].endswith("PRECOMP_GEMM") and r["dtype"] == "fp32")
    assert fp32_row["efficiency (%)"] == approx(100 * (4e8 / 50e12 * 1e3) / 0.20)


def test_fp16_moves_half_the_bytes():
    layer = branchy_inputs().model.layers[1]
    ceil = Ceilings(bandwidth_gbs=1000.0, flops={Precision.FP16: 1e15, Precision.FP32: 1e15})
    assert bound_ms(layer, Precision.FP16, ceil) == approx(bound_ms(layer, Precision.FP32, ceil) / 2)


def test_missing_ceilings_leave_roofline_out_without_crash():
    rep = analyze(branchy_inputs(ceilings=Ceilings()))
    assert set(rep.tables["roofline"].column("bound (ms)")) == {None}
    assert any("no measured bandwidth" in n for n in rep.notes)


# --- ceilings: measured, never above the hardware's physical peak, labelled -----------------------

WINOGRAD = "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED"
FFT_ENGINE = "eng3_kMULTIPLY=2"
RELU = "CUDNN_ACTIVATION_RELU"
H100 = "NVIDIA H100 80GB HBM3"  # the systems table's GPU name of the shipped database
GIVEN = "given with the inputs (no source recorded)"  # the label of a ceiling built by hand


def with_rows(measured: Mapping[str, Sequence[Result]], key: str, *rows: Result,
              keep: bool = True) -> dict[str, Sequence[Result]]:
    """``measured`` with ``rows`` added to (or, without ``keep``, instead of) those of ``key``."""
    return {**measured, key: [*(measured.get(key, ()) if keep else ()), *rows]}


def test_a_winograd_or_fft_row_raises_no_peak_and_has_no_efficiency():
    """Issue 31 (6): Winograd/FFT rows compute fewer FLOPs than the direct count; they raised the
    fp32 peak (alexnet b64 on the H100: 129.6 TFLOP/s, physical 66.9) and so understated every
    other layer's efficiency. Now they raise nothing and have no efficiency against the direct count."""
    inputs = branchy_inputs()
    conv = inputs.model.layers[0].key
    rows = with_rows(inputs.measurements, conv,
                     R(conv, Api.CONV_FWD, WINOGRAD, "fp32", 0.004),  # 4e8 FLOP in 4e-6 s: "100 TFLOP/s"
                     replace(R(conv, Api.GRAPH_CONV, FFT_ENGINE, "fp32", 0.005),  # "80 TFLOP/s", an FFT engine
                             notes={"numerical_notes": ["CUDNN_NUMERICAL_NOTE_FFT"]}))
    rep = analyze(branchy_inputs(measurements=rows))
    assert rep.ceilings["peak (FLOP/s)"]["fp32"] == approx(50e12)  # the measured peak, not raised
    bench = {(r["algorithm"], r["dtype"]): r for r in rep.tables["benchmarks"].rows if r["#"] == 0}
    # the direct row's efficiency stays against the measured peak: 4e8 / 50e12 = 8e-3 ms over 0.20 ms
    assert bench[(PRECOMP, "fp32")]["efficiency (%)"] == approx(100 * 8e-3 / 0.20)
    for algorithm in (WINOGRAD, FFT_ENGINE):
        assert bench[(algorithm, "fp32")]["bound (ms)"] == approx(8e-3)
        assert bench[(algorithm, "fp32")]["efficiency (%)"] is None  # not 200 % / 160 %
    conv1 = by_index(rep.tables["roofline"], 0)  # the Winograd row is conv1's best now
    assert conv1["efficiency (%)"] is None and conv1["limit"] == "fewer FLOPs (Winograd/FFT)"
    assert by_index(rep.tables["layers"], 0)["efficiency (%)"] is None
    assert any(n.startswith("2 Winograd/FFT row(s) beat the fp32 peak 50.0") for n in rep.notes), rep.notes
    assert not any("peak raised" in n for n in rep.notes)


def test_no_ceiling_goes_above_the_gpus_physical_peak():
    """On a GPU with known physical peaks (analyze/physical.py) a measured ceiling above one is capped
    to it, a row that beats a ceiling raises it (to at most the physical peak), and a row that would
    need more than physical raises nothing (a miscounted FLOP or byte count), with a note."""
    inputs = branchy_inputs()
    conv, relu = inputs.model.layers[0].key, inputs.model.layers[1].key
    rows = with_rows(inputs.measurements, conv,
                     R(conv, Api.CONV_FWD, GEMM, "fp32", 0.0064),  # 4e8 / 6.4e-6 s = 62.5 TFLOP/s
                     R(conv, Api.GRAPH_CONV, "eng7", "fp32", 0.005))  # 80 TFLOP/s > 66.9: raises nothing
    rows = with_rows(rows, relu, R(relu, Api.ACTIVATION, RELU, "fp32", 8192 / 4.096e9),
                     R(relu, Api.ACTIVATION, RELU, "fp16", 4096 / 3.0e9), keep=False)
    ceil = replace(CEILINGS, flops={**CEILINGS.flops, Precision.FP16: 1.2e15})  # above the H100's 989.4e12
    rep = analyze(branchy_inputs(measurements=rows, ceilings=ceil, system={**SYSTEM, "gpu": H100}))
    c = rep.ceilings
    assert c["peak (FLOP/s)"]["fp32"] == approx(62.5e12)
    assert c["peak (FLOP/s)"]["fp16"] == approx(989.4e12)
    # relu1's fp32 row moves 8192 B at 4096 GB/s (> 3350: raises nothing), its fp16 row 4096 B at 3000 GB/s
    assert c["bandwidth (GB/s)"] == approx(3000.0)
    source = c["source"]
    assert source["peak (FLOP/s)"]["fp32"] == f"raised by Conv 'conv1' ({Api.CONV_FWD.value} / {GEMM}, fp32)"
    assert source["peak (FLOP/s)"]["fp16"].startswith("physical peak")
    assert c["physical peak"]["peak (FLOP/s)"]["fp32"] == 66.9e12 and c["physical peak"]["bandwidth (GB/s)"] == 3350
    assert source["bandwidth (GB/s)"] == f"raised by Relu 'relu1' ({Api.ACTIVATION.value} / {RELU}, fp16)"
    assert any(n.startswith("1 row(s) would need more than the physical fp32 peak 66.9 TFLOP/s") for n in rep.notes)
    assert any(n.startswith("1 row(s) would need more than the physical HBM bandwidth 3350 GB/s") for n in rep.notes)
    assert any(n.startswith("fp16 peak 1200.0 TFLOP/s (given") and n.endswith("the physical peak stands")
               for n in rep.notes)
    bench = {(r["algorithm"], r["dtype"]): r["efficiency (%)"] for r in rep.tables["benchmarks"].rows if r["#"] == 0}
    assert bench[("eng7", "fp32")] == approx(100 * 6.4e-3 / 0.005)  # above 100 %, as its note says


def test_every_ceiling_is_labelled_with_its_source(report, tmp_path):
    """Ceilings given with the inputs say so; the database's are labelled with the measurement."""
    c = report.ceilings
    assert c["source"]["bandwidth (GB/s)"] == GIVEN
    assert c["source"]["L2-resident bandwidth (GB/s)"] == f"the HBM bandwidth ({GIVEN})"
    assert c["source"]["peak (FLOP/s)"] == {"fp32": GIVEN, "tf32": GIVEN}
    assert c["physical peak"] is None  # the test system is no GPU of physical.PHYSICAL_PEAKS
    db = perfdb.open_db(tmp_path / "perf.db")
    system = perfdb.upsert_system(db, {**SYSTEM, "gpu": H100, "bandwidth_gbs": 3000.0})
    ceiling = [replace(R("ceiling", Api.CEILING, algorithm, "fp32", 1.0), notes=notes)
               for algorithm, notes in (("copy_d2d", {"gbs": 2400.0}), ("gemm_fp32", {"tflops": 51.0}))]
    perfdb.insert_results(db, system, ceiling)
    (row,) = perfdb.systems(db)
    measured = ceilings(db, row)
    assert (measured.bandwidth_gbs, measured.flops) == (3000.0, {Precision.FP32: approx(51e12)})
    assert measured.sources == {"hbm": "measured: the system's bandwidth kernel",
                                "fp32": "measured: ceilings benchmark gemm_fp32"}


def test_without_profile():
    rep = analyze(branchy_inputs(profile=None))
    assert [r["policy"] for r in rep.tables["policies"].rows] == ["best execution", "best, layer-wise", "heuristic"]
    assert rep.summary.br_seq_e2e is None
    assert rep.summary.framework_overhead_ms is None
    assert not [r for r in rep.tables["missing"].rows if r["policy"] == "as-executed"]


# --- report object and timeline -------------------------------------------------------------------

def test_report_carries_schema_system_and_units(report):
    assert report.schema == SCHEMA_VERSION
    assert report.system["gpu"] == SYSTEM["gpu"]
    for name in ("layers", "roofline", "benchmarks", "fusion", "what-if", "algorithm"):
        assert any("(ms)" in c for c in report.tables[name].columns), name
    assert "efficiency (%)" in report.tables["layers"].columns
    assert by_index(report.tables["layers"], 3)["layer"] == NASTY  # model text kept as data


def test_timeline_levels_and_parallel_lanes(report):
    bound = [s for s in report.timeline if s.process == "lower bound (best, parallel)"]
    layer_spans = {s.args["#"][0]: s for s in bound if s.level == "layer"}
    # conv2 and pool start together after the fused conv1+relu1 call and sit in different lanes
    assert layer_spans[2].start_us == approx(layer_spans[3].start_us) == approx(0.07 * 1e3)
    assert layer_spans[2].lane != layer_spans[3].lane
    model_span = next(s for s in bound if s.level == "model")
    assert model_span.dur_us == approx(report.summary.lbl_par_ms * 1e3)
    measured = [s for s in report.timeline if s.process == "measured run"]
    assert {s.level for s in measured} == {"model", "layer", "library call", "kernel"}


def test_dag_helpers():
    import networkx as nx

    g = nx.DiGraph([(0, 1), (1, 2), (1, 3), (2, 4), (3, 4)])
    times = earliest_start(g, {0: 1.0, 1: 1.0, 2: 3.0, 3: 1.0, 4: 1.0})
    assert times[4] == (5.0, 6.0)
    assert lanes({2: times[2], 3: times[3]}) == {2: 0, 3: 1}
    merged = contract(g, [(0, 1)])
    assert set(merged.nodes) == {0, 2, 3, 4} and merged.has_edge(0, 2)
    assert contract(nx.DiGraph([(0, 1), (1, 2), (0, 2)]), [(0, 2)]) is None  # 1 would sit inside a cycle


def test_unknown_profile_layer_does_not_break():
    prof = profile()
    layers = dict(prof.layers)
    layers[99] = LayerProfile(0.5, 1, ExecutedCall(Api.CONV_FWD.value, GEMM, "fp32"))
    rep = analyze(branchy_inputs(profile=Profile(layers, 0.9, 0.35)))
    assert rep.summary.layers == 8


def test_run_precisions_come_from_the_recorded_settings():
    from benanza.workflows.prepare import run_precisions

    fp32, tf32 = frozenset({Precision.FP32}), frozenset({Precision.FP32, Precision.TF32})
    assert run_precisions("onnxruntime", "fp32", {"use_tf32": 0})[0] == fp32
    assert run_precisions("onnxruntime", "tf32", {"use_tf32": 1})[0] == tf32
    assert run_precisions("pytorch", "fp32", {"allow_tf32": False})[0] == fp32
    assert run_precisions("pytorch", "fp32", {"allow_tf32": True})[0] == tf32
    assert run_precisions("pytorch", "fp16", {"allow_tf32": False})[0] == frozenset({Precision.FP16})
    assert run_precisions("pytorch", "fp32", {})[0] == tf32  # nothing recorded: the looser bound


def test_fp16_run_bound_uses_fp16_rows_and_half_the_bytes():
    rep = analyze(branchy_inputs(constraints=Constraints(precisions=frozenset({Precision.FP16}))))
    rows = {r["#"]: r for r in rep.tables["execution"].rows}
    assert "eng3 / fp16 + bias" in rows[0]["call"] and rows[0]["charged (ms)"] == approx(0.0075 + ROOF_BIAS1 / 2)
    assert rows[4]["charged (ms)"] == approx(ROOF_CONCAT / 2)  # fp16 storage: half the bytes


def test_as_executed_takes_the_row_in_the_layout_the_call_used():
    """fp16 convs are measured NHWC and NCHW: a PyTorch (NCHW) call gets its NCHW row, best the cheaper."""
    from benanza.analyze.choose import Choice, Policy, choose
    from benanza.records import ExecutedCall

    inputs = branchy_inputs()
    conv1 = inputs.model.layers[0]
    nhwc = replace(R(conv1.key, Api.CONV_FWD, GEMM, "fp16", 0.05, 0), layout="NHWC")
    nchw = replace(R(conv1.key, Api.CONV_FWD, GEMM, "fp16", 0.08, 0), layout="NCHW")
    inputs = replace(inputs, measurements={**inputs.measurements, conv1.key: [nhwc, nchw]})
    call = ExecutedCall(Api.CONV_FWD.value, GEMM, "fp16", layout="NCHW")
    assert executed_row(call, conv1.key, inputs) is nchw
    assert executed_row(replace(call, layout="NHWC"), conv1.key, inputs) is nhwc
    assert executed_row(replace(call, layout=""), conv1.key, inputs) is nhwc  # layout unknown: any
    only_nhwc = replace(inputs, measurements={**inputs.measurements, conv1.key: [nhwc]})
    miss = executed_row(call, conv1.key, only_nhwc)
    assert isinstance(miss, Miss) and miss.reason is MissingReason.NOT_BENCHMARKED and "NCHW" in miss.detail
    fp16 = replace(inputs, constraints=inputs.constraints.with_precisions(frozenset({Precision.FP16})))
    best = choose(conv1, fp16, Policy.BEST)
    assert isinstance(best, Choice) and best.result is nhwc
