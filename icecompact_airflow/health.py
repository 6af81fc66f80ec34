"""Data and rendering of the UI plugin: per-table partition health, run history with before/after per partition.

Data builders return plain JSON-able dicts (served as JSON and rendered as HTML). Rendering is stdlib only: every
text is escaped with :func:`html.escape`, the chart is inline SVG (no scripts, no CDN).
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

HISTORY_RUNS = 20
DETAILED_RUNS = 5


# ------------------------------------------------------------------------------------------------ data
def table_health(catalog: Any, table_name: str) -> dict[str, Any]:
    """Per-partition health of ``table_name`` from metadata (pyiceberg, no Spark)."""
    from compaction.cli import partition_health_rows
    from compaction.inspect import inspect_table

    state = inspect_table(catalog, table_name)
    rows = partition_health_rows(state)
    for row, p in zip(rows, state.partitions):
        row["readable"] = readable_label(p.key)
        row["delete_files"] = row["position_delete_files"] + row["equality_delete_files"] + row["deletion_vectors"]
        row["delete_records"] = (row["position_delete_records"] + row["equality_delete_records"]
                                 + row["deletion_vector_records"])
    return {
        "catalog": catalog.name,
        "table": table_name,
        "snapshot_id": state.snapshot_id,
        "format_version": state.format_version,
        "partitions": rows,
        "totals": {
            "partitions": len(rows),
            "data_files": sum(r["data_files"] for r in rows),
            "data_records": sum(r["data_records"] for r in rows),
            "delete_files": sum(r["delete_files"] for r in rows),
            "delete_records": sum(r["delete_records"] for r in rows),
        },
    }


def table_history(ledger: Any, table_name: str, catalog: str | None = None, limit: int = HISTORY_RUNS,
                  detailed: int = DETAILED_RUNS) -> dict[str, Any]:
    """The table's latest runs from the ledger; the ``detailed`` most recent with their per-partition outcomes."""
    runs = ledger.runs(table_name, catalog=catalog, limit=limit)
    out = []
    for index, run in enumerate(runs):
        item = run.to_dict()
        if index < detailed:
            item["outcomes"] = [o.to_dict() for o in ledger.outcomes(run.run_id)]
        out.append(item)
    return {"table": table_name, "catalog": catalog, "runs": out}


def run_detail(ledger: Any, run_id: str) -> dict[str, Any] | None:
    run = ledger.run(run_id)
    if run is None:
        return None
    return {"run": run.to_dict(), "outcomes": [o.to_dict() for o in ledger.outcomes(run_id)],
            "conflicts": [c.to_dict() for c in ledger.conflicts(run_id)]}


def readable_label(key: Any) -> str:
    """The partition label with time transforms shown as dates/hours (``ts_day=2024-01-01``)."""
    import datetime as _dt

    if not key.fields:
        return str(key.label())
    parts = []
    for f in key.fields:
        value = f.value
        if isinstance(value, int) and not isinstance(value, bool):
            if f.transform == "day":
                value = (_dt.date(1970, 1, 1) + _dt.timedelta(days=value)).isoformat()
            elif f.transform == "hour":
                value = (_dt.datetime(1970, 1, 1) + _dt.timedelta(hours=value)).strftime("%Y-%m-%dT%H")
            elif f.transform == "month":
                value = f"{1970 + value // 12:04d}-{value % 12 + 1:02d}"
            elif f.transform == "year":
                value = f"{1970 + value:04d}"
        parts.append(f"{f.name}={'null' if value is None else value}")
    return "/".join(parts)


