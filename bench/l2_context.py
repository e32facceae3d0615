"""What a batch-1 GEMM pays after other kernels (docs/RESULTS.md §6; session 10's run: at 83e8fcb, §8): its CUPTI
duration back to back, after a tiny kernel, with rotated weights, after a 64 MB read and after a
64 MB write (L2 lines left dirty), each sequence replayed as a CUDA graph so no launch gap differs.

Why: the library-call as-executed check reads 0.89-0.97 at batch 1 and ~1.0 at batch 32; this
separates the candidate causes (cold weights, launch gaps, L2 state left by earlier kernels).

    python bench/l2_context.py          # needs a GPU and torch; about 10 s
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

SHAPES = [(197, 768, 2304, torch.float32), (197, 3072, 768, torch.float32),
          (128, 768, 2304, torch.float16), (128, 768, 3072, torch.float16)]  # ViT-B/16 tf32, GPT-2 fp16
COPIES = 16  # weight copies of the rotated modes
STEPS = 64  # GEMMs per captured graph
REPLAYS = 10


def kernel_durations(prof) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    kernels = sorted((float(e["ts"]), e["name"], float(e["dur"])) for e in events if e.get("cat") == "kernel")
    return [(name, dur) for _, name, dur in kernels]


def timed(step: Callable[[int], object]) -> list[tuple[str, float]]:
    """The kernels of REPLAYS replays of a graph of STEPS calls of ``step``."""
    for i in range(4):
        step(i)
    torch.cuda.synchronize()
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        for i in range(STEPS):
            step(i)
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    return kernel_durations(prof)


def run(m: int, k: int, n: int, dtype: torch.dtype) -> dict[str, float]:
    torch.backends.cuda.matmul.allow_tf32 = True
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    weights = [torch.randn(k, n, device="cuda", dtype=dtype) for _ in range(COPIES)]
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    big = torch.empty(16 * 2**20, device="cuda")  # 64 MB, beyond the 50 MB L2
    total = torch.empty(1, device="cuda")
    tiny = torch.zeros(256, device="cuda")

    def gemm(i: int = 0) -> None:
        torch.matmul(a, weights[i % COPIES], out=c)

    gemm_names = {name for name, _ in timed(lambda i: gemm())}  # the GEMM's own kernels (split-K included)
    modes: dict[str, Callable[[int], object]] = {
        "back to back": lambda i: gemm(),
        "after a tiny kernel": lambda i: (tiny.add_(1.0), gemm()),
        "rotated weights": gemm,
        "after a 64 MB read": lambda i: (torch.sum(big, 0, keepdim=True, out=total), gemm()),
        "after a 64 MB write": lambda i: (big.fill_(1.0), gemm()),
        "rotated + 64 MB write": lambda i: (big.fill_(1.0), gemm(i)),
    }
    out = {}
    for mode, step in modes.items():
        kernels = [d for name, d in timed(step) if name in gemm_names]
        per = len(kernels) // (STEPS * REPLAYS) or 1  # a split-K GEMM is two kernels
        per_call = [sum(kernels[i:i + per]) for i in range(0, len(kernels), per)]
        out[mode] = statistics.median(per_call)
    return out


def main() -> None:
    modes: list[str] = []
    rows = []
    for m, k, n, dtype in SHAPES:
        res = run(m, k, n, dtype)
        modes = list(res)
        rows.append((f"{m} x {k} x {n} ({str(dtype).removeprefix('torch.')})", res))
    print("| GEMM | " + " | ".join(modes) + " |")
    print("|---|" + "---|" * len(modes))
    for label, res in rows:
        base = res[modes[0]]
        cells = [f"{res[x]:.2f} µs ({100 * (res[x] / base - 1):+.0f} %)" for x in modes]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
