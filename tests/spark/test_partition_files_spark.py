"""The fast metadata helpers of the MAJOR path agree with the slow, direct answers they replace.

* targets of position delete files from metadata (``ContentFileUtil.referencedDataFileLocation``) == the distinct
  ``file_path`` values read from the files with Spark;
* dangling deletes judged over partition-filtered manifests (with manifest pruning) == the independent oracle's
  "applies to no live data file";
* ``touched_partitions``' summary fast path == the walk over every added/removed file;
* ``PartitionDecoder`` == ``partition_values``; ``scan_partition(with_applied=False)`` == the full scan minus
  ``applied``.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.metadata.inspect import inspect_table
from compaction.spark import jvm as J
from compaction.spark import partition_files as PF
from compaction.spark.expressions import java_partition_expression
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate


def _catalog(spark: Any, folder: Path) -> CatalogConfig:
    from compaction.spark.session import register_catalog

    catalog = CatalogConfig.sqlite(f"pf_{uuid.uuid4().hex[:8]}", folder / "catalog.db", folder / "warehouse")
    register_catalog(spark, catalog)
    return catalog


def _live_delete_files(spark: Any, table: Any) -> list[Any]:
    io, specs = table.io(), table.specs()
    out = []
    for manifest in table.currentSnapshot().deleteManifests(io):
        for d in PF._iterate(J.jvm(spark).org.apache.iceberg.ManifestFiles.readDeleteManifest(manifest, io, specs)):
            out.append(d.copy())
    return out


def _rewrite(spark: Any, table: Any, expression: Any) -> None:
    """Iceberg's rewrite action, leaving every dangling delete in place (as our MAJOR's first commit does)."""
    actions = J.jvm(spark).org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    (actions.rewriteDataFiles(table).filter(expression)
     .option("delete-file-threshold", "1").option("min-input-files", "1")
     .option("use-starting-sequence-number", "true").option("remove-dangling-deletes", "false")
     .execute())
    table.refresh()


@pytest.fixture(scope="module")
def cdc(spark, tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Single-spec v2 table with file-scoped position deletes and equality deletes; one partition rewritten."""
    catalog = _catalog(spark, tmp_path_factory.mktemp("pf_file"))
    spec = WorkloadSpec(seed=11, partitioning="days_ts", commits=4, rows_per_commit=60, days_span=3,
                        delete_granularity="file", evolve_spec=False)
    workload = generate(spark, catalog, "cdc.t", spec)
    table = J.load_table(spark, workload.table)
    state = inspect_table(catalog, "cdc.t")
    keys = sorted((p.key for p in state.partitions), key=lambda k: k.sort_key())
    return {"catalog": catalog, "workload": workload, "table": table, "keys": keys,
            "base_snapshot": int(table.currentSnapshot().snapshotId())}


@pytest.mark.parametrize("granularity", ["file", "partition"])
def test_position_delete_targets_from_metadata_equal_spark_read(spark, tmp_path, granularity: str) -> None:  # type: ignore[no-untyped-def]
    catalog = _catalog(spark, tmp_path)
    spec = WorkloadSpec(seed=3, partitioning="days_ts", commits=4, rows_per_commit=60, days_span=2,
                        delete_granularity=granularity, use_equality_deletes=False)
    workload = generate(spark, catalog, "cdc.p", spec)
    table = J.load_table(spark, workload.table)
    positions = [d for d in _live_delete_files(spark, table) if PF.delete_kind(d).value == "position"]
    assert positions
    fast = PF._position_delete_targets(spark, positions)
    read = PF._read_position_delete_targets(spark, positions)
    assert fast == read
    from_metadata = [d for d in positions if PF.position_delete_target(spark, d) is not None]
    if granularity == "file":
        # Spark's file-scoped v2 deletes carry no referenced_data_file, only equal file_path bounds.
        assert all(d.referencedDataFile() is None for d in positions)
        assert len(from_metadata) == len(positions)
    else:
        # Partition-scoped files that name several data files cannot be answered from metadata: read instead.
        multi = [d for d in positions if len(read[PF.delete_ref(d)]) > 1]
        assert multi
        assert all(PF.position_delete_target(spark, d) is None for d in multi)


def test_find_dangling_deletes_equals_oracle(spark, cdc) -> None:  # type: ignore[no-untyped-def]
    table, keys = cdc["table"], cdc["keys"]
    rewritten = keys[0]
    _rewrite(spark, table, java_partition_expression(spark, table, rewritten))
    oracle = read_table(cdc["catalog"].load().load_table(cdc["workload"].identifier))
    expected = {(d.path, d.content_offset if d.content_offset is not None else -1) for d in oracle.dangling_delete_files}
    sid = int(table.currentSnapshot().snapshotId())

    whole = {PF.delete_ref(d) for d in PF.find_dangling_deletes(
        spark, table, sid, J.jvm(spark).org.apache.iceberg.expressions.Expressions.alwaysTrue(),
        covers_whole_table=True)}
    assert whole == expected
    assert whole, "the rewrite of one partition must leave dangling deletes"
    live = {PF.delete_ref(d) for d in _live_delete_files(spark, table)}
    assert live - whole, "deletes of the partitions not rewritten still apply"

    by_partition: set[tuple[str, int]] = set()
    for key in keys:
        found = {PF.delete_ref(d) for d in PF.find_dangling_deletes(
            spark, table, sid, java_partition_expression(spark, table, key), covers_whole_table=False)}
        in_key = {(d.path, d.content_offset if d.content_offset is not None else -1)
                  for d in oracle.dangling_delete_files
                  if d.spec_id == key.spec_id and d.partition == tuple(f.value for f in key.fields)}
        assert found == in_key, key.label()
        by_partition |= found
    assert by_partition == expected


