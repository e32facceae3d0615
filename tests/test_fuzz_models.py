"""Seeded fuzzing of the model importer through ``benanza layers`` and ``benanza generate``.

500 mutated real models (tests/fuzz_models.py): every one either loads into layers whose
every dim is positive and below 2^31, or is refused with one clean line naming the file;
no traceback, no markup error, no terminal escape reaching the output.
"""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from fuzz_models import base_zoo, mutants

from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.model.onnx_import import load_model
from benanza.model.validate import MAX_DIM

N_MUTANTS = 500
SEED = 18
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean_failure(output: str, path: Path) -> None:
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: ") and str(path) in lines[-1], output
    assert "Traceback" not in output


def test_mutated_models_never_crash_layers_or_generate(tmp_path: Path) -> None:
    cli = CliRunner()
    path = tmp_path / "model.onnx"
    outcomes = {"loaded": 0, "refused": 0}
    for n, (label, data) in enumerate(mutants(SEED, N_MUTANTS)):
        path.write_bytes(data)
        try:
            model = load_model(path)
        except BenanzaError as exc:
            message = str(exc)
            assert "\n" not in message and message.startswith(str(path)), (label, message)
            outcomes["refused"] += 1
        else:
            outcomes["loaded"] += 1
            for layer in model.layers:
                for t in [*layer.inputs, *layer.outputs]:
                    assert all((0 if t.constant else 1) <= d <= MAX_DIM for d in t.shape), (label, layer.name, t)
        args = [["layers", str(path)], ["generate", str(path), "--out", str(tmp_path / "out")]]
        if n % 5 == 0:
            args.append(["layers", "--json", str(path)])
        for argv in args:
            result = cli.invoke(main, argv)
            assert result.exception is None or isinstance(result.exception, SystemExit), \
                (label, argv[0], repr(result.exception))
            assert not CONTROL.search(result.output.replace("\n", "")), (label, argv[0], result.output)
            if result.exit_code != 0 and argv[0] == "layers":
                _clean_failure(result.output, path)
    assert outcomes["loaded"] > 50 and outcomes["refused"] > 100, outcomes  # both sides exercised


def _zoo(tmp_path: Path, edit) -> Path:
    model = base_zoo()
    edit(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def _node(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.name == name)


def _set(model: onnx.ModelProto, node: str, attr: str, value: object) -> None:
    n = _node(model, node)
    kept = [a for a in n.attribute if a.name != attr]
    del n.attribute[:]
    n.attribute.extend([*kept, onnx.helper.make_attribute(attr, value)])


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda m: _set(m, "conv1", "dilations", [0, 0]), "node 'conv1' (Conv): attribute 'dilations' = [0, 0]"),
    (lambda m: _set(m, "conv1", "strides", [0, 1]), "node 'conv1' (Conv): attribute 'strides' = [0, 1]"),
    (lambda m: _set(m, "conv1", "group", 3), "node 'conv1' (Conv): group 3 does not divide the 4 input channels"),
    (lambda m: _set(m, "conv1", "group", "2"), "attribute 'group' is STRING, the ONNX schema says INT"),
    (lambda m: _set(m, "norm1", "size", "3"), "node 'norm1' (LRN): attribute 'size' is STRING"),
    (lambda m: _remove(m, "norm1", "size"), "node 'norm1' (LRN): required attribute 'size' is missing"),
    (lambda m: m.graph.input[0].type.tensor_type.shape.dim[2].__setattr__("dim_value", 2**31),
     "input 'x': dim 2147483648"),
    (lambda m: m.graph.input[0].type.tensor_type.shape.dim[1].__setattr__("dim_value", 0), "input 'x': dim 0"),
    (lambda m: m.graph.initializer[0].dims.__setitem__(0, 7), "initializer 'w1': dims [7, 2, 3, 3] need"),
    (lambda m: m.graph.initializer[0].__setattr__("data_type", onnx.TensorProto.COMPLEX64),
     "initializer 'w1': has dtype complex64"),
    (lambda m: m.graph.input[0].type.tensor_type.__setattr__("elem_type", onnx.TensorProto.STRING),
     "input 'x': has dtype string"),
])  # fmt: skip
def test_impossible_models_are_one_line_errors(tmp_path: Path, edit, problem: str) -> None:
    path = _zoo(tmp_path, edit)
    with pytest.raises(BenanzaError) as info:
        load_model(path)
    assert problem in str(info.value) and str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def _remove(model: onnx.ModelProto, node: str, attr: str) -> None:
    n = _node(model, node)
    kept = [a for a in n.attribute if a.name != attr]
    del n.attribute[:]
    n.attribute.extend(kept)


def test_non_utf8_names_are_one_line_errors(tmp_path: Path) -> None:
    model = base_zoo()
    _node(model, "conv1").name = "BADNAME_"
    data = model.SerializeToString().replace(b"BADNAME_", b"\xff\xfe(\x80\xed\xa0\x80\xf8")
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    for argv in (["layers", str(path)], ["layers", "--json", str(path)], ["generate", str(path), "--out",
                                                                            str(tmp_path / "o")]):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 1 and "is not UTF-8" in result.output, (argv, result.output)


def test_hostile_names_print_literally(tmp_path: Path) -> None:
    """Markup and escape sequences in names and paths are printed as text, never interpreted."""
    model = base_zoo()
    _set(model, "conv1", "group", 3)  # so the name is printed in the error
    _node(model, "conv1").name = "[bold]x[/bold]\x1b]8;;http://evil/\x07"
    directory = tmp_path / "a[" / "b]"  # the path holds "a[/b]", a closing tag to rich
    directory.mkdir(parents=True)
    path = directory / "[red]m.onnx"
    onnx.save(model, str(path))
    result = CliRunner().invoke(main, ["layers", str(path)])
    assert (result.exit_code == 1 and result.exception is None) or isinstance(result.exception, SystemExit)
    assert "[bold]x[/bold]" in result.output and "[red]m.onnx" in result.output and "a[/b]" in result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
