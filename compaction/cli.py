"""icecompact: compaction of Iceberg merge-on-read tables. inspect shows a table's health from metadata, plan decides
NONE/MINOR/MAJOR per partition, run compacts on Spark and records the run in the ledger, history lists the recorded
runs, maintain expires snapshots, rewrites manifests and deletes orphan files, demo builds and compacts a demo table. inspect, plan and run also record a health sample of the table in the
ledger (health over time, shown by the Airflow UI plugin) unless --no-record is given."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from compaction.core.display import format_bytes, validation_label
from compaction.core.errors import CompactionError, ConfigError
from compaction.core.run_options import MAX_PARALLEL_JOBS_DEFAULT, MAX_RETRIES_DEFAULT, VALIDATION_DEFAULT, VALIDATION_LEVELS


def _catalog(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from compaction.catalog import CatalogConfig

    return CatalogConfig.resolve(args.catalog)


def _is_number(text: str) -> bool:
    head = text.split(" ")[0]
    try:
        float(head)
        return True
    except ValueError:
        return False


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_number(r[i]) for r in cells[1:]) and len(cells) > 1 for i in range(len(headers))]
    _align = lambda c, w, head_numeric: c.rjust(w) if head_numeric or (c and _is_number(c)) else c.ljust(w)  # noqa: E731
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(_align(c, w, n == 0 and i > 0 and numeric[i]) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def partition_health_rows(state) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """One row per partition; deletes are counted where they apply (compaction.core.attribution): a global equality
    delete (written under an unpartitioned spec) also counts in every partition with an older data file."""
    from compaction.core.attribution import GlobalDeleteIndex
    from compaction.core.model import DeleteContent

    global_deletes = GlobalDeleteIndex.of(state.partitions)
    rows = []
    for p in state.partitions:
        attributed = global_deletes.attribute(p)
        rows.append(
            {
                "partition": p.key.label(),
                "spec_id": p.key.spec_id,
                "data_files": p.data_file_count,
                "data_bytes": p.data_bytes,
                "data_records": p.data_records,
                "position_delete_files": attributed.position_delete_files,
                "position_delete_records": attributed.records(DeleteContent.POSITION),
                "equality_delete_files": attributed.equality_delete_files,
                "equality_delete_records": attributed.records(DeleteContent.EQUALITY),
                "deletion_vectors": attributed.deletion_vectors,
                "deletion_vector_records": attributed.records(DeleteContent.DELETION_VECTOR),
                "global_equality_delete_files": attributed.global_equality_delete_files,
                # The partition's own equality deletes (global ones applying here are counted above, not listed).
                "equality_delete_sequence_numbers": list(p.equality_delete_sequence_numbers),
                "min_data_sequence_number": p.min_data_sequence_number,
                "max_data_sequence_number": p.max_data_sequence_number,
                "delete_ratio": round(attributed.delete_records / p.data_records, 4) if p.data_records else 0.0,
                "last_updated_ms": p.last_updated_ms,
            }
        )
    return rows


def format_health(state) -> str:  # type: ignore[no-untyped-def]
    rows = partition_health_rows(state)
    header = (
        f"{state.identity}  format v{state.format_version}  snapshot {state.snapshot_id}  "
        f"{len(rows)} partition(s)"
    )
    if not rows:
        return header + "\n(no live files)"
    table = render_table(
        ["partition", "data files", "data size", "records", "pos-del files", "eq-del files", "of them global", "DVs",
         "delete ratio"],
        [
            (r["partition"], r["data_files"], format_bytes(r["data_bytes"]), r["data_records"],
             r["position_delete_files"], r["equality_delete_files"], r["global_equality_delete_files"],
             r["deletion_vectors"], f"{r['delete_ratio']:.2f}")
            for r in rows
        ],
    )
    if any(r["global_equality_delete_files"] for r in rows):
        table += ("\nglobal: equality deletes written under an unpartitioned spec; they apply to (and count in) every "
                  "partition with an older data file, their records pro rata")
    return header + "\n" + table


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _record_health(args: argparse.Namespace, state, sample=None, metadata_location: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """Record the table's health sample in the ledger (best effort: a ledger problem is a warning)."""
    if getattr(args, "no_record", False):
        return
    from compaction.ops.fleet import record_sample, sample_state

    if sample is None:
        sample = sample_state(state, metadata_location=metadata_location)
    record_sample(sample, "cli", warn=_warn)


