"""Capture the real PyTorch Kineto trace that tests/test_profile_kineto.py reads.

Run on a machine with an NVIDIA GPU and PyTorch (it was run once on an H100 with
PyTorch 2.11 + CUDA 13.0); it writes ``torch2.11_smallcnn_b1_trace.json.gz`` into
the directory given as the first argument. The model is a small CNN at batch 1,
three profiled runs each inside a ``record_function("model_run")`` range, with the
input copied host-to-device inside the run so that the trace holds a memcpy too.
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10), nn.Softmax(dim=1),
    ).to(dev).eval()
    x_host = torch.randn(1, 3, 32, 32).pin_memory()
    with torch.no_grad():
        for _ in range(3):  # warm-up: cuDNN heuristics, allocator
            model(x_host.to(dev, non_blocking=True))
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for _ in range(3):
                with record_function("model_run"):
                    y = model(x_host.to(dev, non_blocking=True))
                    y.cpu()
            torch.cuda.synchronize()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "torch_trace.json"
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(out / f"torch{torch.__version__.split('+')[0][:4]}_smallcnn_b1_trace.json.gz",
                                          "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())


if __name__ == "__main__":
    main(sys.argv[1])
