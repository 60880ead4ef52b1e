"""Charts of runs over time as inline SVG, drawn on the server: the page needs no script library and no network.

Colours are the Okabe-Ito palette (told apart with the common colour-vision deficiencies), and never carry meaning
alone: a failed run's bar is also hatched and marked ✖, every bar has a text tooltip, and each chart has a label
and a table-like summary for screen readers."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
FAILED = "#D55E00"
OK = "#0072B2"


@dataclass(frozen=True)
class Bar:
    """One run in a chart: its label (the run's start), its values (one per series) and whether it failed."""

    label: str
    values: tuple[float, ...]
    failed: bool = False
    title: str = ""


def _fmt(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    if v >= 100 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.2f}"


def bar_chart(name: str, unit: str, bars: list[Bar], series: list[str] | None = None,
              width: int = 640, height: int = 180) -> str:
    """Bars (stacked when there are several series) over runs, oldest left; the SVG as a string of markup."""
    series = series or [unit]
    left, right, top, bottom = 56, 8, 12, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    highest = max((sum(b.values) for b in bars), default=0.0)
    peak = highest or 1.0  # the axis of an all-zero chart still has a height
    slot = plot_w / max(len(bars), 1)
    bar_w = max(min(slot * 0.7, 40), 2)
    pid = "hatch-" + "".join(c if c.isalnum() else "-" for c in name.lower())
    desc = f"{name}: {len(bars)} runs, highest {_fmt(highest)} {unit}" if bars else f"{name}: no runs yet"
    parts = [f'<svg class="chart" role="img" aria-label="{escape(desc)}" viewBox="0 0 {width} {height}" width="100%" '
             f'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(desc)}</title>",
             f'<defs><pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
             f'<rect width="6" height="6" fill="{FAILED}"/><line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/>'
             "</pattern></defs>",
             f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#444"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>',
             f'<text x="{left - 6}" y="{top + 10}" text-anchor="end" font-size="11">{escape(_fmt(peak))}</text>',
             f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" font-size="11">0</text>',
             f'<text x="4" y="{top + plot_h / 2}" font-size="11" transform="rotate(-90 10 {top + plot_h / 2})">{escape(unit)}</text>']
    for i, bar in enumerate(bars):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        tip = bar.title or f"{bar.label}: {' + '.join(_fmt(v) for v in bar.values)} {unit}{' (failed)' if bar.failed else ''}"
        parts.append(f'<g class="bar{" failed" if bar.failed else ""}"><title>{escape(tip)}</title>')
        for k, value in enumerate(bar.values):
            h = plot_h * value / peak
            y -= h
            fill = f"url(#{pid})" if bar.failed else PALETTE[k % len(PALETTE)] if len(series) > 1 else OK
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{max(h, 0):.1f}" fill="{fill}"/>')
        if bar.failed:
            parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{min(y, top + plot_h) - 2:.1f}" text-anchor="middle" '
                         f'font-size="12" fill="{FAILED}">✖</text>')
        parts.append("</g>")
    if bars:
        parts.append(f'<text x="{left}" y="{height - 18}" font-size="11">{escape(bars[0].label)}</text>')
        if len(bars) > 1:
            parts.append(f'<text x="{width - right}" y="{height - 18}" text-anchor="end" font-size="11">{escape(bars[-1].label)}</text>')
    if len(series) > 1:
        x = left
        for k, s in enumerate(series):
            parts.append(f'<rect x="{x}" y="{height - 11}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>'
                         f'<text x="{x + 14}" y="{height - 2}" font-size="11">{escape(s)}</text>')
            x += 24 + 7 * len(s)
    else:
        parts.append(f'<rect x="{left}" y="{height - 11}" width="10" height="10" fill="url(#{pid})"/>'
                     f'<text x="{left + 14}" y="{height - 2}" font-size="11">✖ failed run</text>')
    parts.append("</svg>")
    return "".join(parts)
