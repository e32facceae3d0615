"""Where a replay's time goes beyond LBL_seq: replay_warm - LBL_seq as named parts, from its per-step results.

Why: issue 37 asks that every cell whose replay exceeds 1.15 x LBL_seq be explained. The bound charges
each group of its execution (``charged_ms``, summing to LBL_seq); each step ran a call whose
micro-benchmark took ``measured_ms`` alone, and took ``replay_ms`` in the step-by-step timing of the
replay. So, exactly::

    replay_warm - LBL_seq = sum over steps of (measured - charged)   [a, d: stand-ins, other calls]
                          + sum over steps with no micro-benchmark of (replay_ms - charged)
                                                                   [a': own kernels, b: copies]
                          + (replay_warm - sum of measured - their replay_ms)   [c: composition]
                          + (sum of charged - LBL_seq)   [e: charges with no step, normally 0]

(a) roofline stand-ins: a group the bound charges its bytes at the copy roofline runs its fastest
measured call (``ROOFLINE_NOTE``), which is slower; (a') such a group run by benanza's own kernel (a
fused chain, a pool: ``OWN_KERNEL_STEPS``, no micro-benchmark) costs its step time over the charge;
(b) views run as strided copies and layout transforms, which the bound charges nothing, cost their
step time; (c) composition: the one CUDA
graph against its calls timed alone (launch gaps, the L2 state one call leaves the next). Each part
names the steps behind it, largest first: by measured - charged, by step time, and, for composition,
by how much slower a step ran in the sequence than alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benanza.analyze.replay import ROOFLINE_NOTE
from benanza.generate.replay import OWN_KERNEL_STEPS

EXPLAIN_ABOVE = 1.15  # replay / LBL_seq above which a cell is explained (issue 37's acceptance)
ROOFLINE = "roofline stand-ins"
OWN = "benanza's own kernels (fused chains, pools) over their charge"
COPIES = "copies the bound does not charge (views, layout transforms)"
COMPOSITION = "composition (launch gaps, L2 state)"
OTHER = "charged calls, measured - charged"
UNSTEPPED = "charges with no step"
TOP = 3  # steps named per part in the reason line


@dataclass(frozen=True)
class Part:
    """One named share of replay - LBL_seq (ms), and the steps behind it: (label, ms), largest first."""

    name: str
    ms: float
    steps: tuple[tuple[str, float], ...] = ()
    kinds: tuple[tuple[str, float, int], ...] = ()  # (step kind, ms, steps), largest first
    ranked_by: str = "largest"  # how ``steps`` are ranked, as the reason says it

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.name, "ms": self.ms, "steps": [{"step": s, "ms": ms} for s, ms in self.steps],
                "kinds": [{"kind": k, "ms": ms, "steps": n} for k, ms, n in self.kinds]}


@dataclass(frozen=True)
class Explanation:
    """replay_warm - LBL_seq split into ``parts`` (they add up to ``excess_ms``)."""

    replay_ms: float
    lbl_seq_ms: float
    parts: tuple[Part, ...]

    @property
    def excess_ms(self) -> float:
        return self.replay_ms - self.lbl_seq_ms

    @property
    def ratio(self) -> float | None:
        return self.replay_ms / self.lbl_seq_ms if self.lbl_seq_ms else None

    @property
    def largest(self) -> Part:
        return max(self.parts, key=lambda p: p.ms)

    def reason(self, top: int = TOP) -> str:
        """One line: the ratio, the excess, the largest part with its share and the steps behind it."""
        part = self.largest
        share = f", {part.ms / self.excess_ms:.0%} of it" if self.excess_ms > 0 else ""
        kinds = ", ".join(f"{kind} {ms:.3g} ms in {n}" for kind, ms, n in part.kinds[:2]) if len(part.kinds) > 1 \
            or (part.kinds and part.kinds[0][2] > top) else ""
        behind = ", ".join(f"{label} {ms:.3g} ms" for label, ms in part.steps[:top])
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "replay"
        return (f"{ratio} LBL_seq ({self.excess_ms:+.3g} ms): most in {part.name} {part.ms:+.3g} ms{share}"
                + (f" ({kinds})" if kinds else "") + (f"; {part.ranked_by} {behind}" if behind else ""))

    def needs_reason(self, above: float = EXPLAIN_ABOVE) -> bool:
        return self.ratio is not None and self.ratio > above

    def to_dict(self) -> dict[str, Any]:
        return {"replay_ms": self.replay_ms, "lbl_seq_ms": self.lbl_seq_ms, "excess_ms": self.excess_ms,
                "largest": self.largest.name, "reason": self.reason(), "parts": [p.to_dict() for p in self.parts]}


def step_label(step: Mapping[str, Any]) -> str:
    """A step as the reason names it: its kind and its layers (the head and how many more)."""
    layers = list(step.get("layers") or ())
    names = layers[0] if len(layers) == 1 else f"{layers[0]}+{len(layers) - 1}" if layers else f"#{step.get('step')}"
    return f"{step.get('kind')} {names}"


def _ranked(items: Iterable[tuple[Mapping[str, Any], float]]) -> tuple[tuple[str, float], ...]:
    return tuple((step_label(s), ms) for s, ms in sorted(items, key=lambda i: -i[1]) if ms > 0)


def _by_kind(items: Iterable[tuple[Mapping[str, Any], float]]) -> tuple[tuple[str, float, int], ...]:
    totals: dict[str, list[float]] = {}
    for s, ms in items:
        totals.setdefault(str(s.get("kind")), []).append(ms)
    return tuple(sorted(((k, sum(v), len(v)) for k, v in totals.items() if sum(v) > 0), key=lambda t: -t[1]))


def _ms(value: Any) -> float:
    return float(value) if value is not None else 0.0


def explain(replay_warm_ms: float, lbl_seq_ms: float, steps: Sequence[Mapping[str, Any]]) -> Explanation:
    """Decompose ``replay_warm_ms - lbl_seq_ms`` over a replay's per-step results (``charged_ms``,
    ``measured_ms``, ``replay_ms``, ``note``, ``kind``, ``layers`` per step, as ``benanza replay`` and
    the database's ``replay_steps`` give them)."""
    stand_ins, own, copies, others, slower = [], [], [], [], []
    for s in steps:
        charged = _ms(s.get("charged_ms"))
        if s.get("measured_ms") is None:  # no micro-benchmark: an own kernel, a view's copy, a layout transform
            (own if s.get("kind") in OWN_KERNEL_STEPS else copies).append((s, _ms(s.get("replay_ms")) - charged))
            continue
        measured = _ms(s.get("measured_ms"))
        (stand_ins if s.get("note") == ROOFLINE_NOTE else others).append((s, measured - charged))
        if s.get("replay_ms") is not None:
            slower.append((s, _ms(s.get("replay_ms")) - measured))
    charged_all = sum(_ms(s.get("charged_ms")) for s in steps)
    measured_all = sum(_ms(s.get("measured_ms")) for s in steps if s.get("measured_ms") is not None)
    unmeasured_ms = sum(_ms(s.get("replay_ms")) for s, _ in (*own, *copies))
    parts = (Part(ROOFLINE, sum(ms for _, ms in stand_ins), _ranked(stand_ins), _by_kind(stand_ins)),
             Part(OWN, sum(ms for _, ms in own), _ranked(own), _by_kind(own)),
             Part(COPIES, sum(ms for _, ms in copies), _ranked(copies), _by_kind(copies)),
             Part(COMPOSITION, replay_warm_ms - measured_all - unmeasured_ms, _ranked(slower),
                  ranked_by="slower in the sequence than alone:"),
             Part(OTHER, sum(ms for _, ms in others), _ranked(others), _by_kind(others)),
             Part(UNSTEPPED, charged_all - lbl_seq_ms))
    return Explanation(replay_warm_ms, lbl_seq_ms, parts)
