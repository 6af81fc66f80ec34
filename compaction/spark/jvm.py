"""Small helpers for talking to the Iceberg Java API through py4j from a PySpark driver.

Everything the Spark-side jobs (eq->pos conversion, commit validation) and the test fixtures need that Spark SQL
cannot express goes through the Java API of the table Spark itself has loaded (same catalog, same cache).

py4j quirks handled here :

* Python ``int`` goes to Java as ``Integer`` (``Long`` only when it does not fit 32 bits), and every boxed value
  Java returns comes back as a Python value. A ``long`` partition slot therefore cannot be filled with
  ``PartitionData.set(i, v)`` from Python: :func:`java_objects` boxes values on the Java side (a ``long[]`` turned
  into ``Long`` objects by ``LongStream.boxed()``, copied with ``System.arraycopy``) so they never cross back.
* ``int[]`` varargs (``ofEqualityDeletes(int...)``) need a real Java array: :func:`int_array`.
* ``Expressions.and`` is a Python keyword: :func:`expression_and` uses ``getattr``.
* Never build partition tuples from a path string (``withPartitionPath`` / ``DataFiles.data``): a null in a string
  identity partition is read back as the string ``'null'``. Use :func:`partition_data` (typed ``PartitionData``).

Partition values on the Python side use the internal representation of :mod:`compaction.core.model`
(``days(ts)`` -> int days, ``bucket`` -> int, identity ``date`` -> int days, ``timestamp`` -> int micros,
``decimal`` -> str, ``binary``/``fixed`` -> hex str, ``uuid`` -> str).
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import decimal
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from compaction.core.errors import UnsupportedTableError
from compaction.core.model import PartitionScalar
from compaction.spark.compat import (
    CACHE_CATALOG_CLASS,
    CACHE_CATALOG_CONF,
    stages_rewrites_in_cache_catalog,
    thread_target,
)

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

T = TypeVar("T")
JavaObject = Any  # py4j.java_gateway.JavaObject; kept loose so that mypy does not need py4j stubs

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_TS = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

# Iceberg TypeID names whose Java representation is Long / Integer.
_LONG_TYPES = frozenset({"LONG", "TIMESTAMP", "TIMESTAMP_NANO", "TIME"})
_INT_TYPES = frozenset({"INTEGER", "DATE"})


def jvm(spark: SparkSession) -> Any:
    """The py4j JVM view of the session's driver."""
    return spark.sparkContext._jvm


def in_background(spark: SparkSession, fn: Callable[..., T], *args: Any, name: str = "icecompact-background",
                  **kwargs: Any) -> concurrent.futures.Future[T]:
    """``fn(*args, **kwargs)`` started now in a daemon thread with ``spark`` active there (:func:`activate`) and the
    caller's Spark local properties (job group, scheduler pool); the future gives its result or raises its error.
    For driver-side metadata reads that overlap a Spark job: the py4j calls of both threads run concurrently."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            activate(spark)
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(e)

    threading.Thread(target=thread_target(spark, run), name=name, daemon=True).start()
    return future


class SparkThreadPool:
    """Calls run up to ``workers`` at once in background threads, each with ``spark`` active there (:func:`activate`)
    and the Spark local properties of the thread that submits it (as :func:`in_background`). For work handed out as
    it becomes known; :meth:`close` once nothing more comes (the calls submitted still run; their futures tell)."""

    def __init__(self, spark: SparkSession, *, workers: int, name: str) -> None:
        self._spark = spark
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name)

    def submit(self, fn: Callable[[Any], T], item: Any) -> concurrent.futures.Future[T]:
        def run(value: Any) -> T:
            activate(self._spark)  # the JVM thread serving a Python thread has no active session of its own
            return fn(value)

        return self._pool.submit(thread_target(self._spark, run), item)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def in_pool(spark: SparkSession, fn: Callable[[Any], T], items: Sequence[Any], *, workers: int,
            name: str) -> list[concurrent.futures.Future[T]]:
    """``fn(item)`` of each of ``items``, up to ``workers`` at once (:class:`SparkThreadPool`); the futures, in
    ``items``' order, give each result or error. Returns at once: wait on the futures."""
    pool = SparkThreadPool(spark, workers=min(workers, len(items)), name=name)
    try:
        return [pool.submit(fn, item) for item in items]
    finally:
        pool.close()


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the JVM's active session in the calling thread, with Iceberg's cache catalog registered.

    Iceberg's Spark source resolves tables, and registers the catalog its rewrite actions read and write staged file
    groups through, on ``SparkSession.active()`` (thread-local, else the default session), not on the session an
    action was given. PySpark makes every new session the active and default one, so after another session was
    created (a test, a notebook) the action's own session lacks that catalog ("Catalog 'default_cache_iceberg' ...
    is not defined") and ``iceberg`` reads resolve against the other session's catalogs."""
    jss = spark._jsparkSession
    jvm(spark).org.apache.spark.sql.SparkSession.setActiveSession(jss)
    conf = jss.conf()
    if not conf.contains(CACHE_CATALOG_CONF) and stages_rewrites_in_cache_catalog(spark):
        conf.set(CACHE_CATALOG_CONF, CACHE_CATALOG_CLASS)


