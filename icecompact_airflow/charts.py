"""Inline SVG charts of the UI plugin (no scripts, no CDN): the overview's sparkline and the table's health over
time with its runs marked. Pure functions of plain values; every text is escaped."""

from __future__ import annotations

import datetime as _dt
import html
from typing import Any, Mapping, Sequence

from compaction.core.display import format_bytes

RUN_COLOURS = {"succeeded": "#15803d", "failed": "#b91c1c", "needs_attention": "#b91c1c", "partial": "#ea580c",
               "running": "#6b7280", "planned": "#6b7280"}
SERIES = (("fragment_files", "fragment files", "#7c3aed"), ("data_files", "data files", "#2563eb"),
          ("delete_files", "delete files", "#f59e0b"))
_DASH = {"data_files": ' stroke-dasharray="7,4"'}


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(value: object) -> _dt.datetime:
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    parsed = _dt.datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.timezone.utc)


def sparkline(points: Sequence[tuple[_dt.datetime, int]], width: int = 120, height: int = 26) -> str:
    """Delete files over time as a small step line (a dot marks the latest value)."""
    if not points:
        return '<span class="muted">-</span>'
    t0, t1 = points[0][0], points[-1][0]
    span = max((t1 - t0).total_seconds(), 1e-9)
    top = max(max(v for _, v in points), 1)
    inner = height - 4

    def xy(at: _dt.datetime, value: int) -> tuple[float, float]:
        x = 2 + ((at - t0).total_seconds() / span * (width - 4) if len(points) > 1 else width - 4)
        return round(x, 1), round(2 + inner - value / top * inner, 1)

    coords: list[tuple[float, float]] = []
    for i, (at, value) in enumerate(points):
        x, y = xy(at, value)
        if coords:
            coords.append((x, coords[-1][1]))
        coords.append((x, y))
    path = " ".join(f"{x},{y}" for x, y in coords)
    lx, ly = coords[-1]
    title = f"delete files: {points[0][1]} -> {points[-1][1]} ({len(points)} samples)"
    return (f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="{_e(title)}"><title>{_e(title)}</title>'
            f'<polyline fill="none" stroke="#f59e0b" stroke-width="1.5" points="{path}"/>'
            f'<circle cx="{lx}" cy="{ly}" r="2.5" fill="#f59e0b"/></svg>')


