"""The attention core as a fusion candidate: the chain cuDNN's fused SDPA replaces.

Exporters write ``softmax(Q K^T * scale + mask) V`` as plain ONNX ops, in a few forms:
the TorchScript and dynamo exporters and Hugging Face's eager attention give
``MatMul(Q, Transpose(K))``, then the scale as ``Div`` by sqrt(d) or ``Mul`` by its
inverse (or ``Mul`` on Q and on K^T before the MatMul, as PyTorch's decomposed
``scaled_dot_product_attention`` does), then an additive padding mask (``Add``) and/or a
causal mask (``Where`` on a triangle), ``Softmax`` over the last axis, ``MatMul`` by V.
The candidate holds all of those layers, in execution order; :func:`describe` reads the
shapes and the mask kind back from them for the planner.

Why a separate module: this is one fusion pattern's facts (what it matches, what it
needs), kept together so that the API registry can take it over whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benanza.library import Fusion
from benanza.model.layer import FusionCandidate, Layer

SCALE_OPS = frozenset({"Div", "Mul"})
MASK_OPS = frozenset({"Add", "Where"})
MAX_MASKS = 2  # GPT-2's eager attention: Where (causal), then Add (padding)


@dataclass(frozen=True)
class AttentionShape:
    """The SDPA problem of one candidate: O[b, h, s_q, d_v] = softmax(scale Q K^T + mask) V."""

    batch: int
    heads: int
    s_q: int
    s_kv: int
    d_qk: int
    d_v: int
    causal: bool  # a Where(triangle, scores, -inf): GPT-2's causal mask
    padding: bool  # an Add(scores, mask): an attention_mask made additive (BERT, GPT-2; ViT has none)
    dtype: str  # the model's storage dtype (numpy spelling)

    @property
    def scale(self) -> float:
        """The scale the benchmark applies: 1/sqrt(d), what every exporter writes (its value is not in the IR)."""
        return 1.0 / math.sqrt(self.d_qk)


def producers_of(layers: list[Layer]) -> dict[str, int]:
    """Tensor name -> index of the layer that writes it."""
    return {t.name: layer.index for layer in layers for t in layer.outputs if t.name}


def consumers_of(layers: list[Layer]) -> dict[str, list[int]]:
    """Tensor name -> indices of the layers that read it (each once)."""
    out: dict[str, list[int]] = {}
    for layer in layers:
        for name in dict.fromkeys(t.name for t in layer.inputs):
            out.setdefault(name, []).append(layer.index)
    return out


def _scalar_operand(layer: Layer) -> str | None:
    """For a binary op of a tensor by a one-element tensor (a scale): the tensor's name, else None.

    A Div's divisor must be the scalar; a Mul's scalar may be either input.
    """
    if len(layer.inputs) != 2 or len(layer.outputs) != 1:
        return None
    a, b = layer.inputs
    if math.prod(b.shape) == 1 and tuple(a.shape) == tuple(layer.outputs[0].shape):
        return a.name
    if layer.op == "Mul" and math.prod(a.shape) == 1 and tuple(b.shape) == tuple(layer.outputs[0].shape):
        return b.name
    return None


CHAIN_OPS = SCALE_OPS | MASK_OPS | {"MatMul"}


def _scores_input(add: Layer, layers: list[Layer], producers: dict[str, int]) -> str | None:
    """Which input of a mask Add carries the scores: one with the output's shape, made by the chain's ops."""
    full = [t for t in add.inputs if tuple(t.shape) == tuple(add.outputs[0].shape) and not t.constant]
    made = [t for t in full if t.name in producers and layers[producers[t.name]].op in CHAIN_OPS]
    pick = made or full
    return pick[0].name if len(pick) >= 1 and (len(pick) == 1 or pick[0].name != pick[1].name) else None


def _private(index: int, layers: list[Layer], consumers: dict[str, list[int]], outputs: set[str]) -> bool:
    """Whether ``layers[index]``'s output feeds one layer only and is no model output (fusing it away is legal)."""
    out = layers[index].outputs[0].name
    return len(consumers.get(out, [])) == 1 and out not in outputs and len(layers[index].outputs) == 1


