"""The execution bound's folds, elementwise chains and fused-call choice on small hand-built models
(the model processor's own fusion finder over layers written out here) and on the zoo DenseNet-121
with the shipped H100 database.

Latencies of the hand-built models are TEST INPUTS chosen so that each expected charge can be
worked out on paper (the comments show the arithmetic); they are not measurements of any GPU.
Every tensor is [1, C, 8, 8] fp32: 4096 B at C = 16, a [16] or [16,1,1] constant 64 B; the
bandwidth is 2000 GB/s = 2e9 B/ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
from conftest import LIGHT
from test_analyze_fixtures import CEILINGS, SYSTEM, R, t

from benanza.analyze import Constraints, Inputs, analyze
from benanza.analyze.dag import layer_graph
from benanza.analyze.execution import Execution, GroupKind, execution_bound
from benanza.analyze.peaks import effective_ceilings
from benanza.library import Api, Fusion, Precision
from benanza.model.graph import build_graph, find_fusions
from benanza.model.layer import Layer, Model, Tensor
from benanza.model.onnx_import import load_model
from benanza.store import db as perfdb
from benanza.store.shipped import shipped_db
from benanza.workflows.prepare import inputs_from_db

B_PER_MS = 2e9  # CEILINGS' 2000 GB/s
FP32 = Constraints(precisions=frozenset({Precision.FP32}))
CONV = {"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "strides": [1, 1], "dilations": [1, 1], "group": 1}


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-12)


def nbytes(*tensors: Tensor) -> int:
    return sum(4 * math.prod(x.shape) for x in tensors)  # fp32


class Net:
    """A chain of layers written one call each; each layer reads the previous output unless told."""

    def __init__(self, x: Tensor) -> None:
        self.layers: list[Layer] = []
        self.out = x

    def add(self, op: str, *others: Tensor, attrs: dict | None = None, channels: int | None = None,
            source: Tensor | None = None, flops: int = 0) -> Tensor:
        x = source or self.out
        shape = (x.shape[0], channels, *x.shape[2:]) if channels else x.shape
        y = t(f"t{len(self.layers)}", *shape)
        ins = [x, *others]
        self.layers.append(Layer(f"{op.lower()}{len(self.layers)}", op, ins, [y], attrs or {}, flops=flops,
                                 bytes_read=nbytes(*ins), bytes_written=nbytes(y), index=len(self.layers)))
        self.out = y
        return y

    def conv(self, c_out: int) -> Tensor:
        c_in = self.out.shape[1]
        return self.add("Conv", t(f"w{len(self.layers)}", c_out, c_in, 1, 1, const=True), attrs=CONV,
                        channels=c_out, flops=2 * c_out * c_in * 64)

    def bn(self) -> Tensor:
        c = self.out.shape[1]
        return self.add("BatchNormalization", *(t(f"{p}{len(self.layers)}", c, const=True) for p in "sbmv"),
                        attrs={"epsilon": 1e-5})

    def scale_shift_relu(self) -> Tensor:
        """DenseNet's (caffe2 export's) per-channel Mul and Add by [C,1,1] constants, then ReLU."""
        c = self.out.shape[1]
        self.add("Mul", t(f"g{len(self.layers)}", c, 1, 1, const=True))
        self.add("Add", t(f"h{len(self.layers)}", c, 1, 1, const=True))
        return self.add("Relu")

    def model(self) -> Model:
        layers = self.layers
        return Model("hand", "hand.onnx", 1, layers, build_graph(layers), find_fusions(layers, {self.out.name}))


def groups(model: Model, measurements: dict, fused: bool = True) -> dict[tuple[int, ...], object]:
    inputs = Inputs(model, measurements, SYSTEM, CEILINGS, constraints=FP32)
    return {g.layers: g for g in execution_bound(model, inputs, FP32, model.graph, fused_calls=fused).groups}


# --- defect 8: a Mul/Add after a folded BatchNormalization folds; a fused call never costs more -------------

def conv_bn_scale_shift_relu_twice() -> Model:
    """conv0 -> bn1 -> mul2 -> add3 -> relu4 -> conv5 -> bn6 -> mul7 -> add8 -> relu9 (DenseNet's
    conv blocks as the zoo exports them), conv0 16 -> 16 channels, conv5 16 -> 32."""
    net = Net(t("x", 1, 16, 8, 8))
    net.conv(16)
    net.bn()
    net.scale_shift_relu()
    net.conv(32)
    net.bn()
    net.scale_shift_relu()
    return net.model()


CONV0_MS, FUSED0_MS, CONV5_MS, FUSED5_MS = 0.10, 0.10001, 0.20, 0.15
BIAS0 = (4096 + 64 + 4096) / B_PER_MS  # conv0's bias add (no benchmark: its bytes): y and bias read, y written
RELU4 = (4096 + 4096) / B_PER_MS


def two_block_rows(model: Model) -> dict:
    conv0, conv5 = model.layers[0], model.layers[5]
    f0, f5 = (next(f for f in model.fusions if f.layers[0] == i) for i in (0, 5))
    return {conv0.key: [R(conv0.key, Api.CONV_FWD, "precomp", "fp32", CONV0_MS, 0)],
            conv5.key: [R(conv5.key, Api.CONV_FWD, "precomp", "fp32", CONV5_MS, 0)],
            f0.key: [R(f0.key, Api.GRAPH_CONV, "eng9", "fp32", FUSED0_MS, 0, fusion=Fusion.CONV_BN_ACT.value)],
            f5.key: [R(f5.key, Api.GRAPH_CONV, "eng9", "fp32", FUSED5_MS, 0, fusion=Fusion.CONV_BN_ACT.value)]}


def test_a_per_channel_mul_and_add_after_a_folded_bn_fold_into_the_conv():
    model = conv_bn_scale_shift_relu_twice()
    assert [(f.pattern, f.layers) for f in model.fusions] == [(Fusion.CONV_BN_ACT.value, (0, 1, 2, 3, 4)),
                                                              (Fusion.CONV_BN_ACT.value, (5, 6, 7, 8, 9))]
    plain = groups(model, two_block_rows(model), fused=False)
    # the Mul and Add by [C,1,1] constants scale and shift the conv's output channels exactly as the BN
    # before them does: all three fold (ORT's run: conv, cudnnAddTensor of the folded bias, ReLU)
    assert plain[(0, 1, 2, 3)].folded == (1, 2, 3) and plain[(5, 6, 7, 8)].folded == (6, 7, 8)
    assert plain[(0, 1, 2, 3)].ms == approx(CONV0_MS + BIAS0)
    assert plain[(4,)].ms == approx(RELU4)  # the ReLU alone: 4096 B read, 4096 B written


def test_a_fused_call_dearer_than_the_conv_and_its_unfolded_followers_is_not_charged():
    """conv0's fused call .10001 > conv0 .10 + bias add 4.128e-6 + ReLU 4.096e-6 = .100008224: not charged.
    Charging each unfolded follower its own bytes (Mul 8256 B + Add 8256 B + ReLU 8192 B = 1.2352e-5 ms)
    made it look .0000065 cheaper. conv5's fused call .15 < .20 + its bias + ReLU is charged."""
    model = conv_bn_scale_shift_relu_twice()
    report = analyze(Inputs(model, two_block_rows(model), SYSTEM, CEILINGS, constraints=FP32))
    rows = {r["#"]: r for r in report.tables["execution"].rows}
    assert rows[0]["kind"] == GroupKind.CALL and rows[0]["charged (ms)"] == approx(CONV0_MS + BIAS0)
    assert rows[4]["charged (ms)"] == approx(RELU4)
    assert rows[5]["kind"] == GroupKind.FUSED and rows[5]["charged (ms)"] == approx(FUSED5_MS)
    assert report.summary.lbl_seq_ms == approx(CONV0_MS + BIAS0 + RELU4 + FUSED5_MS)


