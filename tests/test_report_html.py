"""The HTML report of real analyses (ResNet-50 on the shipped H100 database, with and without the
shipped ONNX Runtime profile): the headline card, plots sorted by gap with op names and colour
keys, sortable tables, a sane no-profile page; and the pages in headless Chromium (no console
error, the card rendered, sorting works, a screenshot)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT
from markupsafe import escape as html_escape

from benanza.cli import main
from benanza.paths import perfdb_dir
from benanza.report.fmt import cell

RESNET = LIGHT / "light_resnet50.onnx"
BUNDLE = perfdb_dir() / "bundles" / "resnet50_b1_ort_fp32"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict, str]]:
    """name -> (HTML path, JSON report, terminal output) of the profiled and the no-profile analysis."""
    tmp = tmp_path_factory.mktemp("html")
    out = {}
    for name, extra in (("profiled", ["--profile", str(BUNDLE)]), ("bounds", [])):
        run = CliRunner().invoke(main, ["analyze", str(RESNET), *extra, "--html", str(tmp / f"{name}.html"),
                                        "--json", str(tmp / f"{name}.json")])
        assert run.exit_code == 0, run.output
        out[name] = (tmp / f"{name}.html", json.loads((tmp / f"{name}.json").read_text()), run.output)
    return out


def card(html: str) -> str:
    return html[html.index('<section id="headline">'):html.index("</section>")]


def bar_labels(html: str) -> list[str]:
    plot = html[html.index('aria-label="per-layer latency'):]
    plot = plot[:plot.index("</svg>")]
    return re.findall(r'text-anchor="end">([^<]+)</text>', plot)


def test_the_card_spells_out_the_headline_and_the_top_gaps(pages: dict) -> None:
    path, report, _ = pages["profiled"]
    html, s = path.read_text(), report["summary"]
    head = card(html)
    for label, key in (("LBL sequential (ms)", "LBL_seq (ms)"), ("LBL parallel (ms)", "LBL_par (ms)"),
                       ("measured end-to-end (ms)", "measured end-to-end (ms)"),
                       ("GPU time, kernels only (ms)", "GPU busy (ms)"),
                       ("Benanza ratio (LBL_seq / GPU kernel time)", "BR_seq vs GPU busy"),
                       ("predicted speedup (x)", "predicted speedup vs end-to-end (x)")):
        assert label in head and f">{cell(s[key], label)}<" in head, label
    assert "lower-bound latency over the run&#39;s kernel-only GPU time" in head
    gaps = sorted((r for r in report["tables"]["gaps"]["rows"] if r["kind"] == "gap"), key=lambda r: -r["ms"])[:3]
    items = re.findall(r"<li><b>([^<]+)</b>", head)
    assert items == [g["step"] for g in gaps]
    assert all(g["fix"] and str(html_escape(g["fix"])) in head for g in gaps)  # each with the fix the analysis named


def test_the_layer_plot_is_sorted_by_gap_with_op_names_and_a_key(pages: dict) -> None:
    path, report, _ = pages["profiled"]
    html = path.read_text()
    layers = report["tables"]["layers"]["rows"]
    worst = max((r for r in layers if r["gap_ms"] is not None), key=lambda r: r["gap_ms"])
    labels = bar_labels(html)
    assert labels[0] == f"{worst['op']} #{worst['index']} {worst['layer']}"
    assert all(label.split(" ")[0] in {r["op"] for r in layers} for label in labels)
    for key in ("measured", "best benchmark", "roofline bound", "layer (best benchmark)"):
        assert f">{key}</text>" in html
    assert "measured None" not in html and "None ms" not in html


def test_the_no_profile_page_and_terminal_are_sane(pages: dict) -> None:
    path, report, terminal = pages["bounds"]
    html = path.read_text()
    assert "no profile: bounds only" in html and "needs a profile" in html
    assert 'aria-label="gaps waterfall"' not in html  # nothing to fall from: no bars below zero
    assert "Without a profile there is no measured latency" in card(html)
    labels = bar_labels(html)
    best = max(report["tables"]["layers"]["rows"], key=lambda r: r["best_ms"] or 0)
    assert labels[0] == f"{best['op']} #{best['index']} {best['layer']}"  # sorted by best latency instead
    assert "Top 10 layers by gap" not in terminal and "no layer with a gap above zero" in terminal


def test_tables_are_sortable(pages: dict) -> None:
    html = pages["profiled"][0].read_text()
    assert html.count('<table class="sortable"') >= 10 and "addEventListener(\"click\"" in html


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args],
                          capture_output=True, text=True, timeout=120)


def console_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test installs it where apt-get exists)")
def test_pages_in_headless_chromium(pages: dict, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>")
    assert console_lines(chromium("--dump-dom", broken.as_uri(), profile=tmp_path / "p0").stderr)  # detector works
    for name in ("profiled", "bounds"):
        path = pages[name][0]
        # click "gap (ms)" of the layer table once (ascending), as a user would, then dump the DOM
        clicked = tmp_path / f"{name}.html"
        html = path.read_text()
        clicked.write_text(html.replace("</body>", '<script>document.querySelector("#table-layers th:last-child")'
                                        '.click();</script></body>'))
        done = chromium("--dump-dom", clicked.as_uri(), profile=tmp_path / f"p-{name}")
        assert done.returncode == 0, done.stderr[-2000:]
        assert console_lines(done.stderr) == [], console_lines(done.stderr)
        assert '<section id="headline">' in done.stdout and "Benanza ratio" in done.stdout
        table = done.stdout[done.stdout.index('id="table-layers"'):]
        table = table[:table.index("</tbody>")]
        gaps = [float(v) for v in re.findall(r'<td class="num" data-v="([^"]+)">[^<]*</td></tr>', table)]
        assert gaps and gaps == sorted(gaps)
        shot = tmp_path / f"{name}.png"
        done = chromium("--hide-scrollbars", "--window-size=1200,1400", f"--screenshot={shot}", path.as_uri(),
                        profile=tmp_path / f"s-{name}")
        assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", done.stderr[-2000:]
        assert console_lines(done.stderr) == []
