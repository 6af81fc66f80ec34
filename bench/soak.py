"""Soak: a live CDC writer and the scheduled compaction DAG for 15 minutes on PostgreSQL, with faults (v2 and v3).

Each run (``icecompact_testing.soak.run_soak``): a throwaway PostgreSQL cluster (catalog and ledger), a bulk table
of the production shape, a writer process committing every 2 s (fragments + equality deletes) with a Spark DELETE
or MERGE every 30 s, Airflow's scheduler and api-server running ``iceberg_compaction`` every minute (mode auto, two
parallel Spark jobs), and three faults: a compaction job SIGKILLed mid-rewrite, the scheduler SIGKILLed and
restarted, PostgreSQL stopped for 10 s. A sampler records files, deletes and a full scan's time every 10 s. At the
end: a last compaction, the table against the writer's model (Spark and the reference reader), the ledger, and a
full compaction for the scan reference.

Writes ``bench/results/soak.{txt,json,png}``; prints every goal as met / not met::

    .venv/bin/python bench/soak.py [--minutes 15] [--size s] [--formats 2,3]
    .venv/bin/python bench/soak.py --writer flink --path health   # a Flink upsert job as the writer: soak_flink.*
    .venv/bin/python bench/soak.py --path health --dml-writers both   # DML with and without a lease: soak_writers.*
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)


def label(rep: dict[str, Any]) -> str:
    config = rep["config"]
    return f"format v{config['format_version']}" + (", cooperative DML writer" if config.get("cooperative") else "")


def chart(reports: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib
    from icecompact_testing.soak import max_partition_eq_delete_files

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, len(reports), figsize=(7 * len(reports), 10), squeeze=False, sharex="col")
    for col, (version, rep) in enumerate(sorted(reports.items())):
        start = rep["started"]
        samples = [s for s in rep["samples"] if "error" not in s]
        t = [(s["t"] - start) / 60 for s in samples]
        ax = axes[0][col]
        ax.plot(t, [s["delete_files"] for s in samples], label="delete files (table)")
        ax.plot(t, [s["eq_delete_files"] for s in samples], label="equality-delete files")
        ax.plot(t, [s["max_partition_delete_files"] for s in samples], label="max per partition")
        ax.plot(t, [max_partition_eq_delete_files(s) for s in samples], label="max equality-delete files per partition")
        ax.set_title(label(rep))
        ax.set_ylabel("files")
        ax = axes[1][col]
        scans = [s for s in samples if "scan_ratio" in s]
        ax.plot([(s["t"] - start) / 60 for s in scans], [s["scan_ratio"] for s in scans],
                label="full scan per row / a compacted copy's (live, beside the run)")
        quiet = [s for s in samples if "quiet_scan_ratio" in s]
        ax.plot([(s["t"] - start) / 60 for s in quiet], [s["quiet_scan_ratio"] for s in quiet], "o",
                label="its snapshot rescanned quietly / a compacted copy of its rows")
        ax.axhline(1.5, color="red", linestyle=":", label="goal 1.5x")
        ax.set_ylabel("ratio")
        ax = axes[2][col]
        events = [e for e in rep.get("writer_events", []) if e.get("kind") == "stream" and e.get("ok")]
        ax.plot([(e["t"] - start) / 60 for e in events], [e.get("total", e["latency"]) for e in events], ".",
                markersize=2, label="writer commit (incl. retries)")
        dml = [e for e in rep.get("writer_events", []) if e.get("kind") in ("delete", "update", "merge")
               and "latency" in e and not e.get("landed_anyway")]
        ok = [e for e in dml if e.get("ok")]
        failed = [e for e in dml if not e.get("ok") and e.get("conflict")]
        ax.plot([(e["t"] - start) / 60 for e in ok], [e["latency"] for e in ok], "g^", markersize=4,
                label="DML committed")
        ax.plot([(e["t"] - start) / 60 for e in failed], [e["latency"] for e in failed], "rx", markersize=7,
                label=f"DML failed because of compaction ({len(failed)})")
        ax.set_ylabel("seconds")
        ax.set_xlabel("minutes")
        for row in axes:
            a = row[col]
            for run in rep["runs"]:
                if run["started_at"] and run["finished_at"] and not run["dry_run"]:
                    color = {"succeeded": "tab:green", "partial": "tab:olive"}.get(run["status"], "tab:red")
                    a.axvspan((run["started_at"] - start) / 60, (run["finished_at"] - start) / 60, color=color,
                              alpha=0.12)
            for fault in rep["faults"]:
                if fault.get("t"):
                    a.axvline((fault["t"] - start) / 60, color="black", linestyle="--", linewidth=0.8)
                    if a is row[col] and row is axes[0]:
                        a.annotate(fault["kind"], ((fault["t"] - start) / 60, a.get_ylim()[1] * 0.9),
                                   rotation=90, fontsize=7, va="top")
            a.legend(fontsize=7, loc="upper left")
    fig.suptitle("soak: delete files, scan cost and writer latency; shaded = compaction runs (green ok, red "
                 "failed), dashed = faults")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def describe(report: Any, goals: dict[str, dict[str, Any]], wall_minutes: float | None) -> list[str]:
    wall = f" ({wall_minutes:.1f} min wall)" if wall_minutes is not None else ""
    lines = [f"== {label({'config': dataclasses.asdict(report.config)})}{wall}"]
    for name, goal in goals.items():
        lines.append(f"  {'MET    ' if goal['met'] else 'NOT MET'}  {name}: {goal['figure']}")
    for fault in report.faults:
        at = f"t={fault['t'] - report.started:.0f} s" if fault.get("t") else "not triggered"
        run = f", run {fault.get('run_id')} {fault.get('run_status')}" if fault["kind"] == "kill_job" else ""
        lines.append(f"  fault {fault['kind']} at {at}{run}")
    runs = sorted((r for r in report.runs if not r["dry_run"]), key=lambda r: r["started_at"] or 0)
    for r in runs:
        took = (r["finished_at"] or 0) - (r["started_at"] or 0)
        lines.append(f"  run t={(r['started_at'] or 0) - report.started:5.0f} s {took:5.0f} s {r['status']:9} "
                     f"{r['kinds']} {r['outcomes']} conflicts {r['conflicts']}"
                     f"{' ' + '; '.join(r['reasons']) if r['reasons'] else ''}")
    from icecompact_testing.soak import writer_summary

    lines.append(f"  writer: {json.dumps(writer_summary(report.writer_events, report.faults))}")
    # Every check of every snapshot is in the .json; the text keeps the post-hoc ones (the job's own are one per commit).
    hidden = ("plans_with_snapshots", "snapshot_checks")
    lines.append(f"  checks: {json.dumps({k: v for k, v in report.checks.items() if k not in hidden})}")
    lines.append("")
    return lines


def table_property(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--table-property``: a dotted Iceberg property name and a plain value (they go into an
    ``ALTER TABLE ... SET TBLPROPERTIES`` statement, so nothing else is accepted)."""
    import re

    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", key) or not re.fullmatch(r"[A-Za-z0-9_.:,-]*", value):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (letters, digits, '._-'), got {text!r}")
    return key, value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--size", default="s", help="bulk generator size of the base table (xs, s, m)")
    ap.add_argument("--formats", default="2,3")
    ap.add_argument("--scan-every", type=int, default=2,
                    help="a side-by-side scan pair at every N-th 10-s sample (each pair loads the 2 cores for seconds)")
    ap.add_argument("--quiet-rescans", type=int, default=12,
                    help="after the run, rescan this many sampled snapshots on the quiet machine, each against a "
                         "compacted copy of its own rows (the scan goals are judged on them; 0: the live pairs)")
    ap.add_argument("--out", default=None, help="results path prefix (default bench/results/soak, soak_health)")
    ap.add_argument("--path", default="cron", choices=("cron", "health"),
                    help="cron: iceberg_compaction every minute, a spark-submit per job group; health: the "
                         "event-driven iceberg_compaction_on_health feeding the resident executor")
    ap.add_argument("--writer", default="spark", choices=("spark", "flink"),
                    help="spark: our CDC writer process (streaming upserts + Spark DELETE / MERGE); flink: a Flink "
                         "upsert job (PyFlink, Iceberg's Flink sink, PRIMARY KEY, checkpoint every second) on a table "
                         "of its own schema; no PostgreSQL outage (the job runs without restarts)")
    ap.add_argument("--dml-writers", default="plain", choices=("plain", "cooperative", "both"),
                    help="the Spark writer's DML: plain (announces nothing), cooperative (holds a write lease while "
                         "it runs), both (one run of each per format; results soak_writers.*)")
    ap.add_argument("--workdir", default=None, help="keep logs here (default: a temp folder)")
    ap.add_argument("--table-property", action="append", default=[], metavar="KEY=VALUE", type=table_property,
                    help="set on the soak table before the writer starts (repeatable), e.g. "
                         "write.delete.granularity=partition or compaction.minor.delete-file-count=4")
    ap.add_argument("--from-json", default=None,
                    help="no new run: evaluate the goals again on a stored soak.json and rewrite .txt and .png")
    ap.add_argument("--maintenance", action="store_true",
                    help="the maintenance soak instead (icecompact_testing.maintenance_soak): writer + "
                         "compaction + maintenance, results bench/results/maintenance_soak.*")
    ap.add_argument("--retention-s", type=float, default=300.0, help="--maintenance: snapshot retention")
    ap.add_argument("--maintain-every-s", type=float, default=60.0, help="--maintenance: maintenance interval")
    ap.add_argument("--compact-every-s", type=float, default=60.0, help="--maintenance: compaction interval")
    ap.add_argument("--storage", default="local", choices=("local", "s3"),
                    help="--maintenance: local (SQL catalog on PostgreSQL) or s3 (REST catalog + S3, SeaweedFS)")
    ap.add_argument("--base-mib", type=float, default=72.0,
                    help="--maintenance: compacted history the table starts with (MiB)")
    args = ap.parse_args()
    if args.out is None:
        args.out = str(RESULTS_DIR / ("soak_flink" if args.writer == "flink" else
                                      "soak_writers" if args.dml_writers != "plain" else
                                      "soak_health" if args.path == "health" else "soak"))
    if args.maintenance:
        return maintenance_main(args)

    from icecompact_testing.flink_soak import config_for_flink
    from icecompact_testing.soak import SoakConfig, SoakReport, evaluate, minor_trigger, run_soak, sampler_settings

    reports: dict[str, dict[str, Any]] = {}
    all_met = True
    if args.from_json:
        stored = json.loads(Path(args.from_json).read_text())
        header = stored.get("header", "soak")
        lines = [f"{header}; goals re-evaluated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from the "
                 f"stored figures (--from-json)", ""]
        for key, data in sorted((k, v) for k, v in stored.items() if k != "header"):
            report = SoakReport.from_json(data)
            goals = evaluate(report, minor_trigger(report.config))
            data["goals"] = goals
            reports[key] = data
            lines += describe(report, goals, data.get("wall_minutes"))
            all_met &= all(g["met"] for g in goals.values())
    else:
        from compaction.spark.session import build_session

        workroot = Path(args.workdir or tempfile.mkdtemp(prefix="icecompact-soak-"))
        header = (f"soak ({args.path} path, {args.writer} writer, {args.dml_writers} DML): {args.minutes:g} min per "
                  "run, size "
                  f"{args.size if args.writer == 'spark' else '(Flink stream)'}, work folder "
                  f"{workroot}" + (f", table properties {dict(args.table_property)}" if args.table_property else ""))
        lines = [header, ""]
        spark = build_session([], sampler_settings())
        try:
            cooperative = {"plain": [False], "cooperative": [True], "both": [False, True]}[args.dml_writers]
            for version, coop in ((int(v), c) for v in args.formats.split(",") for c in cooperative):
                config = SoakConfig(duration_s=args.minutes * 60, size=args.size, format_version=version,
                                    scan_every=args.scan_every, quiet_rescans=args.quiet_rescans, path=args.path,
                                    policy=dict(args.table_property), cooperative=coop)
                key = f"{version}{' cooperative' if coop else ''}"
                if args.writer == "flink":
                    config = config_for_flink(config)
                t0 = time.time()
                report = run_soak(config, workroot / f"v{version}{'-cooperative' if coop else ''}", spark=spark)
                goals = evaluate(report, minor_trigger(config))
                data = report.to_json()
                data["writer_events"] = report.writer_events
                data["wall_minutes"] = (time.time() - t0) / 60
                reports[key] = data
                described = describe(report, goals, data["wall_minutes"])
                lines += described
                all_met &= all(g["met"] for g in goals.values())
                print("\n".join(described), flush=True)
                write_results(Path(args.out), lines, reports)  # after each format: a later failure keeps these
        finally:
            spark.stop()
    write_results(Path(args.out), lines, reports)
    return 0 if all_met else 1


