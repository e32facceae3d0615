"""Where a profile's time goes (issue 32: profile capture ≤ 15 s per bundle for a CNN at batch 32).

    python bench/profile_time.py --out OUT [--cells resnet50_module,resnet50_torch,resnet50_ort] [--batch 32]

Runs ``benanza profile`` as a user would (latency and profiled runs as the defaults have them), one
cell after another on an idle GPU, times each whole command, and prints the phases the bundle's
meta.json records (``extra.capture_s``: the parent's phases and, inside each child, start-up, import,
build, warm-up, timed runs, trace writing). Writes OUT/profile_time.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# cell -> the profile command's model arguments (the zoo file is fetched by `benanza models zoo`)
CELLS = {
    "resnet50_module": ["--torch-module", "natives:resnet50"],
    "resnet50_torch": ["{zoo}/resnet50.onnx", "--framework", "torch"],
    "resnet50_ort": ["{zoo}/resnet50.onnx", "--framework", "onnxruntime"],
}


def run_cell(name: str, args: argparse.Namespace) -> dict:
    out = Path(args.out) / name
    what = [a.format(zoo=args.zoo) for a in CELLS[name]]
    cmd = [sys.executable, "-m", "benanza", "profile", *what, "--batch", str(args.batch), "--dtype", args.dtype,
           "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(BENCH), os.environ.get("PYTHONPATH"))))}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if done.returncode:
        return {"cell": name, "wall_s": wall, "error": (done.stderr or done.stdout).strip()[-300:]}
    meta = json.loads((out / "meta.json").read_text())
    return {"cell": name, "command": " ".join(cmd[1:]), "wall_s": round(wall, 2),
            "capture_s": meta["extra"].get("capture_s", {})}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--cells", default=",".join(CELLS))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--zoo", default=str(ROOT / "models" / "zoo"))
    args = p.parse_args()
    if any("{zoo}" in a for c in args.cells.split(",") for a in CELLS[c]) and not Path(args.zoo).is_dir():
        subprocess.run([sys.executable, "-m", "benanza", "models", "zoo", args.zoo], check=True)
    results = [run_cell(c.strip(), args) for c in args.cells.split(",")]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "profile_time.json").write_text(json.dumps(results, indent=1))
    for r in results:
        print(f"\n{r['cell']}: {r['wall_s']:.1f} s" + (f"  ERROR {r['error']}" if "error" in r else ""))
        for phase, v in r.get("capture_s", {}).items():
            if isinstance(v, dict):
                print(f"  {phase}: " + ", ".join(f"{k} {x:.1f}" for k, x in v.items()))
            else:
                print(f"  {phase}: {v:.1f} s")


if __name__ == "__main__":
    main()
