"""replay(as-executed) - replay(best) beside the analysis's joint gap, and where two replays differ.

Why: issue 37 asks that the realized value of the whole advice (the framework's own calls replayed, minus
the best execution replayed, no framework involved) come within 20 % of the joint gap ``benanza analyze``
prints (``Summary.joint_gap_ms``), or be explained. The two plans group layers differently (a fused call
against a call and its separate bias add and ReLU), so steps are compared over the smallest sets of layers
that both plans cover whole: each step links the layers it runs, and a set is a connected component of
those links across both plans. Pure functions over ``ReplayOutcome.step_results`` rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

WITHIN = 0.20  # |realized - joint gap| / joint gap the acceptance allows before the differences are named
TOP = 3  # differences named in a reason line
BIAS_SUFFIX = " (bias)"  # a conv's separate bias add step is named after its conv


@dataclass(frozen=True)
class Difference:
    """One set of layers both plans run whole: what each plan's steps over it took (ms)."""

    layers: tuple[str, ...]
    best_ms: float
    executed_ms: float

    @property
    def diff_ms(self) -> float:
        return self.executed_ms - self.best_ms

    def label(self) -> str:
        return self.layers[0] if len(self.layers) == 1 else f"{self.layers[0]}..{self.layers[-1]} ({len(self.layers)})"


def _layers(step: Mapping[str, Any]) -> list[str]:
    return [name.removesuffix(BIAS_SUFFIX) for name in step.get("layers") or ()]


def step_differences(best: Sequence[Mapping[str, Any]], executed: Sequence[Mapping[str, Any]],
                     field: str = "replay_ms") -> list[Difference]:
    """Per set of layers both plans cover whole, each plan's sum of ``field`` over its steps there
    (``replay_ms`` after a run, ``charged_ms`` from the plans alone), largest |difference| first."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for step in (*best, *executed):
        names = _layers(step)
        for name in names[1:]:
            parent[root(name)] = root(names[0])
        if names:
            root(names[0])
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for side, steps in enumerate((best, executed)):
        for step in steps:
            names = _layers(step)
            if names:
                totals[root(names[0])][side] += step.get(field) or 0.0
    members: dict[str, list[str]] = defaultdict(list)
    for name in parent:
        members[root(name)].append(name)
    out = [Difference(tuple(members[r]), ms[0], ms[1]) for r, ms in totals.items()]
    return sorted(out, key=lambda d: (-abs(d.diff_ms), d.layers))


@dataclass(frozen=True)
class Comparison:
    """replay(as-executed) - replay(best) of one bundle against the analysis's joint gap."""

    best_ms: float  # replay(best), warm (or the best plan's LBL_seq where nothing ran)
    executed_ms: float  # replay(as-executed)
    joint_gap_ms: float  # Summary.joint_gap_ms: gap baseline LBL_seq - joint LBL_par
    charged_gap_ms: float  # as-executed plan's LBL_seq - best plan's LBL_seq: what the analysis charges the difference
    parallelism_ms: float  # best plan's LBL_seq - LBL_par: in the joint gap, not in a sequential replay
    differences: tuple[Difference, ...]

    @property
    def realized_ms(self) -> float:
        return self.executed_ms - self.best_ms

    @property
    def off_by(self) -> float | None:
        """(realized - joint gap) / joint gap; None when the joint gap is 0."""
        return (self.realized_ms - self.joint_gap_ms) / self.joint_gap_ms if self.joint_gap_ms else None

    @property
    def within(self) -> bool:
        return self.off_by is not None and abs(self.off_by) <= WITHIN

    def reason(self) -> str:
        """One line: the figures, and where they differ by more than ``WITHIN`` the largest step differences."""
        off = f" ({self.off_by:+.0%})" if self.off_by is not None else ""
        text = (f"replay(as-executed) - replay(best) {self.realized_ms:.4g} ms vs joint gap {self.joint_gap_ms:.4g} ms"
                f"{off}; charged {self.charged_gap_ms:.4g} ms, of the joint gap {self.parallelism_ms:.4g} ms is "
                "LBL_seq - LBL_par (branches a sequential replay runs one after another)")
        if self.within:
            return text + "; within 20 %"
        named = ", ".join(f"{d.label()} {d.diff_ms:+.4g} ms" for d in self.differences[:TOP])
        return text + f"; largest differences: {named}"

    def to_dict(self) -> dict[str, Any]:
        return {"best_ms": self.best_ms, "executed_ms": self.executed_ms, "realized_ms": self.realized_ms,
                "joint_gap_ms": self.joint_gap_ms, "charged_gap_ms": self.charged_gap_ms,
                "parallelism_ms": self.parallelism_ms, "off_by": self.off_by, "within": self.within,
                "reason": self.reason(),
                "differences": [{"layers": list(d.layers), "best_ms": d.best_ms, "executed_ms": d.executed_ms,
                                 "diff_ms": d.diff_ms} for d in self.differences]}


def compare(best: Mapping[str, Any], executed: Mapping[str, Any], joint_gap_ms: float,
            field: str = "replay_ms") -> Comparison:
    """The comparison of two replays of one bundle's model (``bench/replay.py --bundles`` cells: a summary
    with ``lbl_seq_ms``, ``lbl_par_ms``, ``replay_warm_ms`` and ``steps_detail``); ``field`` "charged_ms"
    compares the plans alone (no GPU: each side's LBL_seq stands for its replay)."""
    def total(cell: Mapping[str, Any]) -> float:
        warm = cell.get("replay_warm_ms")
        return float(warm) if field == "replay_ms" and warm else float(cell["lbl_seq_ms"])

    diffs = step_differences(best.get("steps_detail") or (), executed.get("steps_detail") or (), field)
    return Comparison(total(best), total(executed), joint_gap_ms, executed["lbl_seq_ms"] - best["lbl_seq_ms"],
                      best["lbl_seq_ms"] - best["lbl_par_ms"], tuple(diffs))

