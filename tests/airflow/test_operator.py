"""The DAG's spark-submit operator: the provider's hook runs the command of icecompact's own builder for the Spark
connection's master and deploy mode; the catalog's secret reaches spark-submit only through a private properties
file that is gone when the task ends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.ops.submit import SubmitRequest, build_command, find_spark_binary, py_files_for
from compaction.spark.session import SparkSettings
from icecompact_airflow.hooks import CompactionSparkSubmitHook
from icecompact_airflow.operators import CompactionSubmitOperator

SECRET = "pw-Operat0r-s3cret"


def test_the_hook_builds_the_command_for_the_connections_master_and_deploy_mode(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []

    def command_for(master: str, deploy_mode: str) -> tuple[list[str], dict[str, str]]:
        asked.append((master, deploy_mode))
        return ["spark-submit", "--master", master, "app.py"], {"SPARK_LOCAL_IP": "127.0.0.1"}

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "spark://10.1.2.3", "port": 7077, "extra": {"deploy-mode": "cluster"}}))
    hook = CompactionSparkSubmitHook(command_for=command_for)
    assert hook._build_spark_submit_command("") == ["spark-submit", "--master", "spark://10.1.2.3:7077", "app.py"]
    assert asked == [("spark://10.1.2.3:7077", "cluster")] and not hook._env  # env vars are for client mode only

    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT")
    monkeypatch.setenv("ICECOMPACT_SPARK_MASTER", "local[1]")
    hook = CompactionSparkSubmitHook(command_for=command_for)  # no connection: the embedded default, client mode
    hook._build_spark_submit_command("")
    assert asked[-1] == ("local[1]", "client") and hook._env == {"SPARK_LOCAL_IP": "127.0.0.1"}


def test_the_operator_submits_icecompact_runs_command_and_keeps_the_secret_out_of_argv(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_conn: Any) -> None:
    catalog = CatalogConfig("opcat", {"type": "sql", "uri": f"postgresql+psycopg2://compactor:{SECRET}@db:5432/ice",
                                      "warehouse": (tmp_path / "wh").as_uri()})
    catalog_conn(catalog)
    monkeypatch.setenv("ICECOMPACT_SPARK_MASTER", "local[2]")
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    result = tmp_path / "results" / "g3.json"
    result.parent.mkdir()
    result.write_text("{}")  # a stale result of an earlier try
    seen: dict[str, Any] = {}

    def fake_submit(hook: CompactionSparkSubmitHook, application: str = "", **_: Any) -> None:
        argv = hook._build_spark_submit_command(application)
        properties = Path(argv[argv.index("--properties-file") + 1])
        seen.update(argv=argv, properties=properties, secret_file=properties.read_text(), env=hook._env,
                    stale_result_gone=not result.exists())

    monkeypatch.setattr(CompactionSparkSubmitHook, "submit", fake_submit)
    operator = CompactionSubmitOperator(task_id="compact", plan_path="/plans/p.json", group_id=3,
                                        result_path=str(result), catalog_name="opcat", validation="count",
                                        max_retries=2, app_name="icecompact-db.t-0123-g3")
    operator.execute({"dag_run": type("Run", (), {"dag_id": "d", "run_id": "r"})()})

    from icecompact_airflow.connections import resolve_catalog

    request = SubmitRequest(plan_path=Path("/plans/p.json"), group_id=3, result_path=result,
                            catalog=resolve_catalog("opcat"), settings=SparkSettings.from_environment(master="local[2]"),
                            app_name="icecompact-db.t-0123-g3", validation="count", max_retries=2,
                            spark_binary=find_spark_binary())
    expected = build_command(request, properties_file=seen["properties"], py_files=py_files_for(request))
    assert seen["argv"] == expected  # the very argv `icecompact run` builds for this group
    assert SECRET not in " ".join(seen["argv"]) and SECRET in seen["secret_file"]
    assert seen["env"] and seen["stale_result_gone"]
    assert not seen["properties"].exists()  # the private dir is removed when the task ends