def test_a_fused_calls_unfolded_followers_are_ranked_as_the_one_pass_they_cost_unfused():
    """conv -> Add(residual r) -> ReLU (conv+bias+add+act, nothing folds): unfused, the Add and the ReLU are
    one pass (y and r read, the output written: 12288 B = 6.144e-6 ms), not Add 12288 B + ReLU 8192 B.
    The fused call .100008 > .10 + 6.144e-6 is not charged; at .100006 it is."""
    net = Net(t("x", 1, 16, 8, 8))
    y = net.conv(16)
    net.add("Add", t("r", 1, 16, 8, 8))
    net.add("Relu")
    model = net.model()
    (cand,) = model.fusions
    assert cand.pattern == Fusion.CONV_BIAS_ADD_ACT.value and cand.layers == (0, 1, 2) and y.name == "t0"

    def rows(fused_ms: float) -> dict:
        conv = model.layers[0]
        return {conv.key: [R(conv.key, Api.CONV_FWD, "precomp", "fp32", 0.10, 0)],
                cand.key: [R(cand.key, Api.GRAPH_CONV, "eng9", "fp32", fused_ms, 0,
                             fusion=Fusion.CONV_BIAS_ADD_ACT.value)]}

    dear = groups(model, rows(0.100008))
    assert dear[(0,)].kind == GroupKind.CALL and dear[(1, 2)].ms == approx(12288 / B_PER_MS)
    cheap = groups(model, rows(0.100006))
    assert cheap[(0, 1, 2)].kind == GroupKind.FUSED and cheap[(0, 1, 2)].ms == approx(0.100006)


