"""``CompactionSparkSubmitHook``: the provider's ``SparkSubmitHook`` whose command is the platform's own.

The provider resolves the Spark connection (master, deploy mode, queue, Kerberos), starts spark-submit, follows its
log, tracks a standalone cluster-mode driver and kills the job on ``on_kill``; the one thing this hook changes is the
provider's extension point for the command, ``_build_spark_submit_command``: it returns
:func:`compaction.ops.submit.build_command`'s argv, the same pure builder behind ``icecompact run``, for the
connection's master and deploy mode. Without a command (``command_for=None``) it is the provider's hook. Either way a
missing Spark connection means the platform's embedded default (``$ICECOMPACT_SPARK_MASTER`` or ``local[2]``, client
mode) instead of the provider's silent fall-back to YARN.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from compaction.spark.session import SparkSettings
from icecompact_airflow import SPARK_CONN_ID
from icecompact_airflow.connections import get_connection

#: ``(master, deploy mode) -> (spark-submit argv, environment of spark-submit in client mode)``.
CommandFor = Callable[[str, str], "tuple[list[str], Mapping[str, str]]"]


class CompactionSparkSubmitHook(SparkSubmitHook):
    """The provider's hook with the platform's command (``command_for``) and embedded default master."""

    def __init__(self, *, conn_id: str = SPARK_CONN_ID, command_for: CommandFor | None = None, **kwargs: Any) -> None:
        self._command_for = command_for
        super().__init__(conn_id=conn_id, **kwargs)

    def _resolve_connection(self) -> dict[str, Any]:
        exists = get_connection(self._conn_id) is not None
        data = super()._resolve_connection()
        if not exists:
            data["master"] = SparkSettings.from_environment().master
            data["deploy_mode"] = self._deploy_mode or "client"
            self.log.info("Spark connection %r not defined: using master %s (embedded default)", self._conn_id,
                          data["master"])
        return data

    @property
    def master(self) -> str:
        return str(self._connection["master"])

    @property
    def deploy_mode(self) -> str:
        return str(self._connection.get("deploy_mode") or "client")

    def _build_spark_submit_command(self, application: str) -> list[str]:
        if self._command_for is None:
            return super()._build_spark_submit_command(application)
        argv, env = self._command_for(self.master, self.deploy_mode)
        if env and self.deploy_mode == "client":
            self._env = dict(env)  # the provider's submit() starts spark-submit with os.environ plus these
        self.log.info("Spark-Submit cmd: %s", self._mask_cmd(argv))
        return list(argv)


def spark_settings(conn_id: str | None = None) -> SparkSettings:
    """:class:`~compaction.spark.session.SparkSettings` whose master is the one ``CompactionSubmitOperator`` submits
    to: the Spark connection ``conn_id`` (``spark_default``) resolved as the provider's hook resolves it, else
    ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]``. For the Spark applications a task starts itself (a resident
    executor, the post-hoc check), so that they run where the DAG's spark-submit jobs run."""
    return SparkSettings.from_environment(master=CompactionSparkSubmitHook(conn_id=conn_id or SPARK_CONN_ID).master)
