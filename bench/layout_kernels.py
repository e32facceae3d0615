"""Where a layout change saves GPU time: the kernels of a native torchvision model in NCHW and in
channels_last, per kernel name, from PyTorch's own profiler (no benanza code).

Why: the layout gap (docs/METRICS.md) counts the convolutions' calls in each layout; the closed loop
(bench/close_loop.py, docs/RESULTS.md) realized more than it predicted. This splits the realized
saving into the kernels that changed: convolutions, layout conversions, elementwise and the rest.

    python bench/layout_kernels.py [--model resnet50] [--batch 64] [--iters 10] [--json OUT]   # on a GPU
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

# Kernel-name markers per kind, first match wins (PyTorch 2.11 / cuDNN 9.19 names on an H100).
KINDS = (("layout conversion", ("nchwToNhwc", "nhwcToNchw", "transpose", "convertTensor")),
         ("convolution", ("conv", "xmma", "sm90", "cutlass", "implicit_gemm", "cudnn")),
         ("batch norm", ("batch_norm", "bn_fw")),
         ("elementwise", ("elementwise", "vectorized", "unrolled")),
         ("pooling", ("pool",)))


def kind_of(name: str) -> str:
    low = name.lower()
    return next((k for k, marks in KINDS if any(m.lower() in low for m in marks)), "other")


def kernel_times(model, x, iters: int) -> dict[str, float]:
    """Per kernel name: GPU ms per iteration over ``iters`` profiled iterations."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                model(x)
            torch.cuda.synchronize()
    out: dict[str, float] = defaultdict(float)
    for ev in prof.events():
        if ev.device_type.name == "CUDA" and ev.device_time > 0:
            out[ev.name] += ev.device_time / 1e3 / iters  # us -> ms
    return dict(out)


def main() -> None:
    import torch
    import torchvision

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.benchmark_limit = 0
    runs = {}
    for layout, fmt in (("NCHW", torch.contiguous_format), ("channels_last", torch.channels_last)):
        model = getattr(torchvision.models, args.model)(weights=None).eval().half().cuda()
        model = model.to(memory_format=fmt)
        x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=fmt)
        runs[layout] = kernel_times(model, x, args.iters)
    by_kind = {layout: defaultdict(float) for layout in runs}
    for layout, times in runs.items():
        for name, ms in times.items():
            by_kind[layout][kind_of(name)] += ms
    print(f"{args.model} b{args.batch} fp16, cudnn.benchmark on, benchmark_limit 0: GPU ms per iteration")
    print("| kind | NCHW (ms) | channels_last (ms) | saved (ms) |\n|---|---|---|---|")
    kinds = sorted(set(by_kind["NCHW"]) | set(by_kind["channels_last"]), key=lambda k: -by_kind["NCHW"].get(k, 0))
    for k in kinds:
        a, b = by_kind["NCHW"].get(k, 0.0), by_kind["channels_last"].get(k, 0.0)
        print(f"| {k} | {a:.3f} | {b:.3f} | {a - b:.3f} |")
    total = [sum(runs[layout].values()) for layout in runs]
    print(f"| all | {total[0]:.3f} | {total[1]:.3f} | {total[0] - total[1]:.3f} |")
    names = set(runs["NCHW"]) | set(runs["channels_last"])
    delta = sorted(names, key=lambda n: -abs(runs["NCHW"].get(n, 0) - runs["channels_last"].get(n, 0)))[:12]
    print("\nlargest changes per kernel name (NCHW -> channels_last, ms):")
    for n in delta:
        print(f"  {runs['NCHW'].get(n, 0):8.3f} -> {runs['channels_last'].get(n, 0):8.3f}  [{kind_of(n)}] {n[:110]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "kernels": runs}, f, indent=1)


if __name__ == "__main__":
    main()
