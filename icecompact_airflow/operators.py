"""``CompactionSubmitOperator``: run one job group of a plan with spark-submit, through the Spark provider's hook.

The operator holds what the job is (plan, group, result path, catalog, run options) and nothing of how spark-submit
is spelled: :class:`~icecompact_airflow.hooks.CompactionSparkSubmitHook` builds the command with
:func:`compaction.ops.submit.build_command` (the same pure builder behind ``icecompact run``: Spark conf, jars, driver
class path, ``--py-files`` zip for cluster masters, the entry script and its arguments) for the master and deploy
mode of the Airflow connection ``spark_default`` (``conn_id``), and the provider runs, follows and kills it. Everything
is resolved at execute time on the worker, so XCom carries only paths, ids and the catalog name. Secrets (the catalog
password) are written to a ``0600`` properties file in a private ``0700`` temp dir, passed with
``--properties-file`` and removed when the job ends: never in argv, in the rendered template fields or in the log.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from airflow.sdk import BaseOperator

from compaction.core.run_options import MAX_PARALLEL_JOBS_DEFAULT, MAX_RETRIES_DEFAULT, VALIDATION_DEFAULT
from icecompact_airflow import SPARK_CONN_ID
from icecompact_airflow.hooks import CompactionSparkSubmitHook

#: Environment of spark-submit set from :func:`compaction.ops.submit.submit_env` (client mode).
_CHILD_ENV = ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYTHONUNBUFFERED")


class CompactionSubmitOperator(BaseOperator):
    """Run job group ``group_id`` of the plan at ``plan_path``; the job writes its result JSON to ``result_path``."""

    template_fields: Sequence[str] = ("plan_path", "group_id", "result_path", "catalog_name", "validation",
                                      "max_retries", "max_parallel_jobs", "app_name")
    ui_color = "#f4a460"

    def __init__(self, *, plan_path: str, group_id: int, result_path: str, catalog_name: str,
                 validation: str = VALIDATION_DEFAULT, max_retries: int = MAX_RETRIES_DEFAULT,
                 max_parallel_jobs: int = MAX_PARALLEL_JOBS_DEFAULT, app_name: str | None = None,
                 conn_id: str = SPARK_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan_path = plan_path
        self.group_id = group_id
        self.result_path = result_path
        self.catalog_name = catalog_name
        self.validation = validation
        self.max_retries = max_retries
        self.max_parallel_jobs = max_parallel_jobs
        self.app_name = app_name
        self.conn_id = conn_id
        self._hook: CompactionSparkSubmitHook | None = None

    def _slot(self, catalog: Any, context: Any) -> Any:
        """One job at a time on a SQLite catalog; at most ``max_parallel_jobs`` per DAG run otherwise."""
        from compaction import settings
        from compaction.ops.runner import is_single_writer
        from icecompact_airflow.slots import job_slot, lock_dir

        root = settings.home() / "locks"
        if is_single_writer(catalog):
            key, slots = f"catalog:{catalog.properties.get('uri')}", 1
        else:
            run = context["dag_run"]
            key, slots = f"run:{run.dag_id}/{run.run_id}", max(1, int(self.max_parallel_jobs))
        self.log.info("waiting for one of %d job slot(s) (%s)", slots, key.split(":")[0])
        return job_slot(lock_dir(root, key), slots)

    def execute(self, context: Any) -> None:
        from compaction.ops.submit import (
            SubmitRequest,
            build_command,
            find_spark_binary,
            py_files_for,
            split_conf,
            submit_env,
            write_properties_file,
        )
        from compaction.ledger.engine import LEDGER_URL_ENV, resolve_url
        from compaction.spark.session import SparkSettings
        from icecompact_airflow.connections import resolve_catalog

        catalog = resolve_catalog(self.catalog_name)
        result_path = Path(self.result_path)
        result_path.unlink(missing_ok=True)  # an old result must not pass for this run's
        result_path.parent.mkdir(parents=True, exist_ok=True)
        private_dir = Path(tempfile.mkdtemp(prefix="icecompact-submit-"))  # mode 0700

        def command_for(master: str, deploy_mode: str) -> tuple[list[str], Mapping[str, str]]:
            request = SubmitRequest(
                plan_path=Path(self.plan_path), group_id=int(self.group_id), result_path=result_path,
                catalog=catalog, settings=SparkSettings.from_environment(master=master), deploy_mode=deploy_mode,
                app_name=self.app_name, validation=self.validation, max_retries=int(self.max_retries),
                spark_binary=find_spark_binary(),
            )
            _, secrets = split_conf(request)
            properties = write_properties_file(secrets, private_dir) if secrets else None
            argv = build_command(request, properties_file=properties, py_files=py_files_for(request))
            env = {k: v for k, v in submit_env().items() if k in _CHILD_ENV}
            # The job's commits yield to writers' leases in the DAG's ledger (compaction.spark.gate); in the
            # environment, never argv (the URL may hold a password). Client mode only: see the hook.
            env[LEDGER_URL_ENV] = resolve_url()
            return argv, env

        try:
            self._hook = CompactionSparkSubmitHook(conn_id=self.conn_id, command_for=command_for)
            with self._slot(catalog, context):
                self._hook.submit()
        finally:
            shutil.rmtree(private_dir, ignore_errors=True)

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
