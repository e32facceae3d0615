"""Hostile or impossible profile bundles (issue 38): each is refused in one line naming the file
and the problem, or said in a note, never believed, never a traceback, a silent zero or a hang.

Real files: copies of a shipped bundle (perfdb/bundles/vgg19_b1_*), edited as an attacker or a
broken tool would, read through the library and the CLI.
"""

from __future__ import annotations

import json
import lzma
import math
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import LIGHT

from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.paths import perfdb_dir
from benanza.profile.bundle import read_bundle
from benanza.profile.cudnn_log import read_cudnn_log
from benanza.profile.kineto import read_kineto_trace
from benanza.profile.parse_cache import CACHE_DIR

SHIPPED = perfdb_dir() / "bundles"
ORT = SHIPPED / "vgg19_b1_ort_fp32"
TORCH = SHIPPED / "vgg19_b1_torch_fp32"
MODEL = LIGHT / "light_vgg19.onnx"


def copy_bundle(src: Path, to: Path) -> Path:
    return Path(shutil.copytree(src, to / src.name, ignore=shutil.ignore_patterns(CACHE_DIR)))


def edit_meta(bundle: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    meta = json.loads((bundle / "meta.json").read_text())
    change(meta)
    (bundle / "meta.json").write_text(json.dumps(meta))


def edit_json_xz(file: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(lzma.decompress(file.read_bytes()))
    change(data)
    file.write_bytes(lzma.compress(json.dumps(data).encode(), preset=0))


def one_line_error(result: Result, path: Path | str) -> str:
    """The run failed with exactly one ``error:`` line naming ``path``, and no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output[-2000:])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0], result.output[-2000:]
    return errors[0]


def analyze(bundle: Path) -> Result:
    return CliRunner().invoke(main, ["analyze", str(MODEL), "--profile", str(bundle)])


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(meta: dict[str, Any]) -> None:
        target = meta
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"x": value}
    return value


# (edit of meta.json, words the refusal must hold)
IMPOSSIBLE_META = {
    "negative median": (_set(("latency_ms", "median"), -1.0), "latency_ms.median"),
    "zero latency": (_set(("latency_ms", "min"), 0), "latency_ms.min"),
    "NaN median": (_set(("latency_ms", "median"), math.nan), "latency_ms.median"),
    "infinite max": (_set(("latency_ms", "max"), math.inf), "latency_ms.max"),
    "median above max": (_set(("latency_ms", "median"), 1e6), "contradict"),
    "latency a list": (_set(("latency_ms",), [1, 2]), "latency_ms"),
    "runs a string": (_set(("latency_ms", "runs"), "30"), "latency_ms.runs"),
    "batch 1e30": (_set(("batch",), 1e30), "batch"),
    "batch 2^70": (_set(("batch",), 2**70), "batch"),
    "batch true": (_set(("batch",), True), "batch"),
    "batch a string": (_set(("batch",), "1"), "batch"),
    "framework a number": (_set(("framework",), 5), "framework"),
    "model a list": (_set(("model",), ["a"]), "model"),
    "system a list": (_set(("system",), ["gpu"]), "system"),
    "extra nested too deep": (_set(("extra",), _nested(50)), "extra"),
    "seq_len a string": (_set(("extra", "seq_len"), "128"), "extra.seq_len"),
    "schema a string": (_set(("schema",), "1"), "schema"),
}


@pytest.mark.parametrize("edit", list(IMPOSSIBLE_META), ids=list(IMPOSSIBLE_META))
def test_impossible_meta_is_refused_in_one_line(tmp_path: Path, edit: str) -> None:
    """Issue 38 items 5 and 8: on the parent a negative median was believed (BR -0.42), batch 1e30
    raised OverflowError, a nested or wrongly typed field a TypeError/RecursionError later on."""
    change, words = IMPOSSIBLE_META[edit]
    bundle = copy_bundle(ORT, tmp_path)
    edit_meta(bundle, change)
    with pytest.raises(BenanzaError) as info:
        read_bundle(bundle)
    message = str(info.value)
    assert message.startswith(str(bundle / "meta.json")) and words in message and "\n" not in message, message


def test_meta_nested_past_the_recursion_limit_is_one_line(tmp_path: Path) -> None:
    bundle = copy_bundle(ORT, tmp_path)
    text = (bundle / "meta.json").read_text()
    (bundle / "meta.json").write_text(text[:-2] + ', "system": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(BenanzaError, match="nested too deeply"):
        read_bundle(bundle)
    line = one_line_error(CliRunner().invoke(main, ["bundles", str(tmp_path)]), bundle / "meta.json")
    assert "nested" in line


def test_the_shipped_meta_files_pass_the_schema() -> None:
    for path in sorted(p for p in SHIPPED.iterdir() if p.is_dir()):
        assert read_bundle(path).meta.latency_ms.median > 0


def test_a_batch_the_trace_contradicts_is_refused(tmp_path: Path) -> None:
    """Issue 38 item 5: batch edited from 1 to 64 gave a "lower bound" 9x the measured latency
    (BR 9.14) with 0 layers mapped and exit code 0 on the parent."""
    bundle = copy_bundle(ORT, tmp_path)
    edit_meta(bundle, _set(("batch",), 64))
    line = one_line_error(analyze(bundle), bundle)
    assert "batch 64" in line and "leading dim (tensors): 1 (" in line


@pytest.mark.parametrize("edit", ["no dur", "no ts", "dur a word", "negative dur", "dur NaN", "negative ts"])
def test_kineto_events_are_checked_against_the_schema(tmp_path: Path, edit: str) -> None:
    """Issue 38 items 5 and 8: a kernel without ``dur`` counted 0 ms (GPU busy 0), without ``ts``
    it raised KeyError, a negative or non-numeric ``dur`` went into the sums or raised."""
    bundle = copy_bundle(TORCH, tmp_path)
    trace = bundle / "torch_trace.json.xz"

    def change(data: dict[str, Any]) -> None:
        for event in data["traceEvents"]:
            if event.get("cat") == "kernel":
                if edit == "no dur":
                    del event["dur"]
                elif edit == "no ts":
                    del event["ts"]
                else:
                    value = {"dur a word": "abc", "negative dur": -5, "dur NaN": math.nan, "negative ts": -1e30}[edit]
                    event["ts" if edit == "negative ts" else "dur"] = value

    edit_json_xz(trace, change)
    with pytest.raises(BenanzaError) as info:
        read_kineto_trace(trace)
    assert str(info.value).startswith(str(trace)) and ("dur" in str(info.value) or "ts" in str(info.value))


def test_ort_profile_events_are_checked_against_the_schema(tmp_path: Path) -> None:
    bundle = copy_bundle(ORT, tmp_path)
    profile = bundle / "ort_profile.json.xz"

    def change(events: list[dict[str, Any]]) -> None:
        for event in events:
            if event.get("cat") == "Node":
                event["dur"] = "soon"
                event["tid"] = "main"

    edit_json_xz(profile, change)
    line = one_line_error(analyze(bundle), profile)
    assert "dur" in line


@pytest.mark.parametrize(("dur", "words"), [(1e18, "exceeds the measured end-to-end latency"),
                                           (0, "kernels of no duration")])
def test_kernel_times_the_run_cannot_have_are_refused(tmp_path: Path, dur: float, words: str) -> None:
    """Issue 38 item 5: kernels with ``dur`` 1e18 made GPU busy 1e15 ms on the parent, and the
    analysis printed it with exit code 0; kernels of ``dur`` 0 gave GPU busy 0 and no ratio."""
    bundle = copy_bundle(TORCH, tmp_path)

    def change(data: dict[str, Any]) -> None:
        for event in data["traceEvents"]:  # one alone is an outlier the per-run median leaves out
            if event.get("cat") == "kernel":
                event["dur"] = dur

    edit_json_xz(bundle / "torch_trace.json.xz", change)
    line = one_line_error(analyze(bundle), bundle)
    assert words in line


def test_a_lower_bound_above_the_measured_time_is_refused(tmp_path: Path) -> None:
    """Issue 38 item 5: the figures of a bundle must agree; an end-to-end latency edited far below
    the kernels' time gives a Benanza ratio above 1, which is refused, not printed."""
    bundle = copy_bundle(ORT, tmp_path)
    edit_meta(bundle, lambda m: m["latency_ms"].update(median=0.01, mean=0.01, p90=0.01, min=0.01, max=0.01))
    line = one_line_error(analyze(bundle), bundle)
    assert "contradicts itself" in line or "outside (0, 1]" in line


def test_a_truncated_cudnn_log_is_said_in_analyze(tmp_path: Path) -> None:
    """Issue 38 item 5: a cut cuDNN log mapped 4 layers of 24 as executed; ``profile --map-only``
    said so, ``analyze`` did not say a word on the parent."""
    bundle = copy_bundle(ORT, tmp_path)
    log = bundle / "cudnn_api.log.xz"
    text = lzma.decompress(log.read_bytes())
    log.write_bytes(lzma.compress(text[:2_400_000], preset=0))
    result = analyze(bundle)
    assert result.exit_code == 0, result.output[-2000:]
    assert f"note: {log}: file ends inside a record (cut short)" in result.output


def test_a_missing_cudnn_log_is_said_in_analyze(tmp_path: Path) -> None:
    bundle = copy_bundle(ORT, tmp_path)
    (bundle / "cudnn_api.log.xz").unlink()
    result = analyze(bundle)
    assert f"note: {bundle}: no cudnn_api.log" in result.output, result.output[-2000:]


def newline_bomb(path: Path, megabytes: int = 64) -> Path:
    """An .xz of ``megabytes`` MiB of newlines: a few KB on disk."""
    comp = lzma.LZMACompressor(preset=0)
    chunk = b"\n" * (1 << 20)
    path.write_bytes(b"".join([*(comp.compress(chunk) for _ in range(megabytes)), comp.flush()]))
    return path


def test_a_decompression_bomb_is_refused_in_seconds(tmp_path: Path) -> None:
    """Issue 38 item 9: a 305 KB cudnn_api.log.xz of 2 GB of newlines ran past 60 s on the parent
    (the reader sniffs 200 non-blank lines, and there are none)."""
    bundle = copy_bundle(ORT, tmp_path)
    log = newline_bomb(bundle / "cudnn_api.log.xz")
    started = time.perf_counter()
    with pytest.raises(BenanzaError, match="decompression bomb"):
        read_cudnn_log(log)
    assert time.perf_counter() - started < 10
    line = one_line_error(CliRunner().invoke(main, ["profile", str(MODEL), "--map-only", "--out", str(bundle)]), log)
    assert "xz -d" in line


def test_a_json_bomb_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(TORCH, tmp_path)
    trace = bundle / "torch_trace.json.xz"
    comp = lzma.LZMACompressor(preset=0)
    trace.write_bytes(comp.compress(b'{"traceEvents": [' + b" " * (80 << 20)) + comp.compress(b"]}") + comp.flush())
    with pytest.raises(BenanzaError, match="decompression bomb"):
        read_kineto_trace(trace)


# ---------------------------------------------------------------- names on the terminal (item 10)

HOSTILE_NAMES = ("\x1b]0;pwned\x07osc", "\x1b[31mred\x1b[0m", "[bold red]", "[blink]x", "x\nerror: all is fine")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_bundles(tmp_path: Path) -> list[Path]:
    root = tmp_path / "local"
    root.mkdir()
    return [Path(shutil.copytree(ORT, root / name, ignore=shutil.ignore_patterns(CACHE_DIR))) for name in HOSTILE_NAMES]


def no_escapes(output: str) -> None:
    assert not CONTROL.search(output), repr(output[-500:])
    assert not [line for line in output.splitlines() if line.startswith("error: all is fine")], output[-500:]


def test_bundles_prints_hostile_names_literally(tmp_path: Path) -> None:
    """Issue 38 item 10: bundle names printed raw OSC/CSI sequences in ``bundles``; ``[bold red]``
    was read as markup; a newline split a row."""
    hostile_bundles(tmp_path)
    for argv in (["bundles", str(tmp_path / "local")], ["bundles", "--tsv", str(tmp_path / "local")]):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 0, result.output
        no_escapes(result.output)
        for name in ("[bold red]", "[blink]x", "x\\nerror: all is fine"):
            assert name in result.output, (name, result.output[-1000:])


def test_compare_prints_hostile_names_literally(tmp_path: Path) -> None:
    osc, _, markup, _, _ = hostile_bundles(tmp_path)
    result = CliRunner().invoke(main, ["compare", str(osc), str(markup), "--model", str(MODEL)])
    assert result.exit_code == 0, result.output[-2000:]
    no_escapes(result.output)
    assert "B = [bold red]" in result.output and "A = osc," in result.output


def test_an_error_naming_a_hostile_directory_is_one_line(tmp_path: Path) -> None:
    """Issue 38 item 10: a directory named ``x\\nerror: all is fine`` printed a second line that
    looked like benanza's own."""
    *_, newline = hostile_bundles(tmp_path)
    edit_meta(newline, _set(("latency_ms", "median"), -1.0))
    result = CliRunner().invoke(main, ["analyze", str(MODEL), "--profile", str(newline)])
    no_escapes(result.output)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "x\\nerror: all is fine" in lines[0]
