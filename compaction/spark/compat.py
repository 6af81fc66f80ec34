"""What differs between the supported Spark lines (3.5 / Scala 2.12 and 4.x / Scala 2.13) when we reach past
PySpark's public API into the JVM: one home, so the rest of the code calls these and never asks for the version.

Everything else the Spark-side code does goes through Iceberg's Java API (identical on both lines: the runtime of a
release is built from one source) or Spark SQL.
"""

from __future__ import annotations

from typing import Any, Callable


def spark_major_version(spark: Any) -> int:
    return int(str(spark.version).split(".", 1)[0])


#: (driver JVM's gateway client, class name) -> present: a driver's class path does not change while it runs, and
#: each look is several py4j round trips.
_CLASS_PRESENT: dict[tuple[int, str], bool] = {}


def has_class(spark: Any, name: str) -> bool:
    """Whether the driver's class path has ``name``: what an Iceberg module offers is asked of the runtime, not
    inferred from its version, so a runtime that backports a change works too."""
    return _class_present(spark.sparkContext._gateway._gateway_client, name)


def _class_present(gateway_client: Any, name: str) -> bool:
    from py4j.java_gateway import JavaClass, JVMView
    from py4j.protocol import DEFAULT_JVM_ID, DEFAULT_JVM_NAME

    key = (id(gateway_client), name)
    if key not in _CLASS_PRESENT:
        view = JVMView(gateway_client, jvm_name=DEFAULT_JVM_NAME, id=DEFAULT_JVM_ID)
        _CLASS_PRESENT[key] = isinstance(_resolve(view, name), JavaClass)
    return _CLASS_PRESENT[key]


def _resolve(view: Any, name: str) -> Any:
    for part in name.split("."):
        view = getattr(view, part)
    return view


