"""Data and rendering of the UI plugin: per-table partition health, run history with before/after per partition.

Data builders return plain JSON-able dicts (served as JSON and rendered as HTML). Rendering is stdlib only: every
text is escaped with :func:`html.escape`, the chart is inline SVG (no scripts, no CDN).
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from compaction.core.display import format_bytes

HISTORY_RUNS = 20
DETAILED_RUNS = 5


# ------------------------------------------------------------------------------------------------ data
def table_health(catalog: Any, table_name: str, record: bool = True) -> dict[str, Any]:
    """Per-partition health of ``table_name`` from metadata (pyiceberg, no Spark), with the planner's decision now
    (``decision``); the inspection is recorded as a health sample (source ``ui``) unless ``record`` is false."""
    from compaction.ops.fleet import record_sample, sample_table
    from compaction.ledger import Ledger, LedgerError

    try:
        ledger = Ledger.open()
    except LedgerError:  # health from metadata still: no decision history, nothing recorded
        ledger = None
    try:
        sample, state = sample_table(catalog, table_name, ledger=ledger)
        if record and ledger is not None:
            record_sample(sample, "ui", ledger=ledger)
    finally:
        if ledger is not None:
            ledger.close()
    return health_from_state(catalog.name, table_name, state, sample)


def health_from_state(catalog_name: str, table_name: str, state: Any, sample: Any = None) -> dict[str, Any]:
    from compaction.cli import partition_health_rows

    rows = partition_health_rows(state)
    for row, p in zip(rows, state.partitions):
        row["readable"] = readable_label(p.key)
        row["delete_files"] = row["position_delete_files"] + row["equality_delete_files"] + row["deletion_vectors"]
        row["delete_records"] = (row["position_delete_records"] + row["equality_delete_records"]
                                 + row["deletion_vector_records"])
    return {
        "catalog": catalog_name,
        "table": table_name,
        "snapshot_id": state.snapshot_id,
        "format_version": state.format_version,
        "partitions": rows,
        "totals": {
            "partitions": len(rows),
            "data_files": sum(r["data_files"] for r in rows),
            "data_records": sum(r["data_records"] for r in rows),
            # Each file once, where it lives: a global equality delete counts in every partition it applies to.
            "delete_files": sum(len(p.delete_files) for p in state.partitions),
            "delete_records": sum(p.delete_records for p in state.partitions),
            "fragment_files": None if sample is None else sample.fragment_files,
        },
        "decision": None if sample is None else {"kind": sample.decision, "reason": sample.decision_reason,
                                                 "partitions_minor": sample.partitions_minor,
                                                 "partitions_major": sample.partitions_major},
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


def maintenance_history(ledger: Any, table_name: str, catalog: str | None = None,
                        limit: int = HISTORY_RUNS) -> list[dict[str, Any]]:
    """The table's latest maintenance runs (``icecompact maintain``, the iceberg_maintenance DAG), newest first,
    each with its actions and what they removed; the plan itself is left out (it is in ``/api/...`` of the CLI)."""
    out = []
    for run in ledger.maintenance_runs(table_name, catalog=catalog, limit=limit):
        item = run.to_dict()
        item.pop("plan", None)
        item["actions"] = [a.to_dict() for a in ledger.maintenance_actions(run.run_id)]
        out.append(item)
    return out


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
th a{color:inherit;text-decoration:none} th a.sorted{text-decoration:underline}
.badge{padding:1px 7px;border-radius:9px;font-size:12px;white-space:nowrap}
.lvl-problem{background:#fee2e2;color:#991b1b} .lvl-major{background:#ffedd5;color:#9a3412}
.lvl-minor{background:#fef9c3;color:#854d0e} .lvl-unknown{background:#e5e7eb;color:#374151}
.lvl-healthy{background:#dcfce7;color:#166534} .reason{max-width:360px;color:#4b5563;font-size:12px}
.flash{padding:8px 12px;border-radius:6px;margin:10px 0} .flash.ok{background:#dcfce7;color:#166534}
.flash.refused{background:#fee2e2;color:#991b1b;font-weight:600} .stale{color:#9a3412;font-size:12px}
form.compact{display:flex;gap:12px;align-items:end;flex-wrap:wrap;background:#f9fafb;padding:10px;
border:1px solid #e5e7eb;border-radius:6px} form.compact label{display:flex;flex-direction:column;font-size:12px}
form.compact input[type=text]{width:360px}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{body}</body></html>")


def _global_part(row: Mapping[str, Any]) -> str:
    """`` (2 global)`` when some of a partition's equality deletes were written under an unpartitioned spec."""
    n = int(row.get("global_equality_delete_files") or 0)
    return (f' <span class="muted" title="written under an unpartitioned spec: they apply to every partition with an '
            f'older data file">({n} global)</span>') if n else ""


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


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86_400:.0f} d ago"


