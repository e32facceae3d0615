"""The HTML report of real analyses (ResNet-50 on the shipped H100 database, with and without the
shipped ONNX Runtime profile): the headline card, plots sorted by gap with op names and colour
keys, sortable tables, a sane no-profile page; and the pages in headless Chromium (no console
error, the card rendered, sorting works, a screenshot), whose plots are measured there: axis ticks
and units, no two labels overlapping, no label over the roofline's lines, every roof visible, and
a compare page with plots (issue 33)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape as html_unescape
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
TORCH_BUNDLE = perfdb_dir() / "bundles" / "resnet50_b1_torch_fp32"
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


@pytest.fixture(scope="module")
def compare_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """benanza compare of the shipped ONNX Runtime and PyTorch ResNet-50 bundles, as HTML."""
    path = tmp_path_factory.mktemp("compare") / "compare.html"
    run = CliRunner().invoke(main, ["compare", str(BUNDLE), str(TORCH_BUNDLE), "--model", str(RESNET),
                                    "--html", str(path)])
    assert run.exit_code == 0, run.output
    return path


def card(html: str) -> str:
    return html[html.index('<section id="headline">'):html.index("</section>")]


def bar_labels(html: str) -> list[str]:
    """The per-layer plot's layer names, top to bottom (its y tick labels)."""
    plot = html[html.index('aria-label="per-layer latency'):]
    plot = plot[:plot.index("</svg>")]
    ticks = plot.split('<g id="layers-ytick_')[1:]
    return [html_unescape(re.search(r"<text[^>]*>([^<]+)</text>", t).group(1)) for t in ticks]


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


def test_the_timed_runs_spread_stands_beside_the_median(pages: dict) -> None:
    """The bundle's mean, p90, min and max of the timed runs (it records no p99) beside the median in
    the card and the terminal's headline, not only deep in the summary (issue 33)."""
    path, _, terminal = pages["profiled"]
    meta = json.loads((BUNDLE / "meta.json").read_text())["latency_ms"]
    spread = (f"mean {cell(meta['mean'], '(ms)')}, p90 {cell(meta['p90'], '(ms)')}, min {cell(meta['min'], '(ms)')}, "
              f"max {cell(meta['max'], '(ms)')} ms over {meta['runs']} runs")
    head = card(path.read_text())
    assert f'<div class="spread">{spread}</div>' in head, head[:3000]
    headline = terminal[terminal.index("Headline"):terminal.index("Summary")]
    assert spread in headline and headline.index("measured end-to-end") < headline.index(spread)
    assert "spread" not in card(pages["bounds"][0].read_text())  # no profile, no timed runs


def test_the_layer_plot_is_sorted_by_gap_with_op_names_and_a_key(pages: dict) -> None:
    path, report, _ = pages["profiled"]
    html = path.read_text()
    layers = report["tables"]["layers"]["rows"]
    worst = max((r for r in layers if r["gap_ms"] is not None), key=lambda r: r["gap_ms"])
    labels = bar_labels(html)
    assert labels[0] == f"{worst['op']} #{worst['index']} {worst['layer']}"
    assert all(label.split(" ")[0] in {r["op"] for r in layers} for label in labels)
    for key in ("measured (profiled run)", "best benchmark", "roofline bound", "layer(s) in fp32, best benchmark"):
        assert re.search(f">(\\d+ )?{re.escape(key)}</text>", html), key
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


