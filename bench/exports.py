"""Export today's models with both torch.onnx exporters and print benanza's MACs against the published ones.

    python bench/exports.py --out exports/ [--models resnet18,bert_base] [--exporters ts,dynamo] [--skip-export]

Random weights, offline (torchvision models built without weights, transformers models
from a config).  Each model is exported with the TorchScript exporter (opset 17) and the
dynamo exporter (opset 18), batch and sequence dims symbolic; then loaded by benanza at
batch 1 (sequence 128 for the text models) and its MACs compared with the published figure:

- torchvision: the ``_ops`` of the weights' meta (GFLOPs that count a multiply-add once);
- BERT-base, GPT-2 small (s = 128, h = 768, L = 12): L*(12*s*h^2 + 2*s^2*h), plus for BERT the
  pooler's h^2 (GPT-2 as exported here has no LM head);
- ViT-B/16 is a torchvision model (``_ops``).

Prints one Markdown row per (model, exporter): loaded or the one-line error, MACs, published
MACs and their ratio, and the layers without a library mapping.  An exporter that cannot export
a model is a row too.  Needs torch, torchvision, transformers and onnxscript.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import warnings
from pathlib import Path
from typing import Any

SEQ = 128
# example inputs use batch 2: torch.export specializes a dim of size 1 (then "Invalid ranges [2:1]")


def encoder_macs(layers: int, seq: int, hidden: int) -> int:
    return layers * (12 * seq * hidden**2 + 2 * seq**2 * hidden)


TORCHVISION = {  # model builder -> weights enum (for the published _ops) and input side
    "resnet18": ("ResNet18_Weights", 224), "resnet50": ("ResNet50_Weights", 224),
    "mobilenet_v2": ("MobileNet_V2_Weights", 224), "mobilenet_v3_large": ("MobileNet_V3_Large_Weights", 224),
    "efficientnet_b0": ("EfficientNet_B0_Weights", 224), "convnext_tiny": ("ConvNeXt_Tiny_Weights", 224),
    "googlenet": ("GoogLeNet_Weights", 224), "inception_v3": ("Inception_V3_Weights", 299),
    "vit_b_16": ("ViT_B_16_Weights", 224), "swin_t": ("Swin_T_Weights", 224),
}
TEXT = {"bert_base": (encoder_macs(12, SEQ, 768) + 768 * 768), "gpt2_small": encoder_macs(12, SEQ, 768)}


# Config fields that override the published sizes (bench/transformer_campaign.py --tiny: a CPU check).
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {}


def _text_model(name: str) -> tuple[Any, tuple, list[str]]:
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    class Last(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: torch.Tensor) -> Any:
            out = self.inner(*args, return_dict=False)
            return out[0] if name == "gpt2_small" else out[:2]  # BERT: hidden states and the pooler

    if name == "bert_base":
        inner = BertModel(BertConfig(attn_implementation="eager", **CONFIG_OVERRIDES.get(name, {})))
        ids = torch.ones(2, SEQ, dtype=torch.int64)
        return Last(inner).eval(), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"]
    inner = GPT2Model(GPT2Config(use_cache=False, attn_implementation="eager", **CONFIG_OVERRIDES.get(name, {})))
    return Last(inner).eval(), (torch.ones(2, SEQ, dtype=torch.int64),), ["input_ids"]


def export(name: str, exporter: str, out: Path) -> Path:
    import torch

    path = out / f"{name}_{exporter}.onnx"
    torch.manual_seed(0)  # the same weights, so the same file (and digest) on every machine
    if name in TORCHVISION:
        import torchvision

        module = getattr(torchvision.models, name)(weights=None).eval()
        side = TORCHVISION[name][1]
        args, names = (torch.rand(2, 3, side, side),), ["input"]
        axes = {"input": {0: "batch"}}
    else:
        module, args, names = _text_model(name)
        axes = {n: {0: "batch", 1: "seq"} for n in names}
    kwargs: dict[str, Any] = {"input_names": names, "dynamo": exporter == "dynamo",
                              "opset_version": 18 if exporter == "dynamo" else 17}
    if exporter == "dynamo":
        from torch.export import Dim

        dims = {"batch": Dim("batch", min=1, max=1024), "seq": Dim("seq", min=2, max=512)}
        specs = tuple({a: dims[d] for a, d in axes[n].items()} for n in names)
        kwargs["dynamic_shapes"] = {"args": specs} if name in TEXT else list(specs)
        kwargs["external_data"] = False
    else:
        kwargs["dynamic_axes"] = axes
    # the dynamo exporter reports progress on stdout: keep stdout for the table
    # no torch.no_grad(): under it nn.MultiheadAttention takes a fused fast path no exporter knows
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), **kwargs)
    return path


def published(name: str) -> int:
    if name in TEXT:
        return TEXT[name]
    import torchvision

    weights = getattr(torchvision.models, TORCHVISION[name][0]).DEFAULT
    return round(weights.meta["_ops"] * 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("exports"))
    ap.add_argument("--models", default=",".join([*TORCHVISION, *TEXT]))
    ap.add_argument("--exporters", default="ts,dynamo")
    ap.add_argument("--skip-export", action="store_true", help="load the files already in --out")
    args = ap.parse_args()
    from benanza.errors import BenanzaError
    from benanza.model.onnx_import import load_model

    args.out.mkdir(parents=True, exist_ok=True)
    print("| model | exporter | loaded | layers | MACs (G) | published (G) | ratio | ops without a library call |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for name in args.models.split(","):
        for exporter in args.exporters.split(","):
            path = args.out / f"{name}_{exporter}.onnx"
            try:
                if not args.skip_export:
                    export(name, exporter, args.out)
            except Exception as exc:  # an exporter that cannot export a model is a row, not a crash
                cause = exc.__cause__ or exc  # torch.onnx wraps the exporter's own error
                text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(cause).__name__}: {cause}").replace("|", "/")
                line = next((x for x in text.splitlines() if x.strip()), type(cause).__name__)[:160]
                print(f"| {name} | {exporter} | export failed: {line} | | | | | |", flush=True)
                continue
            try:
                model = load_model(path, 1, SEQ if name in TEXT else None)
            except BenanzaError as exc:
                print(f"| {name} | {exporter} | {str(exc)[:160]} | | | | | |", flush=True)
                continue
            macs, ref = sum(layer.macs for layer in model.layers), published(name)
            missing = sorted({layer.op for layer in model.layers if not layer.supported})
            print(f"| {name} | {exporter} | yes | {len(model.layers)} | {macs / 1e9:.3f} | {ref / 1e9:.3f} | "
                  f"{macs / ref:.4f} | {', '.join(missing)} |", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