def _duration(ms: object) -> str:
    if ms is None:
        return "-"
    seconds = float(ms) / 1000  # type: ignore[arg-type]
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _airflow_run_link(dag_run_id: object) -> str:
    from urllib.parse import quote

    from icecompact_airflow import DAG_ID

    return f"/dags/{DAG_ID}/runs/{quote(str(dag_run_id), safe='')}"


_LEVEL_CLASS = {3: "lvl-major", 2: "lvl-minor", 1: "lvl-unknown", 0: "lvl-healthy"}


def _level_class(level: int) -> str:
    return "lvl-problem" if level >= 10 else _LEVEL_CLASS.get(level, "lvl-unknown")


def render_maintenance(samples: Sequence[Mapping[str, Any]], maintenance: Sequence[Mapping[str, Any]], base: str,
                       table: str, q: str, now: Any = None) -> str:
    """Metadata and maintenance: snapshots, metadata file size, manifests and bytes referenced over time (from the
    health samples) with the maintenance runs marked, and what each run's actions removed."""
    from icecompact_airflow.charts import metadata_chart

    body = [f'<h2>Metadata and maintenance</h2><p class="muted">{len(maintenance)} maintenance run(s) &middot; '
            f'<a href="{_e(base)}/api/tables/{_e(table)}/maintenance{_e(q)}">JSON</a></p>',
            metadata_chart(samples, maintenance, now=now)]
    if not maintenance:
        body.append('<p id="maintenance-none" class="muted">no maintenance runs recorded (icecompact maintain, the '
                    'iceberg_maintenance DAG)</p>')
        return "".join(body)
    body.append('<table id="maintenance"><tr><th>run</th><th>started (UTC)</th><th>status</th><th>action</th>'
                '<th>action status</th><th>files removed</th><th>bytes removed</th><th>duration</th><th>reason</th>'
                '</tr>')
    for m in maintenance:
        status = str(m.get("status")) + (" (dry run)" if m.get("dry_run") else "")
        actions = m.get("actions") or [{}]
        for i, a in enumerate(actions):
            head = (f'<td>{_e(str(m.get("run_id") or "")[:8])}</td><td>{_e(str(m.get("started_at") or "")[:19])}</td>'
                    f'<td class="{"bad" if m.get("status") in ("failed", "partial") else ""}">{_e(status)}</td>'
                    if i == 0 else "<td></td><td></td><td></td>")
            removed = a.get("bytes_removed")
            body.append(
                f'<tr class="maintenance-action">{head}<td>{_e(a.get("action", "-"))}</td>'
                f'<td class="{"bad" if a.get("status") in ("failed", "refused") else ""}">{_e(a.get("status", ""))}'
                f'</td><td class="n">{_e(a.get("files_removed", ""))}</td>'
                f'<td class="n">{format_bytes(int(removed)) if removed is not None else ("?" if a else "")}</td>'
                f'<td class="n">{_duration(a.get("duration_ms")) if a.get("duration_ms") is not None else ""}</td>'
                f'<td class="reason">{_e(a.get("reason") or "")}</td></tr>')
    body.append("</table>")
    return "".join(body)


