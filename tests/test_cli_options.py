"""One voice across the commands: the --dtype parser, the --api flag, --db with the shipped .xz,
piped output, the next command after generate, pipeline's order and its missing-cuDNN line,
`benanza bundles`, and the README's quick start. Through the CLI on the zoo and the shipped data."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.paths import perfdb_dir

SQUEEZENET = LIGHT / "light_squeezenet.onnx"
ROOT = Path(__file__).resolve().parent.parent
WORDING = "--dtype: unknown fp64; choose from fp32, tf32, fp16, bf16"


def invoke(args: list[str]) -> tuple[int, str]:
    out = CliRunner().invoke(main, args)
    return out.exit_code, out.output


def commands_with_dtype(tmp_path: Path) -> dict[str, list[str]]:
    return {
        "analyze": ["analyze", str(SQUEEZENET)],
        "generate": ["generate", str(SQUEEZENET), "--out", str(tmp_path / "g")],
        "run": ["run", str(SQUEEZENET), "--db", str(tmp_path / "r.db"), "--project-dir", str(tmp_path / "r")],
        "pipeline": ["pipeline", str(SQUEEZENET), "--db", str(tmp_path / "p.db"), "--project-dir", str(tmp_path / "p")],
        "quickstart": ["quickstart", str(tmp_path), "--out", str(tmp_path / "q")],
        "profile": ["profile", str(SQUEEZENET), "--out", str(tmp_path / "b")],
    }


@pytest.mark.parametrize("command", ["analyze", "generate", "run", "pipeline", "quickstart", "profile"])
@pytest.mark.parametrize("bad, says", [("fp64", WORDING), ("fp32,,tf32", "--dtype: empty item in 'fp32,,tf32'")])
def test_every_command_refuses_a_bad_dtype_in_one_wording(command: str, bad: str, says: str, tmp_path: Path) -> None:
    code, output = invoke([*commands_with_dtype(tmp_path)[command], "--dtype", bad])
    assert code == 1, output
    assert output.strip() == f"error: {says}; choose from fp32, tf32, fp16, bf16" if "empty" in says \
        else output.strip() == f"error: {says}"


def test_dtype_is_case_insensitive_and_keeps_the_order_given(tmp_path: Path) -> None:
    code, output = invoke(["generate", str(SQUEEZENET), "--out", str(tmp_path / "g"), "--dtype", "TF32,Fp32"])
    assert code == 0, output
    manifest = (tmp_path / "g" / "manifest.json").read_text()
    assert '"tf32"' in manifest and '"fp32"' in manifest


def test_analyze_takes_api_and_no_longer_apis() -> None:
    code, output = invoke(["analyze", str(SQUEEZENET), "--api", "legacy"])
    assert code == 0, output
    assert "apis=legacy" in output
    assert "│ heuristic " in output  # captured output is not a terminal: wide, never "heurist/ic"
    code, output = invoke(["analyze", str(SQUEEZENET), "--apis", "legacy"])
    assert code == 2 and "No such option '--apis'" in output


@pytest.mark.parametrize("args", [["analyze", str(SQUEEZENET), "--db"], ["db", "info"], ["db", "systems"]])
def test_db_accepts_the_shipped_xz(args: list[str]) -> None:
    code, output = invoke([*args, str(perfdb_dir() / "h100.columns.xz")])
    assert code == 0, output
    assert "H100" in output


def test_piped_output_stays_wide() -> None:
    """A pipe is not a terminal: no 80-column fallback that folds words and elides ids."""
    done = subprocess.run([sys.executable, "-m", "benanza", "db", "systems", str(perfdb_dir() / "h100.columns.xz")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    row = next(line for line in done.stdout.splitlines() if "H100" in line)
    assert "NVIDIA H100 80GB HBM3" in row and "9.19.0" in row and "13.1.0" in row


def test_generate_prints_the_next_command(tmp_path: Path) -> None:
    code, output = invoke(["generate", str(SQUEEZENET), "--out", str(tmp_path / "proj")])
    assert code == 0, output
    assert f"benanza run {tmp_path / 'proj'} --db perf.db" in output.replace("\n", "")
    assert "cmake -S" not in output


def pipeline(tmp_path: Path, name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benanza", "pipeline", str(SQUEEZENET), "--db",
                           str(tmp_path / f"{name}.db"), "--project-dir", str(tmp_path / name), "--dtype",
                           "tf32,fp16,fp32"], capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def test_pipeline_generates_the_same_project_whatever_the_hash_seed(tmp_path: Path) -> None:
    """Precisions were a frozenset: job numbering and sources changed between runs (and every
    rerun rebuilt). No cmake on PATH stops each run right after generating."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "cmake").exists())
    projects = []
    for seed in (1, 2, 3):
        shutil.rmtree(tmp_path / "proj", ignore_errors=True)
        done = pipeline(tmp_path, "proj", {"PYTHONHASHSEED": str(seed), "PATH": path})
        assert done.returncode == 1 and "cmake is not on PATH" in done.stderr, done.stderr
        projects.append({p.relative_to(tmp_path / "proj"): p.read_bytes() for p in (tmp_path / "proj").rglob("*")
                         if p.is_file()})
    assert projects[0] and projects[0] == projects[1] == projects[2]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_pipeline_without_cudnn_headers_says_so_in_one_line(tmp_path: Path) -> None:
    done = pipeline(tmp_path, "nocudnn", {"CUDNN_INCLUDE_DIR": str(tmp_path / "nowhere")})
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "CUDNN_INCLUDE not found" in done.stderr and "pip install -r requirements-cuda.txt" in done.stderr


