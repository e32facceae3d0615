"""The profile bundles recorded on the H100 (perfdb/bundles) against the shipped database.

Real data: ONNX Runtime 1.31 (CUDA EP) and PyTorch 2.11 runs of zoo models, recorded with
`benanza profile` (docs/RESULTS.md at 83e8fcb, §4). A sound lower bound never exceeds what was measured.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import LIGHT

from benanza.analyze import Report
from benanza.apis import NAMED_CONFIG_APIS
from benanza.generate.plan import plan_executed
from benanza.library import NO_COPY_OPS, Api, Precision
from benanza.model.layer import Model, bias_add
from benanza.model.onnx_import import load_model
from benanza.paths import perfdb_dir
from benanza.profile.bundle import Bundle, read_bundle
from benanza.profile.catalog import model_stem, shipped_bundle
from benanza.profile.mapping import Mapping, executed_calls, kernel_time_mapped, map_bundle_report
from benanza.records import OverheadKind
from benanza.store import db as perfdb
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model

BUNDLES = sorted(p for p in (perfdb_dir() / "bundles").iterdir() if p.is_dir())
SYSTEM = "46ce012553693050"  # the H100 every shipped bundle was recorded on
DIRECT_ENGINES = ("eng28_", "eng70_")  # one implicit-GEMM kernel per call (FFT engines launch several)


def model_of(bundle: Path) -> Path:
    stem = model_stem(read_bundle(bundle).meta.model)
    return LIGHT / f"light_{'bvlc_alexnet' if stem == 'alexnet' else stem}.onnx"


@functools.cache
def opened(bundle: Path) -> Bundle:
    """The bundle, each part read from the parse cache once per session (bundles are read-only data)."""
    return read_bundle(bundle)


@functools.cache
def model_at(bundle: Path, batch: int) -> Model:
    """The bundle's model at ``batch``, loaded once per session (three tests of each bundle read it)."""
    return load_model(model_of(bundle), batch)


@functools.cache
def mapped(bundle: Path, batch: int) -> tuple[Model, Mapping]:
    """The bundle's model at ``batch`` and its mapping, shared by the tests that read them."""
    model = model_at(bundle, batch)
    return model, map_bundle_report(model, opened(bundle))


@pytest.fixture(scope="session")
def h100() -> Path:
    return shipped_db()


@pytest.fixture(scope="session")
def analyzed(h100: Path) -> Callable[[Path], tuple[Report, Mapping]]:
    """Each bundle parsed, mapped and analyzed once per session (bundles are read-only data)."""
    return functools.cache(lambda bundle: analyze_model(model_of(bundle), h100, bundle))


def test_the_zoo_models_the_readme_analyzes_have_a_bundle() -> None:
    for stem in ("resnet50", "inception_v1", "densenet121", "vgg19"):
        assert shipped_bundle(Path(f"{stem}.onnx")) is not None, stem


