"""Factories for ``benanza profile --torch-module`` tests (tests/test_torch_module.py): a tiny CNN with
torchvision-style module names, and factories that fail in each way the CLI must report in one line."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn1(self.conv1(x)) + x)


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = nn.Sequential(Block(8), Block(8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layer1(self.stem(x))), 1))


def tiny_net(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return TinyNet(), (torch.randn(batch, 3, 16, 16),)


def raises() -> nn.Module:
    raise RuntimeError("weights file missing\nsecond line")


def not_a_module() -> int:
    return 3


def no_inputs() -> nn.Module:
    return nn.Linear(4, 4)


class Eigh(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.eigh(x @ x.transpose(-1, -2))[0]


def unexportable() -> tuple[nn.Module, torch.Tensor]:
    return Eigh(), torch.randn(2, 4, 4)


# ---------------------------------------------------------------- recorded --torch-module bundles
# (tests/data/modules, written by tests/module_traces.py): small versions of the architectures
# whose mapping failed, each with the trait that broke it.

def tiny_swin(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """torchvision's Swin at toy width: Sequentials in Sequentials (``/features/features.0/features.0.0/Conv``),
    an attention module of ~30 own layers, GELU as a chain, Dropouts with no layer."""
    from torchvision.models.swin_transformer import SwinTransformer

    torch.manual_seed(0)
    module = SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[1, 1], num_heads=[1, 2], window_size=[2, 2],
                             stochastic_depth_prob=0.0, num_classes=10)
    return module.eval(), (torch.randn(batch, 3, 16, 16),)


class Bottlenecks(nn.Module):
    """Two of torchvision's Bottleneck blocks: one ReLU module called three times per block."""

    def __init__(self) -> None:
        from torchvision.models.resnet import Bottleneck

        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.layer1 = nn.Sequential(Bottleneck(16, 4), Bottleneck(16, 4))
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.layer1(self.stem(x)), 1), 1))


def tiny_bottlenecks(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return Bottlenecks().eval(), (torch.randn(batch, 3, 8, 8),)


def tiny_vit(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """torchvision's ViT at toy width: nn.MultiheadAttention, whose inference fast path has no ONNX form."""
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    module = VisionTransformer(image_size=16, patch_size=8, num_layers=1, num_heads=2, hidden_dim=16, mlp_dim=32,
                               num_classes=10)
    return module.eval(), (torch.randn(batch, 3, 16, 16),)
