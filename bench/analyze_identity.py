"""Whether a speed-up changed any number ``benanza analyze`` prints: hash its outputs per shipped bundle.

    python bench/analyze_identity.py record  REF_DIR [--benanza CMD | --checkout DIR] [--zoo models/zoo]
    python bench/analyze_identity.py compare REF_DIR [--benanza CMD] [--zoo models/zoo]

Runs ``benanza analyze <model> --profile <bundle> --json --csv --trace`` for every bundle under
perfdb/bundles (against the shipped H100 database), plus one model without a bundle, and keeps the
JSON, CSV, trace and terminal output (stdout and stderr) in REF_DIR. ``compare`` runs the same and
lists every file whose bytes differ from the reference (exit 1 on any). Each command runs twice, so
that a first call and a cached later call are both compared. ``--benanza`` is a command line;
``--checkout DIR`` runs the benanza package of another source tree (e.g. ``git archive BASE | tar -x
-C DIR``) with this venv, past its editable install, from this checkout, so that the paths in the
outputs are the same.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# ``python -c`` program that runs the CLI of the benanza package in the directory argv[1] names
OTHER_CHECKOUT = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower() "
                  "and 'skbc' not in repr(f)]; sys.path.insert(0, sys.argv.pop(1)); "
                  "from benanza.cli import main; main()")
OUTPUTS = ("json", "csv", "trace")


def _cases(zoo: Path) -> dict[str, list[str]]:
    sys.path.insert(0, str(ROOT))
    from benanza.profile.bundle import read_bundle
    from benanza.profile.catalog import bundle_model

    cases = {"resnet50_no_profile": [str(zoo / "resnet50.onnx"), "--batch", "64"]}
    for bundle in sorted((ROOT / "perfdb" / "bundles").iterdir()):
        model = bundle_model(zoo, read_bundle(bundle))
        cases[bundle.name] = [str(model), "--profile", str(bundle)]
    return cases


def run(benanza: list[str], zoo: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, args in _cases(zoo).items():
        for call in ("first", "later"):
            files = {kind: out / f"{name}.{call}.{kind}" for kind in OUTPUTS}
            command = [*benanza, "analyze", *args, *(a for kind, f in files.items() for a in (f"--{kind}", str(f)))]
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            stdout = "\n".join(line for line in done.stdout.splitlines() if not line.startswith("wrote "))
            stderr = "\n".join(line for line in done.stderr.splitlines()
                               if not line.startswith(("parsing ", "parsed ", "unpacking ")))
            (out / f"{name}.{call}.out").write_text(f"rc {done.returncode}\n{stdout}\n--- stderr\n{stderr}\n")
            print(f"{name} ({call}): rc {done.returncode}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("record", "compare"))
    parser.add_argument("ref", type=Path)
    parser.add_argument("--benanza", default=str(Path(sys.executable).parent / "benanza"))
    parser.add_argument("--checkout", type=Path, help="run the benanza package of this source tree instead")
    parser.add_argument("--zoo", type=Path, default=ROOT / "models" / "zoo")
    args = parser.parse_args()
    if args.checkout:
        args.benanza = shlex.join([sys.executable, "-c", OTHER_CHECKOUT, str(args.checkout.resolve())])
    if args.action == "record":
        run(shlex.split(args.benanza), args.zoo, args.ref)
        return 0
    new = args.ref.with_name(args.ref.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    run(shlex.split(args.benanza), args.zoo, new)
    ref_files = {p.name for p in args.ref.iterdir()}
    new_files = {p.name for p in new.iterdir()}
    differ = sorted(n for n in ref_files & new_files if (args.ref / n).read_bytes() != (new / n).read_bytes())
    for name in differ:
        print(f"differs: {name}")
    for name in sorted(ref_files - new_files):
        print(f"missing: {name}")
    for name in sorted(new_files - ref_files):
        print(f"new: {name}")
    print(f"{len(ref_files & new_files) - len(differ)} of {len(ref_files | new_files)} files identical")
    return 1 if differ or ref_files != new_files else 0


if __name__ == "__main__":
    sys.exit(main())
