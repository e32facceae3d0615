"""Bad input is one line naming the file and the problem, and leaves nothing behind (issue 33): a
damaged .db.xz, an output directory under a file, a model whose work benanza cannot bound. Each
failed on the code before this change (a traceback, a bad cache copy reused, an LSTM bounded at 9e-06 ms)."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import LIGHT
from onnx import TensorProto, helper, numpy_helper

from benanza.cli import main
from benanza.paths import perfdb_dir

MODEL = LIGHT / "light_squeezenet.onnx"
SHIPPED = perfdb_dir() / "h100.columns.xz"


def one_line_error(out, *words: str) -> None:
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out.output, out.output
    assert all(w in lines[0] for w in words), lines[0]


@pytest.mark.parametrize("content", [lzma.compress(b"not a database"), lzma.compress(b"x" * 4096)[:40]],
                         ids=["foreign", "truncated"])
def test_a_damaged_db_xz_is_one_line_and_leaves_no_cache_copy(tmp_path: Path, monkeypatch, content: bytes) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bad = tmp_path / "perf.db.xz"
    bad.write_bytes(content)
    for _ in range(2):  # the second call must not reuse what the first left
        one_line_error(CliRunner().invoke(main, ["analyze", str(MODEL), "--batch", "1", "--db", str(bad)]), str(bad))
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and "perf" in p.name]


def test_generate_into_a_path_under_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    out = CliRunner().invoke(main, ["generate", str(MODEL), "--out", str(tmp_path / "afile" / "sub"), "--batch", "1"])
    one_line_error(out, str(tmp_path / "afile" / "sub"), "cannot write")


def test_a_model_of_an_unsupported_op_is_refused_naming_it(tmp_path: Path) -> None:
    t, b, i, h = 8, 1, 16, 32
    weights = [numpy_helper.from_array(np.ones((1, 4 * h, n), np.float32), name) for name, n in (("W", i), ("R", h))]
    graph = helper.make_graph([helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=h)], "lstm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, i])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    path = tmp_path / "lstm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    one_line_error(CliRunner().invoke(main, ["analyze", str(path)]), str(path), "LSTM", "unsupported")


EXPORTS = Path(__file__).parent / "data" / "exports"


def suggestion(output: str) -> list[str]:
    """The command a refusal suggests ('... measure them: benanza run ...'), as arguments."""
    import shlex

    return shlex.split(output.split("benanza ", 1)[1].strip().splitlines()[0])


def test_every_model_command_takes_the_seq_len_its_refusal_names(tmp_path: Path) -> None:
    """The symbolic-dimension refusal says 'give it with --seq-len': analyze, generate, run, pipeline
    and layers all take it (before: only layers and profile did)."""
    model = str(EXPORTS / "tinybert_ts17.onnx")
    one_line_error(CliRunner().invoke(main, ["analyze", model]), "--seq-len")
    for command in (["analyze", model], ["generate", model, "--out", str(tmp_path / "p")],
                    ["run", model, "--db", str(tmp_path / "x.db")],  # no GPU here: refused after parsing
                    ["pipeline", model, "--db", str(tmp_path / "x.db"), "--dtype", "none"],  # refused before a build
                    ["layers", model]):
        out = CliRunner().invoke(main, [*command, "--seq-len", "16"])
        assert out.exit_code != 2 and "no such option" not in out.output.lower(), (command, out.output)  # 2: usage
        assert "dynamic dimension" not in out.output, (command, out.output)


def test_the_command_a_missing_data_refusal_suggests_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    """analyze against the read-only shipped database at a batch it lacks suggests a run that measures
    into a writable database and names the database given (before: '--db …/h100.columns.xz', which
    run refuses as read-only, or perf.db, a file the user never gave)."""
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["analyze", str(MODEL), "--db", str(SHIPPED), "--batch", "7"])
    one_line_error(out, str(SHIPPED), "benanza run")
    args = suggestion(out.output)
    assert args[0] == "run" and "--db" in args
    ran = CliRunner().invoke(main, args)
    assert ran.exit_code != 2 and "read-only" not in ran.output, ran.output  # 2: a usage error


def test_ctrl_c_exits_130_in_one_line(monkeypatch) -> None:
    """A KeyboardInterrupt during an analysis (here raised where the model is loaded) is one line and exit
    130, as a shell expects (before: click's 'Aborted!' and exit 1)."""
    import benanza.cli.analyze

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(benanza.cli.analyze, "analyze_model", interrupted)
    out = CliRunner().invoke(main, ["analyze", str(MODEL)])
    assert out.exit_code == 130 and "interrupted:" in out.output and "Traceback" not in out.output, out.output


def _one_node_model(path: Path, node: onnx.NodeProto, shape: list[int], weight: np.ndarray) -> Path:
    x = helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", [x], [y], [numpy_helper.from_array(weight, node.input[1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize(("node", "shape", "weight", "words"), [
    (helper.make_node("Conv", ["x", "w"], ["y"], name="c0", kernel_shape=[1, 1]), [1, 480, 14, 14],
     np.zeros((192, 480, 1, 0), np.float32), ("node 'c0' (Conv)", "[192, 480, 1, 0] is empty")),
    (helper.make_node("Gemm", ["x", "w"], ["y"], name="g0", beta=float("nan")), [4, 8], np.ones((8, 3), np.float32),
     ("node 'g0' (Gemm)", "'beta' = nan is not a finite number")),
])
@pytest.mark.parametrize("command", ["layers", "generate"])
def test_an_impossible_layer_never_reaches_generated_code(tmp_path: Path, node, shape, weight, words,
                                                          command: str) -> None:
    """A zero-size weight (0 MACs) or a NaN attribute is refused at import, naming the node: it once
    reached generated C++ (the Conv) or gave a traceback in generate (the Gemm's NaN beta)."""
    model = _one_node_model(tmp_path / "m.onnx", node, shape, weight)
    args = [command, str(model)] + (["--out", str(tmp_path / "gen")] if command == "generate" else [])
    one_line_error(CliRunner().invoke(main, args), "m.onnx", *words)
    assert not (tmp_path / "gen").exists()


