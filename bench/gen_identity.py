"""Whether a refactor changed any generated source: hash every file ``benanza generate`` writes.

    python bench/gen_identity.py record  REF_DIR [--benanza BIN]   # write REF_DIR/sha256.txt
    python bench/gen_identity.py compare REF_DIR [--benanza BIN]   # exit 1 on any difference

Generates the zoo (models/zoo, ``benanza models zoo`` fills it) at batches 1,8 in fp32, tf32,
fp16 and bf16, plus one project per shipped profile bundle (``--from-profile``: the
planner's executed-call path), always into the same directory (the manifest records the
command line), and lists one SHA-256 per file, the venv's path (benchmarks.cmake's include
directories) replaced by ``<venv>`` so that two checkouts compare.  ``--no-generate`` hashes
what the last run left in the work directory.  ``compare`` prints the files whose bytes
differ, are missing or are new against the reference.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = Path("/tmp/benanza_gen_identity")  # fixed: manifest.json records the --out path


def _runs(zoo: Path) -> dict[str, list[str]]:
    runs = {"zoo": [str(zoo), "--batch", "1,8", "--dtype", "fp32,tf32,fp16,bf16"]}
    for bundle in sorted((ROOT / "perfdb" / "bundles").iterdir()):
        runs[f"profile_{bundle.name}"] = [str(zoo), "--from-profile", str(bundle)]
    return runs


def hashes(benanza: str, zoo: Path, generate: bool = True) -> dict[str, str]:
    """Relative path -> SHA-256 of every generated file, over every run."""
    venv = str(Path(benanza).absolute().parent.parent).encode()
    out: dict[str, str] = {}
    for name, args in _runs(zoo).items():
        target = WORK / name
        if generate:
            shutil.rmtree(target, ignore_errors=True)
            done = subprocess.run([benanza, "generate", *args, "--out", str(target)], capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{name}: benanza generate failed:\n{done.stderr or done.stdout}")
        for path in sorted(p for p in target.rglob("*") if p.is_file()):
            data = path.read_bytes().replace(venv, b"<venv>")
            out[f"{name}/{path.relative_to(target)}"] = hashlib.sha256(data).hexdigest()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("record", "compare"))
    parser.add_argument("ref", type=Path)
    parser.add_argument("--benanza", default=str(Path(sys.executable).parent / "benanza"))
    parser.add_argument("--zoo", type=Path, default=ROOT / "models" / "zoo")
    parser.add_argument("--no-generate", action="store_true", help="hash the last run's files")
    args = parser.parse_args()
    got = hashes(args.benanza, args.zoo, generate=not args.no_generate)
    manifest = args.ref / "sha256.txt"
    if args.mode == "record":
        args.ref.mkdir(parents=True, exist_ok=True)
        manifest.write_text("".join(f"{h}  {p}\n" for p, h in got.items()))
        print(f"{len(got)} files recorded in {manifest}")
        return
    want = dict(reversed(line.split("  ", 1)) for line in manifest.read_text().splitlines())
    bad = sorted({p for p in want.keys() | got.keys() if want.get(p) != got.get(p)})
    for p in bad:
        print(f"{'missing' if p not in got else 'new' if p not in want else 'differs'}: {p}")
    print(f"{len(got)} files generated, {len(want)} in the reference, {len(bad)} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
