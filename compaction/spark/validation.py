"""Commit validation, layers (b) and (c) of the design, plus a safe rollback.

(a) is Iceberg's own optimistic-concurrency validation (``validateFromSnapshot``) inside every commit we make.
(b) :func:`classify_java_error` maps what went wrong to a ``CompactionError`` subclass (conflict vs failure).
(c) :func:`fingerprint` computes the live row count and an order-independent content checksum of a partition's
    rows at a snapshot (Spark time travel); the job compares the compaction snapshot with its parent.
"""

from __future__ import annotations

import decimal
import enum
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Sequence, Tuple

from compaction.core.errors import (
    CatalogUnavailableError,
    CommitConflictError,
    CompactionError,
    ConfigError,
    RewriteJobError,
)
from compaction.core.run_options import VALIDATION_DEFAULT, VALIDATION_LEVELS
from compaction.spark.compat import read_at_snapshot

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


class ValidationLevel(str, enum.Enum):
    NONE = "none"
    COUNT = "count"
    CHECKSUM = "checksum"

    @classmethod
    def parse(cls, value: str) -> ValidationLevel:
        try:
            return cls(str(value).lower())
        except ValueError as e:
            raise ConfigError(f"invalid validation level {value!r}: expected one of {', '.join(VALIDATION_LEVELS)}") from e


# Chosen from bench/results/scale.txt: count catches every lost or resurrected row for +13-38 % over no validation;
# checksum also catches changed values but reads the table 4-5 times (about 2x a bare rewrite_data_files).
VALIDATION_LEVEL_DEFAULT = ValidationLevel(VALIDATION_DEFAULT)


@dataclass(frozen=True)
class Fingerprint:
    rows: int
    checksum: str | None  # decimal string; None at level count

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "checksum": self.checksum}


def fingerprint(spark: SparkSession, table_ref: str, snapshot_id: int, predicate: Column,
                level: ValidationLevel) -> Fingerprint | None:
    """Live rows of the partition at ``snapshot_id`` (deletes applied by Iceberg's reader)."""
    if level is ValidationLevel.NONE:
        return None
    from pyspark.sql import functions as F

    df = read_at_snapshot(spark, table_ref, snapshot_id).where(predicate)
    if level is ValidationLevel.COUNT:
        # Iceberg answers this from manifest metadata (aggregate push-down) when no delete file applies to the
        # scanned files and the predicate selects whole partitions, e.g. right after a MAJOR; otherwise it reads.
        return Fingerprint(int(df.count()), None)
    agg = df.agg(F.count(F.lit(1)).alias("n"), F.sum(_row_hash(df)).alias("h")).collect()[0]
    return _fingerprint_of(agg["n"], agg["h"], with_checksum=True)


def snapshot_fingerprints(spark: SparkSession, table_ref: str, requests: Sequence[Tuple[int, Column]],
                          level: ValidationLevel) -> list[Fingerprint | None]:
    """:func:`fingerprint` of each ``(snapshot_id, predicate)``, all in one Spark job: the union of one aggregate per
    request (each branch is the very query :func:`fingerprint` runs, so Iceberg still answers a count from
    metadata where it can), instead of one job per request."""
    if level is ValidationLevel.NONE:
        return [None] * len(requests)
    if len(requests) == 1:
        return [fingerprint(spark, table_ref, requests[0][0], requests[0][1], level)]
    from functools import reduce

    from pyspark.sql import functions as F

    branches = []
    for i, (snapshot_id, predicate) in enumerate(requests):
        df = read_at_snapshot(spark, table_ref, snapshot_id).where(predicate)
        checksum = F.sum(_row_hash(df)) if level is ValidationLevel.CHECKSUM else F.lit(None).cast("decimal(38,0)")
        branches.append(df.agg(F.count(F.lit(1)).alias("n"), checksum.alias("h")).select(F.lit(i).alias("i"), "n", "h"))
    rows = {int(r["i"]): r for r in reduce(lambda a, b: a.unionByName(b), branches).collect()}
    with_checksum = level is ValidationLevel.CHECKSUM
    return [_fingerprint_of(rows[i]["n"], rows[i]["h"], with_checksum) for i in range(len(requests))]


def _fingerprint_of(n: Any, h: Any, with_checksum: bool) -> Fingerprint:
    """A count (and checksum: a sum of row hashes, null over no rows) as aggregated by Spark."""
    return Fingerprint(int(n), str(h if h is not None else 0) if with_checksum else None)