# --- defect 5: a BatchNormalization beside an elementwise chain is part of its one pass ----------------------

def after_a_concat(form: str) -> Model:
    """concat0 ([1,8,8,8] twice -> [1,16,8,8]) -> ``form`` -> conv: the BN cannot fold into a conv."""
    net = Net(t("a", 1, 8, 8, 8))
    net.add("Concat", t("b", 1, 8, 8, 8), attrs={"axis": 1}, channels=16)
    for step in form.split("+"):
        {"bn": net.bn, "scale_shift_relu": net.scale_shift_relu, "relu": lambda: net.add("Relu")}[step]()
    net.conv(16)
    return net.model()


BN_PARAMS = 4 * 64  # scale, bias, mean, var: [16] each
SHIFT = 2 * 64  # the Mul's and the Add's [16,1,1] constants


@pytest.mark.parametrize(("form", "members", "moved"), [
    # the zoo's export: Mul+Add+ReLU is a pointwise chain; the BN before it joins that pass:
    # the concat's output read once (4096 B) + the constants + the ReLU's output written once (4096 B)
    ("bn+scale_shift_relu", (1, 2, 3, 4), 4096 + BN_PARAMS + SHIFT + 4096),
    ("scale_shift_relu+bn", (1, 2, 3, 4), 4096 + SHIFT + BN_PARAMS + 4096),  # a BN after the chain
    ("bn+relu", (1, 2), 4096 + BN_PARAMS + 4096),  # torchvision's DenseNet: BN + ReLU
])
def test_a_batchnorm_beside_an_elementwise_chain_is_one_pass(form: str, members: tuple[int, ...], moved: int):
    model = after_a_concat(form)
    chains = [f.layers for f in model.fusions if f.pattern == Fusion.POINTWISE.value]
    assert chains == ([(2, 3, 4)] if form.startswith("bn+s") else [(1, 2, 3)] if "shift" in form else [])
    for fused in (True, False):
        got = groups(model, {}, fused)
        assert got[members].kind == GroupKind.CHAIN and got[members].ms == approx(moved / B_PER_MS)
        assert not [g for g in got.values() if model.layers[g.layers[0]].op == "BatchNormalization"
                    and len(g.layers) == 1]


# --- the zoo DenseNet-121 on the shipped database ------------------------------------------------------------

DENSENET = LIGHT / "light_densenet121.onnx"


@dataclass(frozen=True)
class Shipped:
    """The light zoo DenseNet-121 against the shipped H100 database, bounded as ``analyze`` bounds
    it (its effective ceilings): the headline execution and the one without fused calls."""

    model: Model
    inputs: Inputs
    headline: Execution
    plain: Execution


def shipped(batch: int, precisions: frozenset[Precision]) -> Shipped:
    if not DENSENET.exists():
        pytest.skip(f"{DENSENET} not shipped by this onnx package")
    db = perfdb.open_db(shipped_db(), readonly=True)
    (system,) = perfdb.systems(db)
    model = load_model(DENSENET, batch)
    run = Constraints(precisions=precisions)
    inputs = inputs_from_db(db, model, system, constraints=run)
    inputs = replace(inputs, ceilings=effective_ceilings(model, inputs)[0])
    graph = layer_graph(model.graph, (layer.index for layer in model.layers))
    fused, plain = (execution_bound(model, inputs, run, graph, fused_calls=f) for f in (True, False))
    return Shipped(model, inputs, min((fused, plain), key=lambda e: e.seq_ms), plain)


@pytest.fixture(scope="module")
def densenet_b256_tf32() -> Shipped:
    """fp32 and TF32 allowed: the run that charged a fused conv+bn+act call (.2954 ms) above its conv with
    the folded bias (.2173 ms) and its ReLU (.0680 ms), layers 137-141."""
    return shipped(256, frozenset({Precision.FP32, Precision.TF32}))