def thread_target(spark: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` wrapped to run in another Python thread with the calling thread's Spark local properties (job group,
    scheduler pool), as PySpark's ``inheritable_thread_target``. PySpark 4 takes the session first and then also
    passes on its tags; given only the function it warns on every call ("Spark session is not provided"). PySpark
    3.5 takes only the function."""
    from py4j.clientserver import ClientServer
    from pyspark import SparkContext, inheritable_thread_target

    if not isinstance(SparkContext._gateway, ClientServer):
        return fn  # not PySpark's pinned-thread mode (PYSPARK_PIN_THREAD=false): nothing to pass on, as PySpark does
    if spark_major_version(spark) >= 4:
        return inheritable_thread_target(spark)(fn)  # type: ignore[no-any-return]
    return inheritable_thread_target(fn)


def dataframe_of_table(spark: Any, spark_table: Any) -> Any:
    """A DataFrame reading the DataSource V2 ``spark_table`` (e.g. Iceberg's ``SparkTable`` over a static table),
    without a catalog.

    Spark 4 moved the Dataset implementation to ``org.apache.spark.sql.classic`` and gave
    ``DataSourceV2Relation.create`` a fifth parameter (a time-travel spec; Scala's default argument is not visible
    from py4j, so ``None`` is passed as ``Option.empty()``)."""
    from pyspark.sql import DataFrame

    j = spark.sparkContext._jvm
    none = j.scala.Option.empty()
    options = j.org.apache.spark.sql.util.CaseInsensitiveStringMap(j.java.util.HashMap())
    relations = j.org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
    if spark_major_version(spark) >= 4:
        relation = relations.create(spark_table, none, none, options, none)
        dataset = j.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, relation)
    else:
        relation = relations.create(spark_table, none, none, options)
        dataset = j.org.apache.spark.sql.Dataset.ofRows(spark._jsparkSession, relation)
    return DataFrame(dataset, spark)


def iceberg_spark_table_at(spark: Any, table: Any, snapshot_id: int) -> Any:
    """Iceberg's Spark ``SparkTable`` over ``table`` pinned to ``snapshot_id``.

    Iceberg's Spark 4.1 module (1.11+) builds a pinned table with ``SparkTable.create(table, TimeTravel)`` and no
    longer has the ``SparkTable(table, Long snapshotId, boolean refreshEagerly)`` constructor its Spark 3.5 module
    keeps (see :func:`has_class`)."""
    j = spark.sparkContext._jvm
    spark_tables = j.org.apache.iceberg.spark.source.SparkTable
    if has_class(spark, "org.apache.iceberg.spark.TimeTravel"):
        return spark_tables.create(table, j.org.apache.iceberg.spark.TimeTravel.version(str(int(snapshot_id))))
    return spark_tables(table, j.java.lang.Long.valueOf(int(snapshot_id)), False)


#: The catalog Iceberg's rewrite actions stage their file groups in (``IcebergSource.DEFAULT_CACHE_CATALOG``) on the
#: Spark 3.5 module; Iceberg's Spark 4.1 module stages them without a catalog and has no such class.
CACHE_CATALOG_CONF = "spark.sql.catalog.default_cache_iceberg"
CACHE_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCachedTableCatalog"


def stages_rewrites_in_cache_catalog(spark: Any) -> bool:
    return has_class(spark, CACHE_CATALOG_CLASS)


def read_at_snapshot(spark: Any, table_ref: str, snapshot_id: int) -> Any:
    """A DataFrame of ``table_ref`` (``cat.ns.t``) as of ``snapshot_id``.

    Spark's own time-travel option, ``versionAsOf`` (Spark 3.3+, turned into a ``TimeTravelSpec`` and handed to the
    catalog's ``loadTable(ident, version)``), works on every supported line; Iceberg's ``snapshot-id`` read option
    is refused by its Spark 4.1 module ("no longer supported, use Spark built-in `versionAsOf`")."""
    return spark.read.format("iceberg").option("versionAsOf", str(int(snapshot_id))).load(table_ref)


def position_delete_metrics_config(spark: Any, table: Any) -> Any:
    """Iceberg's ``MetricsConfig`` for position-delete files: ``forPositionDelete(table)`` up to 1.10, the table
    argument dropped in 1.11+ (position deletes always get full metrics of both columns)."""
    from py4j.protocol import Py4JError

    configs = spark.sparkContext._jvm.org.apache.iceberg.MetricsConfig
    try:
        return configs.forPositionDelete()
    except Py4JError:
        return configs.forPositionDelete(table)


class _SnapshotChangesOfSnapshot:
    """``SnapshotChanges``' reading methods over a runtime without it (Iceberg up to 1.10): the snapshot's own."""

    def __init__(self, snapshot: Any, io: Any) -> None:
        self._snapshot, self._io = snapshot, io

    def addedDataFiles(self) -> Any:  # noqa: N802 - the Java method's name
        return self._snapshot.addedDataFiles(self._io)

    def removedDataFiles(self) -> Any:  # noqa: N802
        return self._snapshot.removedDataFiles(self._io)

    def addedDeleteFiles(self) -> Any:  # noqa: N802
        return self._snapshot.addedDeleteFiles(self._io)

    def removedDeleteFiles(self) -> Any:  # noqa: N802
        return self._snapshot.removedDeleteFiles(self._io)


#: Iceberg 1.11+: a snapshot's added and removed files, read with the table's specs.
SNAPSHOT_CHANGES_CLASS = "org.apache.iceberg.SnapshotChanges"


def snapshot_changes(table: Any, snapshot: Any) -> Any:
    """The data and delete files ``snapshot`` (a snapshot of ``table``) added and removed, as Iceberg's
    ``SnapshotChanges``: ``addedDataFiles()``, ``removedDataFiles()``, ``addedDeleteFiles()``,
    ``removedDeleteFiles()``, each read once and kept.

    Iceberg 1.11+ reads them through ``SnapshotChanges`` with the table's partition specs. The ``Snapshot`` methods it
    deprecates (``addedDataFiles(io)`` ...) parse each manifest's spec from the manifest's own metadata, log a
    deprecation WARN per manifest read, and go in Iceberg 2.0. Older runtimes (the Spark 3.5 line's 1.10) have only
    those."""
    from py4j.java_gateway import JavaClass

    client = table._gateway_client
    if _class_present(client, SNAPSHOT_CHANGES_CLASS):
        return JavaClass(SNAPSHOT_CHANGES_CLASS, client).builderFor(table).snapshot(snapshot).build()
    return _SnapshotChangesOfSnapshot(snapshot, table.io())