def render_table_page(health: Mapping[str, Any], history: Mapping[str, Any], base: str, *,
                      samples: Sequence[Mapping[str, Any]] = (), pending: Sequence[Mapping[str, Any]] = (),
                      form_token: str = "", flash: tuple[str, str] | None = None,
                      now: Any = None, maintenance: Sequence[Mapping[str, Any]] = ()) -> str:
    """The table page: health now and the planner's decision, health over time with runs marked, "compact now",
    per-partition health, run history (ledger runs, and DAG runs for this table not yet in the ledger)."""
    from urllib.parse import quote

    from compaction.core.display import validation_label
    from icecompact_airflow.charts import history_chart

    t = health["totals"]
    rows = health["partitions"]
    table, catalog = str(health["table"]), str(health["catalog"])
    q = f"?catalog={quote(catalog)}"
    decision = health.get("decision") or {}
    kind = decision.get("kind")
    body = [
        f'<p class="muted"><a href="{_e(base)}/{_e(q)}">all tables</a></p>',
        f'<h1>{_e(catalog)}.{_e(table)}</h1>',
        f'<p class="muted">snapshot {_e(health["snapshot_id"])}, format v{_e(health["format_version"])} &middot; '
        f'{t["partitions"]} partitions, {t["data_files"]} data files'
        + (f' ({t["fragment_files"]} fragment files)' if t.get("fragment_files") is not None else "")
        + f', {t["data_records"]} data records, '
        f'<span class="{"bad" if t["delete_files"] else "ok"}">{t["delete_files"]} delete files</span> '
        f'({t["delete_records"]} delete records) &middot; '
        f'<a href="{_e(base)}/api/tables/{_e(table)}/health{_e(q)}">JSON</a></p>',
    ]
    if kind is not None:
        level = {"major": 3, "minor": 2}.get(str(kind), 0)
        body.append(f'<p id="decision">Planner now (auto, table policy): <span class="badge {_level_class(level)}">'
                    f'{_e(str(kind).upper())}</span> <span class="reason">{_e(decision.get("reason"))}</span></p>')
    if flash is not None:
        body.append(f'<p id="flash" class="flash {_e(flash[0])}">{_e(flash[1])}</p>')
    body.append(f'<h2>Health over time</h2><p class="muted">{len(samples)} sample(s) &middot; '
                f'<a href="{_e(base)}/api/tables/{_e(table)}/samples{_e(q)}">JSON</a></p>')
    body.append(history_chart(samples, history["runs"], now=now))
    body.append(render_maintenance(samples, maintenance, base, table, q, now=now))
    body.append(
        f'<h2>Compact now</h2><form class="compact" id="compact-now" method="post" '
        f'action="{_e(base)}/tables/{_e(table)}/compact{_e(q)}">'
        f'<input type="hidden" name="form_token" value="{_e(form_token)}">'
        '<label>mode<select name="mode"><option value="auto" selected>auto</option><option value="minor">minor'
        '</option><option value="major">major</option></select></label>'
        '<label>partition filter (Iceberg row filter, optional)<input type="text" name="partition_filter" '
        'placeholder="ts &gt;= \'2024-01-02\' and region = \'EU\'"></label>'
        '<label><span><input type="checkbox" name="dry_run" value="true"> dry run (plan and record only)</span></label>'
        '<button type="submit">Compact now</button></form>'
        '<p class="muted">Starts a run of the iceberg_compaction DAG for this table through Airflow\'s API, as you: '
        'Airflow decides whether you may.</p>')
    body += [
        "<h2>Partition health</h2>",
        health_chart(rows) if rows else "<p>no partitions</p>",
        "<table id=\"health\"><tr><th>partition</th><th>readable</th><th>data files</th><th>data records</th>"
        "<th>position deletes</th>"
        "<th>equality deletes (global)</th><th>DVs</th><th>delete records</th><th>delete ratio</th></tr>",
    ]
    for r in rows:
        body.append(
            f'<tr><td class="partition">{_e(r["partition"])}</td><td>{_e(r.get("readable", ""))}</td>'
            f'<td class="n">{r["data_files"]}</td>'
            f'<td class="n">{r["data_records"]}</td><td class="n">{r["position_delete_files"]}</td>'
            f'<td class="n">{r["equality_delete_files"]}{_global_part(r)}</td>'
            f'<td class="n">{r["deletion_vectors"]}</td><td class="n">{r["delete_records"]}</td>'
            f'<td class="n{" bad" if r["delete_ratio"] else ""}">{float(r["delete_ratio"]) * 100:.1f}%</td></tr>')
    body.append("</table>")
    body.append(f'<h2>Run history</h2><p class="muted"><a href="{_e(base)}/api/tables/{_e(table)}/runs'
                f'{_e(q)}">JSON</a></p>')
    runs = history["runs"]
    if not runs and not pending:
        body.append("<p>no runs recorded</p>")
    else:
        body.append("<table id=\"runs\"><tr><th>run</th><th>started (UTC)</th><th>trigger</th><th>Airflow run</th>"
                    "<th>mode</th><th>status</th><th>duration</th></tr>")
        for p in pending:  # DAG runs for this table that have not reached the ledger yet
            conf = p.get("conf") or {}
            state = f"{p.get('state')} (Airflow)" + (" (dry run)" if conf.get("dry_run") else "")
            body.append(
                f'<tr class="pending"><td>-</td><td>{_e(str(p.get("run_after") or p.get("queued_at") or "")[:19])}</td>'
                f'<td>airflow</td><td><a href="{_e(_airflow_run_link(p.get("dag_run_id")))}">'
                f'{_e(p.get("dag_run_id"))}</a></td><td>{_e(conf.get("mode") or "auto")}</td>'
                f'<td>{_e(state)}</td><td class="n">-</td></tr>')
        for r in runs:
            status = str(r["status"]) + (" (dry run)" if r["dry_run"] else "")
            airflow_run = (f'<a href="{_e(_airflow_run_link(r["airflow_run_id"]))}">{_e(r["airflow_run_id"])}</a>'
                           if r["airflow_run_id"] else "")
            body.append(
                f'<tr><td><a href="{_e(base)}/api/runs/{_e(r["run_id"])}">{_e(str(r["run_id"])[:8])}</a></td>'
                f'<td>{_e(str(r["started_at"])[:19])}</td><td>{_e(r["trigger"])}</td>'
                f'<td>{airflow_run}</td><td>{_e(r["mode"])}</td>'
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
                    f'<td>{_e(validation_label(o["validation_level"], o["validation_result"]))}</td></tr>')
            body.append("</table>")
            spec_ids = sorted({o["spec_id"] for o in outcomes if o.get("spec_id") is not None})
            if len(spec_ids) > 1:  # what a row counts, as in `icecompact run`'s table (compaction.cli)
                body.append(f'<p class="note">Partition specs {_e(", ".join(map(str, spec_ids)))}: a row is one '
                            "(spec, partition) and counts only the files written under that spec and partition, so "
                            "the rows add up; a rewrite moves the rows of older-spec files into partitions of the "
                            "current spec.</p>")
    return _page(f"{table} - compaction health", "".join(body))


