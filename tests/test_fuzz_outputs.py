"""Outputs are whole or absent: a failed write leaves no partial file and a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benanza.atomic import write_text
from benanza.errors import BenanzaError

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "models" / "fusions.onnx"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_layers_json_to_a_full_stdout_fails_in_one_line() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "benanza", "layers", "--json", str(MODEL)], stdout=full,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode != 0
    assert done.stderr.startswith("error: stdout: cannot write (No space left on device)"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_text(path, "old")
    def full_disk(fd: int) -> None:  # the disk fills up just before the data is safe
        raise OSError(28, "No space left on device")

    with pytest.raises(BenanzaError, match=r"report\.json: cannot write"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", full_disk)
        write_text(path, "new and longer")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_every_output_target_kind_keeps_its_promises(tmp_path: Path) -> None:
    """The seeded output-path fuzzer's CI subset (tests/hostile_outputs.py; the full run is
    bench/fuzz_outputs.py): each target kind once, the commands in turn, a third with --force."""
    import hostile_databases
    import hostile_outputs

    small = hostile_databases.base_db(tmp_path / "small.db")
    commands = hostile_outputs.COMMANDS
    verdicts = {(commands[i % len(commands)].name, target, i % 3 == 0):
                hostile_outputs.check(commands[i % len(commands)], target, i % 3 == 0, small)
                for i, target in enumerate(hostile_outputs.TARGETS)}
    broken = {k: v for k, v in verdicts.items() if v not in ("ok", "refused")}
    assert not broken, broken
    assert "ok" in verdicts.values() and "refused" in verdicts.values()
