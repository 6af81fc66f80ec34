"""A compaction commit whose answer is lost on a JDBC catalog (PostgreSQL): the server commits Iceberg's
``UPDATE iceberg_tables SET metadata_location = ...`` but the connection drops before the answer reaches Spark
(icecompact_testing.pg_faults). Every row must stay readable, every file that a snapshot of the table's metadata
references must still exist, our rewrite must be on the table at most once, the run must end in a clear terminal
state, and the next run must finish the work.

What Iceberg (1.10-1.12) does then: JdbcTableOperations.doCommit never throws CommitStateUnknownException.
JdbcClientPool (ClientPoolImpl.run) treats the PSQLException (SQLSTATE 08006) as a connection error and re-runs
the UPDATE on a new connection; its ``WHERE metadata_location = <old>`` now matches 0 rows, so updateTable throws
CommitFailedException, which SnapshotProducer.commit retries: refreshed, the table holds the landed snapshot (same
snapshot id), and when nothing else committed meanwhile the retry's apply validates and finds nothing to change -
the commit "succeeds" and only the retry's own files are cleaned. When another writer commits in that window the
retry fails its validation (ValidationException, a CleanableFailure) and Iceberg deletes the landed commit's
manifest list and manifests (and, in RewriteDataFiles, its new data files): the writer's test below.

Spark's catalog and pyiceberg both reach PostgreSQL through the proxy (one catalog name: Iceberg's JdbcCatalog keys
its rows by it); the assertions read the table straight from the server."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from compaction.catalog import CatalogConfig
from icecompact_testing.pg_faults import PgFaultProxy


@pytest.fixture()
def pg_proxy(postgres_cluster) -> Iterator[PgFaultProxy]:  # type: ignore[no-untyped-def]
    with PgFaultProxy(postgres_cluster.port) as proxy:
        yield proxy


@pytest.fixture()
def catalogs(tmp_path: Path, spark, postgres_cluster,  # type: ignore[no-untyped-def]
             pg_proxy: PgFaultProxy) -> tuple[CatalogConfig, CatalogConfig]:
    """(through the proxy, registered in Spark; straight to the server, for the assertions): one catalog, own
    database, local warehouse."""
    from compaction.spark.session import register_catalog

    database = postgres_cluster.create_database()
    name = f"pgl_{uuid.uuid4().hex[:8]}"
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    direct_uri = postgres_cluster.sqlalchemy_uri(database)
    proxied_uri = direct_uri.replace(f"@127.0.0.1:{postgres_cluster.port}/", f"@127.0.0.1:{pg_proxy.port}/")
    assert proxied_uri != direct_uri
    through = CatalogConfig(name, {"type": "sql", "uri": proxied_uri, "warehouse": warehouse.as_uri()})
    register_catalog(spark, through)
    return through, CatalogConfig(name, {"type": "sql", "uri": direct_uri, "warehouse": warehouse.as_uri()})


def _missing_files(table) -> list[str]:  # type: ignore[no-untyped-def]
    """Files a snapshot of ``table``'s metadata references (manifest list, manifests, live data and delete files)
    that do not exist."""
    io = table.io
    missing: list[str] = []
    for snapshot in table.metadata.snapshots:
        if not io.new_input(snapshot.manifest_list).exists():
            missing.append(snapshot.manifest_list)
            continue
        for manifest in snapshot.manifests(io):
            if not io.new_input(manifest.manifest_path).exists():
                missing.append(manifest.manifest_path)
                continue
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                if not io.new_input(entry.data_file.file_path).exists():
                    missing.append(entry.data_file.file_path)
    return sorted(set(missing))


def _unreferenced_metadata(table) -> list[str]:  # type: ignore[no-untyped-def]
    """Manifest lists and manifests in the table's metadata folder that no snapshot references (local warehouse):
    what a commit whose retry succeeded must not leave behind."""
    import os
    from urllib.parse import urlsplit

    def local(path: str) -> str:
        return urlsplit(path).path if path.startswith("file:") else path

    referenced = set()
    for snapshot in table.metadata.snapshots:
        referenced.add(local(snapshot.manifest_list))
        referenced.update(local(m.manifest_path) for m in snapshot.manifests(table.io))
    folder = os.path.join(local(table.metadata.location), "metadata")
    return sorted(p for p in (os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".avro"))
                  if p not in referenced)


def _our_snapshots(table, plan_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The task tags of the snapshots our plan committed, one per snapshot."""
    from compaction.core.posthoc import PLAN_PROPERTY
    from compaction.spark.major import TASK_PROPERTY

    return [str(s.summary.get(TASK_PROPERTY)) for s in table.metadata.snapshots
            if s.summary is not None and s.summary.get(PLAN_PROPERTY) == plan_id]