def _row_hash(df: Any) -> Column:
    """Order-independent row checksum term: the row's 64-bit hash, as decimal so that sums never overflow.

    The columns are hashed directly (``xxhash64(c1, c2, ...)``), together with a bit mask of the null columns:
    xxhash64 skips nulls, so without the mask (a, null) and (null, a) would hash alike. Nested columns are hashed
    through their JSON (Spark refuses to hash maps, and skips nulls inside structs). Hashing the row's JSON
    instead, as before, cost several times the rewrite itself on wide rows with long strings (bench/scale.py)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    values: list[Column] = []
    masks: list[Column] = []
    mask: Column | None = None
    for i, field in enumerate(df.schema.fields):
        col = F.col("`" + field.name.replace("`", "``") + "`")
        nested = isinstance(field.dataType, (T.StructType, T.ArrayType, T.MapType))
        values.append(F.to_json(col) if nested else col)
        bit = F.when(col.isNull(), F.lit(1 << (i % 62))).otherwise(F.lit(0)).cast("long")
        mask = bit if mask is None else mask.bitwiseOR(bit)
        if i % 62 == 61:
            masks.append(mask)
            mask = None
    if mask is not None:
        masks.append(mask)
    return F.xxhash64(*values, *masks).cast("decimal(38,0)")


#: Partitions whose fingerprints one Spark job computes side by side (one conditional aggregate each).
PARTITIONS_PER_JOB = 32


def partition_fingerprints(spark: SparkSession, table_ref: str, snapshot_id: int, predicates: Sequence[Column],
                           level: ValidationLevel) -> list[Fingerprint | None]:
    """:func:`fingerprint` of each predicate at ``snapshot_id``, several per Spark job (one read of the union).

    Each value is computed with the very predicate :func:`fingerprint` would use (a conditional aggregate per
    predicate, so overlapping predicates are fine), over the rows the OR of the predicates selects: rows outside
    it satisfy none of them. Time travel and delete application are Iceberg's, as for :func:`fingerprint`."""
    return partition_fingerprints_query(spark, table_ref, snapshot_id, predicates, level)()


def partition_fingerprints_query(spark: SparkSession, table_ref: str, snapshot_id: int,
                                 predicates: Sequence[Column],
                                 level: ValidationLevel, *,
                                 frame: Any = None) -> Callable[[], list[Fingerprint | None]]:
    """:func:`partition_fingerprints` in two steps: this call loads the table and builds (analyses) the queries in
    the calling thread; the returned function runs them, in any thread. ``table_ref``: a catalog table name or the
    path of a ``metadata.json`` (Iceberg's static table, loaded without any catalog); ``frame``: the table's rows at
    ``snapshot_id`` already loaded, used instead (e.g. :func:`compaction.spark.file_io_reads.static_table_frame`)."""
    if level is ValidationLevel.NONE:
        return lambda: [None] * len(predicates)
    from functools import reduce

    from pyspark.sql import functions as F

    queries = []
    for start in range(0, len(predicates), PARTITIONS_PER_JOB):
        chunk = list(predicates[start:start + PARTITIONS_PER_JOB])
        source = frame if frame is not None else (
            read_at_snapshot(spark, table_ref, snapshot_id))
        df = source.where(reduce(lambda a, b: a | b, chunk))
        checksum = level is ValidationLevel.CHECKSUM
        # Each row's hash and predicate values once (a projection: Spark does not inline an expensive expression
        # used several times), then one conditional aggregate per predicate.
        flags = [F.coalesce(predicate, F.lit(False)).alias(f"p{i}") for i, predicate in enumerate(chunk)]
        rows = df.select(*flags, *([_row_hash(df).alias("h")] if checksum else []))
        columns = []
        for i in range(len(chunk)):
            # A predicate that is false or null counts no row, exactly like where(predicate).
            columns.append(F.count(F.when(F.col(f"p{i}"), F.lit(1))).alias(f"n{i}"))
            if checksum:
                columns.append(F.sum(F.when(F.col(f"p{i}"), F.col("h"))).alias(f"h{i}"))
        queries.append((rows.agg(*columns), len(chunk), checksum))

    def run() -> list[Fingerprint | None]:
        out: list[Fingerprint | None] = []
        for query, n, with_checksum in queries:
            row = query.collect()[0]
            out.extend(_fingerprint_of(row[f"n{i}"], row[f"h{i}"] if with_checksum else None, with_checksum)
                       for i in range(n))
        return out

    return run