def test_densenet_never_charges_a_fused_call_above_its_unfused_layers(densenet_b256_tf32):
    run = densenet_b256_tf32
    plain = {g.layers: g.ms for g in run.plain.groups}
    fused = [g for g in run.headline.groups if g.kind == GroupKind.FUSED]
    assert fused
    for g in fused:  # the execution without fused calls runs the same layers as these groups
        parts = [ms for layers, ms in plain.items() if set(layers) & set(g.layers)]
        assert all(set(layers) <= set(g.layers) for layers in plain if set(layers) & set(g.layers))
        assert g.ms <= sum(parts), (g.layers, g.ms, sum(parts))
    head = {g.layers[0]: g for g in run.headline.groups}
    assert head[137].layers == (137, 138, 139, 140) and head[137].folded == (138, 139, 140)  # conv, BN, Mul, Add


@pytest.fixture(scope="module")
def densenet_b64_fp16() -> Shipped:
    """fp16: the run that charged 62 BatchNormalizations after a Concat their own pass (0.718 ms)."""
    return shipped(64, frozenset({Precision.FP16}))


def test_densenet_charges_each_batchnorm_in_the_pass_of_its_scale_shift_relu(densenet_b64_fp16):
    model, run = densenet_b64_fp16.model, densenet_b64_fp16
    group_of = {i: g for g in run.headline.groups for i in g.layers}
    producer = {t.name: layer for layer in model.layers for t in layer.outputs}
    bns = [layer for layer in model.layers if layer.op == "BatchNormalization"]
    alone = [bn.index for bn in bns if len(group_of[bn.index].layers) == 1]
    assert len(bns) == 121 and not alone, f"{len(alone)} BatchNormalizations charged alone: {alone[:6]} ..."
    unfolded = [bn for bn in bns if producer[bn.inputs[0].name].op != "Conv"]  # after a Concat or a pool
    assert len(unfolded) == 62
    for bn in unfolded:  # one pass: the BN's input and the constants read, the ReLU's output written (fp16: 2 B)
        g = group_of[bn.index]
        assert [model.layers[i].op for i in g.layers] == ["BatchNormalization", "Mul", "Add", "Relu"]
        consts = [x for i in g.layers for x in model.layers[i].inputs if x.constant]
        relu = model.layers[g.layers[-1]].outputs[0]
        moved = sum(2 * math.prod(x.shape) for x in (bn.inputs[0], *consts, relu))
        assert g.kind == GroupKind.CHAIN and g.ms == approx(run.inputs.ceilings.memory_ms(moved))


# --- views: a Transpose, Slice, Split or select-Gather that another layer reads moves no bytes ------------

def test_views_that_other_layers_read_cost_nothing_and_one_that_leaves_the_model_costs_its_bytes():
    """ViT-B/16's attention (TorchScript export): Gather(qkv, 0/1/2) selects q, k and v, Transposes put the
    heads first; PyTorch reads them through strides and ran none of them (its MHA path: GEMMs, one fused
    attention kernel), so charging each its bytes put the bound 5-6 % above PyTorch's kernel time at batch
    32 (TF32 8.69 ms vs 8.16 ms). x -> Transpose0 -> Relu1 -> Gather2 (scalar index) -> Slice3 -> Relu4 ->
    Gather5 (two indices: a copy) -> Relu6 -> Transpose7 (the model's output: materialized)."""
    net = Net(t("x", 1, 16, 8, 8))
    net.add("Transpose", attrs={"perm": [0, 2, 3, 1]})
    net.add("Relu")
    net.add("Gather", t("i", const=True), attrs={"axis": 0})
    net.add("Slice", t("starts", 1, const=True), t("ends", 1, const=True))
    net.add("Relu")
    net.add("Gather", t("j", 2, const=True), attrs={"axis": 0})
    net.add("Relu")
    net.add("Transpose", attrs={"perm": [0, 3, 1, 2]})
    model = net.model()
    got = groups(model, {})
    assert {i: got[(i,)].kind for i in (0, 2, 3)} == {0: GroupKind.ALIAS, 2: GroupKind.ALIAS, 3: GroupKind.ALIAS}
    assert got[(0,)].ms == got[(2,)].ms == got[(3,)].ms == 0.0
    # a Gather by an index list copies the rows it picks; the last Transpose writes the model's output
    assert got[(5,)].kind == GroupKind.UNMEASURED and got[(5,)].ms > 0
    assert got[(7,)].kind == GroupKind.UNMEASURED and got[(7,)].ms == approx(2 * 4096 / B_PER_MS)
