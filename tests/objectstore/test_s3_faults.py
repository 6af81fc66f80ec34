"""The object store failing as S3 does in production (500 InternalError, 503 SlowDown) while a table's metadata is
read: the inspection retries and succeeds, or ends in a clear, retryable error with nothing changed."""

from __future__ import annotations

import uuid
from typing import Iterator

import pyarrow as pa
import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import StorageUnavailableError
from compaction.metadata.inspect import inspect_table, load_table, table_state
from icecompact_testing.faults import S3FaultProxy

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