def test_bundles_lists_shipped_and_local(tmp_path: Path) -> None:
    local = tmp_path / "mine"
    shutil.copytree(perfdb_dir() / "bundles" / "vgg19_b1_ort_fp32", local / "my_vgg")
    code, output = invoke(["bundles", str(local), "--tsv"])
    assert code == 0, output
    rows = [line.split("\t") for line in output.strip().splitlines()]
    assert rows[0][:3] == ["bundle", "where", "model"]
    shipped = [r for r in rows[1:] if r[1] == "shipped"]
    assert len(shipped) == 20 and {r[0] for r in shipped} >= {"resnet50_b1_ort_fp32", "vgg19_b1_torch_fp32"}
    assert [r[:3] for r in rows[1:] if r[1] == "local"] == [["my_vgg", "local", "vgg19.onnx"]]


def test_readme_has_pip_install_and_the_two_command_quick_start() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install" in readme
    assert "benanza models zoo models/zoo" in readme and "benanza quickstart models/zoo" in readme
    for command in ("benanza compare", "benanza bundles", "--csv", "datasette"):
        assert command in readme, command


def test_a_terminal_sees_a_progress_line_for_the_build_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generating and building take seconds to minutes: a terminal gets a line saying what runs
    (a pipe or a log gets nothing extra). No cmake on PATH stops right after the line."""
    import io

    from rich.console import Console

    from benanza.cli import progress

    screen = io.StringIO()
    monkeypatch.setattr(progress, "err_console", Console(file=screen, force_terminal=True, width=200))
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "cmake").exists())
    out = CliRunner().invoke(main, ["pipeline", str(SQUEEZENET), "--db", str(tmp_path / "p.db"), "--project-dir",
                                    str(tmp_path / "proj")], env={"PATH": path})
    assert out.exit_code == 1 and "cmake is not on PATH" in out.output
    assert f"generating the benchmarks of 1 model(s) into {tmp_path / 'proj'}" in screen.getvalue()
    assert f"building {tmp_path / 'proj'} (CMake + Ninja" in screen.getvalue()


def test_generate_skips_what_the_shipped_xz_holds_and_run_refuses_to_write_it(tmp_path: Path) -> None:
    shipped = str(perfdb_dir() / "h100.columns.xz")
    code, output = invoke(["generate", str(SQUEEZENET), "--out", str(tmp_path / "g"), "--db", shipped])
    assert code == 0, output
    assert "already holds all" in output or "already in the database" in output
    code, output = invoke(["run", str(SQUEEZENET), "--db", shipped, "--project-dir", str(tmp_path / "r")])
    assert code == 1 and output.strip() == (f"error: {shipped}: a compressed database is read-only; measure into a "
                                            ".db file (e.g. --db perf.db)")


def test_the_readme_stage_table_names_every_command_and_subcommand() -> None:
    """The README's stage table is where a reader looks a command up: every command and every
    subcommand of a group (db pack and unpack once went missing) appears in its command column."""
    import click

    readme = (ROOT / "README.md").read_text()
    start = readme.index("| stage | module | command |")
    table = readme[start:readme.index("\n\n", start)]
    cells = [re.split(r"(?<!\\)\|", row) for row in table.splitlines()[2:]]  # "\|" inside a cell is text
    commands = " ".join(row[-2] for row in cells).replace("\\|", "|")
    ctx = click.Context(main, info_name="benanza")
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert f"benanza {name}" in commands, name
        if isinstance(command, click.Group):
            cell = commands[commands.index(f"benanza {name} "):].split("`")[0]
            listed = set(re.split(r"[| ]", cell.removeprefix(f"benanza {name} ")))
            assert set(command.list_commands(ctx)) <= listed, (name, cell)


def test_pipeline_profile_with_says_in_one_line_what_it_cannot_do_and_touches_nothing(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """``pipeline --profile-with``: every refusal comes before anything is generated or profiled."""
    from benanza.cli import pipeline

    proj = tmp_path / "proj"
    base = ["pipeline", str(SQUEEZENET), "--db", str(tmp_path / "p.db"), "--project-dir", str(proj),
            "--profile-with", "torch"]
    code, output = invoke([*base, "--profile", str(tmp_path / "b")])
    assert code == 1 and output.strip() == ("error: --profile-with captures its own bundle: give it or --profile, "
                                            "not both")
    code, output = invoke(["pipeline", str(LIGHT), *base[2:]])
    assert code == 1 and output.strip() == f"error: {LIGHT}: --profile-with profiles one model file, not a directory"
    code, output = invoke([*base, "--cluster", "local"])
    assert code == 1 and "leave out --cluster" in output and len(output.strip().splitlines()) == 1
    (tmp_path / "proj-bundle").mkdir()
    (tmp_path / "proj-bundle" / "meta.json").write_text("{}")
    code, output = invoke(base)
    assert code == 1 and "an earlier --profile-with run's bundle is there" in output
    shutil.rmtree(tmp_path / "proj-bundle")
    # as on a machine without a GPU (CI's), also where this test runs on one
    monkeypatch.setattr(pipeline.system, "fingerprint", lambda **_: {"usable": False, "reason": "no driver"})
    code, output = invoke(base)
    assert code == 1 and output.strip() == "error: --profile-with needs a usable NVIDIA GPU here (no driver)"
    assert not proj.exists()  # nothing generated by any of them


def test_pipeline_max_engines_goes_to_the_workflow_and_says_the_answer_is_a_first_one(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """``pipeline --max-engines N``: the measuring workflow gets N, and the end says that the bound is over
    the heuristics' first N engine configs only; 0 is refused in one line before anything runs."""
    from benanza.cli import pipeline
    from benanza.workflows.measure import PipelineRun

    seen: list[Any] = []

    def workflow(*args: Any, **options: Any) -> PipelineRun:
        seen.append(options.get("max_engines"))
        return PipelineRun(tmp_path / "p")

    monkeypatch.setattr(pipeline.measure, "pipeline", workflow)
    base = ["pipeline", str(SQUEEZENET), "--db", str(tmp_path / "p.db"), "--project-dir", str(tmp_path / "p")]
    code, output = invoke([*base, "--max-engines", "4"])
    assert code == 0 and seen == [4]
    assert "first 4 engine config(s)" in output and "without it" in output
    code, output = invoke(base)
    assert code == 0 and seen == [4, None] and "engine config" not in output
    code, output = invoke([*base, "--max-engines", "0"])
    assert code == 2 and "--max-engines" in output and seen == [4, None]


