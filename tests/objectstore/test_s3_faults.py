"""The object store and the REST catalog failing as they do in production (500 InternalError, 503 SlowDown with or
without Retry-After, connection resets, latency spikes, commit answers lost) while a table's metadata is read or a
compaction commits: the inspection retries and succeeds, or ends in a clear, retryable error with nothing changed; a
commit whose answer is lost keeps every row and file and the next run finishes the work."""

from __future__ import annotations

import uuid
from typing import Iterator

import pyarrow as pa
import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import StorageUnavailableError
from compaction.metadata.inspect import inspect_table, load_table, table_state
from icecompact_testing.faults import FaultSchedule, S3FaultProxy

MANIFEST_LIST = r"/snap-[^/]*\.avro$"


@pytest.fixture()
def proxy(object_store) -> Iterator[S3FaultProxy]:  # type: ignore[no-untyped-def]
    with S3FaultProxy(object_store.s3_endpoint) as running:
        yield running


@pytest.fixture()
def table_name(object_store) -> str:  # type: ignore[no-untyped-def]
    """A partitioned table with two commits, written straight to the store (not through the proxy)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = object_store.catalog().load()
    namespace = f"faults_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False))
    table = catalog.create_table(f"{namespace}.t", schema, partition_spec=PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")),
        properties={"format-version": "2"})
    for region in ("EU", "US"):
        table.append(pa.table({"id": pa.array(range(10), pa.int64()), "region": pa.array([region] * 10)}))
    return f"{namespace}.t"


def _through(proxy: S3FaultProxy, object_store) -> CatalogConfig:  # type: ignore[no-untyped-def]
    catalog = object_store.catalog()
    return CatalogConfig(catalog.name, {**catalog.properties, "s3.endpoint": proxy.endpoint})


def test_inspection_retries_s3_internal_errors_on_the_manifest_list(proxy, object_store, table_name: str) -> None:  # type: ignore[no-untyped-def]
    catalog = _through(proxy, object_store)
    identity, table = load_table(catalog, table_name)
    baseline = table_state(table, identity)
    assert proxy.forwarded > 0, "the reads did not go through the proxy"
    assert len(baseline.partitions) == 2

    # More failures in a row than the S3 client's own quick retries absorb: what an endpoint restart looks like.
    proxy.fail_next(8, path=MANIFEST_LIST, status=500)
    proxy.fail_next(2, path=MANIFEST_LIST, status=503)
    lines: list[str] = []
    state = table_state(table, identity, progress=lines.append)
    assert proxy.faults_served == 10
    assert lines and all("transient storage error" in line for line in lines), lines
    assert state == baseline


def test_inspection_survives_connection_resets_of_a_seeded_schedule(proxy, object_store, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Connection resets (TCP RST, no answer) on the manifest lists and the REST catalog's loadTable, drawn from a
    seeded schedule: every reset is served, the reads are retried, and the state is the baseline."""
    catalog_proxy = S3FaultProxy(object_store.catalog_uri)
    with catalog_proxy:
        catalog = _through(proxy, object_store)
        catalog = CatalogConfig(catalog.name, {**catalog.properties, "uri": catalog_proxy.endpoint})
        identity, table = load_table(catalog, table_name)
        baseline = table_state(table, identity)
        schedule = FaultSchedule.draw(7, ["reset"], faults=3, targets=[("GET", MANIFEST_LIST)], max_count=3)
        assert schedule == FaultSchedule.draw(7, ["reset"], faults=3, targets=[("GET", MANIFEST_LIST)], max_count=3)
        resets = sum(f.count for f in schedule.faults)
        proxy.install(schedule)
        catalog_proxy.reset_next(1, path=rf"/tables/{table_name.split('.')[1]}$")
        catalog_proxy.reset_next(1, method="POST", path=r"/oauth/tokens$")  # opening the catalog
        lines: list[str] = []
        identity, table = load_table(catalog, table_name)
        state = table_state(table, identity, progress=lines.append)
        assert catalog_proxy.by_kind["reset"] == 2
        assert proxy.by_kind["reset"] == resets and proxy.pending() == 0, (proxy.log, lines)
        assert all("transient storage error" in line for line in lines), lines
        assert state == baseline


def test_inspection_waits_out_slow_down_with_retry_after(proxy, object_store, table_name: str) -> None:  # type: ignore[no-untyped-def]
    catalog = _through(proxy, object_store)
    identity, table = load_table(catalog, table_name)
    baseline = table_state(table, identity)
    proxy.slow_down_next(6, path=MANIFEST_LIST, retry_after_s=1)
    lines: list[str] = []
    state = table_state(table, identity, progress=lines.append)
    assert proxy.by_kind["status:503"] == 6 and proxy.pending() == 0
    assert all("transient storage error" in line for line in lines), lines
    assert state == baseline