def cmd_inspect(args: argparse.Namespace) -> int:
    from compaction.metadata.inspect import load_table, table_state

    identity, table = load_table(_catalog(args), args.table)
    state = table_state(table, identity)
    _record_health(args, state, metadata_location=table.metadata_location)
    if args.json:
        print(json.dumps({"table": str(state.identity), "format_version": state.format_version,
                          "snapshot_id": state.snapshot_id, "partitions": partition_health_rows(state)}, indent=2))
    else:
        print(format_health(state))
    return 0


def _filter_text(args: argparse.Namespace) -> str | None:
    """``--partition``, syntax-checked before anything else happens (binding to the table comes next)."""
    if args.partition is None:
        return None
    from compaction.metadata.filters import parse_row_filter

    parse_row_filter(args.partition)
    return str(args.partition)


def cmd_plan(args: argparse.Namespace) -> int:
    from compaction.core.planner import CompactionMode, plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.filters import compile_partition_filter
    from compaction.metadata.inspect import load_table, table_state

    text = _filter_text(args)
    identity, table = load_table(_catalog(args), args.table)
    partition_filter = compile_partition_filter(table, text, table_name=identity.dotted)
    state = table_state(table, identity)
    policy = CompactionPolicy.resolve(state.properties, _parse_overrides(args.set))
    now = _dt.datetime.now(_dt.timezone.utc)
    last_minor_at = None
    if policy.minor_interval_seconds > 0:  # compaction.minor.interval counts from the ledger's last MINOR
        from compaction.core.errors import CompactionError
        from compaction.ledger import Ledger
        from compaction.ops.runner import last_minor_times

        try:
            with Ledger.open() as ledger:
                last_minor_at = last_minor_times(ledger, state, policy)
        except CompactionError as e:
            _warn(f"ledger not readable, compaction.minor.interval counts every partition as never compacted: {e}")
    result = plan(state, policy, CompactionMode(args.mode), now,
                  partition_filter=partition_filter, last_minor_at=last_minor_at)
    if CompactionMode(args.mode) is CompactionMode.AUTO and partition_filter is None and not args.set:
        from compaction.core.health import sample_from_state

        _record_health(args, state, sample_from_state(state, policy, result, table.metadata_location))
    else:  # the sample holds the table's own auto decision, not this run's mode, filter or overrides
        _record_health(args, state, metadata_location=table.metadata_location)
    if args.json:
        print(result.to_json())
    else:
        print(format_plan(result))
        _print_maintenance_preview(table, identity)
    return 0


def _print_maintenance_preview(table, identity) -> None:  # type: ignore[no-untyped-def]
    """The maintenance decisions now (metadata only: one manifest list read; in-flight work from the ledger)."""
    from compaction.core.maintenance import plan_maintenance
    from compaction.core.maintenance_policy import MaintenancePolicy
    from compaction.ops.maintenance import in_flight, maintenance_state

    now = _dt.datetime.now(_dt.timezone.utc)
    try:
        from compaction.ledger import Ledger

        with Ledger.open() as ledger:
            flying = in_flight(ledger, identity, now)
    except CompactionError as e:
        _warn(f"ledger not readable, maintenance preview assumes nothing is in flight: {e}")
        flying = ()
    try:
        state = maintenance_state(table, identity, flying)
        mplan = plan_maintenance(state, MaintenancePolicy.resolve(state.properties), now)
    except CompactionError as e:
        _warn(f"maintenance preview not available: {e}")
        return
    print()
    print(format_maintenance_plan(mplan))


def format_maintenance_plan(mplan) -> str:  # type: ignore[no-untyped-def]
    s = mplan.stats
    head = (f"maintenance {mplan.plan_id} for {mplan.table}: {s.get('snapshots', 0)} snapshot(s), "
            f"{s.get('manifests', 0)} manifest(s) ({s.get('small_manifests', 0)} small), metadata file "
            f"{format_bytes(s['metadata_file_bytes']) if 'metadata_file_bytes' in s else '?'}, "
            f"{s.get('in_flight', 0)} in flight")
    rows = [(d.action.value, "RUN" if d.run else "-", d.reason) for d in mplan.decisions]
    lines = [head, render_table(["action", "decision", "reason"], rows)]
    lines += [f"note: {n}" for n in mplan.notes]
    return "\n".join(lines)