def kernel_ms(mapping: Mapping) -> tuple[float, float]:
    """(kernels, kernels + memcpy/memset) summed over the representative run's GPU work, ms."""
    p = mapping.profile
    layers = sum(k.dur_us for lp in p.layers.values() for k in lp.kernels) / 1e3
    kernels = layers + sum(w.ms for w in p.unmapped if w.kind is not OverheadKind.COPY)
    return kernels, kernels + sum(w.ms for w in p.unmapped if w.kind is OverheadKind.COPY)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_bundle_maps_fully_and_the_bound_holds_against_the_kernels(bundle: Path, analyzed) -> None:
    """The headline bound never exceeds the framework's kernel-only GPU time (GPU busy counts no
    memcpy/memset: a pageable input copy is no layer's work), nor its end-to-end latency."""
    report, mapping = analyzed(bundle)
    s = report.summary
    assert not mapping.unmapped_layers
    assert s.mapped.layers > 0
    kernels, with_copies = kernel_ms(mapping)
    assert s.gpu_busy_ms <= 1.02 * kernels, (s.gpu_busy_ms, kernels, with_copies)
    assert s.gpu_busy_ms <= s.e2e_ms
    for name in ("br_seq_e2e", "br_par_e2e", "br_seq_busy", "br_par_busy"):
        assert 0 < getattr(s, name) <= 1, (name, getattr(s, name))
    if read_bundle(bundle).meta.batch == 1:  # the run streams weights from HBM: between warm and cold L2
        with_call = sum(1 for lp in mapping.profile.layers.values() if lp.executed and lp.gpu_ms is not None)
        assert s.cold_l2.layers >= 0.8 * with_call  # copies (roofline) have no cold row
        assert s.cold_weights.layers >= 0.8 * with_call
        assert s.mapped.ratio < 1 < s.cold_l2.ratio


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_framework_overhead_counts_nothing_twice(bundle: Path, analyzed) -> None:
    """The overhead and the layers' own kernel time together fit in the end-to-end latency: a pageable
    input copy lies in end-to-end - GPU busy (busy counts kernels only) and is not added again
    (resnet50_b64_ort_tf32 read 11.56 ms of overhead where end-to-end - busy was 6.57 ms)."""
    report, mapping = analyzed(bundle)
    s, p = report.summary, mapping.profile
    layer_kernels = sum(lp.gpu_ms or 0.0 for lp in p.layers.values())
    # 1 %: GPU busy is the median over the runs, the layers' kernels come from one representative run
    assert s.framework_overhead_ms + layer_kernels <= s.e2e_ms * 1.01, \
        (s.framework_overhead_ms, layer_kernels, s.e2e_ms)
    not_copies = sum(w.ms for w in p.unmapped if w.kind is not OverheadKind.COPY)
    assert s.framework_overhead_ms == pytest.approx(p.e2e_ms - p.gpu_busy_ms + not_copies)


def test_kernel_time_mapped_counts_no_copies(analyzed) -> None:
    """A batch-64 ORT run uploads its input with a pageable memcpy of several ms that no layer
    owns: it is no kernel, so the mapped share of kernel time stays whole (counted as unmapped
    kernel time it read 78 %, as the transformer scripts did for ViT at batch 32)."""
    mapping = analyzed(perfdb_dir() / "bundles" / "resnet50_b64_ort_fp32")[1]
    share, copy_ms = kernel_time_mapped(mapping.profile)
    copies = sum(w.ms for w in mapping.profile.unmapped if "Memcpy" in w.name or "Memset" in w.name)
    assert copy_ms == pytest.approx(copies) and copy_ms > 1.0
    assert share == pytest.approx(1.0)


# The precisions each shipped run allowed, read off its meta.json by hand (not by the code under test).
RUN_PRECISIONS = {"ort_fp32": "fp32", "ort_tf32": "fp32,tf32", "torch_fp32": "fp32", "torch_fp16": "fp16"}


def run_kind(bundle: Path) -> str:
    return re.search(r"_(ort|torch)_(fp32|tf32|fp16)", bundle.name).group(0)[1:]


# The H100 SXM5's datasheet peaks (dense), written out here rather than read from analyze/physical.py.
H100_PHYSICAL = {"bandwidth": 3350.0, "fp32": 66.9e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12}


@functools.cache
def fewer_flop_calls(db_path: Path) -> frozenset[tuple[str, str]]:
    """(api, algorithm) of the database's Winograd/FFT calls, read off its rows here rather than by
    the code under test: legacy algorithms by name, graph-API engine configs by their numerical notes."""
    db = perfdb.open_db(db_path, readonly=True)
    notes = "json_extract(notes, '$.numerical_notes')"
    return frozenset(map(tuple, db.execute(
        "SELECT DISTINCT api, algorithm FROM benchmarks WHERE algorithm LIKE '%FFT%' OR algorithm LIKE '%WINOGRAD%' "
        f"OR {notes} LIKE '%FFT%' OR {notes} LIKE '%WINOGRAD%'").fetchall()))


