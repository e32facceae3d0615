"""Native PyTorch models for the closed loop (``bench/close_loop.py --set native``): factories in
the form ``benanza profile --torch-module natives:<name>`` takes (bench/ on ``PYTHONPATH``).

Why: a gap is advice for the run a user has, and most users run their ``nn.Module`` itself,
not an ONNX file through onnx2torch. Each factory builds the module with random weights
(seeded, offline) and returns it with example inputs at ``batch``; the harness builds the
same module again to apply a change to it, so profile and timing run the same code. No
benanza import here.
"""

from __future__ import annotations

from typing import Any

SEED = 0
SEQ_LEN = 128  # BERT's sequence length, as the transformer validation uses


def _image(batch: int, side: int = 224) -> Any:
    import torch

    return torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(1))


def resnet50(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """torchvision's ResNet-50 (v1.5: the stride in the 3x3 convolution)."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    return torchvision.models.resnet50(weights=None).eval(), (_image(batch),)


def googlenet(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """torchvision's GoogLeNet (Inception-v1 with BatchNorm): four branches per Inception block,
    no auxiliary heads (inference)."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    module = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=False)
    return module.eval(), (_image(batch),)


def bert_base(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """Hugging Face BERT-base (random init, offline) with PyTorch's fused attention
    (``attn_implementation="sdpa"``), token ids at ``SEQ_LEN`` and no attention mask (every token
    attends: the mask an all-ones batch would give), returning the last hidden state."""
    import torch
    from transformers import BertConfig, BertModel

    class LastHidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, return_dict=False)[0]

    torch.manual_seed(SEED)
    inner = BertModel(BertConfig(attn_implementation="sdpa"), add_pooling_layer=False)
    ids = torch.randint(0, inner.config.vocab_size, (batch, SEQ_LEN), generator=torch.Generator().manual_seed(1))
    return LastHidden(inner).eval(), (ids,)


def bert_base_eager(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """``bert_base`` with Hugging Face's eager attention: the run before the attention fusion."""
    module, inputs = bert_base(batch)
    return set_attention(module, "eager"), inputs


def set_attention(module: Any, implementation: str) -> Any:
    """A Hugging Face module (``bert_base``'s) switched to ``implementation`` ("eager": the unfused
    MatMul-Softmax-MatMul; "sdpa": PyTorch's fused kernels); other modules are returned as they are."""
    inner = getattr(module, "inner", None)
    if inner is not None and hasattr(inner, "set_attn_implementation"):
        inner.set_attn_implementation(implementation)
    return module


FACTORIES = {"resnet50": resnet50, "googlenet": googlenet, "bert_base": bert_base, "bert_base_eager": bert_base_eager}
