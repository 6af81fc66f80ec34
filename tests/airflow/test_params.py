"""DAG params validation and job slots (no Airflow run needed)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from compaction.core.errors import CompactionError
from compaction.core.intervals import TimeWindow
from compaction.core.plan import CompactionMode
from icecompact_airflow.params import DEFAULTS, parse_params
from icecompact_airflow.slots import job_slot, lock_dir


def test_defaults_and_good_values() -> None:
    params = parse_params({})
    assert params.tables == ("*",) and params.mode is CompactionMode.AUTO and params.window is TimeWindow.AUTO
    assert params.matches("demo.events")
    good = parse_params({"tables": ["db.orders", "sales_*.t?"], "mode": "major", "policy": {"major.delete-ratio": "0.2"},
                         "partition_filter": " ts >= '2024-01-01' and region = 'EU' ", "catalog": "prod",
                         "max_parallel_jobs": 4, "validation": "count", "window": "data_interval"})
    assert good.explicit_tables == ("db.orders",)
    assert good.matches("db.orders") and good.matches("sales_eu.t1") and not good.matches("db.orders_old")
    # syntax checked here; columns, literals and projection per table in discover (tests/test_filters.py)
    assert good.partition_filter == "ts >= '2024-01-01' and region = 'EU'"
    assert parse_params({"partition_filter": "  "}).partition_filter is None
    assert parse_params({"tables": "a.b, c.*"}).tables == ("a.b", "c.*")
    assert set(DEFAULTS) == {"tables", "mode", "partition_filter", "dry_run", "policy", "max_parallel_jobs",
                             "validation", "max_retries", "catalog", "window", "executor"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"tables": []}, "invalid DAG param tables=[]: expected at least one"),
        ({"tables": ["db.t; DROP TABLE x"]}, "invalid DAG param tables=['db.t; DROP TABLE x']: invalid table name part"),
        ({"tables": ["db.`*`"]}, "pattern 'db.`*`' may only use"),
        ({"tables": ["orders"]}, "expected NAMESPACE.TABLE"),
        ({"mode": "fast"}, "invalid DAG param mode='fast': expected one of auto, minor, major"),
        ({"partition_filter": "ts_day = 1; drop"},
         "invalid DAG param partition_filter='ts_day = 1; drop': invalid partition filter 'ts_day = 1; drop': "
         "cannot parse at character 11 ('; drop')"),
        ({"partition_filter": "ts_day=2024-01-05"}, "(the partition-field form ts_day=2024-01-05 is retired)"),
        ({"partition_filter": "region like '%EU'"}, "LIKE expressions only supports wildcard"),
        ({"partition_filter": 5}, "invalid DAG param partition_filter=5: expected filter text"),
        ({"policy": {"major.delete-ratio": 5}}, "invalid DAG param policy={'major.delete-ratio': 5}: invalid value 5"),
        ({"policy": {"no.such-key": 1}}, "invalid DAG param policy={'no.such-key': 1}"),
        ({"policy": "ratio=1"}, "invalid DAG param policy='ratio=1': expected an object"),
        ({"dry_run": "yes"}, "invalid DAG param dry_run='yes': expected true or false"),
        ({"max_parallel_jobs": 0}, "invalid DAG param max_parallel_jobs=0: expected 1 <= max_parallel_jobs <= 64"),
        ({"max_parallel_jobs": True}, "invalid DAG param max_parallel_jobs=True: expected an integer"),
        ({"max_retries": -1}, "invalid DAG param max_retries=-1"),
        ({"validation": "full"}, "invalid DAG param validation='full': expected one of none, count, checksum"),
        ({"catalog": "prod-db"}, "invalid DAG param catalog='prod-db': invalid catalog name"),
        ({"window": "week"}, "invalid DAG param window='week': expected one of auto, data_interval, all"),
        ({"tabels": ["a.b"]}, "unknown DAG param(s) tabels"),
    ],
)
def test_bad_values_name_the_param(raw: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(CompactionError) as info:
        parse_params(raw)
    assert message in str(info.value)


def test_job_slot_admits_at_most_n_holders(tmp_path: Path) -> None:
    directory = lock_dir(tmp_path, "catalog:sqlite:///x.db")
    assert directory == lock_dir(tmp_path, "catalog:sqlite:///x.db") != lock_dir(tmp_path, "other")
    waited = threading.Event()
    entered = threading.Event()

    def second() -> None:
        with job_slot(directory, 1, wait=waited.set):
            entered.set()

    with job_slot(directory, 1) as index:
        assert index == 0
        thread = threading.Thread(target=second)
        thread.start()
        assert waited.wait(30), "the second holder must wait while the only slot is taken"
        assert not entered.is_set()
    thread.join(30)
    assert entered.is_set(), "the slot is free again once released"
    with job_slot(directory, 2) as a, job_slot(directory, 2) as b:
        assert {a, b} == {0, 1}