def call_of(table: str, row: dict, best: dict[int, str | None]) -> tuple[str, ...]:
    """(api, algorithm) of a benchmarks row, or of a roofline row's best benchmark ('api / algorithm / ...')."""
    return (row["api"], row["algorithm"]) if table == "benchmarks" else tuple((best[row["#"]] or "").split(" / ")[:2])


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_the_bound_is_charged_as_the_run_computed(bundle: Path, analyzed, h100: Path) -> None:
    """Matched precision (TF32 only where the run's use_tf32/allow_tf32 was on, storage of the run's
    type for copies), every layer charged once and never 0 unless it aliases, every conv bias
    charged, and no benchmark above its roofline (one bandwidth, one peak per precision)."""
    report, _ = analyzed(bundle)
    s, model_layers = report.summary, report.model["layers"]
    assert s.bound_precisions == RUN_PRECISIONS[run_kind(bundle)]
    allowed = set(s.bound_precisions.split(","))
    groups = report.tables["execution"].rows
    covered = [name for g in groups for name in g["layers"].split(", ")]
    assert len(covered) == model_layers == len(set(covered)), "every layer charged exactly once"
    assert sum(g["charged (ms)"] for g in groups) == pytest.approx(s.lbl_seq_ms)
    for g in groups:
        ops = set(g["ops"].split("+"))
        if g["charged (ms)"] <= 0:
            assert ops <= NO_COPY_OPS, g  # only aliases are free (folded layers ride in their conv's group)
        call = g["call"]
        if " / " in call:
            dtype = call.split(" / ")[2].split(" ")[0]
            assert dtype in allowed or (dtype == "fp32" and "tf32" in allowed), g
        if g["kind"] == "library call" and g["ops"].startswith("Conv+BatchNormalization"):
            assert "+ bias" in call, g  # a folded BatchNormalization leaves a bias to add
    model = model_at(bundle, opened(bundle).meta.batch)
    by_head = {g["#"]: g for g in groups}
    for layer in model.layers:
        if layer.op == "Conv" and len(layer.inputs) > 2 and layer.index in by_head:
            g = by_head[layer.index]
            assert "+ bias" in g["call"] or g["kind"] == "fused call", g
    best = {r["#"]: r["best (ms)"] for r in report.tables["layers"].rows}  # the conv call alone, layer-wise
    for g in groups:  # a bias add costs something, measured or not (never 0)
        if g["kind"] == "library call" and "+ bias" in g["call"] and best[g["#"]] is not None:
            assert g["charged (ms)"] > best[g["#"]], g
    system_bw = perfdb.systems(perfdb.open_db(shipped_db()))[0]["bandwidth_gbs"]
    assert report.ceilings["bandwidth (GB/s)"] >= system_bw
    fewer, best = fewer_flop_calls(h100), {r["#"]: r["best benchmark"] for r in report.tables["layers"].rows}
    for table in ("benchmarks", "roofline"):
        rows = report.tables[table].rows
        # Winograd/FFT rows compute fewer FLOPs than the direct count the bound uses: no efficiency (it
        # came out at up to 310 % of the measured fp32 peak), and they are the only rows left without one
        winograd = {id(r) for r in rows if call_of(table, r, best) in fewer}
        assert winograd or table == "roofline", "the check checks something"
        shown = [r for r in rows if id(r) in winograd and r["efficiency (%)"] is not None]
        assert not shown, shown[:3]
        over = [r for r in rows if id(r) not in winograd and r["bound (ms)"] is not None
                and r["latency (ms)" if table == "benchmarks" else "best (ms)"]  # an alias costs 0: no efficiency
                and (r["efficiency (%)"] is None or r["efficiency (%)"] > 100.0 + 1e-6)]
        assert not over, over[:3]


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_every_ceiling_is_labelled_and_within_the_physical_peak(bundle: Path, analyzed) -> None:
    """Each ceiling says where it comes from (measured, raised by a named row, or the physical peak)
    and none exceeds the H100's physical peak (issue 31, 6: the fp32 peak reached 160 TFLOP/s)."""
    c = analyzed(bundle)[0].ceilings
    assert c["bandwidth (GB/s)"] <= H100_PHYSICAL["bandwidth"]
    assert c["peak (FLOP/s)"] and all(v <= H100_PHYSICAL[p] for p, v in c["peak (FLOP/s)"].items()), c
    source, physical = c["source"], c["physical peak"]
    assert physical == {"bandwidth (GB/s)": H100_PHYSICAL["bandwidth"], "source": physical["source"],
                        "peak (FLOP/s)": {p: v for p, v in H100_PHYSICAL.items() if p != "bandwidth"}}
    assert set(source["peak (FLOP/s)"]) == set(c["peak (FLOP/s)"])
    labels = [source["bandwidth (GB/s)"], source["L2-resident bandwidth (GB/s)"], *source["peak (FLOP/s)"].values()]
    kinds = ("measured: ", "raised by ", "physical peak", "the HBM bandwidth (")
    assert all(s.startswith(kinds) for s in labels), labels