def cmd_maintain(args: argparse.Namespace) -> int:
    from compaction.ops.maintenance import maintain_table
    from compaction.spark.session import SparkSettings

    report = maintain_table(_catalog(args), args.table, overrides=_parse_overrides(args.set), dry_run=args.dry_run,
                            progress=lambda m: print(m, file=sys.stderr, flush=True),
                            spark_settings=SparkSettings.from_environment(master=args.master))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return report.exit_code
    print(format_maintenance_plan(report.plan))
    if args.dry_run:
        print(f"dry run: nothing executed (maintenance run {report.run_id})")
        return 0
    if not report.results:
        print(f"nothing to do (maintenance run {report.run_id})")
        return 0
    print()
    print(render_table(
        ["action", "status", "files removed", "bytes removed", "duration", "detail"],
        [(r.action.value, r.status, r.files_removed,
          "?" if r.bytes_removed is None else format_bytes(r.bytes_removed), f"{r.duration_ms / 1000:.1f}s",
          r.error or ", ".join(f"{k}={v}" for k, v in r.detail.items() if k != "sample"))
         for r in report.results]))
    print(f"maintenance run {report.run_id}: {report.status}")
    return report.exit_code


def format_plan(result) -> str:  # type: ignore[no-untyped-def]
    lines = [f"plan {result.plan_id} for {result.table} at snapshot {result.base_snapshot_id} (mode {result.mode.value})"]
    if result.partition_filter is not None:
        lines.append(f"partition filter: {result.partition_filter.to_text()}")
    rows = [(d.partition.label(), d.kind.value.upper(), d.reason) for d in result.decisions]
    lines.append(render_table(["partition", "decision", "reason"], rows) if rows else "(no partitions)")
    for group in result.groups:
        lines.append(
            f"job group {group.group_id}: {len(group.tasks)} task(s), {len(group.partitions)} partition(s), "
            f"~{format_bytes(group.estimated_cost_bytes)}"
        )
    for deferred in result.deferred:
        lines.append(f"deferred {deferred.partition.label()}: {deferred.reason}")
    if not result.groups:
        lines.append("nothing to do")
    return "\n".join(lines)


def _parse_overrides(pairs: Sequence[str] | None) -> dict[str, str]:
    from compaction.core.errors import ConfigError

    out: dict[str, str] = {}
    for pair in pairs or ():
        if "=" not in pair:
            raise ConfigError(f"invalid --set {pair!r}: expected KEY=VALUE")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


#: The row of the whole table under the per-partition rows of the before/after table.
WHOLE_TABLE_LABEL = "whole table"
#: Counted per (spec, partition) row: data files, delete files, data file records.
_NO_FILES = (0, 0, 0)


def _state_counts(partition) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    if partition is None:
        return _NO_FILES
    return partition.data_file_count, len(partition.delete_files), partition.data_records


def _arrow_cell(before: object, after: object) -> str:
    return f"{_n(before)} -> {_n(after)}"