def _lost_commit(table, proxy: PgFaultProxy):  # type: ignore[no-untyped-def]
    """The snapshot the commit whose answer was lost made current: Iceberg's UPDATE binds the new metadata location
    first; that metadata file's current snapshot, as the table's metadata holds it (None: not on the table)."""
    import json

    from pyiceberg.io import load_file_io

    (lost,) = proxy.log
    location = lost.parameters[0]
    assert location and location.endswith(".metadata.json"), lost
    with load_file_io(properties=table.properties, location=location).new_input(location).open() as f:
        current = json.load(f)["current-snapshot-id"]
    return table.metadata.snapshot_by_id(current)


def _describe(run) -> list[tuple[str, str, str, str, str | None]]:  # type: ignore[no-untyped-def]
    return [(p.label, p.kind, p.status, p.reason, p.error) for p in run.partitions]


def _lose_one_commit_answer(spark, catalogs, pg_proxy: PgFaultProxy,  # type: ignore[no-untyped-def]
                            mode: str, seed: int, overrides: dict[str, object] | None = None):
    """Generate a v2 CDC table, run ``mode`` with the answer of its first catalog commit lost, check the table, then
    run ``mode`` again. Returns (first run, the snapshot whose commit answer was lost, the table after both runs)."""
    from compaction.core.plan import CompactionMode
    from compaction.core.posthoc import PLAN_PROPERTY
    from compaction.core.results import COMMITTED, FAILED, NEEDS_ATTENTION, NO_OP, ROLLED_BACK, SKIPPED
    from compaction.demo.workload import WorkloadSpec, generate
    from compaction.spark.validation import ValidationLevel
    from icecompact_testing.inprocess import compact_in_process
    from icecompact_testing.oracle import read_table

    through, direct = catalogs
    name = f"lost_{uuid.uuid4().hex[:8]}.t"
    workload = generate(spark, through, name, WorkloadSpec(seed=seed, partitioning="days_ts", commits=2,
                                                           rows_per_commit=20, days_span=2))
    before = read_table(direct.load().load_table(workload.identifier))
    assert before.applicable_deletes, "the scenario must start with deletes"
    assert pg_proxy.matching(), "the writer's commits did not go through the proxy"

    pg_proxy.lose_answer_of_next(1)
    first = compact_in_process(spark, through, name, CompactionMode(mode), level=ValidationLevel.COUNT,
                               overrides=overrides)
    assert pg_proxy.faults_served == 1, (pg_proxy.completed[-10:], _describe(first))
    assert "UPDATE 0" in pg_proxy.matching(), pg_proxy.matching()  # the JDBC pool re-ran the landed UPDATE
    assert first.plan.groups, "nothing planned"
    # A clear terminal state: finished, or failed / undone / needing attention with our error; never running.
    terminal = (COMMITTED, NO_OP, SKIPPED, FAILED, ROLLED_BACK, NEEDS_ATTENTION)
    assert all(p.status in terminal for p in first.partitions), _describe(first)
    for p in first.partitions:
        if p.status not in (COMMITTED, NO_OP, SKIPPED):
            assert p.error and "Traceback" not in p.error and p.error_class, _describe(first)

    table = direct.load().load_table(workload.identifier)
    assert _missing_files(table) == [], _describe(first)
    assert read_table(table).rows == before.rows, _describe(first)
    ours = _our_snapshots(table, first.plan.plan_id)
    assert len(ours) == len(set(ours)), ours  # no task attempt committed twice
    # The UPDATE took effect on the server: the snapshot it made current is on the table, and it is ours.
    lost = _lost_commit(table, pg_proxy)
    assert lost is not None, "the lost commit is not on the table"
    assert lost.summary is not None and lost.summary.get(PLAN_PROPERTY) == first.plan.plan_id, lost
    print(f"first {mode}: {_describe(first)}; {len(ours)} snapshot(s) of the plan; lost answer: {lost.summary}")

    second = compact_in_process(spark, through, name, CompactionMode(mode), level=ValidationLevel.COUNT,
                                overrides=overrides)
    second.assert_finished()
    table = direct.load().load_table(workload.identifier)
    assert _missing_files(table) == []
    assert _unreferenced_metadata(table) == []  # the retry's own files were cleaned once the commit was known
    assert read_table(table).rows == before.rows
    ours = _our_snapshots(table, second.plan.plan_id)
    assert len(ours) == len(set(ours)), ours
    print(f"second {mode}: {_describe(second)}")
    return first, lost, table