def combine_fingerprints(parts: Sequence[Fingerprint]) -> Fingerprint:
    """The fingerprint of the union of *disjoint* row sets: counts and checksums (sums of row hashes) add up."""
    rows = sum(p.rows for p in parts)
    if any(p.checksum is None for p in parts):
        return Fingerprint(rows, None)
    return Fingerprint(rows, str(sum((decimal.Decimal(p.checksum) for p in parts if p.checksum is not None),
                                     decimal.Decimal(0))))


FingerprintKey = Tuple[int, FrozenSet[Any]]


class FingerprintCache:
    """Fingerprints of (snapshot, set of partition keys), each read at most once, optionally read ahead.

    Sound because a snapshot never changes: the rows of a snapshot restricted to a fixed set of partitions are a
    pure function of both. Our cleanup commit's parent is our rewrite commit, whose rows were just read as the
    rewrite's "after", and the rewrite's parent is the base snapshot, whose rows can be read while Iceberg's
    rewrite action runs (one file group of one partition leaves a core idle). ``compute`` is called as
    ``compute(snapshot_id, predicate)``; the caller binds the session, table and level."""

    def __init__(self, compute: Callable[[int, Any], Fingerprint | None],
                 compute_many: Callable[[list[Tuple[int, Any]]], list[Fingerprint | None]] | None = None,
                 known: dict[FingerprintKey, Fingerprint | None] | None = None) -> None:
        self._compute = compute
        self._compute_many = compute_many
        # ``known``: values shared with other caches of the same table and level (a job group's checks: the
        # snapshot a selective rewrite committed is the parent its conversion is compared with).
        self._values: dict[FingerprintKey, Fingerprint | None] = {} if known is None else known
        self._pending: dict[FingerprintKey, Future[Fingerprint | None]] = {}
        self._executor: ThreadPoolExecutor | None = None

    def prefetch(self, snapshot_id: int, keys: FrozenSet[Any], predicate: Any) -> None:
        """Start reading in a background thread (Spark runs jobs of several threads concurrently)."""
        key = (int(snapshot_id), keys)
        if key in self._values or key in self._pending:
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icecompact-prefetch")
        self._pending[key] = self._executor.submit(self._compute, int(snapshot_id), predicate)

    def get_many(self, requests: Sequence[Tuple[int, FrozenSet[Any], Any]]) -> None:
        """Make every ``(snapshot_id, keys, predicate)`` known: read-aheads are awaited, the rest is read together
        (``compute_many``: one Spark job). Values are then answered by :meth:`get`."""
        missing: dict[FingerprintKey, Any] = {}
        for snapshot_id, keys, predicate in requests:
            key = (int(snapshot_id), keys)
            if key in self._values or key in missing:
                continue
            if key in self._pending:
                self.get(int(snapshot_id), keys, predicate)
                continue
            missing[key] = predicate
        if self._compute_many is None or len(missing) < 2:
            for (snapshot_id, keys), predicate in missing.items():
                self.get(snapshot_id, keys, predicate)
            return
        values = self._compute_many([(snapshot_id, predicate) for (snapshot_id, _), predicate in missing.items()])
        for key, value in zip(missing, values):
            self._values[key] = value

    def get(self, snapshot_id: int, keys: FrozenSet[Any], predicate: Any) -> Fingerprint | None:
        key = (int(snapshot_id), keys)
        if key not in self._values:
            future = self._pending.pop(key, None)
            value = None
            done = False
            if future is not None:
                try:
                    value, done = future.result(), True
                except Exception:  # a failed read-ahead is simply read again, in this thread, where errors surface
                    done = False
            self._values[key] = value if done else self._compute(int(snapshot_id), predicate)
        return self._values[key]

    def close(self) -> None:
        """Wait for read-aheads still running (never leave a Spark job behind) and stop the thread."""
        for future in self._pending.values():
            try:
                future.result()
            except Exception:  # nobody asked for this value any more
                pass
        self._pending.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def read_ahead_allowed(spark: SparkSession, catalog_name: str) -> bool:
    """Whether :meth:`FingerprintCache.prefetch` may be used for tables of this catalog.

    A read-ahead loads the table through the catalog from a second thread while this one commits. SQLite takes one
    writer at a time and breaks on overlapping access from one JVM (SQLITE_BUSY, a JVM left locked;
    bench/major.py hit ``SQLITE_BUSY`` on the next commit after a read-ahead), so on an SQLite catalog every read
    happens in the committing thread, one after the other."""
    uri = spark.conf.get(f"spark.sql.catalog.{catalog_name}.uri", "") or ""
    return not str(uri).startswith("jdbc:sqlite")


