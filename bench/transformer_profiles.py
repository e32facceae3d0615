"""Profile transformer exports on the GPU and print how much of each run maps to the layers.

    python bench/transformer_profiles.py exports/vit_b_16_dynamo.onnx exports/bert_base_dynamo.onnx \\
        --out bundles/ [--batch 1,32] [--dtype fp32,tf32,fp16] [--framework ort,torch] [--seq-len 128]

One ``benanza profile`` capture per (model, batch, dtype, framework), written to
``--out/<model>_b<batch>_<framework>_<dtype>``, then mapped onto the model's layers.  One
Markdown row each: layers, layers with a framework node (or fused into one), unmapped layers,
the share of kernel time that maps to a layer, and end-to-end / GPU-busy times; a capture that
fails is a row with its one-line error.  Needs a GPU, onnxruntime-gpu and (for torch) onnx2torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benanza.errors import BenanzaError
from benanza.model.onnx_import import load_model
from benanza.profile.bundle import read_bundle
from benanza.profile.capture import capture
from benanza.profile.mapping import kernel_time_mapped, map_bundle_report, summary

FRAMEWORKS = {"ort": "onnxruntime", "torch": "pytorch"}


def row(model: Path, batch: int, dtype: str, framework: str, out: Path, seq_len: int, runs: int) -> str:
    bundle = out / f"{model.stem}_b{batch}_{framework}_{dtype}"
    head = f"| {model.stem} | {batch} | {dtype} | {framework} |"
    try:
        if not bundle.exists():
            capture(model, FRAMEWORKS[framework], batch, dtype, bundle, runs=runs, warmup=5, seq_len=seq_len)
        mapping = map_bundle_report(load_model(model, batch, seq_len), read_bundle(bundle))
    except BenanzaError as exc:
        return f"{head} {str(exc).splitlines()[0][:200]} | | | | |"
    s = summary(mapping)  # layers' kernel time against the kernel time no layer explains
    p = mapping.profile
    mapped = s["with node"] + s["fused into another"]
    share = kernel_time_mapped(p)[0] or 0.0  # memcpy/memset are no kernels
    return (f"{head} {s['layers']} | {mapped} ({100 * mapped / max(s['layers'], 1):.1f} %) | "
            f"{s['unmapped layers']} | {100 * share:.1f} % | {s['end-to-end (ms)']} / {s['GPU busy (ms)']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp32,tf32,fp16")
    ap.add_argument("--framework", default="ort,torch")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print("| model | batch | dtype | framework | layers | mapped (node or fused) | unmapped | kernel time mapped "
          "| e2e / GPU busy (ms) |")
    print("|---|---:|---|---|---:|---:|---:|---:|---|")
    for model in args.models:
        for batch in (int(b) for b in args.batch.split(",")):
            for dtype in args.dtype.split(","):
                for framework in args.framework.split(","):
                    print(row(model, batch, dtype, framework, args.out, args.seq_len, args.runs), flush=True)


if __name__ == "__main__":
    main()
