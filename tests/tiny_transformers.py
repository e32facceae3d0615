"""Small transformer blocks built with onnx.helper, static shapes, in the forms today's exporters write.

Why here and not checked in: they are a few dozen nodes each and exact by construction,
so the tests build them (seeded weights) until the real exports of the model loader land.

- ``bert_block``: embedding Gather, Q/K/V projections, TorchScript-style attention
  (Transpose of K, ``Div`` by sqrt(d), additive padding mask, last-axis Softmax),
  LayerNormalization, GELU in its Erf form.
- ``gpt2_block``: GPT-2 eager attention (``Div``, causal ``Where`` on a constant triangle,
  then the additive mask), GELU in its tanh form, LayerNormalization, and an RMSNorm
  written as ONNX opset-23 ``RMSNormalization`` is left out (onnx's checker of this
  environment decides the opset); ``sdpa_block``: PyTorch's decomposed SDPA (scale as a
  ``Mul`` on Q and on K^T).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, value: np.ndarray, stem: str = "c") -> str:
        n = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, *shape: int) -> str:
        return self.const((self.rng.standard_normal(shape) * 0.02).astype(np.float32), "w")

    def op(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"/{out}/{op}", **attrs))
        return out

    def linear(self, x: str, d_in: int, d_out: int) -> str:
        return self.op("Add", [self.op("MatMul", [x, self.weight(d_in, d_out)]), self.weight(d_out)])

    def heads(self, x: str, b: int, s: int, h: int, d: int) -> str:
        """[b, s, h*d] -> [b, h, s, d]"""
        r = self.op("Reshape", [x, self.const(np.array([b, s, h, d], np.int64))])
        return self.op("Transpose", [r], perm=[0, 2, 1, 3])

    def merge(self, x: str, b: int, s: int, h: int, d: int) -> str:
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        return self.op("Reshape", [t, self.const(np.array([b, s, h * d], np.int64))])

    def layernorm(self, x: str, hidden: int) -> str:
        return self.op("LayerNormalization", [x, self.weight(hidden), self.weight(hidden)], axis=-1, epsilon=1e-12)

    def model(self, inputs: list[onnx.ValueInfoProto], output: str, shape: list[int], name: str) -> onnx.ModelProto:
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)
        graph = helper.make_graph(self.nodes, name, inputs, [out], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="benanza-tests")
        onnx.checker.check_model(m)
        return m


def bert_block(batch: int = 2, seq: int = 16, heads: int = 2, head_dim: int = 8, vocab: int = 50,
               seed: int = 0) -> onnx.ModelProto:
    """One BERT encoder layer over an embedding lookup (TorchScript exporter's forms)."""
    g, hidden = _Builder(seed), heads * head_dim
    x = g.op("Gather", [g.weight(vocab, hidden), "input_ids"], axis=0)
    x = g.layernorm(x, hidden)
    q = g.heads(g.linear(x, hidden, hidden), batch, seq, heads, head_dim)
    k = g.heads(g.linear(x, hidden, hidden), batch, seq, heads, head_dim)
    v = g.heads(g.linear(x, hidden, hidden), batch, seq, heads, head_dim)
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    scores = g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.array(np.sqrt(head_dim), np.float32))])
    probs = g.op("Softmax", [g.op("Add", [scores, "attention_mask"])], axis=-1)
    ctx = g.merge(g.op("MatMul", [probs, v]), batch, seq, heads, head_dim)
    x = g.layernorm(g.op("Add", [g.linear(ctx, hidden, hidden), x]), hidden)
    f = g.linear(x, hidden, 4 * hidden)  # GELU, Erf form: x * 0.5 * (1 + erf(x / sqrt 2))
    e = g.op("Erf", [g.op("Div", [f, g.const(np.array(np.sqrt(2.0), np.float32))])])
    f = g.op("Mul", [g.op("Mul", [f, g.op("Add", [e, g.const(np.array(1.0, np.float32))])]),
                     g.const(np.array(0.5, np.float32))])
    y = g.layernorm(g.op("Add", [g.linear(f, 4 * hidden, hidden), x]), hidden)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
              helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [batch, 1, 1, seq])]
    return g.model(inputs, y, [batch, seq, hidden], "bert_block")


