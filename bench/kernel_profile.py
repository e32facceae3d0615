"""Per-kernel GPU time of native torchvision runs, to set beside the bound's charges per layer class.

Why: a cell whose bound lies above the framework's kernel time names no layer; this says which
kernels the framework ran and how long each took (torch.profiler, inference mode, 3 iterations after
5 warm-up runs, random weights and inputs). Shares no code with benanza.

    python bench/kernel_profile.py            # on the GPU; writes $OUT/kprof.json (else ./kprof.json)
"""

from __future__ import annotations

import collections
import json
import os

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

CASES = [("convnext_tiny", 64, "tf32"), ("vit_b_16", 32, "tf32"), ("vit_b_16", 32, "fp16"),
         ("efficientnet_b0", 64, "fp16"), ("mobilenet_v2", 64, "fp16"), ("convnext_tiny", 64, "fp16")]
ITERS = 3


def top(times: dict[str, float], n: int) -> dict[str, float]:
    return dict(sorted(times.items(), key=lambda kv: -kv[1])[:n])


def one_case(arch: str, batch: int, precision: str) -> dict[str, object]:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.benchmark = False
    dtype = torch.float16 if precision == "fp16" else torch.float32
    torch.manual_seed(0)
    net = torchvision.models.get_model(arch, weights=None).eval().to("cuda", dtype)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype)
    with torch.inference_mode():
        for _ in range(5):
            net(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(ITERS):
                net(x)
            torch.cuda.synchronize()
    kernels: dict[str, float] = collections.defaultdict(float)
    ops: dict[str, float] = collections.defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name[:120]] += event.device_time / ITERS / 1e3
    for avg in prof.key_averages():
        if avg.key.startswith("aten::") and avg.self_device_time_total > 0:
            ops[avg.key] += avg.self_device_time_total / ITERS / 1e3
    return {"kernel_ms_sum": sum(kernels.values()), "kernels": top(kernels, 40), "aten_self_ms": top(ops, 30)}


def main() -> None:
    out = {}
    for arch, batch, precision in CASES:
        out[f"{arch}_b{batch}_{precision}"] = case = one_case(arch, batch, precision)
        print(f"{arch} b{batch} {precision}: {case['kernel_ms_sum']:.3f} ms of kernels", flush=True)
        torch.cuda.empty_cache()
    path = os.path.join(os.environ.get("OUT", "."), "kprof.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
