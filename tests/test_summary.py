"""The typed summary record: every figure it holds reaches the writers under one label."""

from __future__ import annotations

from dataclasses import fields, replace

from test_analyze_fixtures import branchy_inputs

from benanza.analyze import analyze
from benanza.analyze.summary import LABELS, WHAT_IF, Check, Summary


def test_every_field_has_a_label_and_every_label_one_figure() -> None:
    """A field without a label would reach no writer (and no JSON key); a label read twice would be two names."""
    paths = [path for _, path in LABELS]
    assert len(set(paths)) == len(paths) and len({label for label, _ in LABELS}) == len(LABELS)
    roots = {path.split(".")[0] for path in paths}
    assert {f.name for f in fields(Summary)} <= roots
    for f in fields(Summary):
        if f.type == "Check":  # each of its fields and its ratio, once
            assert {p.split(".", 1)[1] for p in paths if p.startswith(f"{f.name}.")} == {
                *(g.name for g in fields(Check)), "ratio"}


def test_the_labelled_form_puts_each_what_if_in_its_place_and_derives_the_ratios() -> None:
    s = replace(analyze(branchy_inputs()).summary, what_if_ms={"tf32": 1.0, "fp16": None})
    labelled = s.labelled()
    keys = list(labelled)
    at = keys.index("parallelism gap (ms)") + 1
    assert keys[at:at + 3] == [WHAT_IF.format("tf32"), WHAT_IF.format("fp16"), "framework overhead (ms)"]
    assert labelled[WHAT_IF.format("tf32")] == 1.0 and WHAT_IF not in labelled
    assert labelled["BR_seq vs GPU busy"] == s.lbl_seq_ms / s.gpu_busy_ms == s.benanza_ratio
    without = replace(s, gpu_busy_ms=None, e2e_ms=0.0)  # unknown, and a zero denominator
    assert without.benanza_ratio is None and without.br_par_e2e is None and without.speedup_e2e == 0.0
    assert replace(s, e2e_ms=None).speedup_e2e is None
    assert Check(3, None, 1.0).ratio is None and Check(3, 2.0, 1.0).ratio == 0.5
