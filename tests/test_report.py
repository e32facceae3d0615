"""Report writers: they only format a Report; check that what they write is well-formed and safe."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console
from test_analyze_fixtures import NASTY, branchy_inputs

from benanza import SCHEMA_VERSION
from benanza.analyze import Ceilings, analyze
from benanza.analyze.tables import LEVELS, machine_key
from benanza.library import Precision
from benanza.report import print_report, to_html, to_json, trace_events, write_html, write_json, write_trace
from benanza.report.fmt import cell
from benanza.report.json_report import REPORT_SCHEMA, SCHEMA_FILE
from benanza.report.terminal import waterfall_lines

ROOT = Path(__file__).resolve().parent.parent

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}


class StrictChecker(HTMLParser):
    """Nesting checker: every start tag closed in order; records tags and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]} ")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def report():
    return analyze(branchy_inputs())


def check_html(page: str) -> StrictChecker:
    checker = StrictChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    return checker


def test_html_is_well_formed_self_contained_and_escapes_names(report):
    page = to_html(report)
    checker = check_html(page)
    # the node name's <script> never became a tag: the one script is the page's own table sorter
    assert checker.tags.count("script") == 1 and page.count("<script") == 1 and "</td>\"" not in page
    assert "&lt;script&gt;" in page
    assert NASTY in "".join(checker.text)  # shown to the reader literally
    for external in ("<link", "<img", "src=", "@import", "https://"):
        assert external not in page
    assert not re.findall(r'url\((?!#)|href="(?!#)', page)  # the plots refer only to their own parts
    assert checker.tags.count("svg") == 3  # waterfall, per-layer bars, roofline
    assert 'id="roofline-roof-fp32"' in page and 'id="roofline-points-fp32"' in page  # roofline ceilings and points
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # three plots on one page, no id twice


def test_html_without_ceilings_or_profile(report):
    bare = analyze(branchy_inputs(ceilings=Ceilings(), profile=None))
    page = to_html(bare)
    check_html(page)
    # achieved FLOP/s needs no ceiling, so the points are drawn, but no roof is guessed
    assert 'id="roofline-points-' in page and 'id="roofline-roof-' not in page


def test_every_writer_shows_each_ceiling_with_its_source():
    """A ceiling is never shown without where it comes from (issue 31, 6: "fp32 peak 1.3e+14 FLOP/s",
    raised by a Winograd row past the physical peak, unlabelled)."""
    ceil = Ceilings(bandwidth_gbs=2000.0, flops={Precision.FP32: 50e12}, sources={
        "hbm": "measured: ceilings benchmark copy_d2d", "fp32": "measured: ceilings benchmark gemm_fp32"})
    rep = analyze(branchy_inputs(ceilings=ceil, system={"gpu": "NVIDIA H100 80GB HBM3"}))
    page = to_html(rep)
    assert "fp32 roof 50 TFLOP/s (measured)" in page and "bandwidth 2000 GB/s (measured)" in page  # the plot
    assert "measured: ceilings benchmark gemm_fp32" in page and "measured: ceilings benchmark copy_d2d" in page
    assert "NVIDIA H100 SXM5 datasheet (dense)" in page
    console = Console(record=True, width=300)
    print_report(rep, console=console)
    text = console.export_text()
    assert "Roofline ceilings" in text and "measured: ceilings benchmark gemm_fp32" in text and "6.69e+13" in text
    data = json.loads(to_json(rep))["ceilings"]
    assert data["peak_flop_s"] == {"value": {"fp32": 50e12}, "unit": "FLOP/s", "label": "peak (FLOP/s)"}
    assert data["source"]["value"]["peak_flop_s"] == {"fp32": "measured: ceilings benchmark gemm_fp32"}
    assert data["physical_peak"]["value"]["peak_flop_s"]["fp32"] == 66.9e12


