"""Health over time: samples in the ledger on SQLite and PostgreSQL (dedupe, retention, per-table
queries), the pure sample/attention logic, and the overview over real pyiceberg tables (no Spark)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any, Iterator

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.health import (
    HealthSample,
    PartitionHealth,
    attention,
    fragment_threshold_bytes,
    sample_from_state,
)
from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionState,
    TableIdentity,
    TableState,
)
from compaction.core.policy import CompactionPolicy
from compaction.ops.fleet import build_overview, metadata_locations, needs_sample, sort_rows
from compaction.ledger import HealthRetention, Ledger, LedgerError, RunStatus

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
MIB = 1024 * 1024


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        cluster: Any = request.getfixturevalue("postgres_cluster")
        url = str(cluster.sqlalchemy_uri(cluster.create_database()))
    with Ledger.open(url) as opened:
        yield opened


def sample(table: str = "db.a", snapshot: int = 1, deletes: int = 0, decision: str = "none",
           location: str | None = None, catalog: str = "cat") -> HealthSample:
    detail = (PartitionHealth("spec=0/region=EU", 4, 4000, 100, deletes, 0, 0, deletes * 10, 3, decision),)
    return HealthSample(catalog=catalog, table_ref=table, snapshot_id=snapshot,
                        metadata_location=location or f"file:///m/{table}/{snapshot}.json", partitions=1,
                        data_files=4, data_bytes=4000, data_records=100, position_delete_files=deletes,
                        equality_delete_files=0, deletion_vectors=0, delete_records=deletes * 10,
                        delete_bytes=deletes * 50, fragment_files=3, decision=decision,
                        decision_reason=f"spec=0/region=EU: {decision}", partitions_detail=detail)


# ------------------------------------------------------------------------------------------------ ledger
def test_record_round_trip_dedupe_and_queries(ledger: Ledger) -> None:
    keep = HealthRetention(days=30, max_samples=100, min_interval_s=300)
    first = ledger.record_health_sample(sample(deletes=2, decision="minor"), source="cli", now=at(0), retention=keep)
    assert first.delete_files == 2 and first.delete_ratio == 0.2 and first.source == "cli"
    assert first.partitions_detail[0].label == "spec=0/region=EU" and first.recorded_at == at(0)
    # Same snapshot, metadata and decision within the interval: not stored again.
    again = ledger.record_health_sample(sample(deletes=2, decision="minor"), source="ui", now=at(60), retention=keep)
    assert again.id == first.id and again.source == "cli"
    # A new snapshot is always stored; so is the same snapshot after the interval.
    ledger.record_health_sample(sample(snapshot=2, deletes=5, decision="major"), source="airflow", now=at(120),
                                retention=keep)
    ledger.record_health_sample(sample(snapshot=2, deletes=5, decision="major"), source="ui", now=at(1000),
                                retention=keep)
    ledger.record_health_sample(sample(table="db.b", deletes=1), now=at(10), retention=keep)
    ledger.record_health_sample(sample(table="db.a", catalog="other", deletes=9), now=at(2000), retention=keep)

    got = ledger.health_samples("db.a", catalog="cat")
    assert [(s.snapshot_id, s.delete_files, s.source) for s in got] == [(1, 2, "cli"), (2, 5, "airflow"), (2, 5, "ui")]
    assert got[0].partitions_detail == ()  # detail only on request
    detailed = ledger.health_samples("db.a", catalog="cat", with_partitions=True, limit=1)
    assert len(detailed) == 1 and detailed[0].recorded_at == at(1000)
    assert detailed[0].partitions_detail[0].position_delete_files == 5
    assert [s.recorded_at for s in ledger.health_samples("db.a", catalog="cat", since=at(100))] == [at(120), at(1000)]

    latest = ledger.latest_health_samples("cat")
    assert set(latest) == {"db.a", "db.b"}
    assert latest["db.a"].recorded_at == at(1000) and latest["db.a"].decision == "major"
    assert latest["db.b"].delete_files == 1
    assert ledger.latest_health_samples("other")["db.a"].delete_files == 9

    series = ledger.health_series("cat", points=2)
    assert series["db.a"] == [(at(120), 5), (at(1000), 5)] and series["db.b"] == [(at(10), 1)]
    assert ledger.health_series("cat", since=at(500))["db.a"] == [(at(1000), 5)]
    assert first.to_dict()["recorded_at"] == at(0).isoformat()


def test_retention_prunes_by_age_and_count(ledger: Ledger) -> None:
    keep = HealthRetention(days=1, max_samples=3, min_interval_s=0)
    for i in range(6):  # one sample a day with a new snapshot each
        ledger.record_health_sample(sample(snapshot=i, deletes=i), now=at(i * 86_400 * 0.4), retention=keep)
    got = ledger.health_samples("db.a", catalog="cat")
    assert [s.snapshot_id for s in got] == [3, 4, 5]  # the 3 newest (all within one day of the last)
    ledger.record_health_sample(sample(snapshot=9), now=at(10 * 86_400), retention=keep)
    assert [s.snapshot_id for s in ledger.health_samples("db.a", catalog="cat")] == [9]  # the others > 1 day old
    ledger.record_health_sample(sample(table="db.other"), now=at(10 * 86_400), retention=keep)
    assert len(ledger.health_samples("db.a", catalog="cat")) == 1  # pruning is per table


def test_retention_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert HealthRetention.from_env({}) == HealthRetention()
    assert HealthRetention.from_env({"ICECOMPACT_HEALTH_RETENTION_DAYS": "7",
                                     "ICECOMPACT_HEALTH_MAX_SAMPLES": "50"}) == HealthRetention(7, 50)
    with pytest.raises(LedgerError, match="ICECOMPACT_HEALTH_MAX_SAMPLES"):
        HealthRetention.from_env({"ICECOMPACT_HEALTH_MAX_SAMPLES": "0"})
    with pytest.raises(LedgerError, match="expected numbers"):
        HealthRetention.from_env({"ICECOMPACT_HEALTH_RETENTION_DAYS": "a month"})


def test_latest_runs_per_table(ledger: Ledger) -> None:
    old = ledger.start_run("db.a", "cat", now=at(0))
    ledger.finish_run(old, RunStatus.SUCCEEDED, 0, now=at(5))
    new = ledger.start_run("db.a", "cat", now=at(100), dry_run=True)
    ledger.finish_run(new, RunStatus.FAILED, 1, now=at(130))
    other = ledger.start_run("db.b", "cat", now=at(50))
    ledger.start_run("db.a", "elsewhere", now=at(500))
    runs = ledger.latest_runs("cat")
    assert {t: r.run_id for t, r in runs.items()} == {"db.a": new, "db.b": other}
    assert runs["db.a"].status is RunStatus.FAILED and runs["db.a"].duration_ms == 30_000


# ------------------------------------------------------------------------------------------------ pure logic
def key(day: int) -> PartitionKey:
    return PartitionKey(0, (PartitionFieldValue("ts_day", "day", "ts", day),))


def test_sample_from_state_counts_kinds_fragments_and_truncates() -> None:
    policy = CompactionPolicy.resolve({"write.target-file-size-bytes": str(128 * MIB)})
    limit = fragment_threshold_bytes(policy)
    assert limit == 16 * MIB
    parts = []
    for day in range(5):
        data = (DataFileInfo(f"d{day}a", limit - 1, 100, 1), DataFileInfo(f"d{day}b", limit, 100, 1))
        deletes = tuple(DeleteFileInfo(f"x{day}{i}", kind, 10, 5, 2)
                        for i, kind in enumerate([DeleteContent.POSITION, DeleteContent.EQUALITY,
                                                  DeleteContent.DELETION_VECTOR][: day % 4]))
        parts.append(PartitionState(key(day), data, deletes))
    state = TableState(TableIdentity("cat", ("db",), "t"), 3, 42, 3, {}, tuple(parts))
    s = sample_from_state(state, policy, None, metadata_location="file:///m.json", max_partitions=2)
    assert (s.partitions, s.data_files, s.fragment_files) == (5, 10, 5)
    assert (s.position_delete_files, s.equality_delete_files, s.deletion_vectors) == (3, 2, 1)
    assert s.delete_files == 6 and s.delete_records == 30 and s.delete_ratio == round(30 / 1000, 4)
    assert s.partitions_truncated and [p.label for p in s.partitions_detail] == [key(2).label(), key(3).label()]
    assert s.decision is None and s.snapshot_id == 42 and s.table_ref == "db.t"


def test_attention_levels() -> None:
    order = [attention("none", "failed"), attention("major", None), attention("minor", "succeeded"),
             attention(None, None, inspected=False), attention("none", "succeeded")]
    assert [a.level for a in order] == sorted((a.level for a in order), reverse=True)
    assert order[0].label == "last run failed" and order[1].label == "major compaction due"
    assert attention("major", "needs_attention").label == "last run needs_attention; major compaction due"


def test_needs_sample() -> None:
    rec: Any = dataclasses.make_dataclass("R", ["metadata_location", "recorded_at"])("m1", T0)
    assert needs_sample("m1", None, T0)
    assert needs_sample("m2", rec, T0)
    assert not needs_sample("m1", rec, at(60), max_age_s=120)
    assert needs_sample("m1", rec, at(600), max_age_s=120)


# ------------------------------------------------------------------------------------------------ overview
def _pyiceberg_tables(catalog: CatalogConfig, appends: dict[str, int]) -> None:
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    loaded = catalog.load()
    loaded.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "region", StringType(), required=False))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    for name, n in appends.items():
        table = loaded.create_table(f"db.{name}", schema, partition_spec=spec, properties={"format-version": "2"})
        for _ in range(n):
            table.append(pa.table({"id": pa.array(range(4), pa.int64()), "region": ["EU", "EU", "US", "US"]}))


def test_overview_samples_changed_tables_only_and_orders_by_attention(tmp_path: Path) -> None:
    catalog = CatalogConfig.sqlite("ov", tmp_path / "catalog.db", tmp_path / "wh")
    _pyiceberg_tables(catalog, {"t_one": 1, "t_many": 4, "t_failed": 1})  # every append: 2 fragment files
    loaded = catalog.load()
    assert set(metadata_locations(catalog)) == {"db.t_one", "db.t_many", "db.t_failed"}
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        failed = ledger.start_run("db.t_failed", "ov")
        ledger.finish_run(failed, RunStatus.FAILED, 1)
        cold = build_overview(catalog, ledger, budget_s=None)
        assert set(cold.refreshed) == {"db.t_one", "db.t_many", "db.t_failed"} and cold.stale == ()
        names = [t.table_ref for t in cold.tables]
        assert names[0] == "db.t_failed", [t.attention_label for t in cold.tables]
        by_name = {t.table_ref: t for t in cold.tables}
        assert by_name["db.t_many"].sample is not None and by_name["db.t_many"].sample.data_files == 8
        assert by_name["db.t_many"].sample.fragment_files == 8
        assert by_name["db.t_failed"].last_run is not None and by_name["db.t_failed"].last_run.run_id == failed

        warm = build_overview(catalog, ledger)
        assert warm.refreshed == () and all(t.current for t in warm.tables)
        assert [t.table_ref for t in warm.tables] == names

        # A new snapshot makes exactly that table stale; a zero budget shows it from its old sample.
        import pyarrow as pa

        loaded.load_table("db.t_one").append(pa.table({"id": pa.array([9], pa.int64()), "region": ["EU"]}))
        lazy = build_overview(catalog, ledger, budget_s=0)
        assert lazy.stale == ("db.t_one",) and lazy.refreshed == ()
        assert {t.table_ref: t.sample.data_files for t in lazy.tables if t.sample}["db.t_one"] == 2
        fresh = build_overview(catalog, ledger)
        assert fresh.refreshed == ("db.t_one",)
        assert {t.table_ref: t.sample.data_files for t in fresh.tables if t.sample}["db.t_one"] == 3
        assert len(ledger.health_samples("db.t_one", catalog="ov")) == 2
        assert [r.table_ref for r in sort_rows(fresh.tables, "data_files")][0] == "db.t_many"
        assert [r.table_ref for r in sort_rows(fresh.tables, "table")] == sorted(names)


def test_sample_decision_honours_minor_interval_from_the_ledger(tmp_path: Path) -> None:
    from compaction.core.plan import CompactionKind
    from compaction.ops.fleet import sample_table
    from compaction.ledger import OutcomeStatus, PartitionOutcome

    catalog = CatalogConfig.sqlite("iv", tmp_path / "catalog.db", tmp_path / "wh")
    _pyiceberg_tables(catalog, {"t": 3})  # 3 fragment files per partition
    catalog.load().load_table("db.t").transaction().set_properties(
        {"compaction.minor.interval": "1h"}).commit_transaction()
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        never, state = sample_table(catalog, "db.t", ledger=ledger)
        assert never.decision == "minor" and "interval" in (never.decision_reason or "")
        run = ledger.start_run("db.t", "iv")
        for p in state.partitions:
            ledger.record_partition_outcome(run, PartitionOutcome.for_partition(p.key, CompactionKind.MINOR,
                                                                               OutcomeStatus.COMMITTED))
        ledger.finish_run(run, RunStatus.SUCCEEDED, 0)
        recent, _ = sample_table(catalog, "db.t", ledger=ledger)
        assert recent.decision == "none", recent.decision_reason
        assert sample_table(catalog, "db.t")[0].decision == "minor"  # without the ledger: no MINOR history
