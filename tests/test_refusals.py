"""Bad input is one line naming the file and the problem, and leaves nothing behind (issue 33): a
damaged .db.xz, an output directory under a file, a model whose work benanza cannot bound. Each
failed on the code before this change (a traceback, a bad cache copy reused, an LSTM bounded at 9e-06 ms)."""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import LIGHT
from onnx import TensorProto, helper, numpy_helper

from benanza.cli import main

MODEL = LIGHT / "light_squeezenet.onnx"


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