OVERVIEW_COLUMNS = (("attention", "attention"), ("table", "table"), ("decision", "planner now"),
                    ("data_files", "data files"), ("fragment_files", "fragment files"),
                    ("delete_files", "delete files (pos / eq / DV)"), ("delete_ratio", "delete ratio"),
                    ("", "size"), ("last_run", "last run"), ("", "delete files over time"), ("", "sampled"))


def _pointers_note(overview: Any) -> str:
    """How fresh the table list is, when it did not come from the catalog database for this answer (REST)."""
    if getattr(overview, "pointers_source", "catalog database") == "catalog database":
        return ""
    age = _age(overview.pointers_age_s)
    if not overview.pointers_cached:
        return ' &middot; <span class="pointers">tables and metadata pointers read from the catalog API now</span>'
    return (f' &middot; <span class="pointers" title="the catalog has no listing query: its tables and their '
            f'current metadata files are read in the background and cached">tables and metadata pointers read from '
            f'the catalog API {_e(age)}</span>')


def render_overview(overview: Any, base: str, sort: str = "attention", descending: bool | None = None) -> str:
    """Every table of the catalog: health, the planner's decision now, last run, delete files over time."""
    from urllib.parse import quote

    from compaction.ops.fleet import SORT_DESCENDING, SORT_KEYS, sort_rows
    from icecompact_airflow.charts import sparkline

    key = sort if sort in SORT_KEYS else "attention"
    desc = SORT_DESCENDING[key] if descending is None else descending
    rows = sort_rows(overview.tables, key, desc)
    now = overview.generated_at
    catalog = str(overview.catalog)
    q = f"catalog={quote(catalog)}"
    head = []
    for col, label in OVERVIEW_COLUMNS:
        if not col:
            head.append(f"<th>{_e(label)}</th>")
            continue
        next_desc = (not desc) if col == key else SORT_DESCENDING[col]
        mark = (" &darr;" if desc else " &uarr;") if col == key else ""
        head.append(f'<th><a class="{"sorted" if col == key else ""}" href="{_e(base)}/?{_e(q)}&amp;sort={col}'
                    f'&amp;order={"desc" if next_desc else "asc"}">{_e(label)}{mark}</a></th>')
    body = [
        "<h1>Iceberg compaction</h1>",
        f'<p class="muted">catalog {_e(catalog)} &middot; {len(rows)} table(s) &middot; answered in '
        f'{overview.elapsed_s * 1000:.0f} ms &middot; {len(overview.refreshed)} re-inspected now'
        + (f' &middot; <span class="stale">{len(overview.stale)} shown from an older sample (being re-inspected; '
           f'reload)</span>' if overview.stale else "")
        + _pointers_note(overview)
        + f' &middot; <a href="{_e(base)}/api/overview?{_e(q)}">JSON</a></p>',
        f'<table id="overview"><tr>{"".join(head)}</tr>',
    ]
    for r in rows:
        s = r.sample
        link = f'{_e(base)}/tables/{_e(r.table_ref)}?{_e(q)}'
        badge = f'<span class="badge {_level_class(r.attention_level)}">{_e(r.attention_label)}</span>'
        if r.error:
            badge += f'<div class="bad reason">{_e(r.error)}</div>'
        if s is None:
            cells = '<td colspan="6" class="muted">not inspected yet</td>'
        else:
            decision = (f'<b>{_e((s.decision or "?").upper())}</b>'
                        + (f' <span class="muted">({s.partitions_major} major, {s.partitions_minor} minor)</span>'
                           if s.partitions_major or s.partitions_minor else "")
                        + f'<div class="reason" title="{_e(s.decision_reason)}">{_e((s.decision_reason or "")[:160])}'
                        f'</div>')
            cells = (f'<td class="decision">{decision}</td><td class="n">{s.data_files}</td>'
                     f'<td class="n">{s.fragment_files}</td>'
                     f'<td class="n deletes{" bad" if s.delete_files else ""}">{s.delete_files} '
                     f'<span class="muted">({s.position_delete_files} / {s.equality_delete_files} / '
                     f'{s.deletion_vectors})</span></td>'
                     f'<td class="n">{s.delete_ratio * 100:.1f}%</td><td class="n">{format_bytes(s.data_bytes)}</td>')
        run = r.last_run
        if run is None:
            last = '<span class="muted">never</span>'
        else:
            end = run.finished_at or now
            status = run.status.value + (" (dry run)" if run.dry_run else "")
            bad = run.status.value in ("failed", "needs_attention", "partial")
            last = (f'<a class="{"bad" if bad else ""}" href="{_e(base)}/api/runs/{_e(run.run_id)}">{_e(status)}</a> '
                    f'<span class="muted">{_e(_age((now - run.started_at).total_seconds()))}, took '
                    f'{_e(_duration(run.duration_ms if run.finished_at else (end - run.started_at).total_seconds() * 1000))}'
                    f'</span>' + (f' &middot; <a href="{_e(_airflow_run_link(run.airflow_run_id))}">Airflow</a>'
                                  if run.airflow_run_id else ""))
        sampled = "-" if r.sampled_at is None else _age((now - r.sampled_at).total_seconds())
        if s is not None and not r.current:
            sampled += ' <span class="stale">(older snapshot)</span>'
        body.append(f'<tr class="table-row" data-table="{_e(r.table_ref)}" data-level="{r.attention_level}">'
                    f'<td>{badge}</td><td class="name"><a href="{link}">{_e(r.table_ref)}</a></td>{cells}'
                    f'<td class="last-run">{last}</td><td>{sparkline(list(r.series))}</td><td>{sampled}</td></tr>')
    if not rows:
        body.append('<tr><td colspan="11">no tables</td></tr>')
    body.append("</table>")
    body.append('<p class="muted">Attention: a failed / partial / needs-attention last run first, then tables the '
                'planner would compact now (MAJOR, then MINOR), tables not inspected yet, healthy tables; within a '
                'level, more delete files first. Health is read from metadata only and recorded in the ledger.</p>')
    return _page("Iceberg compaction", "".join(body))
