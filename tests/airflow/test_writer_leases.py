"""An Airflow task that declares an Iceberg table as an outlet asset holds a write lease on it while it runs (the
``icecompact`` plugin's listener, icecompact_airflow.writer_leases): real Airflow (``dag.test()``, the plugin loaded
from the plugins folder), real Spark, a real SQLite ledger. The task's Spark DELETE commits while a compaction, ready
to commit, waits; the compaction commits after the task, on top of the task's snapshot, and validates."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.results import COMMITTED
from compaction.demo.workload import WorkloadSpec, generate, spark_rows
from compaction.ledger import LEDGER_URL_ENV, Ledger, LedgerCommitGate
from icecompact_airflow.assets import table_asset, table_asset_uri, table_of_asset_uri
from icecompact_testing.inprocess import InProcessRun, compact_in_process
from icecompact_testing.oracle import ancestor_ids, read_table

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _serialize(the_dag: Any, folder: Path) -> None:
    """Into the metadata DB, as the DAG processor would (``dag.test()`` runs serialized DAGs only)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()  # the bundle row the DAG's row refers to
    (folder / "no-dags").mkdir(exist_ok=True)
    bag = DagBag(dag_folder=str(folder / "no-dags"), collect_dags=False)
    bag.bag_dag(the_dag)
    sync_bag_to_db(bag, "dags-folder", None)


def test_table_asset_uris_round_trip_and_other_assets_are_not_tables() -> None:
    assert table_asset_uri("db.events", catalog="lake") == "iceberg://lake/db.events"
    assert table_of_asset_uri("iceberg://lake/db.events") == ("lake", "db.events")
    assert table_of_asset_uri("icecompact://lake/health") is None
    assert table_of_asset_uri("iceberg://lake/events") is None  # no namespace
    assert table_of_asset_uri("s3://bucket/db.events") is None


def test_a_task_with_the_table_as_outlet_commits_first_and_the_compaction_after_it(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, airflow_db: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import dag, task

    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv(LEDGER_URL_ENV, ledger_url)
    workload = generate(spark, sqlite_catalog, "af.leased", WorkloadSpec(
        seed=61, format_version=2, partitioning="days_ts", days_span=2, commits=3, rows_per_commit=40,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    victims = sorted((r for r in before.rows if r[0] is not None), key=repr)[:3]
    expected = Counter(before.rows)
    for row in victims:
        del expected[row]
    seen: dict[str, Any] = {}
    runs: list[InProcessRun] = []
    errors: list[BaseException] = []
    waiting = threading.Event()

    def compact() -> None:
        def progress(line: str) -> None:
            seen.setdefault("lines", []).append(line)
            if "waiting for the write lease of airflow writes_leased.delete_rows" in line:
                waiting.set()

        try:
            with Ledger.open(ledger_url) as ledger:
                gate = LedgerCommitGate(ledger, sqlite_catalog.name, "test-compaction", poll_s=0.2, progress=progress)
                runs.append(compact_in_process(spark, sqlite_catalog, "af.leased", CompactionMode.MINOR, now=NOW,
                                               gate=gate, progress=progress))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    compaction = threading.Thread(target=compact, name="compaction")

    @dag(dag_id="writes_leased", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
         catchup=False)
    def writes_leased() -> None:
        @task(outlets=[table_asset("af.leased", catalog=sqlite_catalog.name)])
        def delete_rows() -> None:
            with Ledger.open(ledger_url) as ledger:
                seen["holders"] = [w.holder for w in ledger.active_write_leases("af.leased",
                                                                                catalog=sqlite_catalog.name)]
            # The task holds its lease: a compaction that becomes ready to commit now waits at its commit.
            compaction.start()
            assert waiting.wait(300) or not compaction.is_alive(), seen
            ids = ", ".join(str(int(r[0])) for r in victims)
            spark.sql(f"DELETE FROM {workload.table} WHERE id IN ({ids})")
            seen["writer_snapshot"] = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
            seen["ours_before_the_task_ended"] = [p for g in ([] if not runs else runs[0].groups) for p in g.partitions]

        delete_rows()

    the_dag = writes_leased()
    _serialize(the_dag, tmp_path)
    dag_run = the_dag.test()
    compaction.join(timeout=600)
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success"
    assert not compaction.is_alive() and not errors, errors
    assert seen["holders"] == [f"airflow writes_leased.delete_rows {dag_run.run_id}"]
    assert waiting.is_set(), seen.get("lines")
    assert seen["ours_before_the_task_ended"] == []
    with Ledger.open(ledger_url) as ledger:  # released when the task succeeded
        assert ledger.active_write_leases("af.leased", catalog=sqlite_catalog.name) == []
    (run,) = runs
    run.assert_clean()
    assert all(p.status == COMMITTED for p in run.partitions), [(p.label, p.status, p.reason) for p in run.partitions]
    table = sqlite_catalog.load().load_table(workload.identifier)
    for sid in {c for p in run.partitions for c in p.commit_snapshot_ids}:
        assert seen["writer_snapshot"] in ancestor_ids(table, sid), "a compaction commit landed before the task's"
    after = read_table(table)
    assert after.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
