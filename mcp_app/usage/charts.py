"""Charts drawn on the server as inline SVG: no script, no CDN, readable by a screen reader's title.

Every text that comes from data (a tool name) is escaped; numbers are formatted here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 28
COLORS = ("#0b5cad", "#c2410c", "#15803d", "#7e22ce")


def _nice_max(value: float) -> float:
    """A round upper bound for the y axis at or above `value`."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for factor in (1, 2, 2.5, 5, 10):
        if value <= factor * magnitude:
            return float(factor * magnitude)
    return float(10 * magnitude)


def line_chart(
    title: str,
    times: Sequence[datetime],
    series: Sequence[tuple[str, Sequence[float | None]]],
    fmt: Callable[[float], str],
    time_format: str = "%H:%M",
) -> SafeString:
    """A line per series over `times`; a None value leaves a gap (no request in that step)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    values = [v for _, points in series for v in points if v is not None]
    top = _nice_max(max(values, default=0.0))
    n = max(len(times) - 1, 1)

    def x(i: int) -> float:
        return LEFT + plot_w * i / n

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'aria-label="{escape(title)}" data-series="{len(series)}">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in (0.0, top / 2, top):
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{escape(fmt(tick))}</text>'
        )
    if times:
        for i in sorted({0, len(times) // 2, len(times) - 1}):
            anchor = "start" if i == 0 else "end" if i == len(times) - 1 else "middle"
            parts.append(
                f'<text class="axis" x="{x(i):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">'
                f"{escape(times[i].strftime(time_format))}</text>"
            )
    for index, (name, points) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        runs: list[list[str]] = [[]]
        for i, v in enumerate(points):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(f"{x(i):.1f},{y(v):.1f}")
        for run in runs:
            if len(run) == 1:
                cx, cy = run[0].split(",")
                parts.append(
                    f'<circle class="series" data-name="{escape(name)}" cx="{cx}" cy="{cy}" r="3" fill="{color}"/>'
                )
            elif run:
                parts.append(
                    f'<polyline class="series" data-name="{escape(name)}" fill="none" stroke="{color}" '
                    f'stroke-width="2" points="{" ".join(run)}"/>'
                )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{COLORS[i % len(COLORS)]}"></i>{escape(name)}</span>'
        for i, (name, _) in enumerate(series)
    )
    return mark_safe(
        f'<figure class="chart"><figcaption>{escape(title)} {legend}</figcaption>{"".join(parts)}</figure>'
    )  # noqa: S308 - every data text above is escaped


def bar_chart(title: str, bars: Sequence[tuple[str, float]], fmt: Callable[[float], str]) -> SafeString:
    """Horizontal bars, one per label, longest first as given."""
    row_h, label_w = 22, 180
    height = TOP + row_h * max(len(bars), 1) + 8
    top = _nice_max(max((v for _, v in bars), default=0.0))
    plot_w = WIDTH - label_w - RIGHT - 60
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'aria-label="{escape(title)}" data-bars="{len(bars)}">',
        f"<title>{escape(title)}</title>",
    ]
    for i, (label, value) in enumerate(bars):
        y0 = TOP + i * row_h
        width = max(plot_w * value / top, 1.0)
        shown = label if len(label) <= 28 else label[:27] + "…"
        parts.append(
            f'<text class="axis" x="{label_w - 6}" y="{y0 + 15}" text-anchor="end">{escape(shown)}</text>'
            f'<rect class="bar" x="{label_w}" y="{y0 + 3}" width="{width:.1f}" height="{row_h - 6}" fill="{COLORS[0]}"/>'
            f'<text class="axis" x="{label_w + width + 6:.1f}" y="{y0 + 15}">{escape(fmt(value))}</text>'
        )
    if not bars:
        parts.append(f'<text class="axis" x="{LEFT}" y="{TOP + 15}">No calls in this window.</text>')
    parts.append("</svg>")
    return mark_safe(
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>{"".join(parts)}</figure>'
    )  # noqa: S308 - every data text above is escaped


def count(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def millis(value: float) -> str:
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def percent(value: float) -> str:
    return f"{value * 100:.0f}%" if value >= 0.1 or value == 0 else f"{value * 100:.1f}%"