def test_json_has_schema_system_and_every_table(report, tmp_path):
    data = json.loads(to_json(report))
    assert list(data)[:3] == ["schema", "schema_file", "system"]
    assert data["schema"] == REPORT_SCHEMA and (ROOT / data["schema_file"]).is_file()
    assert data["system"]["gpu"] == report.system["gpu"]
    assert set(data["tables"]) == {machine_key(name)[0] for name in report.tables}
    rows = data["tables"]["layers"]["rows"]
    assert rows[3]["layer"] == NASTY and rows[0]["best_ms"] == pytest.approx(0.08)
    assert {"key": "best_ms", "label": "best (ms)", "unit": "ms"} in data["tables"]["layers"]["columns"]
    assert data["figures"]["lbl_seq_ms"] == {"value": report.summary.lbl_seq_ms, "unit": "ms",
                                             "label": "LBL_seq (ms)"}
    assert rows == report.records("layers") and {k: f["value"] for k, f in data["figures"].items()} == \
        report.figures()
    path = write_json(report, tmp_path / "r.json")
    assert json.loads(path.read_text())["summary"] == data["summary"]


def test_json_follows_its_published_schema(report):
    """docs/analysis.schema.json: every key a program reads is snake_case, each figure and column carries
    its unit as data; the display labels stay beside them."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / SCHEMA_FILE).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(to_json(report)), schema)


def test_json_never_writes_nan():
    rep = analyze(branchy_inputs())
    rep = replace(rep, summary=replace(rep.summary, lbl_seq_ms=float("nan")))  # whatever a writer is given

    assert json.loads(to_json(rep))["summary"]["LBL_seq (ms)"] is None


def test_trace_nesting_and_metadata(report, tmp_path):
    path = write_trace(report, tmp_path / "t.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    profiled, timed = (next((n for n in names if n.startswith(s)), s) for s in ("profiled run", "timed runs"))
    assert names == {profiled, timed, "lower bound (best, parallel)", "joint estimate"}
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["cat"] for e in spans} == set(LEVELS)
    pid = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    measured = [e for e in spans if e["pid"] == pid[profiled]]
    model = next(e for e in measured if e["cat"] == "model")
    for e in measured:
        assert model["ts"] <= e["ts"] and e["ts"] + e["dur"] <= model["ts"] + model["dur"] + 1e-6
    # every kernel lies inside its layer's box, and each layer has a library call box of the same extent
    layers = {e["args"]["#"]: e for e in measured if e["cat"] == "layer"}
    for k in (e for e in measured if e["cat"] == "kernel"):
        layer = layers[k["args"]["layer"]]
        assert layer["ts"] <= k["ts"] and k["ts"] + k["dur"] <= layer["ts"] + layer["dur"] + 1e-6
    calls = [e for e in measured if e["cat"] == "library call"]
    assert {(c["ts"], c["dur"]) for c in calls} <= {(e["ts"], e["dur"]) for e in layers.values()}
    # the levels stack: model rows above layer rows above call rows above kernel rows
    tid = {e["cat"]: e["tid"] for e in measured if e["tid"] % 1000 == 1}
    assert tid["model"] < tid["layer"] < tid["library call"] < tid["kernel"]
    bound = [e for e in spans if e["pid"] == pid["lower bound (best, parallel)"] and e["cat"] == "layer"]
    assert len({e["tid"] for e in bound}) == 2  # conv2 and pool side by side
    assert trace_events(report)["otherData"]["schema"] == SCHEMA_VERSION


def test_the_trace_names_the_profiled_run_and_shows_the_timed_one(report):
    """The kernel timeline comes from the profiled run (profiler and API logs on, slower); the latency
    every ratio uses comes from the timed runs. The trace says which is which and draws the timed
    median beside it (before: one process named "measured run", the timed latency nowhere)."""
    events = trace_events(report)["traceEvents"]
    pid = {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "measured run" not in pid, sorted(pid)
    profiled = next(n for n in pid if n.startswith("profiled run"))
    timed_name = next(n for n in pid if n.startswith("timed runs"))
    assert "API logs" in profiled and "slower" in profiled
    timed = [e for e in events if e["ph"] == "X" and e["pid"] == pid[timed_name]]
    s = report.summary
    assert len(timed) == 1 and timed[0]["dur"] == pytest.approx(s.e2e_ms * 1e3, abs=1e-3)
    assert timed[0]["args"]["median (ms)"] == s.e2e_ms
    assert pid[timed_name] < pid[profiled]  # Perfetto lists the timed latency first
    bare = analyze(branchy_inputs(profile=None))
    names = {e["args"]["name"] for e in trace_events(bare)["traceEvents"] if e["name"] == "process_name"}
    assert names == {"lower bound (best, parallel)", "joint estimate"}  # no profile: neither run


def test_terminal_prints_summary_waterfall_top_layers_and_missing(report):
    console = Console(record=True, width=200)
    print_report(report, console, top=10)
    text = console.export_text()
    for needle in ("LBL_par (ms)", "Gaps:", "Top 10 layers by gap", "Missing data", "mystery", "joint estimate"):
        assert needle in text
    assert NASTY in text  # shown literally, not interpreted as rich markup


def test_waterfall_lines_scale_bars(report):
    lines = waterfall_lines(report.tables["gaps"])
    assert lines[0].startswith("measured") and lines[0].count("█") == 40  # the largest step fills the bar
    assert lines[-1].startswith("joint estimate")


def test_cell_formats_carry_units():
    assert cell(None) == "-"
    assert cell(12.3456, "efficiency (%)") == "12.3"
    assert cell(0.012345, "best (ms)") == "0.01235"
    assert cell(1234567, "FLOPs") == "1,234,567"
    assert cell({"fp16": 0.5}, "x (ms)") == "fp16: 0.5"


def test_writers_on_a_real_zoo_model(tmp_path):
    from test_analyze_zoo import CEIL, RESNET50, synthetic_measurements

    from benanza.analyze import Inputs

    if not RESNET50.exists():
        pytest.skip("zoo model not shipped")
    from benanza.model.onnx_import import load_model

    model = load_model(RESNET50, 1)
    rep = analyze(Inputs(model, synthetic_measurements(model), {"gpu": "synthetic test input"}, CEIL))
    page = write_html(rep, tmp_path / "r.html").read_text()
    check_html(page)
    points = page[page.index('<g id="roofline-points-'):]
    points = points[:points.index("</svg>")]
    assert len(re.findall(r"<use [^>]*><title>[^<]+FLOP/B", points)) >= 100  # one point per layer with FLOPs
    json.loads(write_json(rep, tmp_path / "r.json").read_text())
    trace = json.loads(write_trace(rep, tmp_path / "r.trace.json").read_text())
    pids = {e["args"]["name"]: e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    layer_boxes = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "layer"]
    bound = [e for e in layer_boxes if e["pid"] == pids["lower bound (best, parallel)"]]
    assert len(bound) == len(rep.tables["execution"].rows)  # one box per group of the best execution
    assert sorted(i for e in bound for i in e["args"]["#"]) == [layer.index for layer in model.layers]
    assert 0 < sum(e["pid"] == pids["joint estimate"] for e in layer_boxes) <= len(bound)
    console = Console(record=True, width=160)
    print_report(rep, console)
    assert "resnet50" in console.export_text().lower()


def test_plot_text_is_the_name_as_written():
    """A layer name is untrusted text: '$' is not math (matplotlib would parse '$\\alpha$' or fail on one
    '$'), markup is escaped, and its tooltip too."""
    from benanza.report import plots

    name = 'conv $\\alpha_1$ $ <b>&" id="x" url(#y)'
    page = str(plots.layer_bars([(name, 1.0, 0.5, 0.2)]))
    check_html(page)
    assert '>conv $\\alpha_1$ $ &lt;b&gt;&amp;" id="x" url(#y)</text>' in page  # the tick label, ids untouched
    assert "<b>" not in page
    assert "<title>conv $\\alpha_1$ $ &lt;b&gt;&amp;&#34; id=&#34;x&#34; url(#y): measured 1" in page  # tooltip
