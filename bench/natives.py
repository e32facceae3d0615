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


# ---------------------------------------------------------------- the --torch-module acceptance matrix
# (bench/torch_mapping.py): torchvision classifiers with weights=None and Hugging Face models with a
# random init, offline, each at ``batch``.

TORCHVISION = ("resnet50", "resnext50_32x4d", "wide_resnet50_2", "regnet_y_400mf", "mobilenet_v2",
               "mobilenet_v3_large", "efficientnet_b0", "mnasnet1_0", "shufflenet_v2_x1_0", "squeezenet1_1",
               "densenet121", "googlenet", "inception_v3", "convnext_tiny", "vit_b_16", "swin_t", "maxvit_t")
SIDE = {"inception_v3": 299}  # input side per model (224 otherwise)


def torchvision_model(name: str, batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """torchvision's ``name`` with random weights (no auxiliary heads) and an image batch."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    kwargs: dict[str, Any] = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=False)
    module = getattr(torchvision.models, name)(**kwargs)
    return module.eval(), (_image(batch, SIDE.get(name, 224)),)


def _tv_factory(name: str) -> Any:
    def factory(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
        return torchvision_model(name, batch)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"torchvision.models.{name}(weights=None) at ``batch``."
    return factory


for _name in TORCHVISION:
    if _name not in globals():
        globals()[_name] = _tv_factory(_name)


class _FirstOutput:
    """Wraps a Hugging Face model so that the module returns one tensor (its first output)."""

    @staticmethod
    def wrap(inner: Any, mask: bool = False, **fixed: Any) -> Any:
        """``mask``: pass an all-ones attention mask (GPT-2 without one looks for packed sequences with
        ``torch.diff``, which the ONNX exporter lacks)."""
        import torch

        class FirstOutput(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                key = "pixel_values" if x.is_floating_point() else "input_ids"
                extra = {"attention_mask": torch.ones_like(x)} if mask else {}
                return self.inner(**{key: x}, **extra, return_dict=False, **fixed)[0]

        return FirstOutput()


def _ids(batch: int, vocab: int) -> Any:
    import torch

    return torch.randint(0, vocab, (batch, SEQ_LEN), generator=torch.Generator().manual_seed(1))


def gpt2_small(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """Hugging Face GPT-2 small (random init, offline), token ids at ``SEQ_LEN``, no cache."""
    import torch
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(SEED)
    inner = GPT2Model(GPT2Config(attn_implementation="sdpa"))
    return _FirstOutput.wrap(inner, mask=True, use_cache=False).eval(), (_ids(batch, inner.config.vocab_size),)


def hf_vit_b16(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """Hugging Face ViT-B/16 (random init, offline) on 224x224 images."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(SEED)
    inner = ViTModel(ViTConfig(attn_implementation="sdpa"), add_pooling_layer=False)
    return _FirstOutput.wrap(inner).eval(), (_image(batch),)


def t5_small_encoder(batch: int = 1) -> tuple[Any, tuple[Any, ...]]:
    """The encoder of Hugging Face T5-small (random init, offline), token ids at ``SEQ_LEN``."""
    import torch
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(SEED)
    config = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64, vocab_size=32128)
    inner = T5EncoderModel(config)
    return _FirstOutput.wrap(inner).eval(), (_ids(batch, config.vocab_size),)


FACTORIES.update({name: globals()[name] for name in TORCHVISION})
FACTORIES.update({"gpt2_small": gpt2_small, "hf_vit_b16": hf_vit_b16, "t5_small_encoder": t5_small_encoder})
