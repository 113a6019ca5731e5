"""A small server-side SVG line chart (no JavaScript, no CDN). Every label is escaped."""

from __future__ import annotations

from html import escape

PALETTE = ("#0b57d0", "#b3261e", "#146c2e", "#8e4ec6", "#c05600", "#00696f", "#5f6368", "#a8326c")


def line_chart(
    series: list[tuple[str, list[tuple[float, float | None]]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    reference: float | None = 0.5,
    y_range: tuple[float, float] = (0.0, 1.0),
    width: int = 720,
    height: int = 360,
) -> str:
    """One polyline per series (None values break the line), a dashed reference line, axes with
    ticks and a legend. Returns SVG markup built from escaped text only."""
    left, right, top, bottom = 56, 170, 36, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for _, pts in series for x, y in pts if y is not None]
    x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_max == x_min:
        x_max = x_min + 1
    y_lo, y_hi = y_range

    def px(x: float) -> float:
        return left + (x - x_min) / (x_max - x_min) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y_lo) / (y_hi - y_lo)) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(title)}" class="chart">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="20" font-size="14" font-weight="600">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d0d7de"/>',
    ]
    for i in range(6):
        y = y_lo + (y_hi - y_lo) * i / 5
        parts.append(f'<line x1="{left - 4}" x2="{left}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#57606a"/>')
        parts.append(f'<text x="{left - 8}" y="{py(y) + 4:.1f}" font-size="11" text-anchor="end">{y:.1f}</text>')
    for i in range(6):
        x = x_min + (x_max - x_min) * i / 5
        parts.append(f'<text x="{px(x):.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="middle">{x:g}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 10}" font-size="12" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" font-size="12" text-anchor="middle">'
        f"{escape(y_label)}</text>"
    )
    if reference is not None:
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{py(reference):.1f}" y2="{py(reference):.1f}" '
            f'stroke="#57606a" stroke-dasharray="6 4"><title>perfect judge: {reference:g}</title></line>'
        )
    for n, (name, points) in enumerate(series):
        colour = PALETTE[n % len(PALETTE)]
        segment: list[str] = []
        segments = []
        for x, y in points:
            if y is None:
                if segment:
                    segments.append(segment)
                segment = []
                continue
            segment.append(f"{px(x):.1f},{py(y):.1f}")
        if segment:
            segments.append(segment)
        for seg in segments:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(seg)}"/>')
            for pt in seg:
                cx, cy = pt.split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{colour}"/>')
        ly = top + 14 + 18 * n
        parts.append(
            f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 32}" y1="{ly}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="3"/>'
        )
        parts.append(f'<text x="{left + plot_w + 38}" y="{ly + 4}" font-size="12">{escape(name)}</text>')
    if reference is not None:
        ly = top + 14 + 18 * len(series)
        parts.append(
            f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 32}" y1="{ly}" y2="{ly}" '
            'stroke="#57606a" stroke-dasharray="6 4"/>'
        )
        parts.append(f'<text x="{left + plot_w + 38}" y="{ly + 4}" font-size="12">perfect judge</text>')
    parts.append("</svg>")
    return "".join(parts)
