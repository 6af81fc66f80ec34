"""WorkItemsTrigger (icecompact_airflow/resident.py) run by asyncio against a real ledger: it fires when every item is
terminal, and says so when unfinished work has no live executor; its kwargs hold ids only."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from pathlib import Path

import pytest

from compaction.ledger import Ledger
from icecompact_airflow.params import parse_params
from icecompact_airflow.resident import WorkItemsTrigger


async def _first_event(trigger: WorkItemsTrigger, timeout: float = 60) -> dict:  # type: ignore[type-arg]
    async def first() -> dict:  # type: ignore[type-arg]
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return await asyncio.wait_for(first(), timeout)


def test_fires_when_every_item_is_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", url)
    with Ledger.open(url) as ledger:
        ids = [ledger.enqueue_work("{}", plan_id="p", table_ref="db.t", catalog="c", group_ids=[g]).item_id
               for g in (0, 1)]
        assert ledger.claim_executor_start("x1", catalog="c", host="h", master="local[2]")
        trigger = WorkItemsTrigger(ids, poll_s=0.1)
        assert trigger.serialize() == ("icecompact_airflow.resident.WorkItemsTrigger",
                                       {"item_ids": ids, "poll_s": 0.1, "echo": None})

        def work() -> None:
            with Ledger.open(url) as own:
                for _ in ids:
                    time.sleep(0.3)
                    item = own.claim_work("x1", catalogs=["c"])
                    assert item is not None
                    own.complete_work(item.item_id, "x1", {item.group_ids[0]: {"status": "succeeded"}})

        worker = threading.Thread(target=work)
        started = time.monotonic()
        worker.start()
        event = asyncio.run(_first_event(trigger))
        worker.join()
        assert event == {"status": "done", "items": {i: "done" for i in ids}, "echo": None}
        assert time.monotonic() - started >= 0.6  # not before the second item finished


def test_says_when_unfinished_work_has_no_live_executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", url)
    with Ledger.open(url) as ledger:
        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
        ledger.claim_executor_start("x-dead", catalog="c", host="h", master="local[2]", now=old)
        item = ledger.enqueue_work("{}", plan_id="p", table_ref="db.t", catalog="c", group_ids=[0])
        event = asyncio.run(_first_event(WorkItemsTrigger([item.item_id], poll_s=0.1)))
        assert event == {"status": "executor_lost", "catalogs": ["c"], "echo": None}


def test_executor_param() -> None:
    assert parse_params({}).executor == "submit"
    assert parse_params({"executor": "resident"}).executor == "resident"
    with pytest.raises(Exception, match="executor"):
        parse_params({"executor": "yarn"})


def test_health_trigger_fires_for_the_table_that_needs_work_and_not_for_a_healthy_one(
        spark, sqlite_catalog, catalog_conn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from icecompact_airflow.health_trigger import TableHealthTrigger

    catalog_conn(sqlite_catalog)
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.ht")
    for name, files in (("healthy", 1), ("busy", 4)):
        ref = f"{sqlite_catalog.name}.ht.{name}"
        spark.sql(f"CREATE TABLE {ref} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='2', "
                  "'compaction.minor.fragment-file-count'='4')")
        for i in range(files):  # one small file per append: fragments
            spark.sql(f"INSERT INTO {ref} VALUES ({i})")
    trigger = TableHealthTrigger(catalog=sqlite_catalog.name, tables=["ht.*"], poll_s=0.2, min_interval_s=60)
    assert "secret" not in str(trigger.serialize()) and trigger.serialize()[1]["tables"] == ["ht.*"]

    async def events(n_polls: int) -> list[dict]:  # type: ignore[type-arg]
        seen: list[dict] = []  # type: ignore[type-arg]

        async def collect() -> None:
            async for event in trigger.run():
                seen.append(dict(event.payload))

        try:
            await asyncio.wait_for(collect(), timeout=n_polls * 0.2 + 5)
        except TimeoutError:
            pass
        return seen

    fired = asyncio.run(events(10))
    assert [e["table"] for e in fired] == ["ht.busy"], fired  # once: then rate-limited
    assert fired[0]["kinds"] == {"minor": 1} and fired[0]["catalog"] == sqlite_catalog.name


def test_applications_a_task_starts_itself_run_on_the_spark_connections_master(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resident executor a task starts (and the post-hoc check, through the same settings) run where the DAG's
    spark-submit jobs run: the Spark connection's master, not $ICECOMPACT_SPARK_MASTER."""
    import json

    from compaction.catalog import CatalogConfig
    from icecompact_testing.processes import stop_ledger_executors
    from icecompact_airflow.hooks import spark_settings
    from icecompact_airflow.resident import ensure_executors

    monkeypatch.setenv("ICECOMPACT_SPARK_MASTER", "local[2]")
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    assert spark_settings().master == "local[2]"  # no connection: the embedded default, as the operator's hook
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT",
                       json.dumps({"conn_type": "spark", "host": "spark://10.1.2.3", "port": 7077}))
    assert spark_settings().master == "spark://10.1.2.3:7077"

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    catalog = CatalogConfig.sqlite("conn_master", tmp_path / "catalog.db", tmp_path / "warehouse")
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        try:
            ensure_executors(ledger, [catalog], log=lambda _m: None)
            (record,) = ledger.executors(catalog=catalog.name)
            assert record.master == "local[1]"
        finally:
            stop_ledger_executors(ledger, just_started=True)