@pytest.mark.parametrize("args", [["layers", str(MODEL)], ["db", "info", "DB"], ["bundles"]])
def test_a_full_output_is_one_line(args: list[str], tmp_path: Path) -> None:
    """stdout on /dev/full (a full disk): one error line, exit 1, no traceback and no second error at exit."""
    import subprocess
    import sys

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    from benanza.store.shipped import shipped_db

    args = [str(shipped_db()) if a == "DB" else a for a in args]
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "benanza", *args], stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == ["error: cannot write the output: No space left on device"]


def test_a_merge_into_a_place_that_refuses_writes_is_one_line(tmp_path: Path) -> None:
    """A read-only place (here /sys, refused even to root): one line naming the path, the input untouched."""
    from benanza.store.shipped import shipped_db

    if not Path("/sys").is_dir():
        pytest.skip("no /sys here")
    db = shipped_db()
    before = db.stat().st_mtime_ns
    one_line_error(CliRunner().invoke(main, ["db", "merge", "/sys/benanza-merge.db", str(db)]), "/sys/")
    assert db.stat().st_mtime_ns == before


@pytest.mark.parametrize("args", [
    ["layers", "NOPE"], ["analyze", "NOPE"], ["generate", "NOPE", "--out", "OUT"], ["run", "NOPE", "--db", "x.db"],
    ["pipeline", "NOPE", "--db", "x.db"], ["profile", "NOPE", "--out", "OUT"], ["compare", "NOPE", "NOPE"],
    ["analyze", str(MODEL), "--profile", "NOPE"], ["db", "info", "NOPE"], ["quickstart", "NOPE"],
])
def test_a_missing_input_is_the_same_mistake_everywhere(args: list[str], tmp_path: Path) -> None:
    """The same mistake, the same answer in every command: one error line naming the path, exit 1
    (click's own check gave three usage lines and exit 2 in all but `layers`)."""
    nope = str(tmp_path / "nope.onnx")
    out = CliRunner().invoke(main, [nope if a == "NOPE" else str(tmp_path / "o") if a == "OUT" else a for a in args])
    one_line_error(out, f"{nope}: no such file or directory")


def test_a_directory_where_a_file_belongs_is_one_line(tmp_path: Path) -> None:
    one_line_error(CliRunner().invoke(main, ["analyze", str(tmp_path)]), f"{tmp_path}: is a directory, not a file")


@pytest.mark.parametrize("command", [
    ["layers", str(MODEL)], ["analyze", str(MODEL)], ["generate", str(MODEL), "--out", "OUT"],
    ["run", str(MODEL), "--db", "x.db"], ["pipeline", str(MODEL), "--db", "x.db"],
    ["profile", str(MODEL), "--out", "OUT"],
])
def test_a_bad_batch_is_the_same_usage_error_everywhere(command: list[str], tmp_path: Path) -> None:
    """--batch 0 is a malformed command line in every command: click's usage lines and exit 2 (before:
    generate exit 1, run went on to look for a GPU)."""
    out = CliRunner().invoke(main, [str(tmp_path / "o") if a == "OUT" else a for a in command] + ["--batch", "0"])
    assert out.exit_code == 2 and "--batch" in out.output and "Traceback" not in out.output, out.output


