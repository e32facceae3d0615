"""Regenerate the small export corpus in this directory (needs torch, transformers, onnxscript).

Why: the loader must read what today's exporters write (TorchScript and dynamo
``torch.onnx.export``, opsets 17-20, symbolic batch/sequence dims, Shape->Gather->
Concat->Reshape chains), and CI has no torch.  These are tiny configurations of the
real architectures (a few tens of KB each), exported with random weights, offline;
the tests load the checked-in files.  Run from the repository root:

    python tests/data/exports/make_exports.py
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).parent
SEQ = 16  # the sequence length the exporters trace with (the exports keep it symbolic)


class Block(nn.Module):
    """A ResNet basic block: module names like torchvision's (layer1.0.conv1, ...)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + x)


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(Block(8), Block(8))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.maxpool(self.relu(self.bn1(self.conv1(x)))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _bert() -> nn.Module:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    return BertModel(cfg).eval()


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=64, use_cache=False,
                     attn_implementation="eager")
    return GPT2Model(cfg).eval()


def _vit() -> nn.Module:
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, attn_implementation="eager")
    return ViTModel(cfg, add_pooling_layer=False).eval()


class LastHidden(nn.Module):
    """A Hugging Face model returning only ``last_hidden_state`` (one plain output)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.inner(*args, return_dict=False)[0]


def _export(module: nn.Module, args: tuple, path: Path, names: list[str], dynamic: dict, opset: int,
            dynamo: bool) -> None:
    kwargs = dict(input_names=names, output_names=["out"], opset_version=opset, dynamo=dynamo)
    if dynamo:
        from torch.export import Dim

        dims = {"batch": Dim("batch", min=1, max=1024), "seq": Dim("seq", min=2, max=64)}
        specs = [{axis: dims[d] for axis, d in dynamic[n].items()} for n in names]
        # LastHidden.forward takes *args: its shapes go under "args"
        kwargs["dynamic_shapes"] = {"args": tuple(specs)} if isinstance(module, LastHidden) else specs
        kwargs["external_data"] = False
    else:
        kwargs["dynamic_axes"] = {n: dict(dynamic[n]) for n in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), **kwargs)
    _strip_metadata(path)
    print(f"{path.name}: {path.stat().st_size} bytes", file=sys.stderr)


def _strip_metadata(path: Path) -> None:
    """Drop doc strings and per-node metadata (the dynamo exporter's stack traces): most of a tiny file."""
    import onnx

    model = onnx.load(str(path))
    del model.metadata_props[:]
    model.graph.doc_string = ""
    for node in model.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    for value in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        del value.metadata_props[:]
    onnx.save(model, str(path))


def main() -> None:
    torch.manual_seed(0)
    ids = torch.ones(2, SEQ, dtype=torch.int64)
    image = torch.rand(2, 3, 32, 32)
    text = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    cases = [
        ("tinyresnet", TinyResNet().eval(), (image,), ["input"], {"input": {0: "batch"}}),
        ("tinybert", LastHidden(_bert()), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"], text),
        ("tinygpt2", LastHidden(_gpt2()), (ids,), ["input_ids"], {"input_ids": text["input_ids"]}),
        ("tinyvit", LastHidden(_vit()), (image,), ["pixel_values"], {"pixel_values": {0: "batch"}}),
    ]
    for stem, module, args, names, dynamic in cases:
        for kind, opset in (("ts", 17), ("dynamo", 18), ("dynamo", 20)):
            try:
                _export(module, args, HERE / f"{stem}_{kind}{opset}.onnx", names, dynamic, opset, kind == "dynamo")
            except Exception as exc:  # an exporter that cannot do a model is recorded, not hidden
                line = next((ln for ln in str(exc).strip().splitlines() if ln.strip()), type(exc).__name__)
                print(f"{stem} {kind} opset {opset}: cannot export: {line[:200]}", file=sys.stderr)


if __name__ == "__main__":
    main()