def gpt2_block(batch: int = 2, seq: int = 16, heads: int = 2, head_dim: int = 8, seed: int = 1) -> onnx.ModelProto:
    """One GPT-2 decoder layer: causal Where then additive mask, GELU tanh form."""
    g, hidden = _Builder(seed), heads * head_dim
    x0 = "hidden_states"
    x = g.layernorm(x0, hidden)
    q = g.heads(g.linear(x, hidden, hidden), batch, seq, heads, head_dim)
    k = g.heads(g.linear(x, hidden, hidden), batch, seq, heads, head_dim)
    v = g.heads(g.linear(x, hidden, hidden), batch, seq, heads, head_dim)
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    scores = g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.array(np.sqrt(head_dim), np.float32))])
    causal = g.const(np.tril(np.ones((seq, seq), bool)).reshape(1, 1, seq, seq), "causal")
    masked = g.op("Where", [causal, scores, g.const(np.array(np.finfo(np.float32).min, np.float32))])
    probs = g.op("Softmax", [g.op("Add", [masked, "attention_mask"])], axis=-1)
    ctx = g.merge(g.op("MatMul", [probs, v]), batch, seq, heads, head_dim)
    x = g.op("Add", [g.linear(ctx, hidden, hidden), x0])
    f = g.linear(g.layernorm(x, hidden), hidden, 4 * hidden)  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    cube = g.op("Mul", [g.op("Pow", [f, g.const(np.array(3.0, np.float32))]), g.const(np.array(0.044715, np.float32))])
    inner = g.op("Mul", [g.op("Add", [f, cube]), g.const(np.array(np.sqrt(2 / np.pi), np.float32))])
    t = g.op("Add", [g.op("Tanh", [inner]), g.const(np.array(1.0, np.float32))])
    f = g.op("Mul", [g.op("Mul", [f, g.const(np.array(0.5, np.float32))]), t])
    y = g.op("Add", [g.linear(f, 4 * hidden, hidden), x])
    inputs = [helper.make_tensor_value_info(x0, TensorProto.FLOAT, [batch, seq, hidden]),
              helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [batch, 1, 1, seq])]
    return g.model(inputs, y, [batch, seq, hidden], "gpt2_block")


def sdpa_block(batch: int = 2, seq: int = 16, heads: int = 2, head_dim: int = 8, seed: int = 2) -> onnx.ModelProto:
    """PyTorch's decomposed scaled_dot_product_attention: sqrt(scale) Mul on Q and on K^T, no mask."""
    g = _Builder(seed)
    shape = [batch, heads, seq, head_dim]
    s = g.const(np.array(head_dim ** -0.25, np.float32))
    q = g.op("Mul", ["q", s])
    kt = g.op("Mul", [g.op("Transpose", ["k"], perm=[0, 1, 3, 2]), s])
    probs = g.op("Softmax", [g.op("MatMul", [q, kt])], axis=-1)
    y = g.op("MatMul", [probs, "v"])
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    return g.model(inputs, y, shape, "sdpa_block")


def rmsnorm_block(batch: int = 2, seq: int = 16, hidden: int = 32, reciprocal: bool = True,
                  seed: int = 3) -> onnx.ModelProto:
    """Hugging Face's LlamaRMSNorm as exported: Pow, ReduceMean, Add(eps), Sqrt, Reciprocal + Mul (or Div), Mul(w)."""
    g = _Builder(seed)
    x = "hidden_states"
    mean = g.op("ReduceMean", [g.op("Pow", [x, g.const(np.array(2.0, np.float32))])], axes=[-1], keepdims=1)
    root = g.op("Sqrt", [g.op("Add", [mean, g.const(np.array(1e-6, np.float32))])])
    normed = g.op("Mul", [x, g.op("Reciprocal", [root])]) if reciprocal else g.op("Div", [x, root])
    y = g.op("Mul", [normed, g.weight(hidden)])
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, seq, hidden])]
    return g.model(inputs, y, [batch, seq, hidden], f"rmsnorm_block{int(reciprocal)}")