def test_the_zoo_a_refusal_suggests_fetches_what_was_missing(tmp_path: Path, monkeypatch) -> None:
    """quickstart on an empty directory and compare with a --model directory without the bundle's model both
    say 'get the zoo with: benanza models zoo DIR'; run as written, it gives what they lacked and the
    refused command then works."""
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "zoo"
    empty.mkdir()
    bundles = [str(perfdb_dir() / "bundles" / b) for b in ("vgg19_b1_ort_fp32", "vgg19_b1_torch_fp32")]
    for refused in (["quickstart", str(empty)], ["compare", *bundles, "--model", str(empty)]):
        out = CliRunner().invoke(main, refused)
        one_line_error(out, "benanza models zoo")
        fetch = suggestion(out.output)  # the command ends the line: nothing sticks to its last argument
        assert fetch == ["models", "zoo", str(empty)]
        assert CliRunner().invoke(main, fetch).exit_code == 0 and len(list(empty.glob("*.onnx"))) == 9
        again = CliRunner().invoke(main, ["compare", *bundles, "--model", str(empty)])
        assert again.exit_code == 0, again.output
        for model in empty.glob("*.onnx"):
            model.unlink()


def test_a_suggestion_that_does_not_run_fails_the_test_that_printed_it() -> None:
    """conftest runs the command at the end of every error and note line of every CliRunner output
    (tests/suggestions.py): a placeholder, a usage error or a failure fails the test that printed it;
    a command that stops only for want of a GPU passes."""
    import click
    from suggestions import problem

    assert "placeholder(s) MODEL, PATH" in problem(("generate", "MODEL", "--api", "add_tensor", "--db", "PATH"),
                                                   CliRunner.invoke)
    assert problem(("layers", str(MODEL), "--no-such-flag"), CliRunner.invoke).startswith("exit 2")
    assert problem(("layers", str(MODEL)), CliRunner.invoke) is None

    @click.command()
    def says() -> None:
        click.echo("note: 3 calls have no benchmark; benchmark them: benanza layers MODEL --per-layer")

    with pytest.raises(AssertionError, match="suggested `benanza layers MODEL --per-layer`, which does not run"):
        CliRunner().invoke(says, [])


BUNDLE_ORT = perfdb_dir() / "bundles" / "resnet50_b1_ort_fp32"


def test_the_note_on_unbenchmarked_calls_suggests_a_command_that_runs(tmp_path: Path, monkeypatch) -> None:
    """An as-executed call the database lacks (here: every separate bias add of ResNet-50's ORT run,
    withheld) is noted with the command that benchmarks the run's calls, concrete and on one line; run as
    written it generates them (before: 'benanza generate MODEL --api add_tensor --db PATH', placeholders
    to fill in, and generate's --api plans the model's layers, not the calls the run made)."""
    import importlib

    choose = importlib.import_module("benanza.analyze.choose")  # the module (the package exports a function)
    real = choose.executed_row

    def without_bias_adds(call, *args, **kwargs):
        if call.api == "cudnnAddTensor":
            return choose.Miss(choose.MissingReason.NOT_BENCHMARKED, f"{call.api} (withheld)")
        return real(call, *args, **kwargs)

    monkeypatch.setattr(choose, "executed_row", without_bias_adds)
    model = LIGHT / "light_resnet50.onnx"
    out = CliRunner().invoke(main, ["analyze", str(model), "--profile", str(BUNDLE_ORT)])  # conftest runs it too
    assert out.exit_code == 0, out.output
    note = next(line for line in out.output.splitlines() if "have no benchmark" in line)
    args = suggestion(note)
    assert args[:5] == ["generate", str(model), "--from-profile", str(BUNDLE_ORT), "--db"], args
    monkeypatch.chdir(tmp_path)
    ran = CliRunner().invoke(main, args)  # the shipped database does hold them (withheld above): nothing to do
    assert ran.exit_code == 0 and "already holds all" in ran.output, ran.output
    db = args.index("--db")
    ran = CliRunner().invoke(main, args[:db] + args[db + 2:])  # against no database: every call of the run
    assert ran.exit_code == 0, ran.output
    manifest = json.loads((tmp_path / args[args.index("--out") + 1] / "manifest.json").read_text())
    assert any(job["executable"] == "bench_add_tensor" for job in manifest["jobs"])


def test_every_command_answers_a_mistake_and_ctrl_c_alike() -> None:
    """Every command, subcommands included, runs inside friendly_errors: a refusal is one line and exit 1,
    Ctrl-C one line and exit 130, in each (a command added without it would print click's 'Aborted!')."""
    import click

    from benanza.cli.main import friendly_errors

    wrapped = friendly_errors(lambda: None).__code__
    ctx = click.Context(main, info_name="benanza")
    leaves, groups = [], [([], main)]
    while groups:
        path, group = groups.pop()
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            (groups if isinstance(command, click.Group) else leaves).append(([*path, name], command))
    assert len(leaves) >= 17
    bare = [" ".join(path) for path, command in leaves if command.callback.__code__ is not wrapped]
    assert bare == []
