"""Airflow glue for icecompact: DAG parameters, task bodies, the spark-submit operator and the UI plugin's data.

Kept out of the ``compaction`` package (which never imports Airflow, see setup.cfg). Modules here import nothing
heavy at import time (no pyspark, no pyiceberg): the DAG file imports them at parse time.
"""

DAG_ID = "iceberg_compaction"
#: Airflow pool of the Spark jobs; its slot count is the platform's concurrent spark-submit budget (all DAG runs).
POOL = "icecompact_spark"
POOL_SLOTS_DEFAULT = 4
#: Airflow connection of the Spark cluster (provider's ``spark`` type); embedded default when it does not exist.
SPARK_CONN_ID = "spark_default"
#: Airflow connection ``icecompact_catalog_<name>`` defines catalog ``<name>`` (extra = pyiceberg properties).
CATALOG_CONN_PREFIX = "icecompact_catalog_"
#: Schedule of the DAG: a cron expression or preset (``@daily``), or ``none`` for manual runs only.
SCHEDULE_ENV = "ICECOMPACT_DAG_SCHEDULE"
SCHEDULE_DEFAULT = "@daily"
#: Default of the DAG's ``window`` param, i.e. what scheduled runs use: ``auto`` (default: the run's data interval on
#: time-partitioned tables), ``all`` (every partition, e.g. a CDC table whose updates reach old partitions) or
#: ``data_interval``.
WINDOW_ENV = "ICECOMPACT_DAG_WINDOW"
WINDOW_DEFAULT = "auto"
WINDOW_CHOICES = ("auto", "data_interval", "all")
#: Default of the DAG's ``executor`` param: ``submit`` (a spark-submit per job group) or ``resident`` (queue the work
#: for the catalog's long-running executor and wait deferred; see docs/executors.md).
EXECUTOR_ENV = "ICECOMPACT_DAG_EXECUTOR"
