"""Where a replay's time beyond LBL_seq goes (``analyze.replay_explain``), on real H100 replays: six cells
of ``bench/replay.py``'s runs in session 20 (tests/data/replay/h100_replay_excerpt.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benanza.analyze.replay_explain import COMPOSITION, COPIES, OTHER, OWN, ROOFLINE, UNSTEPPED, explain

EXCERPT = Path(__file__).parent / "data" / "replay" / "h100_replay_excerpt.json"


def cells() -> dict[tuple[str, int, str], dict]:
    return {(c["model"], c["batch"], c["dtype"]): c for c in json.loads(EXCERPT.read_text())["cells"]}


def explained(model: str, batch: int, dtype: str):
    c = cells()[(model, batch, dtype)]
    return explain(c["replay_warm_ms"], c["lbl_seq_ms"], c["steps_detail"])


@pytest.mark.parametrize("cell", sorted(cells()))
def test_the_parts_add_up_to_replay_minus_lbl(cell: tuple[str, int, str]) -> None:
    e = explained(*cell)
    assert sum(p.ms for p in e.parts) == pytest.approx(e.excess_ms, abs=1e-12)
    assert [p.name for p in e.parts] == [ROOFLINE, OWN, COPIES, COMPOSITION, OTHER, UNSTEPPED]
    by = {p.name: p.ms for p in e.parts}
    assert by[UNSTEPPED] == pytest.approx(0.0, abs=1e-9)  # the steps carry the whole bound
    assert by[OTHER] == pytest.approx(0.0, abs=1e-9)  # a charged call runs the row it was charged


def test_shufflenet_b64_fp32_is_its_transposes_run_as_copies() -> None:
    """3.5x: the 16 channel-shuffle Transposes the bound reads through strides cost 6.3 ms as copies."""
    e = explained("shufflenet", 64, "fp32")
    assert e.ratio == pytest.approx(3.479, abs=1e-3) and e.needs_reason()
    assert e.largest.name == COPIES and e.largest.ms == pytest.approx(6.26, abs=0.01)
    assert e.largest.kinds == ((("permute", pytest.approx(e.largest.ms), 16)),)
    assert e.largest.steps[0] == ("permute n8", pytest.approx(1.67, abs=0.01))
    assert e.reason().startswith("3.48x LBL_seq (+6.42 ms): most in copies the bound does not charge")
    assert "permute n8 1.67 ms" in e.reason()


def test_zfnet512_b1_fp16_is_its_lrns_standing_in_for_a_roofline() -> None:
    e = explained("zfnet512", 1, "fp16")
    assert e.largest.name == ROOFLINE and e.largest.kinds[0][0] == "lrn"
    assert [label for label, _ in e.largest.steps[:2]] == ["lrn n6", "lrn n2"]


def test_squeezenet_b64_fp16_is_composition_named_by_the_steps_slower_in_sequence() -> None:
    e = explained("squeezenet", 64, "fp16")
    assert e.largest.name == COMPOSITION and e.needs_reason()
    assert "slower in the sequence than alone: concat n16" in e.reason()


def test_a_cell_within_115_percent_needs_no_reason() -> None:
    e = explained("vgg19", 64, "fp32")
    assert e.ratio == pytest.approx(0.9933, abs=1e-4) and not e.needs_reason()
    assert e.to_dict()["reason"] == e.reason() and len(e.to_dict()["parts"]) == 6


def test_inception_v1_b64_fp16_is_benanzas_own_pools_over_their_charge() -> None:
    """Steps with no micro-benchmark of their own are benanza's kernels or copies, each its own part: the
    14 roofline pools this run put on benanza's pooling kernel are 1.18 ms of the 1.80 ms excess (before
    the own-kernel part they were counted as copies the bound does not charge)."""
    e = explained("inception_v1", 64, "fp16")
    assert e.ratio == pytest.approx(2.76, abs=0.01) and e.largest.name == OWN
    assert e.largest.kinds == (("pool", pytest.approx(e.largest.ms), 14),)
    assert e.largest.ms == pytest.approx(1.18, abs=0.01)
    assert {p.name: p.ms for p in e.parts}[COPIES] == pytest.approx(0.175, abs=0.01)  # the layout transforms
