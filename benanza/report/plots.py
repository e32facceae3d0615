"""The HTML pages' plots, drawn by matplotlib and inlined as SVG text (no external asset, no script).

pyplot is never imported: each plot is a ``Figure`` rendered by the non-interactive SVG backend
(``FigureCanvasSVG``), so no GUI backend is loaded and a notebook's own backend is left alone.
Text stays text (``svg.fonttype: none``), so a browser can find and measure every label, and math
parsing is off: layer names come from the model file, are untrusted and may hold ``$``; matplotlib
escapes them as XML text. Every id in a plot is prefixed with the plot's name, so that several
plots share one page without sharing ids, and elements a reader may point at (a roof, a layer's bar
or point) carry a ``<title>`` tooltip.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

COLORS = {"best": "#3465a4", "measured": "#babdb6", "bound": "#cc0000", "gap": "#f57900",
          "total": "#555753", "residual": "#c4a000"}
# one colour per precision: a roof and the layers computed in that precision share it
PRECISION_COLORS = {"fp32": "#c17d11", "tf32": "#204a87", "fp16": "#75507b", "bf16": "#4e9a06",
                    "int8": "#a40000", "fp8": "#ce5c00"}
OTHER_COLORS = ("#2e3436", "#5c3566", "#8f5902", "#4e9a06")
SIDE_COLORS = ("#3465a4", "#f57900", "#4e9a06", "#75507b", "#c17d11", "#555753")
BANDWIDTH_COLOR = "#2e3436"
CLOSE_ROOFS = 1.25  # roofs closer than this factor are drawn dashed, one over the other, so each shows
TOP_LAYERS = 30  # layers in the per-layer plots (every layer is in the tables)
WIDTH_IN = 11.0

RC = {"svg.fonttype": "none", "text.parse_math": False, "text.usetex": False, "font.family": "DejaVu Sans",
      "font.size": 9.0, "axes.formatter.useoffset": False, "axes.formatter.use_mathtext": False,
      "axes.titlesize": 10.0, "axes.titleweight": "bold", "legend.fontsize": 8.5, "legend.frameon": False}


def _render(fig, name: str, label: str, titles: Mapping[str, str] | None = None,
            markers: Mapping[str, Sequence[str]] | None = None) -> Markup:
    """The figure as inline SVG: no XML prologue or metadata, ids prefixed with ``name``, an
    ``aria-label``, a ``<title>`` inside each group whose gid ``titles`` names and one inside each
    marker of a group ``markers`` names (its markers in data order, none clipped: the axes hold them)."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    out = io.StringIO()
    with matplotlib.rc_context({**RC, "svg.hashsalt": name}):
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = out.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    # matplotlib's stylesheet is '*{...}': inline, it would style the whole page
    text = re.sub(r"\s*<defs>\s*<style[^>]*>[^<]*</style>\s*</defs>", "", text, count=1)
    text = re.sub(r"<[^<>]+>", lambda tag: _prefixed(tag.group(0), name), text)  # tags only, never a label
    for gid, tip in (titles or {}).items():
        text = text.replace(f'<g id="{name}-{gid}">', f'<g id="{name}-{gid}"><title>{escape(tip)}</title>', 1)
    for gid, tips in (markers or {}).items():
        text = _marker_titles(text, f"{name}-{gid}", tips)
    text = text.replace("<svg ", f'<svg class="plot-{name}" role="img" aria-label="{escape(label)}" ', 1)
    return Markup(text)


def _prefixed(tag: str, name: str) -> str:
    """One tag with its id and its references to ids (``url(#…)``, ``xlink:href="#…"``) prefixed."""
    tag = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', tag)
    tag = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{name}-{m.group(1)})", tag)
    return re.sub(r'xlink:href="#([^"]+)"', lambda m: f'xlink:href="#{name}-{m.group(1)}"', tag)


def _marker_titles(text: str, gid: str, tips: Sequence[str]) -> str:
    """Each ``<use>`` (one marker) of group ``gid`` gets the next tooltip of ``tips``."""
    start = text.find(f'<g id="{gid}">')
    if start < 0:
        return text
    end = text.index("</g>", start)
    uses = iter(tips)
    body = re.sub(r"<use ([^>]*?)\s*/>", lambda m: f"<use {m.group(1)}><title>{escape(next(uses, ''))}</title></use>",
                  text[start:end])
    return text[:start] + body + text[end:]


