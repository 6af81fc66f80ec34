"""``CompactionSubmitOperator``: the provider's ``SparkSubmitOperator`` running one job group of a plan.

Everything spark-submit needs (Spark conf, jars, driver class path, ``--py-files`` zip for cluster masters, the entry
script and its arguments) comes from :func:`compaction.ops.submit.submit_parts`, the same pure builder behind
``icecompact run``'s :func:`~compaction.ops.submit.build_command`; it is resolved at execute time on the worker,
so XCom carries only paths, ids and the catalog name. Secrets (the catalog password) are written to a ``0600``
properties file in a private ``0700`` temp dir, passed with ``--properties-file`` and removed when the job ends:
they never appear in argv, in the rendered template fields or in the task log.

Master: the Airflow connection ``spark_default`` (``conn_id``) when it exists; otherwise - instead of the provider's
silent fall-back to YARN - ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]``, client mode.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from compaction.core.run_options import MAX_PARALLEL_JOBS_DEFAULT, MAX_RETRIES_DEFAULT, VALIDATION_DEFAULT
from icecompact_airflow import SPARK_CONN_ID
from icecompact_airflow.hooks import CompactionSparkSubmitHook


#: Environment of spark-submit set from :func:`compaction.ops.submit.submit_env` (client mode).
_CHILD_ENV = ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYTHONUNBUFFERED")


class CompactionSubmitOperator(SparkSubmitOperator):
    """Run job group ``group_id`` of the plan at ``plan_path``; the job writes its result JSON to ``result_path``."""

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "plan_path", "group_id", "result_path",
                                      "catalog_name", "validation", "max_retries", "max_parallel_jobs")
    ui_color = "#f4a460"

    def __init__(self, *, plan_path: str, group_id: int, result_path: str, catalog_name: str,
                 validation: str = VALIDATION_DEFAULT, max_retries: int = MAX_RETRIES_DEFAULT,
                 max_parallel_jobs: int = MAX_PARALLEL_JOBS_DEFAULT,
                 conn_id: str = SPARK_CONN_ID, **kwargs: Any) -> None:
        super().__init__(conn_id=conn_id, **kwargs)
        self.plan_path = plan_path
        self.group_id = group_id
        self.result_path = result_path
        self.catalog_name = catalog_name
        self.validation = validation
        self.max_retries = max_retries
        self.max_parallel_jobs = max_parallel_jobs

    def _get_hook(self) -> CompactionSparkSubmitHook:
        # Same arguments as SparkSubmitOperator._get_hook (provider 5.6.0), with our hook class.
        return CompactionSparkSubmitHook(
            conf=self.conf, conn_id=self._conn_id, files=self.files, py_files=self.py_files,
            archives=self._archives, driver_class_path=self.driver_class_path, jars=self.jars,
            java_class=self._java_class, packages=self.packages, exclude_packages=self.exclude_packages,
            repositories=self._repositories, total_executor_cores=self._total_executor_cores,
            executor_cores=self._executor_cores, executor_memory=self._executor_memory,
            driver_memory=self._driver_memory, keytab=self.keytab, principal=self.principal,
            proxy_user=self.proxy_user, name=self.name, num_executors=self._num_executors,
            status_poll_interval=self._status_poll_interval, application_args=self.application_args,
            env_vars=self.env_vars, verbose=self._verbose, spark_binary=self._spark_binary,
            properties_file=self.properties_file, yarn_queue=self._yarn_queue, deploy_mode=self._deploy_mode,
            use_krb5ccache=self._use_krb5ccache,
        )

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
        from compaction.spark.session import SparkSettings
        from compaction.ops.submit import (
            SubmitRequest,
            find_spark_binary,
            py_files_for,
            split_conf,
            submit_env,
            submit_parts,
            write_properties_file,
        )
        from icecompact_airflow.connections import resolve_catalog

        if self._spark_binary is None:
            self._spark_binary = find_spark_binary()
        connection = self._get_hook()._connection  # the resolved master and deploy mode
        deploy_mode = connection.get("deploy_mode") or "client"
        catalog = resolve_catalog(self.catalog_name)
        request = SubmitRequest(
            plan_path=Path(self.plan_path), group_id=int(self.group_id), result_path=Path(self.result_path),
            catalog=catalog, settings=SparkSettings.from_environment(master=connection["master"]),
            deploy_mode=deploy_mode, app_name=self.name if self.name != "arrow-spark" else None,
            validation=self.validation, max_retries=int(self.max_retries), spark_binary=self._spark_binary,
        )
        request.result_path.unlink(missing_ok=True)  # an old result must not pass for this run's
        request.result_path.parent.mkdir(parents=True, exist_ok=True)
        private_dir = Path(tempfile.mkdtemp(prefix="icecompact-submit-"))  # mode 0700
        try:
            _, secrets = split_conf(request)
            properties = write_properties_file(secrets, private_dir) if secrets else None
            parts = submit_parts(request, properties_file=properties, py_files=py_files_for(request))
            self.conf = dict(parts.conf)
            self.jars = ",".join(parts.jars) or None
            self.driver_class_path = os.pathsep.join(parts.driver_class_path) or None
            self.packages = parts.packages
            self.properties_file = parts.properties_file
            self.py_files = parts.py_files
            self.application = parts.application
            self.application_args = list(parts.application_args)
            self.name = parts.name
            self._deploy_mode = parts.deploy_mode
            if deploy_mode == "client":
                env = {k: v for k, v in submit_env().items() if k in _CHILD_ENV}
                self.env_vars = {**env, **(self.env_vars or {})}
            self._hook = None
            with self._slot(catalog, context):
                super().execute(context)
        finally:
            shutil.rmtree(private_dir, ignore_errors=True)
