"""cuDNN's fused scaled-dot-product attention against the unfused chain, on this machine's GPU.

    python bench/attention.py [--out DIR] [--seq 128,512,2048] [--batch 1,32] [--dtype fp16,bf16]
                              [--heads 12] [--head-dim 64] [--mask padding,causal] [--dry-run | --build-only]

For each (batch, seq, mask) it writes the attention core as the exporters do (BERT's form:
``MatMul(Q, Transpose(K))``, ``Div`` by sqrt(d), ``Add`` of the padding mask, last-axis
``Softmax``, ``MatMul`` by V; GPT-2's causal form puts a ``Where`` on a triangle before the
``Add``), loads it with benanza's model processor, which finds the attention core as a
fusion candidate, plans, generates, builds (CMake + Ninja) and runs every benchmark into
DIR/attention.db, then prints one Markdown row per (batch, seq, mask, dtype):

- unfused: the sum, over the chain's layers, of each layer's fastest checked call
  (strided-batched cuBLASLt matmuls, cudnnSoftmaxForward, cudnnAddTensor/cudnnOpTensor) or,
  for the layers no library call computes (Transpose, Div, Where), their copy-roofline
  bound (a device copy of their output), shown apart as "of which roofline";
- fused: the fastest engine config of cuDNN's fused SDPA (cudnn-frontend ``sdpa``) that
  passed its output check against the fp32 reference;
- fused / unfused.

``--dry-run`` stops after generating (prints the plan's jobs per executable);
``--build-only`` after building.  A second call with the same configuration rebuilds
nothing and runs only the jobs DIR/attention.db lacks (so a run cut short resumes).
The table is also written to DIR/attention.md and DIR/attention.json, and copied with
the database to $OUT when that is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benanza.generate import codegen
from benanza.generate.plan import plan
from benanza.library import Api, Fusion, Precision
from benanza.measure import runner, system
from benanza.model.layer import Model
from benanza.model.onnx_import import load_model
from benanza.store.db import DatabaseSink, open_db

# The unfused chain's calls (cublasGemmEx's 66 algorithms are left out: cuBLASLt's heuristic
# list is what frameworks call), the fused call, and the copy bound of the non-library layers.
APIS = (Api.GRAPH_SDPA, Api.LT_MATMUL, Api.SOFTMAX, Api.ADD_TENSOR, Api.OP_TENSOR, Api.COPY)
MASKS = ("padding", "causal")


def attention_model(batch: int, seq: int, heads: int, head_dim: int, mask: str) -> onnx.ModelProto:
    """The attention core alone, Q/K/V [batch, heads, seq, head_dim] as inputs, in the exporters' form."""
    shape = [batch, heads, seq, head_dim]
    inits = [numpy_helper.from_array(np.array(np.sqrt(head_dim), np.float32), "sqrt_d")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
             helper.make_node("Div", ["qk", "sqrt_d"], ["scores"], name="scale")]
    scores = "scores"
    if mask == "causal":
        tril = np.tril(np.ones((seq, seq), bool)).reshape(1, 1, seq, seq)
        inits += [numpy_helper.from_array(tril, "causal"),
                  numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "lowest")]
        nodes.append(helper.make_node("Where", ["causal", scores, "lowest"], ["causal_scores"], name="causal_mask"))
        scores = "causal_scores"
    nodes += [helper.make_node("Add", [scores, "attention_mask"], ["masked"], name="padding_mask"),
              helper.make_node("Softmax", ["masked"], ["probs"], name="softmax", axis=-1),
              helper.make_node("MatMul", ["probs", "v"], ["o"], name="pv")]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [batch, 1, 1, seq]))
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT, shape)
    graph = helper.make_graph(nodes, f"attention_b{batch}_s{seq}_{mask}", inputs, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench/attention.py")


def models(out: Path, batches: list[int], seqs: list[int], heads: int, head_dim: int, masks: list[str]
           ) -> list[tuple[int, int, str, Model]]:
    """Write and load every configuration's model; each must hold exactly one attention candidate."""
    found = []
    (out / "models").mkdir(parents=True, exist_ok=True)
    for batch in batches:
        for seq in seqs:
            for mask in masks:
                proto = attention_model(batch, seq, heads, head_dim, mask)
                path = out / "models" / f"{proto.graph.name}.onnx"
                onnx.save(proto, path)
                model = load_model(path, batch)
                cands = [f for f in model.fusions if f.pattern == Fusion.ATTENTION.value]
                if len(cands) != 1 or len(cands[0].layers) != len(model.layers):
                    sys.exit(f"{path}: the attention core was not found as one fusion candidate of every layer")
                found.append((batch, seq, mask, model))
    return found


def best(con: sqlite3.Connection, key: str, dtype: str, apis: tuple[str, ...], fusion: str) -> tuple[float, str] | None:
    sql = (f"SELECT median_ms, api, algorithm FROM benchmarks WHERE layer_key = ? AND dtype = ? AND fusion = ? "
           f"AND status = 'ok' AND l2 = 'warm' AND api IN ({', '.join('?' * len(apis))}) ORDER BY median_ms LIMIT 1")
    row = con.execute(sql, (key, dtype, fusion, *apis)).fetchone()
    return (row[0], f"{row[1]} {row[2]}") if row else None


def table(db: Path, configs: list[tuple[int, int, str, Model]], dtypes: list[str]) -> list[dict]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    library = tuple(a.value for a in APIS if a not in (Api.GRAPH_SDPA, Api.COPY))
    rows = []
    for batch, seq, mask, model in configs:
        cand = next(f for f in model.fusions if f.pattern == Fusion.ATTENTION.value)
        for dtype in dtypes:
            unfused, roofline, missing = 0.0, 0.0, []
            for i in cand.layers:
                layer = model.layers[i]
                call = best(con, layer.key, dtype, library, Fusion.NONE.value)
                bound = best(con, layer.key, dtype, (Api.COPY.value,), Fusion.NONE.value)
                if call:
                    unfused += call[0]
                elif bound:
                    unfused += bound[0]
                    roofline += bound[0]
                else:
                    missing.append(layer.op)
            fused = best(con, cand.key, dtype, (Api.GRAPH_SDPA.value,), Fusion.ATTENTION.value)
            rows.append({"batch": batch, "seq": seq, "mask": mask, "dtype": dtype,
                         "unfused (ms)": None if missing else unfused, "of which roofline (ms)": roofline,
                         "fused SDPA (ms)": fused[0] if fused else None,
                         "fused engine": fused[1].split(" ", 1)[1] if fused else "",
                         "fused/unfused": fused[0] / unfused if fused and not missing and unfused else None,
                         "unmeasured layers": ",".join(missing)})
    return rows


def markdown(rows: list[dict]) -> str:
    cols = list(rows[0]) if rows else []
    fmt = [("—" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)) for r in rows for v in r.values()]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for i in range(0, len(fmt), max(len(cols), 1)):
        lines.append("| " + " | ".join(fmt[i:i + len(cols)]) + " |")
    return "\n".join(lines)


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("build/attention"), help="work directory (project, database)")
    ap.add_argument("--seq", type=ints, default=[128, 512, 2048])
    ap.add_argument("--batch", type=ints, default=[1, 32])
    ap.add_argument("--dtype", default="fp16,bf16")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--mask", default=",".join(MASKS))
    ap.add_argument("--max-engines", type=int, default=None, help="engine configs per graph-API job (default: all)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per executable run before it is killed")
    ap.add_argument("--dry-run", action="store_true", help="generate only, print the jobs")
    ap.add_argument("--build-only", action="store_true", help="generate and build, run nothing")
    args = ap.parse_args()
    dtypes = [Precision(d).value for d in args.dtype.split(",")]
    masks = [m for m in args.mask.split(",") if m]
    if bad := [m for m in masks if m not in MASKS]:
        sys.exit(f"--mask: unknown {bad} (choose from {', '.join(MASKS)})")
    out = args.out.resolve()
    t0 = time.monotonic()
    configs = models(out, args.batch, args.seq, args.heads, args.head_dim, masks)
    p = plan([m for *_, m in configs], dtypes, apis=APIS)
    project = out / "project"
    # the configuration alone (not --dry-run/--build-only): a second call rewrites nothing, Ninja rebuilds nothing
    command = (f"python bench/attention.py --seq {','.join(map(str, args.seq))} --batch "
               f"{','.join(map(str, args.batch))} --dtype {','.join(dtypes)} --heads {args.heads} "
               f"--head-dim {args.head_dim} --mask {','.join(masks)}")
    manifest = codegen.generate(p, project, command)
    counts = {exe: spec["num_jobs"] for exe, spec in manifest.executables.items()}
    print(f"{len(configs)} models, {len(p.jobs)} jobs: {counts} ({time.monotonic() - t0:.1f} s)", flush=True)
    if args.dry_run:
        return
    build = runner.build(project, jobs=os.cpu_count())
    print(f"built in {time.monotonic() - t0:.1f} s", flush=True)
    if args.build_only:
        return
    fingerprint = system.fingerprint(bandwidth=True)
    if not fingerprint["usable"]:
        sys.exit(f"no usable NVIDIA GPU ({fingerprint['reason']})")
    db_path = out / "attention.db"
    db = open_db(db_path)
    summary = runner.run(project, DatabaseSink(db), timeout_s=args.timeout, build_dir=build, system=fingerprint,
                         max_engines=args.max_engines)
    print(f"ran in {time.monotonic() - t0:.1f} s: {summary.ok} ok of {summary.results} results, "
          f"{summary.check_failed} check_failed, errors: {summary.errors or 'none'}", flush=True)
    rows = table(db_path, configs, dtypes)
    text = markdown(rows)
    print(f"\n### Attention core, {args.heads} heads x {args.head_dim}, {fingerprint.get('gpu', {})}\n")
    print(text)
    (out / "attention.md").write_text(text + "\n")
    (out / "attention.json").write_text(json.dumps({"system": fingerprint, "rows": rows}, indent=1) + "\n")
    results = Path(os.environ["OUT"]).resolve() if os.environ.get("OUT") else out
    if results != out:  # the device machine returns only what lies under $OUT
        results.mkdir(parents=True, exist_ok=True)
        for name in ("attention.md", "attention.json", "attention.db"):
            shutil.copyfile(out / name, results / name)


if __name__ == "__main__":
    main()