def gateway(spark: SparkSession) -> Any:
    return spark.sparkContext._gateway


def _declared(obj: JavaObject, kind: str, name: str, arity: int | None = None) -> JavaObject:
    """The field or method ``name`` declared by ``obj``'s class or a superclass, made accessible."""
    cls = obj.getClass()
    while cls is not None:
        if kind == "field":
            for field in cls.getDeclaredFields():
                if str(field.getName()) == name:
                    field.setAccessible(True)
                    return field
        else:
            for method in cls.getDeclaredMethods():
                if str(method.getName()) == name and int(method.getParameterCount()) == arity:
                    method.setAccessible(True)
                    return method
        cls = cls.getSuperclass()
    raise UnsupportedTableError(f"this Iceberg runtime has no {kind} {name} in {obj.getClass().getName()} "
                                "(an Iceberg version this release does not support)")


def call_declared(spark: SparkSession, obj: JavaObject, name: str, *args: Any) -> JavaObject:
    """Call a non-public method of ``obj`` (reflection; pinned to the supported Iceberg versions)."""
    method = _declared(obj, "method", name, len(args))
    argv = gateway(spark).new_array(jvm(spark).java.lang.Object, len(args))
    for i, arg in enumerate(args):
        argv[i] = arg
    return method.invoke(obj, argv)


def declared_field(obj: JavaObject, name: str) -> JavaObject:
    """The value of a non-public field of ``obj`` (reflection; pinned to the supported Iceberg versions)."""
    return _declared(obj, "field", name).get(obj)


def is_instance(obj: JavaObject, class_name: str) -> bool:
    """Whether the Java object ``obj`` is a ``class_name`` (class or interface, by name: py4j cannot call
    ``isInstance`` on an interface it reaches through the JVM view)."""
    pending, seen = [obj.getClass()], set()
    while pending:
        cls = pending.pop()
        if cls is None:
            continue
        name = str(cls.getName())
        if name == class_name:
            return True
        if name in seen:
            continue
        seen.add(name)
        pending.append(cls.getSuperclass())
        pending.extend(cls.getInterfaces())
    return False


class DeferredCleanup:
    """Iceberg's clean-up deletes of one commit of ours (RowDelta, RewriteFiles), collected instead of done while
    the commit runs (``deleteWith`` a ``Stream.Builder``, which only keeps the paths), and done by :meth:`committed`
    once the commit is known to be on the table: Iceberg never deletes a file of a commit that may have landed.

    Iceberg deletes a commit's new manifests and manifest lists when it believes the commit failed
    (``SnapshotProducer.commit``: ``cleanAll`` on a ``CleanableFailure`` - CommitFailedException,
    ValidationException). On a JDBC catalog a commit whose answer is lost looks failed although it landed:
    ``JdbcClientPool`` re-runs the ``UPDATE iceberg_tables ... WHERE metadata_location = <old>`` on a new connection
    (SQLSTATE 08006 is retryable), finds 0 rows, ``JdbcTableOperations`` throws CommitFailedException (never
    CommitStateUnknownException), and the producer's retry on top of the landed commit fails its validation when
    another writer committed meanwhile ("Missing required files to delete"): the clean-up then deletes the manifest
    list and manifests of the committed snapshot, which the other writer's snapshot references too - the current
    snapshot is unreadable (tests/test_jdbc_commit_lost.py). Whether a failed commit landed is decided by reading
    the table (compaction.spark.task); the files of a commit that really failed are orphans, for orphan-file
    removal. After a commit that succeeded, Iceberg's deletes (an earlier attempt's manifest list, manifests merged
    away) are done as Iceberg does them, except for any file the committed snapshot references."""

    def __init__(self, spark: SparkSession) -> None:
        self._paths = jvm(spark).java.util.stream.Stream.builder()
        self._done = False

    def attach(self, update: JavaObject) -> JavaObject:
        """``update`` with its clean-up deletes collected here."""
        return update.deleteWith(self._paths)

    def committed(self, table: JavaObject, snapshot_id: int) -> None:
        """The commit is on the table as ``snapshot_id``: delete what Iceberg asked to delete, but for the files that
        snapshot references. Best effort: a file left is an orphan."""
        if self._done:
            return
        self._done = True
        try:
            paths = [str(p) for p in self._paths.build().toArray()]
            if not paths:
                return
            snapshot = table.snapshot(int(snapshot_id))
            if snapshot is None:
                return  # cannot tell what the commit references: delete nothing
            io = table.io()
            keep = {str(snapshot.manifestListLocation())} | {str(m.path()) for m in snapshot.allManifests(io)}
            for path in paths:
                if path not in keep:
                    io.deleteFile(path)
        except Exception:  # noqa: BLE001 - clean-up only; the commit stands
            pass


