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
        assert trigger.serialize() == ("icecompact_airflow.resident.WorkItemsTrigger", {"item_ids": ids, "poll_s": 0.1})

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
        assert event == {"status": "done", "items": {i: "done" for i in ids}}
        assert time.monotonic() - started >= 0.6  # not before the second item finished


def test_says_when_unfinished_work_has_no_live_executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", url)
    with Ledger.open(url) as ledger:
        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
        ledger.claim_executor_start("x-dead", catalog="c", host="h", master="local[2]", now=old)
        item = ledger.enqueue_work("{}", plan_id="p", table_ref="db.t", catalog="c", group_ids=[0])
        event = asyncio.run(_first_event(WorkItemsTrigger([item.item_id], poll_s=0.1)))
        assert event == {"status": "executor_lost", "catalogs": ["c"]}


def test_executor_param() -> None:
    assert parse_params({}).executor == "submit"
    assert parse_params({"executor": "resident"}).executor == "resident"
    with pytest.raises(Exception, match="executor"):
        parse_params({"executor": "yarn"})
