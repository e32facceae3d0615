"""The project of the cluster runs (issue 35, docs/RESULTS.md §11): the ten torchvision CNNs of §2 with
random weights, exported offline at batch 1 (TorchScript exporter, opset 17), then
``benanza generate EXPORTS --batch 1 --dtype fp32,tf32,fp16`` (6 737 jobs with torchvision 0.26).

    python bench/cluster_project.py OUT      # OUT/exports/*.onnx, the project OUT/project
    python bench/cluster_scaling.py OUT/project --warm-up --gpus 4,2,1 --sample 1 --kill-after-s 30 --scheduler-file

The exports run as parallel processes (about 25 s on a 64-core machine, vgg16_bn's 550 MB the longest).
Needs torch and torchvision; prints the project's job count last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CNNS = ("resnet18", "resnet50", "resnet101", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "googlenet",
        "densenet121", "vgg16_bn", "convnext_tiny")
EXPORT = """
import sys, warnings, torch, torchvision
warnings.simplefilter("ignore")
torch.manual_seed(0)
module = torchvision.models.get_model(sys.argv[1], weights=None).eval()
torch.onnx.export(module, (torch.rand(1, 3, 224, 224),), sys.argv[2], input_names=["input"], opset_version=17,
                  dynamo=False)
"""


def export_all(out: Path) -> list[Path]:
    """Each CNN in a process of its own (4 threads each), all at once; one that fails stops the script."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "4"}
    paths = {name: out / f"{name}_b1.onnx" for name in CNNS}
    procs = {name: subprocess.Popen([sys.executable, "-c", EXPORT, name, str(path)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for name, path in paths.items() if not path.exists()}
    errors = {name: proc.communicate()[1] for name, proc in procs.items()}  # read while they run: no full pipe
    failed = [f"{name}: {' '.join(errors[name].strip().splitlines()[-1:])}" for name, proc in procs.items()
              if proc.returncode != 0]
    if failed:
        sys.exit("cluster_project.py: export failed: " + "; ".join(failed))
    return list(paths.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    export_all(args.out / "exports")
    project = args.out / "project"
    done = subprocess.run([sys.executable, "-m", "benanza", "generate", str(args.out / "exports"), "--out",
                           str(project), "--batch", "1", "--dtype", "fp32,tf32,fp16"], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"cluster_project.py: benanza generate failed: {done.stderr.strip()[-500:]}")
    jobs = len(json.loads((project / "manifest.json").read_text())["jobs"])
    print(f"{project}: {jobs} jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