def test_a_latency_spike_below_the_client_timeout_is_not_an_error(proxy, object_store, table_name: str) -> None:  # type: ignore[no-untyped-def]
    import time

    catalog = _through(proxy, object_store)
    identity, table = load_table(catalog, table_name)
    baseline = table_state(table, identity)
    proxy.delay_next(1, path=MANIFEST_LIST, seconds=2.0)  # the state reads one manifest list: the current one
    lines: list[str] = []
    started = time.monotonic()
    state = table_state(table, identity, progress=lines.append)
    assert time.monotonic() - started >= 2.0  # the read waited for the delayed answer
    assert proxy.by_kind["latency"] == 1 and proxy.pending() == 0
    assert lines == []  # a slow answer is an answer: nothing retried
    assert state == baseline


def test_a_store_that_stays_down_fails_with_a_clear_retryable_error(proxy, object_store, table_name: str) -> None:  # type: ignore[no-untyped-def]
    catalog = _through(proxy, object_store)
    proxy.fail_next(10_000, path=MANIFEST_LIST, status=500)
    with pytest.raises(StorageUnavailableError) as info:
        inspect_table(catalog, table_name)
    assert info.value.retryable and info.value.exit_code == 12
    assert f"inspect {table_name}" in str(info.value) and "run again" in str(info.value)
    assert object_store.secret_key not in str(info.value)
    proxy.clear()
    assert len(inspect_table(catalog, table_name).partitions) == 2  # the table is as it was


def test_a_rewrite_commit_whose_answer_is_lost_keeps_every_row_and_file(spark, rest_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                        object_store, tmp_path) -> None:
    """The catalog takes the rewrite's commit but its answer is lost (a gateway's 503): Iceberg raises
    CommitStateUnknownException. Nothing the committed snapshot references may be deleted, no row may change, and the
    next run finishes the work."""
    from compaction.core.plan import CompactionMode
    from compaction.ledger import Ledger, RunStatus
    from compaction.ops.runner import run_table
    from icecompact_testing.oracle import read_table
    from compaction.demo.workload import WorkloadSpec, generate

    name = f"lost_{uuid.uuid4().hex[:8]}.t"
    workload = generate(spark, rest_catalog, name, WorkloadSpec(seed=11, partitioning="days_ts", commits=3))
    before = read_table(rest_catalog.load().load_table(workload.identifier))
    assert before.applicable_deletes, "the scenario must start with deletes"
    with S3FaultProxy(object_store.catalog_uri) as catalog_proxy, \
            Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        through = CatalogConfig(rest_catalog.name, {**rest_catalog.properties, "uri": catalog_proxy.endpoint})
        namespace, table = name.split(".")
        catalog_proxy.lose_answer_of_next(1, method="POST", path=rf"/namespaces/{namespace}/tables/{table}$")
        lines: list[str] = []
        first = run_table(through, name, mode=CompactionMode.MAJOR, ledger=ledger, progress=lines.append)
        assert catalog_proxy.faults_served == 1, lines
        assert first.status is not RunStatus.RUNNING
        # Every file of every snapshot the catalog holds is still readable, and the rows are the writer's.
        after_first = read_table(rest_catalog.load().load_table(workload.identifier))
        assert after_first.rows == before.rows, lines
        second = run_table(through, name, mode=CompactionMode.MAJOR, ledger=ledger)
        assert second.status is RunStatus.SUCCEEDED, second.errors
    final = read_table(rest_catalog.load().load_table(workload.identifier))
    assert final.rows == before.rows
    assert not final.applicable_deletes
    print(f"first run {first.status.value}: {first.errors}")