def test_a_major_commit_whose_answer_is_lost_on_postgres_keeps_every_row_and_file(  # type: ignore[no-untyped-def]
        spark, catalogs, pg_proxy: PgFaultProxy) -> None:
    """MAJOR (Iceberg's RewriteDataFiles): the catalog's UPDATE of the rewrite commits, its answer is lost."""
    from icecompact_testing.oracle import read_table

    _, lost, table = _lose_one_commit_answer(spark, catalogs, pg_proxy, "major", seed=21)
    assert lost.summary.operation.value == "replace", lost.summary
    assert not read_table(table).applicable_deletes  # the next run finished the rewrite


def test_a_minor_commit_whose_answer_is_lost_on_postgres_keeps_every_row_and_file(  # type: ignore[no-untyped-def]
        spark, catalogs, pg_proxy: PgFaultProxy) -> None:
    """MINOR's RowDelta (equality deletes converted to position deletes): the catalog's UPDATE commits, its answer
    is lost. MINOR's merge of fragment files (a RewriteDataFiles, as MAJOR's) is off, so its first commit is the
    RowDelta."""
    from compaction.core.plan import CompactionMode
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table
    from compaction.spark.minor import KIND_PROPERTY
    from icecompact_testing.inprocess import DEFAULT_NOW

    overrides = {"fragment_ratio": 1 << 40}  # no data file is a fragment: nothing to merge
    _, lost, _ = _lose_one_commit_answer(spark, catalogs, pg_proxy, "minor", seed=22, overrides=overrides)
    assert lost.summary.get(KIND_PROPERTY) == "minor", lost.summary
    state = inspect_table(catalogs[1], next(iter(_tables(catalogs[1]))))
    again = plan(state, CompactionPolicy.resolve(state.properties, overrides), CompactionMode.MINOR, DEFAULT_NOW)
    assert not again.groups  # no equality delete left to convert


def _tables(catalog: CatalogConfig) -> list[str]:
    loaded = catalog.load()
    return [".".join(ident) for ns in loaded.list_namespaces() for ident in loaded.list_tables(ns)]


def _append_rows(catalog: CatalogConfig, identifier: tuple[str, str], first_id: int, count: int) -> None:
    """Another writer's append (pyiceberg, straight to the server): ``count`` rows from id ``first_id``."""
    import datetime as dt

    import pyarrow as pa

    table = catalog.load().load_table(identifier)
    ts = dt.datetime(2024, 1, 1, 12)
    rows = pa.table({"id": pa.array(range(first_id, first_id + count), pa.int64()),
                     "region": pa.array(["EU"] * count), "ts": pa.array([ts] * count, pa.timestamp("us")),
                     "amount": pa.array([1] * count, pa.int32()), "note": pa.array(["concurrent"] * count)})
    table.append(rows.cast(table.schema().as_arrow()))