def load_table(spark: SparkSession, identifier: str) -> JavaObject:
    """The Iceberg ``org.apache.iceberg.Table`` behind a Spark identifier such as ``cat.ns.t``.

    This is the instance of Spark's (caching) catalog, so commits made through it are seen by Spark's next query.
    Call ``refresh()`` on it before reading metadata if someone else may have committed.
    """
    try:
        return jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, identifier)
    except Exception:
        _raise_catalog_load_error(spark, identifier.split(".", 1)[0])
        raise


def _raise_catalog_load_error(spark: SparkSession, catalog_name: str) -> None:
    """Raise the real reason a configured catalog could not be loaded, if it is one.

    ``Spark3Util.catalogAndIdentifier`` swallows any exception of ``CatalogManager.catalog(name)`` and then resolves
    ``cat.ns.t`` against the session catalog, so a catalog whose initialisation failed (its JDBC database briefly
    down) surfaces as "spark_catalog requires a single-part namespace": a permanent-looking error for a transient
    cause. Loading the catalog again here raises that cause, which the callers classify (and wait on when the
    catalog is unavailable). Spark caches a catalog only once it initialised, so this retries the initialisation."""
    jss = spark._jsparkSession
    if not jss.conf().contains(f"spark.sql.catalog.{catalog_name}"):
        return
    jss.sessionState().catalogManager().catalog(catalog_name)


def int_array(spark: SparkSession, values: Sequence[int]) -> JavaObject:
    """A Java ``int[]`` (for varargs such as ``ofEqualityDeletes(int...)``)."""
    arr = gateway(spark).new_array(jvm(spark).int, len(values))
    for i, v in enumerate(values):
        arr[i] = int(v)
    return arr


def long_array(spark: SparkSession, values: Sequence[int]) -> JavaObject:
    """A Java ``long[]``."""
    arr = gateway(spark).new_array(jvm(spark).long, len(values))
    for i, v in enumerate(values):
        arr[i] = int(v)
    return arr


def expression_and(spark: SparkSession, *expressions: JavaObject) -> JavaObject:
    """``Expressions.and(a, b, ...)`` folded left; ``alwaysTrue()`` for no argument."""
    exprs = jvm(spark).org.apache.iceberg.expressions.Expressions
    result = exprs.alwaysTrue()
    for e in expressions:
        result = getattr(exprs, "and")(result, e)
    return result


def expression_or(spark: SparkSession, *expressions: JavaObject) -> JavaObject:
    """``Expressions.or(a, b, ...)`` folded left; ``alwaysFalse()`` for no argument."""
    exprs = jvm(spark).org.apache.iceberg.expressions.Expressions
    result = exprs.alwaysFalse()
    for e in expressions:
        result = getattr(exprs, "or")(result, e)
    return result


# Partition specs -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionFieldDesc:
    """One field of a partition spec as seen from Python."""

    name: str
    field_id: int
    transform: str  # Iceberg's toString: identity, day, bucket[4], truncate[8], void, ...
    source_id: int
    source_column: str
    result_type: str  # Iceberg TypeID name of the partition value: INTEGER, LONG, STRING, DATE, ...