def test_alexnet_fp32_peak_is_measured_and_below_physics(h100: Path) -> None:
    """Issue 31 (6): on alexnet at batch 64 in fp32 a Winograd-nonfused conv raised the fp32 peak to
    129.6 TFLOP/s (the H100's physical fp32 peak is 66.9), so the direct conv n0 showed 19.3 %."""
    report, _ = analyze_model(LIGHT / "light_bvlc_alexnet.onnx", h100, batch=64, precisions=[Precision.FP32])
    c = report.ceilings
    peak = c["peak (FLOP/s)"]["fp32"]
    assert peak <= H100_PHYSICAL["fp32"], peak
    rows = {r["layer"]: r for r in report.tables["roofline"].rows}
    n0, n4 = rows["n0"], rows["n4"]
    assert (n0["op"], n0["precision"], n0["limit"]) == ("Conv", "fp32", "compute")
    assert n0["bound (ms)"] == pytest.approx(n0["FLOPs"] / peak * 1e3)
    assert n0["efficiency (%)"] == pytest.approx(100 * n0["bound (ms)"] / n0["best (ms)"])
    assert n0["efficiency (%)"] >= 100 * n0["FLOPs"] / H100_PHYSICAL["fp32"] * 1e3 / n0["best (ms)"]  # >= 37 %
    # n4's Winograd rows (fewer FLOPs) have no efficiency; strict fp32 leaves them out of its best (defect 7),
    # so its best is a direct engine, measured against the peak like n0
    winograd = [r for r in report.tables["benchmarks"].rows if r["layer"] == "n4" and "WINOGRAD" in r["algorithm"]]
    assert winograd and all(r["efficiency (%)"] is None for r in winograd)
    assert "WINOGRAD" not in next(r for r in report.tables["layers"].rows if r["layer"] == "n4")["best benchmark"]
    assert 0 < n4["efficiency (%)"] <= 100
    assert c["physical peak"]["peak (FLOP/s)"]["fp32"] == H100_PHYSICAL["fp32"]
    assert c["source"]["peak (FLOP/s)"]["fp32"].startswith(("measured: ", "raised by "))


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_the_gaps_share_the_run_baseline(bundle: Path, analyzed) -> None:
    """Every gap starts from the run's own numerics; the joint gap (all of them at once) is no more than
    fusion and parallelism taken one after the other; a precision the run did not allow is a what-if."""
    report = analyzed(bundle)[0]
    s = report.summary
    assert s.joint_gap_ms <= s.fusion_gap_ms + s.parallelism_gap_ms + 1e-9
    allowed = set(RUN_PRECISIONS[run_kind(bundle)].split(","))
    for row in report.tables["what-if"].rows:
        assert set(row["constraints"].split()[0].removeprefix("precisions=").split(",")) != allowed, row