def _figure(height_in: float):
    """A figure that lays itself out (labels never clipped) and draws with the plot style."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        return Figure(figsize=(WIDTH_IN, height_in), layout="constrained")


def _empty(name: str, label: str) -> Markup:
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(0.5)
        fig.text(0.01, 0.5, f"{label}: no data", va="center")
        return _render(fig, name, label)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _short(label: str, width: int = 44) -> str:
    return label if len(label) <= width else label[:width - 1] + "…"


def _eng(value: float, unit: str = "") -> str:
    """1.5e14 -> '150 T' (SI prefixes, plain text: no math in the SVG)."""
    if value <= 0:
        return f"0 {unit}".strip()
    prefixes = {-3: "n", -2: "µ", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P", 6: "E"}
    exp = max(-3, min(6, math.floor(math.log10(value) / 3)))
    return f"{value / 10 ** (3 * exp):.3g} {prefixes[exp]}{unit}".strip()


def _log_axis(axis, unit: str = "") -> None:
    """Decade ticks labelled in plain text (1, 10, 100 / 1 k, 10 k ...), unlabelled minor ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, numticks=30))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10)), numticks=30))
    axis.set_minor_formatter(NullFormatter())
    if unit:
        axis.set_major_formatter(FuncFormatter(lambda v, _: _eng(v)))
    else:
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def layer_bars(rows: Sequence[tuple[str, float | None, float | None, float | None]], order: str = "gap",
               top: int = TOP_LAYERS) -> Markup:
    """Per layer (label, measured, best, bound) in ms, in the order given, the first ``top``: grey
    measured bar, blue best bar, red bound tick, on a latency axis with ticks top and bottom."""
    import matplotlib

    shown = [r for r in rows if any(v is not None for v in r[1:])]
    label = "per-layer latency: measured, best, bound"
    if not shown:
        return _empty("layers", label)
    total, shown = len(shown), shown[:top]
    titles: dict[str, str] = {}
    with matplotlib.rc_context(RC):
        fig = _figure(1.3 + 0.22 * len(shown))
        ax = fig.add_subplot()
        ys = list(range(len(shown)))
        tips = [f"{name}: measured {_ms(m)}, best {_ms(b)}, bound {_ms(r)}" for name, m, b, r in shown]
        for column, kind, height in ((1, "measured", 0.8), (2, "best", 0.45)):
            rows = [n for n in ys if shown[n][column] is not None]
            bars = ax.barh(rows, [shown[n][column] for n in rows], height=height, color=COLORS[kind])
            for n, bar in zip(rows, bars, strict=True):
                bar.set_gid(f"{kind}-{n}")
                titles[f"{kind}-{n}"] = tips[n]
        bounded = [n for n in ys if shown[n][3] is not None]
        ax.plot([shown[n][3] for n in bounded], bounded, marker="|", markersize=12, markeredgewidth=2.5,
                color=COLORS["bound"], linestyle="none", gid="bounds")
        markers = {"bounds": [tips[n] for n in bounded]}
        ax.set_yticks(ys, [_short(r[0]) for r in shown])
        ax.set_ylim(len(shown) - 0.5, -0.5)
        ax.set_xlim(left=0)
        ax.set_xlabel("latency (ms)")
        ax.xaxis.set_tick_params(labeltop=True, top=True)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        handles = [Patch(color=COLORS["measured"], label="measured (profiled run)"),
                   Patch(color=COLORS["best"], label="best benchmark"),
                   Line2D([], [], marker="|", markersize=10, markeredgewidth=2.5, color=COLORS["bound"],
                          linestyle="none", label="roofline bound")]
        fig.legend(handles=handles, loc="outside upper right", ncols=3)
        more = f" (of {total}; every layer is in the layers table)" if total > len(shown) else ""
        ax.set_title(f"The {len(shown)} layers with the largest {order}{more}", loc="left")
        return _render(fig, "layers", label, titles, markers)


def _roof_styles(peaks: Mapping[str, float]) -> dict[str, tuple[str, object]]:
    """Colour and line style per roof: a roof within ``CLOSE_ROOFS`` of one drawn before it (fp16 and
    bf16 are 4 % apart on an H100) is dashed, so the one under it shows between the dashes."""
    styles: dict[str, tuple[str, object]] = {}
    drawn: list[float] = []
    for n, (name, peak) in enumerate(sorted(peaks.items(), key=lambda kv: -kv[1])):
        color = PRECISION_COLORS.get(name, OTHER_COLORS[n % len(OTHER_COLORS)])
        close = sum(1 for d in drawn if max(d, peak) / min(d, peak) < CLOSE_ROOFS)
        styles[name] = (color, "solid" if not close else (close * 3, (4, 4)))
        drawn.append(peak)
    return styles


