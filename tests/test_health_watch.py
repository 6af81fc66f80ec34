"""Health-triggered compaction's watcher (compaction/ops/watch.py) on a real table: it fires when a commit crosses a
partition's MINOR trigger (fragment files, as a streaming writer makes them) and not before, reads only the manifests a commit added, holds back while a run of the
table waits to start (not while it runs) but not past a catalog outage after its event, and rate-limits; plus the pure
rules (compaction/core/triggering.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from compaction.catalog import CatalogConfig
from compaction.core.triggering import WatchedTable, fire_decision, should_evaluate
from compaction.ledger import Ledger, RunStatus
from compaction.ops.watch import HealthWatcher

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def at(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


def test_rules() -> None:
    assert should_evaluate(None, "m1", T0)
    assert not should_evaluate(WatchedTable("m1"), "m1", T0)
    assert should_evaluate(WatchedTable("m1"), "m2", T0)
    busy = WatchedTable("m1", needs_work=True, last_fired_at=T0)
    assert not should_evaluate(busy, "m1", at(10), 15) and should_evaluate(busy, "m1", at(15), 15)
    assert fire_decision(0, run_waiting=False, last_fired_at=None, now=T0) == (
        False, "healthy: every partition's decision is NONE")
    assert not fire_decision(2, run_waiting=True, last_fired_at=None, now=T0)[0]
    fired, why = fire_decision(2, run_waiting=False, last_fired_at=at(0), now=at(5), min_interval_s=15)
    assert not fired and "rate limit" in why
    assert fire_decision(2, run_waiting=False, last_fired_at=at(0), now=at(15), min_interval_s=15) == (
        True, "2 partition(s) to compact")


def test_fires_on_the_commit_that_crosses_the_minor_trigger(spark, sqlite_catalog: CatalogConfig,
                                                            tmp_path: Path) -> None:
    ref = f"{sqlite_catalog.name}.hw.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.hw")
    spark.sql(f"CREATE TABLE {ref} (id bigint, p string) USING iceberg PARTITIONED BY (p) TBLPROPERTIES "
              "('format-version'='2', 'write.delete.mode'='merge-on-read', "
              "'compaction.minor.fragment-file-count'='4', 'compaction.major.delete-ratio'='0.99', "
              "'compaction.major.small-file-count'='1000')")
    spark.createDataFrame([(i, "a" if i % 2 else "b") for i in range(100)], "id bigint, p string") \
        .coalesce(1).writeTo(ref).append()
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        lines: list[str] = []
        watcher = HealthWatcher(sqlite_catalog, ["hw.*"], min_interval_s=15, ledger=ledger, progress=lines.append)
        assert watcher.poll(at(0)) == []
        misses = watcher.cache.misses
        for n in (1, 2):  # two more fragment files in partition a: three, below the trigger
            spark.sql(f"INSERT INTO {ref} VALUES ({1000 + n}, 'a')")
            assert watcher.poll(at(n)) == [], f"fired after {n} append(s)\n" + "\n".join(lines)
        # Only the manifests each commit wrote were decoded (the data manifest was read once, at the first poll;
        # the table's state cache keeps its rows by partition, so it is not even taken from the cache again).
        assert 1 <= watcher.cache.misses - misses <= 2 * 2
        spark.sql(f"INSERT INTO {ref} VALUES (1003, 'a')")
        events = watcher.poll(at(3))
        assert len(events) == 1, "\n".join(lines)
        (event,) = events
        assert event["table"] == "hw.t" and event["kinds"] == {"minor": 1} and event["catalog"] == sqlite_catalog.name
        assert event["partitions"] == ["spec=0/p=a"]
        assert watcher.poll(at(4)) == []  # nothing new, and rate-limited
        # A commit while the table still needs work, within the rate limit: not yet.
        spark.sql(f"INSERT INTO {ref} VALUES (1004, 'a')")
        assert watcher.poll(at(10)) == []
        # A run of the table waiting to start, being planned and then queued: nothing fires even after the rate
        # limit.
        name = sqlite_catalog.name
        run_id = ledger.start_run("hw.t", name, status=RunStatus.RUNNING, now=at(11))
        assert watcher.poll(at(20)) == []
        item = ledger.enqueue_work("{}", plan_id="p", table_ref="hw.t", catalog=name, group_ids=[0], run_id=run_id,
                                   now=at(20))
        assert watcher.poll(at(21)) == [], "\n".join(lines)
        # Its work item running: the next run is planned and queued behind it.
        assert ledger.claim_work("x1", catalogs=[name], now=at(22)) is not None
        (ahead,) = watcher.poll(at(23))
        assert ahead["partitions"] == ["spec=0/p=a"]
        ledger.complete_work(item.item_id, "x1", {0: {}}, now=at(24))
        ledger.finish_run(run_id, RunStatus.FAILED, exit_code=8, now=at(25))
        assert watcher.poll(at(40)) == []  # past the rate limit, but that event has not become a run yet
        picked = ledger.start_run("hw.t", name, status=RunStatus.RUNNING, now=at(41))
        ledger.finish_run(picked, RunStatus.FAILED, exit_code=8, now=at(42))
        (again,) = watcher.poll(at(43))  # no commit since, but still unhealthy: retried
        assert again["partitions"] == ["spec=0/p=a"]


def test_an_event_lost_to_a_catalog_outage_is_fired_again_once_the_catalog_answers(tmp_path: Path) -> None:
    """The run an event starts can fail before it records itself when the catalog's database goes down right after
    the event (it cannot load the table, nor reach its ledger there). The watcher that finds the catalog unreachable
    after its event does not wait the pickup timeout for that run: once the database answers, the table, still
    needing work, fires again."""
    import time

    import pyarrow as pa

    from compaction.core.errors import CompactionError
    from icecompact_testing.postgres import start_cluster

    cluster = start_cluster()
    try:
        catalog = cluster.sql_catalog("pgw", tmp_path / "warehouse")
        pyiceberg_catalog = catalog.load()
        pyiceberg_catalog.create_namespace("hw")
        table = pyiceberg_catalog.create_table("hw.t", pa.schema([pa.field("id", pa.int64())]), properties={
            "format-version": "2", "compaction.minor.fragment-file-count": "2"})
        for n in range(3):  # three fragment files: a MINOR's work
            table.append(pa.table({"id": [n]}))
        with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
            lines: list[str] = []
            watcher = HealthWatcher(catalog, ["hw.*"], min_interval_s=5, ledger=ledger, progress=lines.append)
            (event,) = watcher.poll(at(0))
            assert event["table"] == "hw.t" and event["kinds"], event
            assert watcher.poll(at(10)) == [], "\n".join(lines)  # its run has not started yet: no second event

            cluster.stop_server()
            try:
                watcher.poll(at(12))
                raise AssertionError("the poll read a catalog whose database is stopped")
            except CompactionError:
                pass
            cluster.start_server()
            events: list[dict[str, object]] = []
            for attempt in range(30):  # the first queries after the restart may meet pooled connections it closed
                try:
                    events = watcher.poll(at(20 + attempt))
                    break
                except CompactionError:
                    time.sleep(0.5)
            # 20 s after the event, far inside the pickup timeout, and no run recorded: fired again.
            assert len(events) == 1 and events[0]["table"] == "hw.t", "\n".join(lines)
    finally:
        cluster.stop()