def format_before_after(report) -> str:  # type: ignore[no-untyped-def]
    """Per compacted partition: files and records before/after, status and the validation its commits passed.

    A row is one (spec, partition) (its label starts with ``spec=N``) and counts only the files written under that
    spec and partition, from the table's metadata as planned (before) and after the run: each file is counted in
    exactly one row, so the rows never overlap. On a table whose spec evolved a rewrite writes the rows of the
    older-spec files it selects into partitions of the current spec, possibly ones it was not asked to compact:
    every partition the run did not compact but whose files changed gets a row too ("not compacted"), and the last
    row is the whole table, so the columns add up. (The ledger keeps what each partition's job counted, its own
    files at its base and at its last commit.) Without the after inspection the job's counts are shown."""
    before_state, after_state = report.before, report.after
    if not report.outcomes:
        return "nothing was compacted"
    before_by_label = {p.key.label(): p for p in before_state.partitions}
    after_by_label = {p.key.label(): p for p in (after_state.partitions if after_state is not None else ())}
    rows = []
    for o in report.outcomes:
        if after_state is None:
            counts = [(o.data_files_before, o.data_files_after), (o.delete_files_before, o.delete_files_after),
                      (o.records_before, o.records_after)]
        else:
            counts = list(zip(_state_counts(before_by_label.get(o.partition_label)),
                              _state_counts(after_by_label.get(o.partition_label))))
        rows.append((o.partition_label, o.kind.value.upper(), o.status.value, *(_arrow_cell(*c) for c in counts),
                     validation_label(o.validation_level, o.validation_result)))
    spec_ids = sorted({o.spec_id for o in report.outcomes if o.spec_id is not None}
                      | {p.key.spec_id for p in before_state.partitions})
    if after_state is not None:
        compacted = {o.partition_label for o in report.outcomes}
        for label in sorted((set(before_by_label) | set(after_by_label)) - compacted):
            was, now = _state_counts(before_by_label.get(label)), _state_counts(after_by_label.get(label))
            if was != now:
                rows.append((label, "-", "not compacted", *(_arrow_cell(b, a) for b, a in zip(was, now)), "-"))
        totals = [tuple(sum(column) for column in zip(_NO_FILES, *(_state_counts(p) for p in state.partitions)))
                  for state in (before_state, after_state)]
        rows.append((WHOLE_TABLE_LABEL, "", "", *(_arrow_cell(b, a) for b, a in zip(*totals)), ""))
    table = render_table(["partition", "kind", "status", "data files", "delete files", "file records", "validation"],
                         rows)
    if len(spec_ids) < 2:
        return table
    return table + "\n" + (
        f"note: partition specs {', '.join(map(str, spec_ids))}: a row is one (spec, partition) and counts only the "
        "files written under that spec and partition; with the unchanged partitions (not listed) they add up to the "
        "whole table. A rewrite writes the "
        "rows of older-spec files it selects into partitions of the current spec: they leave the older spec's row "
        "and appear in the after counts of the current spec's rows.")


def _n(value: object) -> str:
    return "?" if value is None else str(value)


def cmd_run(args: argparse.Namespace) -> int:
    from compaction.core.plan import CompactionMode
    from compaction.ops.runner import run_table

    text = _filter_text(args)
    catalog = _catalog(args)
    report = run_table(
        catalog, args.table, mode=CompactionMode(args.mode), partition_filter=text,
        overrides=_parse_overrides(args.set), dry_run=args.dry_run, validation=args.validation,
        max_retries=args.max_retries, max_parallel_jobs=args.max_parallel_jobs, executor=args.executor,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
    )
    print(format_plan(report.plan))
    if not args.no_record:  # the table's health after the run (metadata only)
        from compaction.ops.fleet import record_sample, sample_table

        try:
            record_sample(sample_table(catalog, args.table)[0], "cli", warn=_warn)
        except CompactionError as e:
            _warn(f"health sample not recorded: {e}")
    if args.dry_run:
        print(f"dry run: nothing submitted (run {report.run_id})")
        return 0
    print()
    print(format_before_after(report))
    print(f"run {report.run_id}: {report.status.value}")
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    return report.exit_code


def cmd_executor(args: argparse.Namespace) -> int:
    from compaction.ops.executor import read_catalog_file, run_supervisor, stop_executors
    from compaction.spark.contract import options_from_args
    from compaction.ledger import Ledger
    from compaction.spark.session import SparkSettings

    if args.action == "run":
        catalog = read_catalog_file(Path(args.catalog_file)) if args.catalog_file else _catalog(args)
        conf = {}
        for entry in args.conf or ():
            key, sep, value = entry.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"invalid --conf {entry!r}: expected KEY=VALUE")
            conf[key.strip()] = value
        return run_supervisor(catalog, args.executor_id, options=options_from_args(args),
                              spark_settings=SparkSettings.from_environment(master=args.master, extra_conf=conf or None),
                              another=args.another,
                              progress=lambda m: print(m, file=sys.stderr, flush=True))
    with Ledger.open() as ledger:
        if args.action == "stop":
            stop_executors(ledger, getattr(args, "catalog", None))
            return 0
        now = _dt.datetime.now(_dt.timezone.utc)
        records = ledger.executors(include_stopped=args.all)
        if args.json:
            print(json.dumps([dict(r.to_dict(), alive=r.alive(now)) for r in records], indent=2))
            return 0
        if not records:
            print("no executor" + ("" if args.all else " running (--all lists stopped ones)"))
        for r in records:
            state = r.status if r.alive(now) or r.status == "stopped" else f"{r.status}, heartbeat lost"
            print(f"{r.executor_id}  catalog {r.catalog}  {state}  host {r.host} pid {r.pid}  "
                  f"generation {r.generation}  {r.groups_run} group(s)  heap {r.heap_used_mb} MiB  "
                  f"heartbeat {r.heartbeat_at.isoformat(timespec='seconds')}"
                  + (f"  item {r.current_item}" if r.current_item else "")
                  + (f"  stopped: {r.stop_reason}" if r.stop_reason else ""))
    return 0