def maintenance_main(args: argparse.Namespace) -> int:
    """``--maintenance``: one maintenance soak per format; goals printed, figures and chart written."""
    from icecompact_testing.maintenance_soak import MaintenanceSoakConfig, chart as m_chart, evaluate as m_evaluate
    from icecompact_testing.maintenance_soak import render as m_render, run_maintenance_soak

    out = Path(args.out if args.out != str(RESULTS_DIR / "soak") else RESULTS_DIR / "maintenance_soak")
    workroot = Path(args.workdir or tempfile.mkdtemp(prefix="icecompact-msoak-"))
    texts, data, all_met = [], {}, True
    for version in (int(v) for v in args.formats.split(",")):
        config = MaintenanceSoakConfig(duration_s=args.minutes * 60, format_version=version,
                                       retention_s=args.retention_s, orphan_age_s=2 * args.retention_s,
                                       maintain_interval_s=args.maintain_every_s,
                                       compact_interval_s=args.compact_every_s,
                                       base_bytes=int(args.base_mib * 2**20), storage=args.storage)
        t0 = time.time()
        report = run_maintenance_soak(config, workroot / f"v{version}")
        goals = m_evaluate(report)
        all_met &= all(g["met"] for g in goals.values())
        text = m_render(report, goals) + f"  wall {(time.time() - t0) / 60:.1f} min, work folder {workroot}\n"
        print(text, flush=True)
        texts.append(text)
        data[str(version)] = {**report.to_json(), "goals": goals}
        out.parent.mkdir(parents=True, exist_ok=True)
        # One chart per format; the first format's is the main one (maintenance_soak.png).
        m_chart(report, out.with_suffix(".png") if len(data) == 1 else out.with_name(f"{out.name}_v{version}.png"))
        out.with_suffix(".txt").write_text("\n".join(texts))
        out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str))
    print(f"wrote {out}.txt, .json, .png", flush=True)
    return 0 if all_met else 1


def write_results(out: Path, lines: list[str], reports: dict[str, dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"header": lines[0], **{str(k): v for k, v in reports.items()}},
                                                   indent=1, default=str))
    if reports:
        chart(reports, out.with_suffix(".png"))
    print(f"wrote {out}.txt, .json, .png", flush=True)


if __name__ == "__main__":
    sys.exit(main())