# Run in the page: every plot's tick labels, text boxes, overlapping pairs, the roofline's plotting area
# and its roofs (box, dashed or not), as the browser laid them out; written into the page as JSON.
MEASURE_PLOTS = """
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height}; }
  function overlap(a, b) {
    var w = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
    var h = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
    return w > 0.5 && h > 0.5;
  }
  var out = {};
  document.querySelectorAll(".plot svg").forEach(function (svg) {
    var name = (svg.getAttribute("class") || svg.getAttribute("aria-label") || "?").replace("plot-", "");
    var texts = Array.prototype.filter.call(svg.querySelectorAll("text"), function (t) {
      return t.textContent.trim() && box(t).w > 0; });
    var boxes = texts.map(box), overlaps = [], inside = [], roofs = {};
    for (var i = 0; i < texts.length; i++) for (var j = i + 1; j < texts.length; j++)
      if (overlap(boxes[i], boxes[j])) overlaps.push([texts[i].textContent, texts[j].textContent]);
    function ticks(axis) {
      var found = [];
      svg.querySelectorAll('g[id^="' + name + "-" + axis + 'tick_"]').forEach(function (g) {
        var t = g.querySelector("text");
        if (t && t.textContent.trim() && box(t).w > 0) found.push(t.textContent); });
      return found; }
    var area = svg.querySelector('[id="' + name + '-area"]');
    if (area) texts.forEach(function (t, i) { if (overlap(boxes[i], box(area))) inside.push(t.textContent); });
    svg.querySelectorAll('g[id^="' + name + '-roof-"]').forEach(function (g) {
      var path = g.querySelector("path"), style = getComputedStyle(path);
      roofs[g.id.slice(name.length + 6)] = {box: box(path), width: parseFloat(style.strokeWidth),
        dashed: style.strokeDasharray !== "none" && style.strokeDasharray !== ""}; });
    out[name] = {xticks: ticks("x"), yticks: ticks("y"), texts: texts.map(function (t) { return t.textContent; }),
                 overlaps: overlaps, inside: inside, roofs: roofs};
  });
  var pre = document.createElement("pre");
  pre.id = "plot-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


def measured_plots(page: Path, tmp_path: Path) -> dict[str, dict]:
    """The plots of ``page`` as headless Chromium lays them out (MEASURE_PLOTS's JSON)."""
    probe = tmp_path / f"probe-{page.name}"
    probe.write_text(page.read_text().replace("</body>", f"<script>{MEASURE_PLOTS}</script></body>"))
    done = chromium("--window-size=1200,1400", "--dump-dom", probe.as_uri(), profile=tmp_path / f"m-{page.stem}")
    assert done.returncode == 0 and console_lines(done.stderr) == [], done.stderr[-2000:]
    found = re.search(r'<pre id="plot-check">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-2000:]
    return json.loads(html_unescape(found.group(1)))


def hidden_roofs(roofs: dict[str, dict]) -> list[str]:
    """Roofs drawn under a later solid one at the same height over their whole length (bf16 under fp16)."""
    names = list(roofs)
    hidden = []
    for n, name in enumerate(names):
        a = roofs[name]["box"]
        for later in names[n + 1:]:
            b, solid = roofs[later]["box"], not roofs[later]["dashed"]
            if (solid and abs(a["y"] + a["h"] / 2 - b["y"] - b["h"] / 2) < max(roofs[later]["width"], 1.0)
                    and b["x"] <= a["x"] + 1 and b["x"] + b["w"] >= a["x"] + a["w"] - 1):
                hidden.append(f"{name} under {later}")
    return hidden


UNITS = {"waterfall": ("latency (ms)",), "layers": ("latency (ms)",), "headline": ("latency (ms)",),
         "roofline": ("arithmetic intensity (FLOP/byte)", "achieved performance (FLOP/s)")}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test installs it where apt-get exists)")
def test_plots_read_like_plots_in_headless_chromium(pages: dict, compare_page: Path, tmp_path: Path) -> None:
    """Each plot, as the browser lays it out: at least three labelled ticks on each axis and the axes' units,
    no two labels overlapping, no label inside the roofline's plotting area (over its lines), every roof
    of the analysis drawn and none hidden under another; and the compare page has plots (before: ticks
    only at decades of a bare '1e3', roof labels over the roofs, bf16 under fp16, no compare plot)."""
    expected = {"profiled": {"waterfall", "layers", "roofline"}, "bounds": {"layers", "roofline"},
                "compare": {"headline", "layers"}}
    for name, page in [*((n, pages[n][0]) for n in ("profiled", "bounds")), ("compare", compare_page)]:
        plots = measured_plots(page, tmp_path)
        for plot, seen in plots.items():
            assert seen["overlaps"] == [], (f"{name}/{plot}", seen["overlaps"][:5])
        assert set(plots) == expected[name], (name, sorted(plots))
        for plot, seen in plots.items():
            where = f"{name}/{plot}"
            assert len(seen["xticks"]) >= 3 and len(seen["yticks"]) >= 3, (where, seen["xticks"], seen["yticks"])
            assert all(any(unit in t for t in seen["texts"]) for unit in UNITS[plot]), (where, seen["texts"])
        if "roofline" in plots:
            roof = plots["roofline"]
            assert roof["inside"] == [], roof["inside"][:5]  # the key is beside the plot, not over the roofs
            peaks = pages[name][1]["ceilings"]["peak_flop_s"]["value"]
            assert set(roof["roofs"]) == {"bandwidth", *peaks}, sorted(roof["roofs"])
            assert hidden_roofs(roof["roofs"]) == []
            for precision in peaks:
                assert any(t.startswith(f"{precision} roof ") and "FLOP/s" in t for t in roof["texts"]), precision
    compare = measured_plots(compare_page, tmp_path)
    assert {BUNDLE.name, TORCH_BUNDLE.name} <= set(compare["headline"]["texts"])  # each side in the key
    assert {"LBL sequential", "measured end-to-end"} <= set(compare["headline"]["xticks"])