@pytest.mark.gpu
def test_pipeline_profile_with_gives_an_unseen_models_first_answer_in_one_command(tmp_path: Path) -> None:
    """profile + generate + build + run + analyze (issue 32's one command): the bundle, both projects
    and the report with the run's figures."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    code, output = invoke(["pipeline", str(SQUEEZENET), "--db", str(tmp_path / "p.db"), "--project-dir",
                           str(tmp_path / "proj"), "--profile-with", "torch", "--dtype", "fp32", "--timings",
                           str(tmp_path / "t.json")])
    assert code == 0, output
    assert (tmp_path / "proj-bundle" / "meta.json").exists() and (tmp_path / "proj" / "manifest.json").exists()
    assert "Benanza ratio" in output and "GPU time, kernels only" in output
    steps = json.loads((tmp_path / "t.json").read_text())
    assert {"profile", "generate", "build", "measure the plan", "analyze"} <= set(steps["steps_s"])
    assert 0 < steps["timed_gpu_s"] < steps["steps_s"]["measure the plan"] + steps["steps_s"].get(
        "measure the profile's calls", 0.0)


def test_the_pipeline_workflow_stops_after_the_build_without_a_gpu(tmp_path: Path, monkeypatch) -> None:
    """``workflows.measure.pipeline``: generate, build (the compiler stood in for: the build's own tests
    compile), say it, then without a usable GPU say why and stop: nothing run, nothing analyzed."""
    from benanza.measure import runner, system
    from benanza.measure.build_cache import BuildOutcome
    from benanza.workflows import measure

    class Heard(measure.Progress):
        def __init__(self) -> None:
            self.heard: list[str] = []

        def built(self, project: Path, done: BuildOutcome) -> None:
            self.heard.append(f"built {project.name} into {done.out.name}")

        def said(self, message: str) -> None:
            self.heard.append(f"said {message}")

        def warned(self, message: str) -> None:
            self.heard.append(f"warned {message}")

    monkeypatch.setattr(runner, "build_project", lambda project, *_: BuildOutcome(Path(project) / "build"))
    monkeypatch.setattr(system, "fingerprint", lambda **_: {"usable": False, "reason": "no driver"})
    proj, heard = tmp_path / "proj", Heard()
    done = measure.pipeline(SQUEEZENET, tmp_path / "p.db", ("fp32",), None, None, proj, 1.0,
                            bundle=tmp_path / "bundle", progress=heard)
    assert heard.heard == ["built proj into build", f"said built {proj}",
                           "warned no usable NVIDIA GPU (no driver): stopping after the build"]
    assert (done.project, done.summaries, done.report) == (proj, (), None) and runner.load_manifest(proj)["jobs"]
    assert list(done.steps_s) == ["generate", "build"]  # where the time went, up to the stop
    assert not (tmp_path / "p.db").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BenanzaError, match=r"no \*\.onnx files"):
        measure.pipeline(empty, tmp_path / "p.db", ("fp32",), None, None, proj, 1.0)