# Issue 6's acceptance: the four models at batch 1 and 64 in both frameworks, fp32.
# Also the TF32 and heuristic runs (0.99-1.01 today), and the fp16 one (issue 15; 0.54 against a
# database with fp16 convolutions in NHWC only, while PyTorch runs them NCHW): checked once the
# database holds the NCHW rows.
ACCEPTANCE = [b for b in BUNDLES if re.fullmatch(r".+_b(1|64)_(ort|torch)_(fp32|tf32|fp16)(_heuristic)?", b.name)]


def has_fp16_nchw_convs(db_path: Path) -> bool:
    db = perfdb.open_db(db_path, readonly=True)
    return db.execute("SELECT 1 FROM benchmarks WHERE dtype = 'fp16' AND layout = 'NCHW' AND api = ?",
                      (Api.GRAPH_CONV.value,)).fetchone() is not None


@pytest.mark.parametrize("bundle", ACCEPTANCE, ids=[b.name for b in ACCEPTANCE])
def test_the_as_executed_lbl_is_within_10_percent_of_the_measured_kernels(bundle: Path, analyzed, h100) -> None:
    """The benchmarks of the calls the framework made reproduce its GPU kernel time of the mapped
    layers: at batch 1 measured as the run leaves L2 (weights cold, activations warm), at batch 64
    warm (activations dominate the traffic there)."""
    s = analyzed(bundle)[0].summary
    check = s.cold_weights if read_bundle(bundle).meta.batch == 1 else s.mapped
    assert 0.9 <= check.ratio <= 1.1, check


@pytest.fixture(scope="session")
def measured_on_h100(h100: Path) -> Callable[[object], bool]:
    """The planner's predicate over the shipped database, read once (2 s of SQLite per bundle otherwise)."""
    return perfdb.measured(perfdb.open_db(h100, readonly=True), SYSTEM)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_the_database_holds_every_engine_config_the_frameworks_ran(bundle: Path, h100: Path,
                                                                   measured_on_h100: Callable[[object], bool]) -> None:
    """`generate --from-profile` filled in what the heuristics' first 12 left out: nothing graph-API is left to plan."""
    model = model_at(bundle, opened(bundle).meta.batch)
    calls = [(model, key, call) for key, call in executed_calls(model, opened(bundle))]
    assert any(Api(c.api) in NAMED_CONFIG_APIS for _m, _k, c in calls)
    left = plan_executed(calls, skip=measured_on_h100)
    assert has_fp16_nchw_convs(h100)  # PyTorch runs fp16 convs NCHW: missing rows fail, never xfail
    assert not [j for j in left.jobs if j.api in NAMED_CONFIG_APIS], [j.fields.algorithms for j in left.jobs]


def test_resnet50_b64_conv_kernels_match_their_as_executed_benchmarks(analyzed) -> None:
    """The mapping picks the right call and kernel: at batch 64 (L2 effects small) each conv's
    implicit-GEMM kernel lasts what its engine config measured in the micro-benchmark."""
    report, mapping = analyzed(perfdb_dir() / "bundles" / "resnet50_b64_ort_fp32")
    rows = {r["#"]: r for r in report.tables["algorithm"].rows}  # the conv call alone, without its bias add
    ratios = []
    for i, lp in mapping.profile.layers.items():
        call = rows[i]["as-executed call"] if i in rows else ""
        if i in rows and rows[i]["op"] == "Conv" and any(e in call for e in DIRECT_ENGINES) and lp.kernels:
            ratios.append(max(k.dur_us for k in lp.kernels) / 1e3 / rows[i]["as-executed (ms)"])
    assert len(ratios) >= 40
    close = [r for r in ratios if abs(r - 1) <= 0.1]
    assert len(close) >= 0.95 * len(ratios), sorted(ratios)