def java_exception_chain(error: BaseException) -> list[tuple[str, str]]:
    """(class name, message) of a py4j Java exception and its causes, outermost first."""
    java = getattr(error, "java_exception", None)
    chain: list[tuple[str, str]] = []
    seen = 0
    while java is not None and seen < 20:
        chain.append((str(java.getClass().getName()), str(java.getMessage())))
        java = java.getCause()
        seen += 1
    return chain


_CONFLICT_CLASSES = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
)


#: Connection failures of the catalog's database or service (JDBC and REST catalogs): the catalog is unavailable.
_UNAVAILABLE_CLASSES = (
    "java.net.ConnectException",
    "java.net.NoRouteToHostException",
    "java.sql.SQLTransientConnectionException",
    "java.sql.SQLNonTransientConnectionException",
)
#: SQLSTATE classes of a lost or refused database connection: 08 (connection exception), 57P01-57P03 (the server
#: is shutting down, crashed, or cannot accept connections yet).
_UNAVAILABLE_SQL_STATES = ("08", "57P01", "57P02", "57P03")


def _sql_states(error: BaseException) -> list[str]:
    """The SQLSTATEs of the java.sql.SQLExceptions in a py4j error's cause chain."""
    java = getattr(error, "java_exception", None)
    states: list[str] = []
    for _ in range(20):
        if java is None:
            break
        try:
            state = java.getSQLState()  # only SQLExceptions have it
            if state:
                states.append(str(state))
        except Exception:  # noqa: BLE001  (py4j: no such method on this class)
            pass
        java = java.getCause()
    return states


def _unavailable(error: BaseException, chain: list[tuple[str, str]]) -> bool:
    if any(cls in _UNAVAILABLE_CLASSES for cls, _ in chain):
        return True
    return any(state.startswith(_UNAVAILABLE_SQL_STATES) for state in _sql_states(error))


def classify_java_error(error: BaseException, what: str) -> CompactionError:
    """Iceberg ValidationException / CommitFailedException -> retryable CommitConflictError; a lost connection to
    the catalog -> CatalogUnavailableError (retryable when nothing was committed); anything else -> RewriteJobError.
    The message names the Java class and message (no stack)."""
    if isinstance(error, CompactionError):
        return error
    chain = java_exception_chain(error)
    # CommitStateUnknownException is never "unavailable": the commit may have landed (Iceberg: do not retry it).
    if _unavailable(error, chain) and not any(c.endswith("CommitStateUnknownException") for c, _ in chain):
        cls, message = chain[0]
        unavailable = CatalogUnavailableError(f"{what}: catalog unavailable: {cls.rsplit('.', 1)[-1]}: {message}")
        unavailable.java_class = cls  # type: ignore[attr-defined]
        return unavailable
    for cls, message in chain:
        if cls in _CONFLICT_CLASSES:
            err: CompactionError = CommitConflictError(f"{what}: {cls.rsplit('.', 1)[-1]}: {message}")
            err.java_class = cls  # type: ignore[attr-defined]
            return err
    if chain:
        cls, message = chain[0]
        err = RewriteJobError(f"{what}: {cls.rsplit('.', 1)[-1]}: {message}")
        err.java_class = cls  # type: ignore[attr-defined]
        return err
    return RewriteJobError(f"{what}: {type(error).__name__}: {error}")


def rollback_if_current(spark: SparkSession, table: Any, commit_snapshot_id: int, parent_snapshot_id: int) -> bool:
    """Make ``parent`` current again, only if ``commit`` is still the current snapshot.

    A single compare-and-swap on the table metadata with no retry: Iceberg's ``rollbackTo`` would refresh and
    re-apply after a concurrent commit, silently dropping that writer's snapshot from main. Returns whether the
    rollback happened (False: someone committed after us -> the run needs human attention)."""
    ops = table.operations()
    base = ops.refresh()
    current = base.currentSnapshot()
    if current is None or int(current.snapshotId()) != int(commit_snapshot_id):
        return False
    builder = spark.sparkContext._jvm.org.apache.iceberg.TableMetadata.buildFrom(base)
    updated = builder.setBranchSnapshot(int(parent_snapshot_id), "main").build()
    try:
        ops.commit(base, updated)
    except Exception:  # CommitFailedException: someone else won the CAS; do not force
        return False
    table.refresh()
    return True