def find_attention(layers: list[Layer], model_outputs: set[str], taken: set[int] | None = None
                   ) -> list[FusionCandidate]:
    """Attention cores of ``layers``, found from each last-axis Softmax outwards; layers in ``taken`` are skipped."""
    taken = set(taken or ())
    producers, consumers = producers_of(layers), consumers_of(layers)
    found: list[FusionCandidate] = []

    def private(i: int) -> bool:
        return _private(i, layers, consumers, model_outputs)

    for soft in layers:
        if soft.op != "Softmax" or soft.index in taken or not soft.inputs or not soft.outputs:
            continue
        rank = len(soft.inputs[0].shape)
        if rank < 3 or int(soft.attrs.get("axis", -1)) % rank != rank - 1 or not private(soft.index):
            continue
        pv = consumers.get(soft.outputs[0].name, [])[0]
        if layers[pv].op != "MatMul" or layers[pv].inputs[0].name != soft.outputs[0].name:
            continue
        members = [soft.index, pv]
        # backwards from the Softmax: masks, the scale, the Q K^T MatMul
        chain, masks, scaled, qk = soft.inputs[0].name, 0, False, None
        while qk is None:
            src = producers.get(chain)
            if src is None or src in taken or not private(src):
                break
            prev = layers[src]
            if prev.op == "Where" and masks < MAX_MASKS and len(prev.inputs) == 3:
                chain, masks = prev.inputs[1].name, masks + 1
            elif prev.op == "Add" and masks < MAX_MASKS and len(prev.inputs) == 2:
                nxt = _scores_input(prev, layers, producers)
                if nxt is None:
                    break
                chain, masks = nxt, masks + 1
            elif prev.op in SCALE_OPS and _scalar_operand(prev) is not None and not scaled:
                chain, scaled = _scalar_operand(prev) or "", True
            elif prev.op == "MatMul":
                qk = prev
            else:
                break
            members.append(src)
        if qk is None:
            continue
        # Q and K^T: a scalar Mul on either, and the Transpose that makes K^T, fuse too
        for pos in (0, 1):
            name = qk.inputs[pos].name
            for _ in range(2):
                src = producers.get(name)
                if src is None or src in taken or not private(src):
                    break
                prev = layers[src]
                if prev.op == "Mul" and _scalar_operand(prev) is not None:
                    members.append(src)
                    name = _scalar_operand(prev) or ""
                elif pos == 1 and prev.op == "Transpose" and _swaps_last_two(prev):
                    members.append(src)
                    name = prev.inputs[0].name
                else:
                    break
        members = sorted(set(members))
        candidate = FusionCandidate(Fusion.ATTENTION.value, tuple(members), tuple(layers[i].key for i in members))
        try:
            describe(candidate, layers)
        except ValueError:
            continue
        taken.update(members)
        found.append(candidate)
    return found


def _swaps_last_two(layer: Layer) -> bool:
    perm = list(layer.attrs.get("perm", []))
    n = len(perm)
    return n >= 2 and perm[-2:] == [n - 1, n - 2]


def describe(candidate: FusionCandidate, layers: list[Layer]) -> AttentionShape:
    """The SDPA problem of an attention candidate; ValueError (one line) when it is not one SDPA can take."""
    members = [layers[i] for i in candidate.layers]
    matmuls = [m for m in members if m.op == "MatMul"]
    if len(matmuls) != 2:
        raise ValueError("an attention core has two MatMuls")
    qk, pv = matmuls
    scores, v, out = qk.outputs[0].shape, pv.inputs[1].shape, pv.outputs[0].shape
    if len(scores) not in (3, 4) or len(v) != len(scores) or len(out) != len(scores):
        raise ValueError(f"attention scores of rank {len(scores)} (SDPA takes [b, h, s, d] or [b*h, s, d])")
    lead = tuple(scores[:-2])
    if tuple(v[:-2]) != lead or tuple(out[:-2]) != lead or tuple(qk.inputs[0].shape[:-2]) != lead:
        raise ValueError("Q, K, V and O do not share their batch and head dimensions")
    b, h = (lead[0], lead[1]) if len(lead) == 2 else (lead[0], 1)
    s_q, s_kv = scores[-2], scores[-1]
    d_qk, d_v = qk.inputs[0].shape[-1], v[-1]
    if v[-2] != s_kv:
        raise ValueError(f"V has {v[-2]} rows, the scores {s_kv} columns")
    ops = {m.op for m in members}
    return AttentionShape(int(b), int(h), int(s_q), int(s_kv), int(d_qk), int(d_v), "Where" in ops, "Add" in ops,
                          qk.inputs[0].dtype)