def spec_for(table: JavaObject, spec_id: int | None = None) -> JavaObject:
    """The table's ``PartitionSpec`` with this id (the current spec when None)."""
    if spec_id is None:
        return table.spec()
    spec = table.specs().get(int(spec_id))
    if spec is None:
        raise UnsupportedTableError(f"table {table.name()} has no partition spec {spec_id}")
    return spec


def spec_ids(table: JavaObject) -> list[int]:
    return sorted(int(s) for s in table.specs().keySet())


def partition_fields(table: JavaObject, spec: JavaObject) -> list[PartitionFieldDesc]:
    schema = table.schema()
    ptype = spec.partitionType()
    out = []
    for i, f in enumerate(spec.fields()):
        source = schema.findColumnName(f.sourceId())
        out.append(
            PartitionFieldDesc(
                name=str(f.name()),
                field_id=int(f.fieldId()),
                transform=str(f.transform().toString()),
                source_id=int(f.sourceId()),
                source_column=str(source) if source is not None else "",
                result_type=str(ptype.fields().get(i).type().typeId().toString()),
            )
        )
    return out


def java_objects(spark: SparkSession, type_ids: Sequence[str], values: Sequence[PartitionScalar]) -> JavaObject:
    """A Java ``Object[]`` holding each value boxed as Iceberg's Java class for its type (``Long`` for long and
    timestamp, ``Integer`` for int and date, ``String``, ``Boolean``, ``Double``, ``BigDecimal``, ``ByteBuffer``,
    ``UUID``). Values are in internal representation; None stays null."""
    j = jvm(spark)
    out = gateway(spark).new_array(j.java.lang.Object, len(values))
    for i, (type_id, value) in enumerate(zip(type_ids, values)):
        if value is None:
            continue
        if type_id in _LONG_TYPES:
            boxed = j.java.util.stream.LongStream.of(long_array(spark, [int(value)])).boxed().toArray()
            j.java.lang.System.arraycopy(boxed, 0, out, i, 1)
        elif type_id in _INT_TYPES:
            out[i] = int(value)  # py4j: Python int in 32-bit range -> Integer
        elif type_id == "STRING":
            out[i] = str(value)
        elif type_id == "BOOLEAN":
            out[i] = bool(value)
        elif type_id == "DOUBLE":
            out[i] = float(value)  # py4j: Python float -> Double
        elif type_id == "DECIMAL":
            out[i] = decimal.Decimal(str(value))  # py4j: Decimal -> BigDecimal
        elif type_id in ("BINARY", "FIXED"):
            raw = bytes.fromhex(value) if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
            out[i] = j.java.nio.ByteBuffer.wrap(bytearray(raw))
        elif type_id == "UUID":
            out[i] = j.java.util.UUID.fromString(str(value))
        else:
            raise UnsupportedTableError(f"partition value of type {type_id} is not supported")
    return out


def partition_data(spark: SparkSession, spec: JavaObject, values: Sequence[PartitionScalar]) -> JavaObject:
    """A typed ``org.apache.iceberg.PartitionData`` for ``spec`` from internal-representation values, one per
    partition field in spec order (``()`` for an unpartitioned spec)."""
    j = jvm(spark)
    ptype = spec.partitionType()
    fields = list(ptype.fields())
    if len(fields) != len(values):
        raise ValueError(f"spec {spec.specId()} has {len(fields)} partition fields, got {len(values)} values")
    pd = j.org.apache.iceberg.PartitionData(ptype)
    if not fields:
        return pd
    objects = java_objects(spark, [str(f.type().typeId().toString()) for f in fields], values)
    # PartitionData.set(int, Object) through reflection, so that the boxed values never come back to Python.
    object_class = j.java.lang.Class.forName("java.lang.Object")
    setter = pd.getClass().getMethod("set", _class_array(spark, [j.java.lang.Integer.TYPE, object_class]))
    for i in range(len(fields)):
        args = gateway(spark).new_array(j.java.lang.Object, 2)
        args[0] = i
        j.java.lang.System.arraycopy(objects, i, args, 1, 1)
        setter.invoke(pd, args)
    return pd


def _class_array(spark: SparkSession, classes: Sequence[JavaObject]) -> JavaObject:
    arr = gateway(spark).new_array(jvm(spark).java.lang.Class, len(classes))
    for i, c in enumerate(classes):
        arr[i] = c
    return arr