def roofline(points: Sequence[tuple[str, float, float, str]], bandwidth_gbs: float | None,
             peaks: Mapping[str, float], kinds: Mapping[str, str] | None = None) -> Markup:
    """Log-log roofline: (label, FLOP/B, FLOP/s, precision) points under the bandwidth slope and one
    roof per precision. Every roof and the slope are named in the key right of the plot with their
    value and source (``kinds``: measured, raised, physical), never on the plot over its lines."""
    import matplotlib
    from matplotlib.lines import Line2D

    kinds = kinds or {}
    label = "roofline"
    points = [p for p in points if p[1] > 0 and p[2] > 0]
    if not points:
        return _empty("roofline", label)
    bw = bandwidth_gbs * 1e9 if bandwidth_gbs else None
    xs = [p[1] for p in points] + ([pk / bw for pk in peaks.values()] if bw else [])
    ys = [p[2] for p in points] + list(peaks.values())
    x0, x1 = 10 ** math.floor(math.log10(min(xs) / 1.5)), 10 ** math.ceil(math.log10(max(xs) * 1.5))
    y0, y1 = 10 ** math.floor(math.log10(min(ys) / 1.5)), 10 ** math.ceil(math.log10(max(ys) * 1.5))
    styles = _roof_styles(peaks)
    titles: dict[str, str] = {}
    markers: dict[str, list[str]] = {}
    with matplotlib.rc_context(RC):
        fig = _figure(5.2)
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.patch.set_gid("area")
        handles = []
        if bw:
            top = max(peaks.values(), default=bw * x1)
            ridge = min(top / bw, x1)
            kind = f" ({kinds['bandwidth']})" if "bandwidth" in kinds else ""
            text = f"bandwidth {bandwidth_gbs:.4g} GB/s{kind}"
            handles += ax.plot([x0, ridge], [bw * x0, bw * ridge], color=BANDWIDTH_COLOR, linewidth=2,
                               gid="roof-bandwidth", label=text)
            titles["roof-bandwidth"] = text
        for name, peak in sorted(peaks.items(), key=lambda kv: -kv[1]):
            color, style = styles[name]
            start = max(min(peak / bw, x1), x0) if bw else x0
            kind = f" ({kinds[name]})" if name in kinds else ""
            text = f"{name} roof {_eng(peak, 'FLOP/s')}{kind}"
            handles += ax.plot([start, x1], [peak, peak], color=color, linewidth=2, linestyle=style,
                               gid=f"roof-{name}", label=text)
            titles[f"roof-{name}"] = text
        by_precision: dict[str, list[tuple[str, float, float]]] = {}
        for name, x, y, precision in points:
            by_precision.setdefault(precision, []).append((name, x, y))
        for precision, group in sorted(by_precision.items()):
            color = PRECISION_COLORS.get(precision, OTHER_COLORS[0])
            # one artist per precision (hundreds of layers draw fast); each marker gets its tooltip
            ax.plot([x for _, x, _ in group], [y for _, _, y in group], marker="o", markersize=4.5, color=color,
                    alpha=0.65, linestyle="none", gid=f"points-{precision}")
            markers[f"points-{precision}"] = [f"{name}: {x:.3g} FLOP/B, {_eng(y, 'FLOP/s')}" for name, x, y in group]
            handles.append(Line2D([], [], marker="o", markersize=5, linestyle="none", color=color,
                                  label=f"{len(group)} layer(s) in {precision}, best benchmark"))
        _log_axis(ax.xaxis)
        _log_axis(ax.yaxis, "FLOP/s")
        ax.grid(which="major", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("achieved performance (FLOP/s)")
        fig.legend(handles=handles, loc="outside right upper")
        return _render(fig, "roofline", label, titles, markers)


def waterfall(steps: Sequence[tuple[str, str, float]]) -> Markup:
    """(step, kind, ms) with kind total / gap / residual: totals stand on 0, gaps step down from the
    level; a latency axis with ticks and each bar's value above it."""
    import matplotlib
    from matplotlib.patches import Patch

    label = "gaps waterfall"
    if not steps:
        return _empty("waterfall", label)
    bars: list[tuple[float, float]] = []  # bottom, height
    level = 0.0
    for _, kind, ms in steps:
        if kind == "total":
            bars.append((0.0, ms))
            level = ms
        else:
            bars.append((min(level, level - ms), abs(ms)))
            level -= ms
    titles: dict[str, str] = {}
    with matplotlib.rc_context(RC):
        fig = _figure(3.8)
        ax = fig.add_subplot()
        for n, ((step, kind, ms), (bottom, height)) in enumerate(zip(steps, bars, strict=True)):
            ax.bar(n, max(height, 1e-12), bottom=bottom, width=0.7, color=COLORS.get(kind, COLORS["gap"]),
                   gid=f"step-{n}")
            titles[f"step-{n}"] = f"{step}: {ms:.4g} ms"
            ax.annotate(f"{ms:.3g}", (n, bottom + height), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        width = max(8, int(90 / len(steps)))
        ax.set_xticks(range(len(steps)), ["\n".join(textwrap.wrap(s, width)[:3]) for s, _, _ in steps])
        ax.set_ylabel("latency (ms)")
        top = max(b + h for b, h in bars)
        ax.set_ylim(min(0.0, *(b for b, _ in bars)), top * 1.12 if top > 0 else 1.0)
        ax.axhline(0, color="#888888", linewidth=0.8)
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        kinds = [k for k in ("total", "gap", "residual") if any(s[1] == k for s in steps)]
        names = {"total": "latency (measured, estimate)", "gap": "gap (a fix's gain)",
                 "residual": "interaction and unexplained"}
        fig.legend(handles=[Patch(color=COLORS[k], label=names[k]) for k in kinds], loc="outside upper right",
                   ncols=len(kinds))
        return _render(fig, "waterfall", label, titles)


def compare_headline(figures: Sequence[tuple[str, Mapping[str, float | None]]], labels: Sequence[str]) -> Markup:
    """Grouped bars: each latency figure (ms) of the headline, one bar per side, values on the bars."""
    import matplotlib

    label = "headline latencies per side"
    figures = [(f, v) for f, v in figures if any(v.get(s) is not None for s in labels)]
    if not figures:
        return _empty("headline", label)
    titles: dict[str, str] = {}
    with matplotlib.rc_context(RC):
        fig = _figure(3.4)
        ax = fig.add_subplot()
        width = 0.8 / len(labels)
        for k, side in enumerate(labels):
            for n, (name, values) in enumerate(figures):
                value = values.get(side)
                if value is None:
                    continue
                x = n - 0.4 + width * (k + 0.5)
                ax.bar(x, value, width=width * 0.92, color=SIDE_COLORS[k % len(SIDE_COLORS)], gid=f"bar-{k}-{n}")
                titles[f"bar-{k}-{n}"] = f"{side}: {name} {value:.4g} ms"
                ax.annotate(f"{value:.3g}", (x, value), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7.5)
        ax.set_xticks(range(len(figures)), [name.removesuffix(" (ms)") for name, _ in figures])
        ax.set_ylabel("latency (ms)")
        ax.set_ylim(0, max(v for _, vs in figures for v in vs.values() if v is not None) * 1.15)
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        _side_legend(fig, labels)
        return _render(fig, "headline", label, titles)


def _side_legend(fig, labels: Sequence[str]) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=SIDE_COLORS[k % len(SIDE_COLORS)], label=_short(side, 60))
                        for k, side in enumerate(labels)], loc="outside upper right", ncols=min(len(labels), 4))