def history_chart(samples: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]], width: int = 860,
                  now: _dt.datetime | None = None) -> str:
    """Health over time: file counts (data, fragment, delete files) and the delete ratio, as step lines from the
    samples (``recorded_at`` + counts), with every run drawn as a vertical marker coloured by its status."""
    if not samples:
        return '<p id="history-chart" class="muted">no health samples yet (every inspection records one)</p>'
    left, right, top_h, gap, ratio_h = 56, 16, 170, 34, 70
    height = 20 + top_h + gap + ratio_h + 34
    plot_w = width - left - right
    times = [_when(s["recorded_at"]) for s in samples]
    run_times = [(_when(r["started_at"]), r) for r in runs if r.get("started_at")]
    t0 = min([*times, *(t for t, _ in run_times)])
    t1 = max([*times, *(t for t, _ in run_times), *([now] if now else [])])
    span = max((t1 - t0).total_seconds(), 1.0)

    def x_of(at: _dt.datetime) -> float:
        return round(left + (at - t0).total_seconds() / span * plot_w, 1)

    y0 = 20
    counts_top = max([1, *(int(s.get(k) or 0) for s in samples for k, _, _ in SERIES)])
    ratio_top = max(0.05, *(float(s.get("delete_ratio") or 0.0) for s in samples))
    ratio_y0 = y0 + top_h + gap
    end_x = x_of(t1)

    def steps(values: Sequence[float], y_base: float, h: float, top: float) -> str:
        pts: list[tuple[float, float]] = []
        for at, value in zip(times, values):
            x, y = x_of(at), round(y_base + h - value / top * h, 1)
            if pts:
                pts.append((x, pts[-1][1]))
            pts.append((x, y))
        pts.append((end_x, pts[-1][1]))
        return " ".join(f"{x},{y}" for x, y in pts)

    parts = [f'<svg id="history-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="health over time" font-family="system-ui,sans-serif" font-size="11">',
             f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{top_h}" fill="#f9fafb" stroke="#e5e7eb"/>',
             f'<rect x="{left}" y="{ratio_y0}" width="{plot_w}" height="{ratio_h}" fill="#f9fafb" stroke="#e5e7eb"/>',
             f'<text x="{left - 4}" y="{y0 + 10}" text-anchor="end" fill="#374151">{counts_top}</text>',
             f'<text x="{left - 4}" y="{y0 + top_h}" text-anchor="end" fill="#374151">0</text>',
             f'<text x="{left - 4}" y="{ratio_y0 + 10}" text-anchor="end" fill="#374151">{ratio_top * 100:.0f}%</text>',
             f'<text x="{left - 4}" y="{ratio_y0 + ratio_h}" text-anchor="end" fill="#374151">0%</text>',
             f'<text x="{left}" y="{ratio_y0 - 6}" fill="#dc2626">delete ratio (delete records / data records)</text>']
    legend_x = left
    for key, label, colour in SERIES:
        parts.append(f'<rect x="{legend_x}" y="4" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{legend_x + 14}" y="13" fill="#374151">{_e(label)}</text>')
        legend_x += 24 + 7 * len(label)
    parts.append(f'<line x1="{legend_x}" y1="9" x2="{legend_x + 12}" y2="9" stroke="#15803d" stroke-dasharray="3,2"'
                 f' stroke-width="2"/><text x="{legend_x + 16}" y="13" fill="#374151">runs (colour: status)</text>')
    for key, label, colour in SERIES:
        values = [float(int(s.get(key) or 0)) for s in samples]
        parts.append(f'<polyline class="series-{key}" fill="none" stroke="{colour}" stroke-width="2"'
                     f'{_DASH.get(key, "")} points="{steps(values, y0, top_h, counts_top)}"/>')
    ratios = [float(s.get("delete_ratio") or 0.0) for s in samples]
    parts.append(f'<polyline class="series-delete_ratio" fill="none" stroke="#dc2626" stroke-width="2" '
                 f'points="{steps(ratios, ratio_y0, ratio_h, ratio_top)}"/>')
    for at, s in zip(times, samples):
        parts.append(f'<circle class="sample" cx="{x_of(at)}" cy="{round(y0 + top_h - int(s.get("delete_files") or 0) / counts_top * top_h, 1)}" '
                     f'r="2.5" fill="#f59e0b"><title>{_e(at.strftime("%Y-%m-%d %H:%M:%S"))} UTC: '
                     f'{int(s.get("data_files") or 0)} data, {int(s.get("fragment_files") or 0)} fragment, '
                     f'{int(s.get("delete_files") or 0)} delete files, delete ratio '
                     f'{float(s.get("delete_ratio") or 0) * 100:.1f}%</title></circle>')
    for at, run in run_times:
        status = str(run.get("status") or "")
        colour = RUN_COLOURS.get(status, "#6b7280")
        x = x_of(at)
        label = f"run {str(run.get('run_id') or '')[:8]} {status}{' (dry run)' if run.get('dry_run') else ''}"
        parts.append(f'<line class="run-marker" x1="{x}" y1="{y0}" x2="{x}" y2="{ratio_y0 + ratio_h}" '
                     f'stroke="{colour}" stroke-width="2" stroke-dasharray="{"2,3" if run.get("dry_run") else "5,3"}">'
                     f'<title>{_e(label)} at {_e(at.strftime("%Y-%m-%d %H:%M:%S"))} UTC</title></line>')
    bottom = ratio_y0 + ratio_h + 16
    parts.append(f'<text x="{left}" y="{bottom}" fill="#374151">{_e(t0.strftime("%Y-%m-%d %H:%M"))} UTC</text>')
    parts.append(f'<text x="{left + plot_w}" y="{bottom}" text-anchor="end" fill="#374151">'
                 f'{_e(t1.strftime("%Y-%m-%d %H:%M"))} UTC</text>')
    parts.append("</svg>")
    return "".join(parts)


#: The metadata panels of the table page: (sample key, label, colour, bytes?).
METADATA_PANELS = (("snapshots", "snapshots", "#2563eb", False),
                   ("metadata_file_bytes", "metadata file", "#7c3aed", True),
                   ("manifests", "manifests (current snapshot)", "#0891b2", False),
                   ("referenced_bytes", "bytes referenced (data + deletes + manifests + metadata file)", "#15803d",
                    True))