def partition_values(spark: SparkSession, spec: JavaObject, partition: JavaObject) -> tuple[PartitionScalar, ...]:
    """A Java partition ``StructLike`` (e.g. ``DataFile.partition()``) in internal representation."""
    j = jvm(spark)
    return tuple(
        _internal_value(j, type_id, partition.get(i, java_class))
        for i, (type_id, java_class) in enumerate(_partition_field_types(spec))
    )


def _partition_field_types(spec: JavaObject) -> list[tuple[str, JavaObject]]:
    """(Iceberg TypeID name, Java class) of each field of ``spec``'s partition type, in order."""
    return [(str(f.type().typeId().toString()), f.type().typeId().javaClass()) for f in spec.partitionType().fields()]


def _internal_value(j: Any, type_id: str, value: Any) -> PartitionScalar:
    if value is None:
        return None
    if type_id in ("BINARY", "FIXED"):
        return bytes(j.org.apache.iceberg.util.ByteBuffers.toByteArray(value)).hex()
    if type_id == "DECIMAL":
        return str(value)
    if type_id == "UUID":
        return str(value.toString())
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class PartitionDecoder:
    """:func:`partition_values` for many files of one table: the spec-level lookups (partition type, field types,
    Java classes: about ten py4j round trips per field) are made once per spec instead of once per file, so a
    file's partition costs one round trip per field. Every py4j call is a socket round trip to the driver JVM,
    which is what made per-file metadata walks slow."""

    def __init__(self, spark: SparkSession, specs: JavaObject) -> None:
        self._jvm = jvm(spark)
        self._specs = specs  # Java Map<Integer, PartitionSpec> (Table.specs())
        self._types: dict[int, list[tuple[str, JavaObject]]] = {}

    def field_types(self, spec_id: int) -> list[tuple[str, JavaObject]]:
        spec_id = int(spec_id)
        if spec_id not in self._types:
            spec = self._specs.get(spec_id)
            if spec is None:
                raise UnsupportedTableError(f"unknown partition spec {spec_id}")
            self._types[spec_id] = _partition_field_types(spec)
        return self._types[spec_id]

    def values(self, spec_id: int, partition: JavaObject) -> tuple[PartitionScalar, ...]:
        """The partition tuple of a file of spec ``spec_id`` (``partition`` is ``ContentFile.partition()``)."""
        return tuple(
            _internal_value(self._jvm, type_id, partition.get(i, java_class))
            for i, (type_id, java_class) in enumerate(self.field_types(spec_id))
        )


def spark_partition_values(fields: Sequence[PartitionFieldDesc], partition: Row | None) -> tuple[PartitionScalar, ...]:
    """Convert a Spark ``_partition`` struct (which spans the fields of *all* specs, by name) to the internal
    representation of one spec's fields. Spark shows ``day``/identity-date values as ``datetime.date`` and
    identity-timestamp values as ``datetime.datetime`` (session time zone naive or aware)."""
    out: list[PartitionScalar] = []
    as_dict = partition.asDict() if partition is not None else {}
    for f in fields:
        value = as_dict.get(f.name)
        out.append(spark_value_to_internal(f.result_type, value))
    return tuple(out)


def spark_value_to_internal(type_id: str, value: Any) -> PartitionScalar:
    if value is None:
        return None
    if type_id == "DATE":
        if isinstance(value, _dt.datetime):
            value = value.date()
        if isinstance(value, _dt.date):
            return (value - _EPOCH_DATE).days
        return int(value)
    if type_id in ("TIMESTAMP", "TIMESTAMP_NANO"):
        if isinstance(value, _dt.datetime):
            if value.tzinfo is None:
                # PySpark builds naive datetimes in the Python process's local time zone.
                value = value.astimezone(_dt.timezone.utc)
            delta = value - _EPOCH_TS
            return int((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
        return int(value)
    if type_id == "DECIMAL":
        return str(value)
    if type_id in ("BINARY", "FIXED"):
        return bytes(value).hex()
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# Files -----------------------------------------------------------------------------------------------------------
def data_files(table: JavaObject, snapshot_id: int | None = None) -> Iterator[JavaObject]:
    """Every live ``DataFile`` of a snapshot (the current one by default)."""
    scan = table.newScan()
    if snapshot_id is not None:
        scan = scan.useSnapshot(int(snapshot_id))
    tasks = scan.planFiles()
    try:
        it = tasks.iterator()
        while it.hasNext():
            yield it.next().file()
    finally:
        tasks.close()