def compare_layers(rows: Sequence[tuple[str, Sequence[float | None]]], labels: Sequence[str], figure: str,
                   total: int) -> Markup:
    """Per layer (label, one value per side) in ms, in the order given: one bar per side."""
    import matplotlib

    label = f"per-layer {figure} per side"
    rows = [r for r in rows if any(v is not None for v in r[1])]
    if not rows:
        return _empty("layers", label)
    titles: dict[str, str] = {}
    with matplotlib.rc_context(RC):
        fig = _figure(1.3 + 0.14 * len(rows) * max(len(labels), 2))
        ax = fig.add_subplot()
        height = 0.8 / len(labels)
        for k, side in enumerate(labels):
            have = [n for n, (_, values) in enumerate(rows) if values[k] is not None]
            bars = ax.barh([n - 0.4 + height * (k + 0.5) for n in have], [rows[n][1][k] for n in have],
                           height=height * 0.92, color=SIDE_COLORS[k % len(SIDE_COLORS)])
            for n, bar in zip(have, bars, strict=True):
                bar.set_gid(f"bar-{k}-{n}")
                titles[f"bar-{k}-{n}"] = f"{rows[n][0]}: {side} {rows[n][1][k]:.4g} ms"
        ax.set_yticks(range(len(rows)), [_short(r[0]) for r in rows])
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlim(left=0)
        ax.set_xlabel(f"{figure.removesuffix(' (ms)')} latency (ms)")
        ax.xaxis.set_tick_params(labeltop=True, top=True)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        more = f" (of {total}; every layer is in the table below)" if total > len(rows) else ""
        ax.set_title(f"The {len(rows)} layers that change most{more}", loc="left")
        _side_legend(fig, labels)
        return _render(fig, "layers", label, titles)
