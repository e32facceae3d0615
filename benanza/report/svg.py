"""Inline SVG plots drawn by hand (no plotting library, no external asset).

Every piece of text that reaches the SVG goes through ``markupsafe.escape``: layer
names come from the model file and are untrusted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

COLORS = {"best": "#3465a4", "measured": "#babdb6", "bound": "#cc0000", "gap": "#f57900",
          "total": "#555753", "residual": "#c4a000", "point": "#3465a4"}
PEAK_COLORS = ("#4e9a06", "#75507b", "#c17d11", "#204a87")


def _svg(width: float, height: float, body: list[str], label: str) -> Markup:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}" '
            'font-family="sans-serif" font-size="11">')
    return Markup(head + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _empty(label: str) -> Markup:
    return _svg(400, 30, [_text(5, 20, f"{label}: no data")], label)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def layer_bars(rows: Sequence[tuple[str, float | None, float | None, float | None]], width: int = 1100) -> Markup:
    """Per layer (label, measured, best, bound) in ms, in the order given: gray measured bar,
    blue best bar, red bound tick, with a colour key on top."""
    rows = [r for r in rows if any(v is not None for v in r[1:])]
    if not rows:
        return _empty("per-layer latency")
    label_w, row_h, top = 300, 16, 24
    plot_w = width - label_w - 70
    vmax = max(v for r in rows for v in r[1:] if v is not None) or 1.0
    sx = plot_w / vmax
    body = [_text(label_w, 14, f"ms (full width = {vmax:.4g} ms)"),
            f'<rect x="{label_w + 200}" y="5" width="10" height="10" fill="{COLORS["measured"]}"/>',
            _text(label_w + 214, 14, "measured"),
            f'<rect x="{label_w + 280}" y="5" width="10" height="10" fill="{COLORS["best"]}"/>',
            _text(label_w + 294, 14, "best benchmark"),
            f'<rect x="{label_w + 390}" y="5" width="3" height="10" fill="{COLORS["bound"]}"/>',
            _text(label_w + 398, 14, "roofline bound")]
    for n, (label, measured, best, bound) in enumerate(rows):
        y = top + n * row_h
        short = label if len(label) <= 46 else label[:45] + "…"
        body.append(f"<g><title>{escape(label)}: measured {_ms(measured)}, best {_ms(best)}, "
                    f"bound {_ms(bound)}</title>")
        body.append(_text(label_w - 6, y + 11, short, "end"))
        if measured is not None:
            body.append(f'<rect x="{label_w}" y="{y + 1}" width="{measured * sx:.2f}" height="6" '
                        f'fill="{COLORS["measured"]}"/>')
        if best is not None:
            body.append(f'<rect x="{label_w}" y="{y + 7}" width="{best * sx:.2f}" height="7" '
                        f'fill="{COLORS["best"]}"/>')
        if bound is not None:
            body.append(f'<rect x="{label_w + bound * sx - 1:.2f}" y="{y}" width="2" height="15" '
                        f'fill="{COLORS["bound"]}"/>')
        body.append("</g>")
    return _svg(width, top + len(rows) * row_h + 8, body, "per-layer latency: measured, best, bound")


def _decades(lo: float, hi: float) -> tuple[int, int]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, max(b, a + 1)


def roofline(points: Sequence[tuple[str, float, float]], bandwidth_gbs: float | None,
             peaks: Mapping[str, float], width: int = 900, height: int = 440,
             kinds: Mapping[str, str] | None = None) -> Markup:
    """Log-log roofline: (label, FLOP/B, FLOP/s) points under the bandwidth slope and compute roofs;
    ``kinds``: a roof's (or "bandwidth"'s) source in a word (measured, raised, physical), shown beside it."""
    kinds = kinds or {}
    points = [p for p in points if p[1] > 0 and p[2] > 0]
    if not points:
        return _empty("roofline")
    bw = bandwidth_gbs * 1e9 if bandwidth_gbs else None
    xs = [p[1] for p in points] + ([pk / bw for pk in peaks.values()] if bw else [])
    ys = [p[2] for p in points] + list(peaks.values())
    x0, x1 = _decades(min(xs) / 2, max(xs) * 2)
    y0, y1 = _decades(min(ys) / 2, max(ys) * 2)
    left, right, top, bottom = 70, 190, 20, 50
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (math.log10(x) - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (math.log10(y) - y0) / (y1 - y0) * ph

    body = [f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for d in range(x0, x1 + 1):
        x = px(10.0 ** d)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        body.append(_text(x, top + ph + 14, f"1e{d}", "middle"))
    for d in range(y0, y1 + 1):
        y = py(10.0 ** d)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
        body.append(_text(left - 4, y + 4, f"1e{d}", "end"))
    body.append(_text(left + pw / 2, height - 12, "arithmetic intensity (FLOP/byte)", "middle"))
    body.append(_text(14, top + ph / 2, "achieved FLOP/s", "middle",
                      f' transform="rotate(-90 14 {top + ph / 2:.1f})"'))
    for label, x, y in points:
        body.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{COLORS["point"]}" '
                    f'fill-opacity="0.5"><title>{escape(label)}: {x:.3g} FLOP/B, {y:.3g} FLOP/s</title></circle>')
    halo = ' stroke="white" stroke-width="3" paint-order="stroke"'
    for n, (name, peak) in enumerate(sorted(peaks.items())):
        color = PEAK_COLORS[n % len(PEAK_COLORS)]
        lo, hi = 10.0 ** x0, 10.0 ** x1
        if bw:
            ridge = min(max(peak / bw, lo), hi)
            line = [(lo, min(bw * lo, peak)), (ridge, min(bw * ridge, peak)), (hi, peak)]
        else:
            line = [(lo, peak), (hi, peak)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line)
        body.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        kind = f" ({kinds[name]})" if name in kinds else ""
        body.append(_text(left + pw - 4, py(peak) - 4, f"{name} peak {peak:.3g} FLOP/s{kind}", "end",
                          f' fill="{color}"{halo}'))
    if bw:
        kind = f" ({kinds['bandwidth']})" if "bandwidth" in kinds else ""
        body.append(_text(left + 6, top + 14, f"bandwidth {bandwidth_gbs:.4g} GB/s{kind}", "start",
                          f' fill="{PEAK_COLORS[0]}"{halo}'))
    key_x = left + pw + 12  # colour key right of the plot, clear of points and roofs
    body.append(f'<circle cx="{key_x + 5}" cy="{top + 10}" r="4" fill="{COLORS["point"]}"/>')
    body.append(_text(key_x + 14, top + 14, "layer (best benchmark)"))
    for n, name in enumerate(sorted(peaks)):
        y = top + 30 + 16 * n
        body.append(f'<rect x="{key_x}" y="{y - 4}" width="12" height="3" '
                    f'fill="{PEAK_COLORS[n % len(PEAK_COLORS)]}"/>')
        body.append(_text(key_x + 16, y, f"{name} roof"))
    return _svg(width, height, body, "roofline")


def _wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap to ``width`` characters (labels under narrow bars)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def waterfall(steps: Sequence[tuple[str, str, float]], width: int = 1100, height: int = 320) -> Markup:
    """(step, kind, ms) with kind total / gap / residual: totals stand on 0, gaps step down from the level."""
    if not steps:
        return _empty("gaps")
    bars: list[tuple[str, str, float, float]] = []  # step, kind, low, high
    level = 0.0
    for step, kind, ms in steps:
        if kind == "total":
            bars.append((step, kind, 0.0, ms))
            level = ms
        else:
            bars.append((step, kind, min(level, level - ms), max(level, level - ms)))
            level -= ms
    vmin = min(0.0, *(b[2] for b in bars))
    vmax = max(b[3] for b in bars) or 1.0
    left, top, bottom = 60, 16, 60
    ph, pw = height - top - bottom, width - left - 10
    slot = pw / len(bars)

    def py(v: float) -> float:
        return top + ph - (v - vmin) / (vmax - vmin) * ph

    body = [f'<line x1="{left}" y1="{py(0):.1f}" x2="{width - 10}" y2="{py(0):.1f}" stroke="#888"/>',
            _text(left - 4, py(vmax) + 4, f"{vmax:.4g} ms", "end"), _text(left - 4, py(0) + 4, "0", "end")]
    for n, (step, kind, low, high) in enumerate(bars):
        x = left + n * slot + slot * 0.15
        ms = steps[n][2]
        body.append(f'<rect x="{x:.1f}" y="{py(high):.1f}" width="{slot * 0.7:.1f}" '
                    f'height="{max(py(low) - py(high), 0.5):.1f}" fill="{COLORS[kind]}">'
                    f"<title>{escape(step)}: {ms:.4g} ms</title></rect>")
        body.append(_text(x + slot * 0.35, py(high) - 3, f"{ms:.3g}", "middle"))
        for k, chunk in enumerate(_wrap(step, max(int(slot / 6.5), 6))[:3]):
            body.append(_text(x + slot * 0.35, top + ph + 14 + 12 * k, chunk, "middle"))
    return _svg(width, height, body, "gaps waterfall")