def cmd_lease(args: argparse.Namespace) -> int:
    from compaction.core.policy import parse_duration
    from compaction.ledger import Ledger
    from compaction.ops import leases

    with Ledger.open() as ledger:
        if args.action == "release":
            ledger.release_write_lease(args.lease_id)
            return 0
        catalog = _catalog(args).name
        if args.action == "list":
            from compaction.core.identifiers import parse_table_identifier

            table_ref = parse_table_identifier(args.table, catalog).dotted
            active = ledger.active_write_leases(table_ref, catalog=catalog)
            if args.json:
                print(json.dumps([{"lease_id": w.lease_id, "holder": w.holder, "started_at": w.started_at.isoformat(),
                                   "expires_at": w.expires_at.isoformat()} for w in active], indent=2))
                return 0
            print(render_table(["lease", "holder", "started", "expires"],
                               [(w.lease_id, w.holder, w.started_at.isoformat(timespec="seconds"),
                                 w.expires_at.isoformat(timespec="seconds")) for w in active])
                  if active else f"no live write lease on {table_ref}")
            return 0
        lease = leases.acquire(ledger, args.table, catalog, holder=args.holder,
                               ttl_s=parse_duration("--ttl", args.ttl), wait_s=parse_duration("--wait", args.wait),
                               progress=lambda m: print(m, file=sys.stderr, flush=True))
        print(lease)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from compaction.ledger import Ledger

    with Ledger.open() as ledger:
        if args.run:
            run = ledger.run(args.run)
            if run is None:
                from compaction.core.errors import ConfigError

                raise ConfigError(f"unknown run {args.run!r}")
            outcomes = ledger.outcomes(args.run)
            if args.json:
                print(json.dumps({"run": run.to_dict(), "outcomes": [o.to_dict() for o in outcomes],
                                  "conflicts": [c.to_dict() for c in ledger.conflicts(args.run)]}, indent=2))
                return 0
            print(f"run {run.run_id} {run.table_ref} {run.status.value} exit={run.exit_code} {run.error or ''}")
            print(render_table(
                ["partition", "kind", "status", "attempts", "data files", "delete files", "records", "validation",
                 "error"],
                [(o.partition_label, o.kind.value, o.status.value, o.attempts,
                  f"{_n(o.data_files_before)} -> {_n(o.data_files_after)}",
                  f"{_n(o.delete_files_before)} -> {_n(o.delete_files_after)}",
                  f"{_n(o.records_before)} -> {_n(o.records_after)}",
                  validation_label(o.validation_level, o.validation_result), (o.error or "")[:80]) for o in outcomes],
            ))
            return 0
        table_ref = None
        if args.table:
            from compaction.core.identifiers import parse_table_identifier

            table_ref = parse_table_identifier(args.table, _catalog(args).name).dotted
        runs = ledger.runs(table_ref, limit=args.limit)
        if args.json:
            print(json.dumps([r.to_dict() for r in runs], indent=2))
            return 0
        print(render_table(
            ["run", "table", "started", "mode", "status", "exit", "duration"],
            [(r.run_id, r.table_ref, r.started_at.isoformat(timespec="seconds"), r.mode.value,
              r.status.value + (" (dry run)" if r.dry_run else ""), _n(r.exit_code),
              f"{(r.duration_ms or 0) / 1000:.1f}s") for r in runs],
        ) if runs else "no runs recorded")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from compaction.catalog import EMBEDDED_CATALOG_NAME, CatalogConfig
    from compaction.metadata.inspect import inspect_table
    from compaction.spark.session import build_session
    from compaction.core.plan import CompactionMode
    from compaction.demo.workload import demo_table

    catalog = CatalogConfig.resolve(args.catalog) if args.catalog else CatalogConfig.embedded()
    kind = "embedded catalog" if catalog.name == EMBEDDED_CATALOG_NAME else "catalog"
    print(f"{kind} {catalog.name!r}: {catalog.describe()}", flush=True)
    print("starting local Spark ...", flush=True)
    spark = build_session([catalog])
    try:
        print(f"creating demo merge-on-read table {args.table} ...", flush=True)
        demo_table(spark, catalog, args.table)
    finally:
        spark.stop()
    print(format_health(inspect_table(catalog, args.table)))
    if args.no_compact:
        return 0
    from compaction.ops.runner import run_table

    print(f"\ncompacting {args.table} (icecompact run, mode {args.mode}) ...", flush=True)
    report = run_table(catalog, args.table, mode=CompactionMode(args.mode),
                       progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_plan(report.plan))
    print()
    print(format_before_after(report))
    print()
    print(format_health(inspect_table(catalog, args.table)))
    print(f"run {report.run_id}: {report.status.value}")
    return report.exit_code