def test_ort_conv_bias_adds_map_to_their_conv_and_are_benchmarked(analyzed) -> None:
    """ONNX Runtime adds every conv's bias (a folded BatchNormalization's shift) with a
    cudnnAddTensor of its own: each conv carries it, keyed like its bias_add, and the
    shipped database holds its benchmark at batch 64."""
    bundle = perfdb_dir() / "bundles" / "resnet50_b64_ort_fp32"
    model, mapping = mapped(bundle, 64)
    report, _ = analyzed(bundle)
    convs = [layer for layer in model.layers if layer.op == "Conv"]
    for conv in convs:
        (extra,) = mapping.profile.layers[conv.index].extra
        assert (extra.api, extra.key) == (Api.ADD_TENSOR.value, bias_add(conv).key), conv.name
    assert report.summary.bias_adds_ms > 1.0
    assert not any("have no benchmark" in n for n in report.notes)


def test_a_conv_bias_add_is_not_taken_by_a_model_mul_or_add_of_its_shape() -> None:
    """DenseNet-121 has Mul and Add layers of the same shapes as ORT's conv bias adds; the
    adds logged right after a conv are that conv's, and ORT runs the model's Mul/Add itself."""
    bundle = perfdb_dir() / "bundles" / "densenet121_b64_ort_fp32"
    model, mapping = mapped(bundle, 64)
    assert not any(mapping.calls.get(layer.index) for layer in model.layers if layer.op in ("Mul", "Add"))
    with_bias = [i for i, lp in mapping.profile.layers.items() if lp.extra]
    assert len(with_bias) == 60 and {model.layers[i].op for i in with_bias} == {"Conv"}  # 600 adds in 10 runs


def test_pytorch_bias_kernels_are_charged_as_the_conv_bias_add(analyzed) -> None:
    """PyTorch adds a conv's bias in an ATen kernel after cuDNN: Inception-v1's convs (all with
    a bias) carry their bias add as an extra call, ResNet-50's (no bias) none; the bias adds
    bring the as-executed LBL of the mapped layers within 10 % of the kernels measured."""
    bundle = perfdb_dir() / "bundles" / "inception_v1_b64_torch_fp32"
    model, mapping = mapped(bundle, 64)
    charged = [i for i, lp in mapping.profile.layers.items() if lp.extra]
    assert len(charged) >= 50 and {model.layers[i].op for i in charged} == {"Conv"}
    for i in charged:
        (extra,) = mapping.profile.layers[i].extra
        assert (extra.api, extra.key) == (Api.ADD_TENSOR.value, bias_add(model.layers[i]).key)
        assert any(k.name.startswith("void at::native::") for k in mapping.profile.layers[i].kernels)
    report, _ = analyzed(bundle)
    assert 0.9 <= report.summary.mapped.ratio <= 1.1
    resnet = perfdb_dir() / "bundles" / "resnet50_b64_torch_fp32"
    assert not [lp for lp in mapped(resnet, 64)[1].profile.layers.values() if lp.extra]


def test_the_end_to_end_statistics_stand_beside_the_median(analyzed) -> None:
    """Issue 33: a user reads the run's spread, not only its median: mean, p90, min, max and runs, as
    meta.json recorded them (read here by hand)."""
    bundle = perfdb_dir() / "bundles" / "resnet50_b1_ort_fp32"
    recorded = json.loads((bundle / "meta.json").read_text())["latency_ms"]
    s = analyzed(bundle)[0].summary
    assert s.e2e_ms == recorded["median"]
    for key, value in (("mean", s.e2e_mean_ms), ("p90", s.e2e_p90_ms), ("min", s.e2e_min_ms), ("max", s.e2e_max_ms)):
        assert value == recorded[key], key
    assert s.e2e_runs == recorded["runs"]
