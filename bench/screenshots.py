"""Retake the two report screenshots under docs/ (README links them) from the shipped H100 database and
bundles: ResNet-50 in ONNX Runtime (headline, waterfall, per-layer plot, roofline) and ONNX Runtime vs
PyTorch (headline and its plots). Needs headless Chromium and the zoo (benanza models zoo models/zoo).

    python bench/screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "perfdb" / "bundles"
# (file under docs/, benanza arguments before --html, window height in CSS pixels: down to the last plot)
SHOTS = (
    ("report-resnet50-ort.png", ["analyze", str(ROOT / "models" / "zoo" / "resnet50.onnx"), "--profile",
                                 str(BUNDLES / "resnet50_b1_ort_fp32")], 2600),
    ("compare-resnet50-ort-vs-torch.png", ["compare", str(BUNDLES / "resnet50_b1_ort_fp32"),
                                           str(BUNDLES / "resnet50_b1_torch_fp32")], 1900),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("needs chromium (make browser installs it)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for name, command, height in SHOTS:
            page = Path(tmp) / f"{name}.html"
            subprocess.run([sys.executable, "-m", "benanza", *command, "--html", str(page)], check=True,
                           stdout=subprocess.DEVNULL)
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={tmp}/profile", f"--window-size=1100,{height}",
                            f"--screenshot={args.out / name}", page.as_uri()], check=True, capture_output=True)
            print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