def test_touched_partitions_fast_path_equals_walk(spark, cdc, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table = cdc["table"]
    table.refresh()
    sids = PF.snapshots_between(table, cdc["base_snapshot"], int(table.currentSnapshot().snapshotId()))
    # The workload's own commits (appends and DML over several partitions) plus the rewrite of one partition.
    history = [int(s.snapshotId()) for s in table.snapshots()]
    candidates = history[-6:] + sids
    fast = {sid: PF.touched_partitions(spark, table, sid) for sid in candidates}
    monkeypatch.setattr(PF, "_changed_partition_count", lambda snapshot: None)  # force the walk
    walk = {sid: PF.touched_partitions(spark, table, sid) for sid in candidates}
    assert fast == walk
    assert any(len(keys) == 1 for keys in walk.values())
    assert any(len(keys) > 1 for keys in walk.values())
    # The rewrite of one partition touched exactly the planner's key for it (same representation, so the
    # validation's fingerprint cache can be keyed by the plan's partition keys).
    assert walk[sids[-1]] == {cdc["keys"][0]}


def test_partition_decoder_equals_partition_values(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    catalog = _catalog(spark, tmp_path)
    spec = WorkloadSpec(seed=8, partitioning="days_identity", commits=3, rows_per_commit=30, evolve_spec=True,
                        null_key_fraction=0.2)
    workload = generate(spark, catalog, "cdc.d", spec)
    table = J.load_table(spark, workload.table)
    specs = table.specs()
    decoder = J.PartitionDecoder(spark, specs)
    seen_specs = set()
    for f in J.data_files(table):
        spec_id = int(f.specId())
        seen_specs.add(spec_id)
        assert decoder.values(spec_id, f.partition()) == J.partition_values(spark, specs.get(spec_id), f.partition())
    assert len(seen_specs) == 2


def test_scan_without_applied_has_the_same_files(spark, cdc) -> None:  # type: ignore[no-untyped-def]
    table, key = cdc["table"], cdc["keys"][-1]
    expression = java_partition_expression(spark, table, key)
    sid = cdc["base_snapshot"]
    full = PF.scan_partition(spark, table, expression, sid)
    light = PF.scan_partition(spark, table, expression, sid, with_applied=False)
    assert set(light.data) == set(full.data) and set(light.deletes) == set(full.deletes)
    assert light.counts() == full.counts() and light.counts()["delete_files"] > 0
    assert any(full.applied.values()) and not light.applied
    with pytest.raises(ValueError):
        light.refine_position_deletes(spark)


def test_fingerprint_cache_reads_each_snapshot_once_and_recovers_from_a_failed_read_ahead() -> None:
    from compaction.spark.validation import Fingerprint, FingerprintCache

    calls: list[int] = []

    def compute(snapshot_id: int, predicate: Any) -> Fingerprint:
        calls.append(snapshot_id)
        if snapshot_id == 13 and calls.count(13) == 1:
            raise RuntimeError("read-ahead failed")
        return Fingerprint(snapshot_id * 10, None)

    cache = FingerprintCache(compute)
    keys = frozenset({"p"})
    cache.prefetch(1, keys, None)
    cache.prefetch(1, keys, None)  # already under way: not read twice
    cache.prefetch(13, keys, None)
    assert cache.get(1, keys, None) == Fingerprint(10, None)
    assert cache.get(1, keys, None) == Fingerprint(10, None)
    assert cache.get(13, keys, None) == Fingerprint(130, None)  # the failed read-ahead is read again
    assert cache.get(2, keys, None) == Fingerprint(20, None)
    assert cache.get(2, frozenset({"q"}), None) == Fingerprint(20, None)  # other partitions: another read
    cache.close()
    assert sorted(calls) == [1, 2, 2, 13, 13]


def test_group_and_batched_fingerprints_equal_one_read_per_partition(spark, cdc) -> None:  # type: ignore[no-untyped-def]
    """Validation's batched reads (all partitions of a group at one snapshot; several snapshots in one job) give
    exactly the fingerprints of one read per (snapshot, predicate), at both levels; disjoint partitions add up."""
    from compaction.spark.group_reads import rows_predicate
    from compaction.spark.validation import (
        ValidationLevel,
        combine_fingerprints,
        fingerprint,
        partition_fingerprints,
        snapshot_fingerprints,
    )

    catalog, table, keys = cdc["catalog"], cdc["table"], cdc["keys"]
    ref = cdc["workload"].table
    table.refresh()
    snapshots = [cdc["base_snapshot"], int(table.currentSnapshot().snapshotId())]
    first = int(table.snapshot(snapshots[0]).parentId())  # a snapshot with different rows
    predicates = [rows_predicate(spark, table, catalog.name, {k}) for k in keys]
    everything = rows_predicate(spark, table, catalog.name, set(keys))  # overlaps every other predicate
    for level in (ValidationLevel.COUNT, ValidationLevel.CHECKSUM):
        one_by_one = [fingerprint(spark, ref, snapshots[0], p, level) for p in predicates + [everything]]
        assert partition_fingerprints(spark, ref, snapshots[0], predicates + [everything], level) == one_by_one
        assert combine_fingerprints(one_by_one[:-1]) == one_by_one[-1]  # type: ignore[arg-type]
        requests = [(first, predicates[0]), (snapshots[1], predicates[0]), (first, everything)]
        assert snapshot_fingerprints(spark, ref, requests, level) == [
            fingerprint(spark, ref, s, p, level) for s, p in requests]
        assert len({f.rows for f in one_by_one if f is not None}) > 1