_NO_RECORD_HELP = "do not record the table's health sample in the ledger"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icecompact", description=__doc__)
    catalog_help = ("catalog name from .pyiceberg.yaml / PYICEBERG_CATALOG__* / an Airflow-style definition (default: "
                    "$ICECOMPACT_CATALOG, else the embedded SQLite catalog); see docs/catalogs.md")
    parser.add_argument("--catalog", help=catalog_help)
    # Also accepted after the subcommand (`icecompact inspect db.t --catalog lake`), as users type it; SUPPRESS keeps
    # the subparser from overwriting a value given before the subcommand.
    catalog_option = argparse.ArgumentParser(add_help=False)
    catalog_option.add_argument("--catalog", default=argparse.SUPPRESS, help=catalog_help)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", parents=[catalog_option], help="per-partition health from metadata only (recorded in the ledger)")
    p.add_argument("table", help="NAMESPACE.TABLE")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-record", action="store_true", help=_NO_RECORD_HELP)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("plan", parents=[catalog_option], help="decide NONE/MINOR/MAJOR per partition and group the work")
    p.add_argument("table", help="NAMESPACE.TABLE")
    p.add_argument("--mode", choices=["auto", "minor", "major"], default="auto")
    p.add_argument("--partition", metavar="FILTER",
                   help="Iceberg row filter on source columns, e.g. \"ts >= '2024-01-02'\"; partitions "
                        "are selected by inclusive projection, as Iceberg's scan planning does (see docs/partition-filters.md)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="policy override (repeatable)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-record", action="store_true", help=_NO_RECORD_HELP)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", parents=[catalog_option], help="plan and compact a table on Spark (spark-submit), record the run")
    p.add_argument("table", help="NAMESPACE.TABLE")
    p.add_argument("--mode", choices=["auto", "minor", "major"], default="auto")
    p.add_argument("--partition", metavar="FILTER",
                   help="Iceberg row filter on source columns, e.g. \"ts >= '2024-01-02'\"; partitions "
                        "are selected by inclusive projection, as Iceberg's scan planning does (see docs/partition-filters.md)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="policy override (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="plan and record, submit nothing")
    p.add_argument("--validation", choices=VALIDATION_LEVELS, default=VALIDATION_DEFAULT,
                   help=f"post-commit check of every compaction snapshot (default {VALIDATION_DEFAULT}; see docs/validation.md)")
    p.add_argument("--max-retries", type=int, default=MAX_RETRIES_DEFAULT,
                   help=f"conflict retries per partition (default {MAX_RETRIES_DEFAULT})")
    p.add_argument("--max-parallel-jobs", type=int, default=MAX_PARALLEL_JOBS_DEFAULT,
                   help="concurrent spark-submits (1 on SQLite)")
    p.add_argument("--executor", choices=["submit", "resident"], default="submit",
                   help="submit: a spark-submit per run (default); resident: queue the work for a long-running "
                        "executor of the catalog, started when none is alive (see docs/executors.md)")
    p.add_argument("--no-record", action="store_true", help=_NO_RECORD_HELP + " after the run")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("executor", parents=[catalog_option],
                       help="resident Spark executors fed by the ledger's queue (see docs/executors.md)")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("run", parents=[catalog_option],
                           help="run an executor for the catalog in the foreground (restarted when it asks to be)")
    q.add_argument("--executor-id", help=argparse.SUPPRESS)  # set by a detached start (already registered)
    q.add_argument("--catalog-file", help=argparse.SUPPRESS)  # a 0600 file read and deleted at once
    q.add_argument("--master", help="Spark master (default $ICECOMPACT_SPARK_MASTER or local[2])")
    q.add_argument("--conf", action="append", metavar="KEY=VALUE",
                   help="Spark conf of the executor's application (repeatable), e.g. spark.cores.max=4")
    q.add_argument("--another", action="store_true",
                   help="start one more executor for a catalog that has one (several share the queue safely on a "
                        "PostgreSQL ledger)")
    from compaction.spark.contract import add_option_args

    add_option_args(q)
    q.set_defaults(func=cmd_executor)
    q = actions.add_parser("status", help="executors and their heartbeats")
    q.add_argument("--all", action="store_true", help="stopped ones too")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_executor)
    q = actions.add_parser("stop", parents=[catalog_option], help="SIGTERM this host's executors (of --catalog)")
    q.set_defaults(func=cmd_executor)

    p = sub.add_parser("maintain", parents=[catalog_option],
                       help="expire snapshots, rewrite manifests, delete orphan files on Spark (see docs/maintenance.md)")
    p.add_argument("table", help="NAMESPACE.TABLE")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="maintenance policy override (repeatable), e.g. maintenance.delete-orphans.enabled=true")
    p.add_argument("--dry-run", action="store_true", help="print and record the plan, execute nothing")
    p.add_argument("--master", help="Spark master the maintenance job is submitted to "
                                    "(default $ICECOMPACT_SPARK_MASTER or local[2])")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("lease", parents=[catalog_option],
                       help="write leases: while a writer holds one on a table, no compaction commits on it "
                            "(see docs/operations.md, Writers and compaction)")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("acquire", parents=[catalog_option],
                           help="take a lease (printed), after any compaction commit under way on the table")
    q.add_argument("table", help="NAMESPACE.TABLE")
    q.add_argument("--holder", help="who writes, shown to compaction runs that wait (default host:pid)")
    q.add_argument("--ttl", default="1h", help="the lease ends on its own after this (default 1h; 30s, 10m, 2h)")
    q.add_argument("--wait", default="30m",
                   help="wait at most this for a compaction commit under way (default 30m), else fail with nothing held")
    q.set_defaults(func=cmd_lease)
    q = actions.add_parser("release", help="end a lease")
    q.add_argument("lease_id")
    q.set_defaults(func=cmd_lease)
    q = actions.add_parser("list", parents=[catalog_option], help="live leases of a table")
    q.add_argument("table", help="NAMESPACE.TABLE")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_lease)

    p = sub.add_parser("history", parents=[catalog_option], help="runs recorded in the ledger (or one run's per-partition outcomes)")
    p.add_argument("table", nargs="?", help="NAMESPACE.TABLE (default: all tables)")
    p.add_argument("--run", help="show one run's per-partition outcomes")
    p.add_argument("--limit", type=int, default=20, help="most recent runs to list (default 20)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("demo", parents=[catalog_option],
                       help="create the demo merge-on-read table (in the embedded catalog unless --catalog), then compact it")
    p.add_argument("--table", default="demo.events")
    p.add_argument("--mode", choices=["auto", "minor", "major"], default="auto")
    p.add_argument("--no-compact", action="store_true", help="only create the table and print its health")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command, callable in-process (tests, the executor's own process); the ``icecompact`` program is
    :func:`run`."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except CompactionError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run() -> int:
    """The ``icecompact`` program. Only a program of its own takes the default SIGPIPE action (`icecompact plan --json |
    head` ends quietly instead of tracing back): in a process that hosts other work (a test session, a server's
    threads) it would kill the whole process on the first write to a socket its peer closed."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
