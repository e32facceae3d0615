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
