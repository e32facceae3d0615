"""The Python API (benanza/api.py) as the README shows it: its example runs as written and gives the
figures `benanza analyze --json` writes for the same analysis."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza import api
from benanza.cli import main
from benanza.errors import BenanzaError

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_and_matches_the_cli_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the example's paths are the checkout's
    if not (ROOT / "models" / "zoo" / "resnet50.onnx").is_file():
        assert CliRunner().invoke(main, ["models", "zoo", "models/zoo"]).exit_code == 0
    scope: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)  # the README's own code, as a reader runs it

    report, both = scope["report"], scope["both"]
    out = CliRunner().invoke(main, ["analyze", "models/zoo/resnet50.onnx", "--profile",
                                    "perfdb/bundles/resnet50_b1_ort_fp32", "--json", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert {k: f["value"] for k, f in data["figures"].items()} == json.loads(json.dumps(report.figures()))
    assert scope["rows"] == data["tables"]["layers"]["rows"]
    assert both.labels == ("resnet50_b1_ort_fp32", "resnet50_b1_torch_fp32") and both.model == "resnet50"
    assert len(both.records()) == len(scope["rows"])


@pytest.mark.parametrize(("call", "says"), [
    (lambda: api.compare(["perfdb/bundles/resnet50_b1_ort_fp32"]), "needs at least two analyses"),
    (lambda: api.analyze(ROOT / "no_such.onnx"), "no_such.onnx"),
    (lambda: api.analyze(ROOT / "models" / "zoo" / "resnet50.onnx", dtype="fp8"), "dtype 'fp8'"),
])
def test_api_errors_are_the_cli_one_liners(call, says: str) -> None:
    with pytest.raises(BenanzaError) as err:
        call()
    assert says in str(err.value) and "\n" not in str(err.value)