def test_a_minor_commit_whose_answer_is_lost_keeps_every_row_and_commits_once(spark, rest_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                            object_store) -> None:
    """MINOR's row-delta commit reaches the catalog and takes effect, but its answer is lost (a gateway's 503, which
    Iceberg's REST client retries: the repeated commit then fails its requirements). No row may change, nothing the
    current snapshot references may be missing, the commit must be on the table once and every partition must end
    in a terminal state; a second MINOR then has nothing left to do. MINOR runs in this process (``run_group``) on a
    Spark catalog whose REST calls go through the proxy."""
    import datetime as dt

    from compaction.core.plan import CompactionMode
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.core.posthoc import PLAN_PROPERTY
    from compaction.demo.workload import WorkloadSpec, generate
    from compaction.spark.job import COMMITTED, NO_OP, SKIPPED, run_group
    from compaction.spark.major import TASK_PROPERTY
    from compaction.spark.session import register_catalog
    from compaction.spark.validation import ValidationLevel
    from icecompact_testing.oracle import read_table

    name = f"lostminor_{uuid.uuid4().hex[:8]}.t"
    workload = generate(spark, rest_catalog, name, WorkloadSpec(seed=12, partitioning="days_ts", commits=2))
    before = read_table(rest_catalog.load().load_table(workload.identifier))
    assert before.applicable_deletes, "the scenario must start with deletes"
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with S3FaultProxy(object_store.catalog_uri) as catalog_proxy:
        through = CatalogConfig(f"{rest_catalog.name}_lost", {**rest_catalog.properties, "uri": catalog_proxy.endpoint})
        register_catalog(spark, through)
        state = inspect_table(through, name)
        the_plan = plan(state, CompactionPolicy.resolve(state.properties, None), CompactionMode.MINOR, now)
        assert the_plan.groups, "nothing planned"
        namespace, table = name.split(".")
        catalog_proxy.lose_answer_of_next(1, method="POST", path=rf"/namespaces/{namespace}/tables/{table}$")
        outcomes = [p for g in the_plan.groups
                    for p in run_group(spark, the_plan, g.group_id, level=ValidationLevel.COUNT, max_retries=3).partitions]
        assert catalog_proxy.faults_served == 1
        # The commit took effect: the job finds its tagged snapshot and reports it committed, not failed.
        assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in outcomes), \
            [(p.label, p.status, p.error) for p in outcomes]
        assert any(p.status == COMMITTED for p in outcomes)
        loaded = rest_catalog.load().load_table(workload.identifier)
        assert read_table(loaded).rows == before.rows  # reads every file the current snapshot references
        ours = [s.summary.get(TASK_PROPERTY) for s in loaded.snapshots()
                if s.summary is not None and s.summary.get(PLAN_PROPERTY) == the_plan.plan_id]
        assert len(ours) == len(set(ours)) >= 1, ours  # committed, and no task attempt committed twice
        again = plan(inspect_table(through, name), CompactionPolicy.resolve(state.properties, None),
                     CompactionMode.MINOR, now)
        assert not again.groups, [(p.label, p.status, p.error) for p in outcomes]
    print(f"first MINOR: {[(p.label, p.status, p.error) for p in outcomes]}")


def test_spark_rewrite_reads_and_writes_through_s3_faults(spark, rest_catalog: CatalogConfig, object_store) -> None:  # type: ignore[no-untyped-def]
    """Spark's own S3 traffic (S3FileIO: the rewrite's reads of data and delete files, its writes of new files and
    metadata) meets 503 SlowDown and connection resets: its S3 client retries them, the MAJOR commits once and every
    row is the writer's. The catalog vends its store's endpoint in each table's config, which Iceberg's Java client
    puts over ours, so the REST proxy re-vends the S3 proxy's address: the PUTs seen there are Spark's (our own side
    only reads)."""
    from compaction.core.plan import CompactionMode
    from compaction.demo.workload import WorkloadSpec, generate
    from compaction.spark.session import register_catalog
    from compaction.spark.validation import ValidationLevel
    from icecompact_testing.inprocess import compact_in_process
    from icecompact_testing.oracle import read_table

    name = f"sparks3_{uuid.uuid4().hex[:8]}.t"
    workload = generate(spark, rest_catalog, name, WorkloadSpec(seed=13, partitioning="days_ts", commits=2))
    before = read_table(rest_catalog.load().load_table(workload.identifier))
    with S3FaultProxy(object_store.s3_endpoint) as s3, \
            S3FaultProxy(object_store.catalog_uri, vend_s3_endpoint=s3.endpoint) as rest:
        through = CatalogConfig(f"{rest_catalog.name}_s3faults", {**rest_catalog.properties, "uri": rest.endpoint,
                                                                  "s3.endpoint": s3.endpoint})
        register_catalog(spark, through)
        s3.slow_down_next(2, method="GET", path=r"\.parquet$", retry_after_s=1)
        s3.reset_next(2, method="GET", path=r"\.parquet$")
        s3.slow_down_next(1, method="PUT", path=r"\.parquet$", retry_after_s=1)
        run = compact_in_process(spark, through, name, CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                                 overrides={"major_full_rewrite": True}, clean=True)
        assert rest.vended > 0, "the catalog vended no s3.endpoint: Spark's traffic did not go through the S3 proxy"
        assert s3.pending() == 0, f"faults not served: {s3.log}"
        puts = [f for f in s3.log if f.method == "PUT"]
        assert puts, "no PUT met a fault: Spark's writes did not go through the proxy"
    loaded = rest_catalog.load().load_table(workload.identifier)
    after = read_table(loaded)
    assert after.rows == before.rows
    assert not after.applicable_deletes
    assert run.plan.groups