@pytest.mark.parametrize("mode", ["major", "minor"])
def test_a_writer_committing_while_the_commit_answer_is_lost_keeps_every_row_and_file(  # type: ignore[no-untyped-def]
        spark, catalogs, pg_proxy: PgFaultProxy, mode: str) -> None:
    """Our commit lands, and before its lost answer reaches Spark another writer appends rows. Iceberg's JDBC pool
    re-runs the UPDATE (0 rows: CommitFailedException) and the producer retries on top of the writer's snapshot,
    which fails its validation ("Missing required files to delete"): Iceberg then cleans up the commit it believes
    failed. Nothing the table's snapshots reference may be deleted, the writer's rows stay, the run ends in a
    terminal state and the next run finishes. (MINOR's merge of fragment files is off: its commit is the RowDelta.)"""
    from compaction.core.plan import CompactionMode
    from compaction.core.posthoc import PLAN_PROPERTY
    from compaction.core.results import COMMITTED, FAILED, NEEDS_ATTENTION, NO_OP, ROLLED_BACK, SKIPPED
    from compaction.demo.workload import WorkloadSpec, generate
    from compaction.spark.validation import ValidationLevel
    from icecompact_testing.inprocess import compact_in_process
    from icecompact_testing.oracle import read_table

    through, direct = catalogs
    name = f"lostw_{uuid.uuid4().hex[:8]}.t"
    # Unpartitioned: the other writer is pyiceberg, whose partitioned appends need pyiceberg-core.
    workload = generate(spark, through, name, WorkloadSpec(seed=23, partitioning="unpartitioned", commits=2,
                                                           rows_per_commit=20, days_span=2))
    before = read_table(direct.load().load_table(workload.identifier))
    assert before.applicable_deletes, "the scenario must start with deletes"
    pg_proxy.lose_answer_of_next(1, before_drop=lambda: _append_rows(direct, workload.identifier, 10_000, 3))
    overrides = {"fragment_ratio": 1 << 40} if mode == "minor" else None
    first = compact_in_process(spark, through, name, CompactionMode(mode), level=ValidationLevel.COUNT,
                               overrides=overrides)
    assert pg_proxy.faults_served == 1 and not pg_proxy.hook_errors, pg_proxy.hook_errors
    print(f"first {mode}: {_describe(first)}")
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED, FAILED, ROLLED_BACK, NEEDS_ATTENTION)
               for p in first.partitions), _describe(first)
    for p in first.partitions:
        if p.status not in (COMMITTED, NO_OP, SKIPPED):
            assert p.error and "Traceback" not in p.error and p.error_class, _describe(first)
            # The reason says what happened: the commit landed, whatever the Java exception says.
            assert "landed although the commit failed" in p.reason, _describe(first)
    table = direct.load().load_table(workload.identifier)
    assert _missing_files(table) == [], _describe(first)
    appended = read_table(table).rows - before.rows
    assert sum(appended.values()) == 3 and not before.rows - read_table(table).rows, _describe(first)
    lost = _lost_commit(table, pg_proxy)
    assert lost is not None and lost.summary is not None and lost.summary.get(PLAN_PROPERTY) == first.plan.plan_id
    ours = _our_snapshots(table, first.plan.plan_id)
    assert len(ours) == len(set(ours)), ours

    second = compact_in_process(spark, through, name, CompactionMode(mode), level=ValidationLevel.COUNT,
                                overrides=overrides)
    print(f"second {mode}: {_describe(second)}")
    second.assert_finished()
    table = direct.load().load_table(workload.identifier)
    assert _missing_files(table) == []
    assert read_table(table).rows == before.rows + appended
