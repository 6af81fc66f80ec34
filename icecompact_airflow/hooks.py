"""``CompactionSparkSubmitHook``: the provider's ``SparkSubmitHook`` with the platform's embedded default when the
Spark connection does not exist, and the Spark settings of the applications a task starts itself."""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from compaction.spark.session import SparkSettings
from icecompact_airflow import SPARK_CONN_ID
from icecompact_airflow.connections import get_connection


class CompactionSparkSubmitHook(SparkSubmitHook):
    """The provider's hook with the platform's embedded default when the Spark connection does not exist."""

    def _resolve_connection(self) -> dict[str, Any]:
        exists = get_connection(self._conn_id) is not None
        data = super()._resolve_connection()
        if not exists:
            data["master"] = SparkSettings.from_environment().master
            data["deploy_mode"] = self._deploy_mode or "client"
            self.log.info("Spark connection %r not defined: using master %s (embedded default)", self._conn_id,
                          data["master"])
        return data


def spark_settings(conn_id: str | None = None) -> SparkSettings:
    """:class:`~compaction.spark.session.SparkSettings` whose master is the one ``CompactionSubmitOperator`` submits
    to: the Spark connection ``conn_id`` (``spark_default``) resolved as the provider's hook resolves it, else
    ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]``. For the Spark applications a task starts itself (a resident
    executor, the post-hoc check), so that they run where the DAG's spark-submit jobs run."""
    hook = CompactionSparkSubmitHook(conn_id=conn_id or SPARK_CONN_ID)
    return SparkSettings.from_environment(master=str(hook._connection["master"]))