def metadata_chart(samples: Sequence[Mapping[str, Any]], maintenance: Sequence[Mapping[str, Any]], width: int = 860,
                   now: _dt.datetime | None = None) -> str:
    """Metadata over time, one small panel per :data:`METADATA_PANELS` entry (step lines from the samples that
    measured it; older samples did not), with every maintenance run as a vertical marker whose tooltip says what
    each action removed."""
    measured = [s for s in samples if any(s.get(k) is not None for k, *_ in METADATA_PANELS)]
    if not measured:
        return '<p id="metadata-chart" class="muted">no metadata samples yet (every inspection records one)</p>'
    left, right, panel_h, gap = 70, 16, 64, 26
    height = 10 + len(METADATA_PANELS) * (panel_h + gap) + 20
    plot_w = width - left - right
    times = [_when(s["recorded_at"]) for s in measured]
    marks = [(_when(m["started_at"]), m) for m in maintenance if m.get("started_at")]
    t0 = min([*times, *(t for t, _ in marks)])
    t1 = max([*times, *(t for t, _ in marks), *([now] if now else [])])
    span = max((t1 - t0).total_seconds(), 1.0)

    def x_of(at: _dt.datetime) -> float:
        return round(left + (at - t0).total_seconds() / span * plot_w, 1)

    parts = [f'<svg id="metadata-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="metadata over time" font-family="system-ui,sans-serif" font-size="11">']
    y = 10
    for key, label, colour, is_bytes in METADATA_PANELS:
        points = [(at, float(s[key])) for at, s in zip(times, measured) if s.get(key) is not None]
        top = max([1.0, *(v for _, v in points)])
        fmt = format_bytes if is_bytes else (lambda v: f"{v:.0f}")
        latest = fmt(points[-1][1]) if points else "-"
        parts.append(f'<text x="{left}" y="{y + 9}" fill="{colour}">{_e(label)}: {_e(latest)}</text>')
        py = y + 13
        parts.append(f'<rect x="{left}" y="{py}" width="{plot_w}" height="{panel_h - 13}" fill="#f9fafb" '
                     f'stroke="#e5e7eb"/>')
        parts.append(f'<text x="{left - 4}" y="{py + 10}" text-anchor="end" fill="#374151">{_e(fmt(top))}</text>'
                     f'<text x="{left - 4}" y="{py + panel_h - 13}" text-anchor="end" fill="#374151">0</text>')
        h = panel_h - 13
        coords: list[tuple[float, float]] = []
        for at, value in points:
            px, pyv = x_of(at), round(py + h - value / top * h, 1)
            if coords:
                coords.append((px, coords[-1][1]))
            coords.append((px, pyv))
        if coords:
            coords.append((x_of(t1), coords[-1][1]))
            parts.append(f'<polyline class="series-{key}" fill="none" stroke="{colour}" stroke-width="2" '
                         f'points="{" ".join(f"{a},{b}" for a, b in coords)}"/>')
        y += panel_h + gap
    bottom = y - gap + 4
    for at, m in marks:
        status = str(m.get("status") or "")
        removed = "; ".join(f"{a.get('action')}: {a.get('status')}, {a.get('files_removed') or 0} file(s), "
                            f"{format_bytes(a['bytes_removed']) if a.get('bytes_removed') is not None else '?'}"
                            for a in m.get("actions") or [])
        x = x_of(at)
        parts.append(f'<line class="maintenance-marker" x1="{x}" y1="10" x2="{x}" y2="{bottom}" '
                     f'stroke="{RUN_COLOURS.get(status, "#6b7280")}" stroke-width="2" stroke-dasharray="5,3">'
                     f'<title>maintenance {_e(str(m.get("run_id") or "")[:8])} {_e(status)}'
                     f'{" (dry run)" if m.get("dry_run") else ""} at {_e(at.strftime("%Y-%m-%d %H:%M:%S"))} UTC'
                     f'{": " + _e(removed) if removed else ""}</title></line>')
    parts.append(f'<text x="{left}" y="{bottom + 14}" fill="#374151">{_e(t0.strftime("%Y-%m-%d %H:%M"))} UTC</text>'
                 f'<text x="{left + plot_w}" y="{bottom + 14}" text-anchor="end" fill="#374151">'
                 f'{_e(t1.strftime("%Y-%m-%d %H:%M"))} UTC</text></svg>')
    return "".join(parts)