# ------------------------------------------------------------------------------------------------ rendering
_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2937;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px} .muted{color:#6b7280}
table{border-collapse:collapse;font-size:13px;margin:6px 0} th,td{border:1px solid #e5e7eb;padding:4px 8px}
th{background:#f3f4f6;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b91c1c;font-weight:600} .ok{color:#15803d} .pill{padding:1px 6px;border-radius:8px;background:#eef2ff}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{body}</body></html>")


def _arrow(before: object, after: object) -> str:
    return f"{_e('?' if before is None else before)} &rarr; {_e('?' if after is None else after)}"


def health_chart(rows: Sequence[Mapping[str, Any]], width: int = 760) -> str:
    """Inline SVG: per partition, the delete ratio (red bar, 0-100 %) and data / delete file counts (bars)."""
    label_w, bar_w, row_h = 230, (width - 230 - 20) // 2, 22
    files_w = bar_w - 70  # room for the counts after the longest bar
    max_files = max([1, *(max(int(r["data_files"]), int(r["delete_files"])) for r in rows)])
    height = 40 + row_h * max(1, len(rows))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="partition health chart" font-family="system-ui,sans-serif" font-size="12">',
             f'<text x="{label_w}" y="14" fill="#374151">delete ratio</text>',
             f'<text x="{label_w + bar_w + 10}" y="14" fill="#374151">data files (blue) / delete files (orange)</text>']
    for i, r in enumerate(rows):
        y = 28 + i * row_h
        ratio = min(1.0, float(r["delete_ratio"] or 0.0))
        data_w = int(files_w * int(r["data_files"]) / max_files)
        del_w = int(files_w * int(r["delete_files"]) / max_files)
        x2 = label_w + bar_w + 10
        parts += [
            f'<text x="4" y="{y + 12}" fill="#111827">{_e(r.get("readable") or r["partition"])}</text>',
            f'<rect x="{label_w}" y="{y}" width="{bar_w - 10}" height="14" fill="#f3f4f6"/>',
            f'<rect class="ratio" x="{label_w}" y="{y}" width="{int((bar_w - 10) * ratio)}" height="14" fill="#dc2626"/>',
            f'<text x="{label_w + 4}" y="{y + 11}" fill="#111827">{ratio * 100:.0f}%</text>',
            f'<rect x="{x2}" y="{y}" width="{max(data_w, 1)}" height="6" fill="#2563eb"/>',
            f'<rect x="{x2}" y="{y + 8}" width="{max(del_w, 0)}" height="6" fill="#f59e0b"/>',
            f'<text x="{x2 + max(data_w, del_w) + 4}" y="{y + 12}" fill="#374151">'
            f'{int(r["data_files"])} / {int(r["delete_files"])}</text>',
        ]
    parts.append("</svg>")
    return "".join(parts)


def render_table_page(health: Mapping[str, Any], history: Mapping[str, Any], base: str) -> str:
    t = health["totals"]
    rows = health["partitions"]
    body = [
        f'<p class="muted"><a href="{_e(base)}/">all tables</a></p>',
        f'<h1>{_e(health["catalog"])}.{_e(health["table"])}</h1>',
        f'<p class="muted">snapshot {_e(health["snapshot_id"])}, format v{_e(health["format_version"])} &middot; '
        f'{t["partitions"]} partitions, {t["data_files"]} data files, {t["data_records"]} data records, '
        f'<span class="{"bad" if t["delete_files"] else "ok"}">{t["delete_files"]} delete files</span> '
        f'({t["delete_records"]} delete records) &middot; '
        f'<a href="{_e(base)}/api/tables/{_e(health["table"])}/health?catalog={_e(health["catalog"])}">JSON</a></p>',
        "<h2>Partition health</h2>",
        health_chart(rows) if rows else "<p>no partitions</p>",
        "<table id=\"health\"><tr><th>partition</th><th>readable</th><th>data files</th><th>data records</th>"
        "<th>position deletes</th>"
        "<th>equality deletes</th><th>DVs</th><th>delete records</th><th>delete ratio</th></tr>",
    ]
    for r in rows:
        body.append(
            f'<tr><td class="partition">{_e(r["partition"])}</td><td>{_e(r.get("readable", ""))}</td>'
            f'<td class="n">{r["data_files"]}</td>'
            f'<td class="n">{r["data_records"]}</td><td class="n">{r["position_delete_files"]}</td>'
            f'<td class="n">{r["equality_delete_files"]}</td><td class="n">{r["deletion_vectors"]}</td>'
            f'<td class="n">{r["delete_records"]}</td>'
            f'<td class="n{" bad" if r["delete_ratio"] else ""}">{float(r["delete_ratio"]) * 100:.1f}%</td></tr>')
    body.append("</table>")
    body.append(f'<h2>Run history</h2><p class="muted"><a href="{_e(base)}/api/tables/{_e(health["table"])}/runs'
                f'?catalog={_e(health["catalog"])}">JSON</a></p>')
    runs = history["runs"]
    if not runs:
        body.append("<p>no runs recorded</p>")
    else:
        body.append("<table id=\"runs\"><tr><th>run</th><th>started (UTC)</th><th>trigger</th><th>Airflow run</th>"
                    "<th>mode</th><th>status</th><th>duration</th></tr>")
        for r in runs:
            status = str(r["status"]) + (" (dry run)" if r["dry_run"] else "")
            body.append(
                f'<tr><td><a href="{_e(base)}/api/runs/{_e(r["run_id"])}">{_e(str(r["run_id"])[:8])}</a></td>'
                f'<td>{_e(str(r["started_at"])[:19])}</td><td>{_e(r["trigger"])}</td>'
                f'<td>{_e(r["airflow_run_id"] or "")}</td><td>{_e(r["mode"])}</td>'
                f'<td class="{"bad" if r["status"] in ("failed", "needs_attention") else ""}">{_e(status)}</td>'
                f'<td class="n">{(r["duration_ms"] or 0) / 1000:.1f}s</td></tr>')
        body.append("</table>")
        for r in runs:
            outcomes = r.get("outcomes")
            if not outcomes:
                continue
            body.append(f'<h2>Run {_e(str(r["run_id"])[:8])} &middot; {_e(str(r["started_at"])[:19])} &middot; '
                        f'{_e(r["status"])}: before &rarr; after</h2>')
            body.append("<table class=\"outcomes\"><tr><th>partition</th><th>kind</th><th>status</th><th>data files</th>"
                        "<th>delete files</th><th>file records</th><th>bytes</th><th>validation</th></tr>")
            for o in outcomes:
                body.append(
                    f'<tr><td class="partition">{_e(o["partition_label"])}</td><td>{_e(o["kind"])}</td>'
                    f'<td>{_e(o["status"])}</td><td>{_arrow(o["data_files_before"], o["data_files_after"])}</td>'
                    f'<td>{_arrow(o["delete_files_before"], o["delete_files_after"])}</td>'
                    f'<td>{_arrow(o["records_before"], o["records_after"])}</td>'
                    f'<td>{_arrow(o["data_bytes_before"], o["data_bytes_after"])}</td>'
                    f'<td>{_e(o["validation_result"] or "-")}</td></tr>')
            body.append("</table>")
    return _page(f"{health['table']} - compaction health", "".join(body))


def render_index(catalog: str, tables: Sequence[str], base: str) -> str:
    items = "".join(f'<li><a href="{_e(base)}/tables/{_e(t)}?catalog={_e(catalog)}">{_e(t)}</a></li>' for t in tables)
    return _page("Iceberg compaction", f"<h1>Iceberg compaction</h1><p class=\"muted\">catalog {_e(catalog)} &middot; "
                 f"<a href=\"{_e(base)}/api/tables?catalog={_e(catalog)}\">JSON</a></p>"
                 f"<ul>{items or '<li>no tables</li>'}</ul>")
