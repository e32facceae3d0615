"""Time the model processor on the nine light ONNX zoo models (DenseNet-121 must stay under 1 s).

    PYTHONPATH=. python bench/process.py [--batch N] [--repeat R]

Prints, per model, the best of R runs of ``load_model`` (read, fold, infer shapes,
normalize, cost, DAG, fusions), its layer count, and the totals, including the
number of unique layer keys across the zoo against the number of layers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import onnx

from benanza.model.onnx_import import load_model

ZOO_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
BUDGET_S = {"densenet121": 1.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    total_s, total_layers, keys, failed = 0.0, 0, set(), []
    print(f"{'model':<16}{'layers':>8}{'best (ms)':>12}")
    for path in sorted(ZOO_DIR.glob("light_*.onnx")):
        name = path.stem.removeprefix("light_")
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            model = load_model(path, args.batch)
            times.append(time.perf_counter() - start)
        best = min(times)
        total_s += best
        total_layers += len(model.layers)
        keys |= model.unique_keys
        print(f"{name:<16}{len(model.layers):>8}{best * 1e3:>12.1f}")
        if best > BUDGET_S.get(name, float("inf")):
            failed.append(f"{name}: {best:.2f} s > {BUDGET_S[name]} s")
    print(f"{'total':<16}{total_layers:>8}{total_s * 1e3:>12.1f}")
    print(f"unique layer keys across the zoo: {len(keys)} of {total_layers} layers")
    for line in failed:
        print(f"over budget: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
