"""Seeded CDC workload generator for merge-on-read Iceberg tables.

:func:`generate` creates a table and drives a change stream into it the way CDC pipelines and row-level DML do,
while tracking the table's live rows in a plain Python model (key -> row). The model is a third, independent
expectation next to Spark's read and the reference reader (:mod:`icecompact_testing.oracle`).

What a workload contains (shape drawn by :meth:`WorkloadSpec.random` or chosen explicitly):

* format v2 (position-delete files) or v3 (deletion vectors), merge-on-read for DELETE/UPDATE/MERGE;
* several insert commits; deletes by key; updates as delete+insert; re-inserts of deleted keys; nulls in key
  columns (``null`` equals ``null`` for equality deletes); single (``id``) or multi-column (``id, region``) keys,
  with reused ``id`` values under another ``region`` for multi-column keys;
* partitioning by ``days(ts)``, identity ``region``, ``bucket(4, id)``, combinations, or none; optionally one
  partition-spec evolution half-way through (so old rows stay in old-spec partitions);
* position deletes / DVs written by Spark DML (``DELETE``, ``UPDATE``, ``MERGE ... DELETE``, ``MERGE ... UPDATE``);
* real equality-delete files committed through the Iceberg Java API (:mod:`compaction.spark.equality_deletes`):
  one file per (spec, partition) that holds a deleted row, or a single global file written with an unpartitioned
  spec (``global_eq_deletes``) when the table has one; occasionally keys that match nothing.

Each round ``r`` (``r = 0 .. commits-1``) makes these commits, in this order::

    [r == evolve round] ALTER TABLE ... partition field
    [r > 0] RowDelta: equality deletes for the keys deleted and updated "CDC style" this round
    append: new rows + re-inserted keys + new versions of the rows updated CDC style
    [r > 0] Spark DELETE or MERGE ... WHEN MATCHED THEN DELETE     (position deletes / DVs)
    [r > 0] Spark UPDATE or MERGE ... WHEN MATCHED THEN UPDATE     (position deletes / DVs + new rows)

The equality delete of a CDC update is committed *before* the append of the new version: it gets a higher
sequence number than the old row and a lower one than the new row, so it removes exactly the old version.
Every key is live at most once (the model is a dict), and equality deletes are written into the partition of the
data file that holds the live row (looked up through Spark's ``_spec_id``/``_partition`` metadata columns), so the
model predicts exactly what Iceberg applies; a key that cannot be found exactly once aborts the workload.

Rows are tuples in table column order ``(id, region, ts, amount, note)``; ``ts`` is a naive UTC ``datetime``,
the canonical form of :func:`icecompact_testing.oracle.normalize_value`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import random
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from compaction.catalog import CatalogConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS: tuple[str, ...] = ("id", "region", "ts", "amount", "note")
TABLE_DDL_COLUMNS = "id bigint, region string, ts timestamp, amount int, note string"

REGIONS: tuple[str, ...] = ("EU", "US", "APAC", "LATAM")
KEY_CHOICES: tuple[tuple[str, ...], ...] = (("id",), ("id", "region"))
BASE_TS_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
DAY_US = 86_400_000_000
_EPOCH = _dt.datetime(1970, 1, 1)

# partitioning name -> PARTITIONED BY clause
PARTITIONINGS: Mapping[str, str] = {
    "unpartitioned": "",
    "days_ts": "days(ts)",
    "identity": "region",
    "bucket": "bucket(4, id)",
    "days_identity": "days(ts), region",
    "multi": "days(ts), region, bucket(4, id)",
}
# partitioning name -> the one spec evolution applied half-way (ADD names the field id_bucket_4, while
# PARTITIONED BY names it id_bucket; DROP/REPLACE below use transform expressions).
EVOLUTIONS: Mapping[str, str] = {
    "unpartitioned": "ADD PARTITION FIELD bucket(4, id)",
    "days_ts": "REPLACE PARTITION FIELD days(ts) WITH region",
    "identity": "ADD PARTITION FIELD days(ts)",
    "bucket": "ADD PARTITION FIELD region",
    "days_identity": "ADD PARTITION FIELD bucket(4, id)",
    "multi": "DROP PARTITION FIELD bucket(4, id)",
}
# Above this many keys, DML uses MERGE with a source relation instead of a literal predicate.
_MAX_PREDICATE_KEYS = 200
# Above this many rows, sources are DataFrames (temp views) instead of inline VALUES.
_MAX_INLINE_ROWS = 2000

Key = tuple[Any, ...]
ModelRow = tuple[Any, ...]  # (id, region, ts_us, amount, note): ts in micros inside the model


@dataclass(frozen=True)
class WorkloadSpec:
    """Shape of one workload. Sizes are parameters: tests use tens of rows, benchmarks many more."""

    seed: int = 0
    format_version: int = 2
    partitioning: str = "days_ts"
    key_columns: tuple[str, ...] = ("id",)
    commits: int = 3  # rounds; each round is one append plus (after the first) the delete/update commits
    rows_per_commit: int = 30  # new keys appended per round
    delete_fraction: float = 0.1  # of the live rows, deleted per round
    update_fraction: float = 0.1  # of the live rows, updated per round
    reinsert_fraction: float = 0.3  # of the deleted keys, re-inserted per round
    eq_delete_fraction: float = 0.5  # of this round's deletes+updates, done CDC style with equality deletes
    null_key_fraction: float = 0.05  # of new rows, with a null in a key column (and of regions, null)
    evolve_spec: bool = False
    use_equality_deletes: bool = True
    global_eq_deletes: bool = False  # write equality deletes with an unpartitioned spec when the table has one
    delete_granularity: str = "file"  # v2 position deletes: 'file' or 'partition' scoped
    days_span: int = 3  # ts values spread over this many days from 2024-01-01
    noise_eq_deletes: bool = True  # sometimes add equality-delete keys that match no row

    def __post_init__(self) -> None:
        if self.format_version not in (2, 3):
            raise ValueError(f"format_version must be 2 or 3, not {self.format_version}")
        if self.partitioning not in PARTITIONINGS:
            raise ValueError(f"partitioning must be one of {sorted(PARTITIONINGS)}, not {self.partitioning!r}")
        if tuple(self.key_columns) not in KEY_CHOICES:
            raise ValueError(f"key_columns must be one of {KEY_CHOICES}, not {self.key_columns!r}")
        if self.commits < 1 or self.rows_per_commit < 1 or self.days_span < 1:
            raise ValueError("commits, rows_per_commit and days_span must be >= 1")
        if self.evolve_spec and self.commits < 2:
            raise ValueError("evolve_spec needs commits >= 2")
        for name in ("delete_fraction", "update_fraction", "reinsert_fraction", "eq_delete_fraction", "null_key_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], not {value}")
        if self.delete_fraction + self.update_fraction > 1.0:
            raise ValueError("delete_fraction + update_fraction must be <= 1")
        if self.delete_granularity not in ("file", "partition"):
            raise ValueError("delete_granularity must be 'file' or 'partition'")

    @classmethod
    def random(cls, seed: int, **overrides: Any) -> WorkloadSpec:
        """A random tiny shape drawn from ``seed`` (deterministic); ``overrides`` replace any field, e.g.
        ``WorkloadSpec.random(7, rows_per_commit=50_000, commits=10)`` for a benchmark."""
        rng = random.Random(f"workload-spec-{seed}")
        partitioning = rng.choice(sorted(PARTITIONINGS))
        commits = rng.randint(2, 4)
        values: dict[str, Any] = dict(
            seed=seed,
            format_version=rng.choice((2, 3)),
            partitioning=partitioning,
            key_columns=rng.choice(KEY_CHOICES),
            commits=commits,
            rows_per_commit=rng.randint(15, 50),
            delete_fraction=round(rng.uniform(0.05, 0.25), 3),
            update_fraction=round(rng.uniform(0.05, 0.25), 3),
            reinsert_fraction=round(rng.uniform(0.1, 0.6), 3),
            eq_delete_fraction=round(rng.uniform(0.3, 0.7), 3),
            null_key_fraction=rng.choice((0.0, 0.05, 0.1, 0.2)),
            evolve_spec=rng.random() < 0.5,
            use_equality_deletes=rng.random() < 0.85,
            global_eq_deletes=rng.random() < 0.5,
            delete_granularity=rng.choice(("file", "partition")),
            days_span=rng.randint(1, 4),
        )
        values.update(overrides)
        if values["evolve_spec"] and values["commits"] < 2:
            values["commits"] = 2
        return cls(**values)

    def replace(self, **changes: Any) -> WorkloadSpec:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class WorkloadResult:
    table: str  # Spark identifier: catalog.namespace.name
    identifier: tuple[str, str]  # (namespace, name) for pyiceberg's load_table
    spec: WorkloadSpec
    columns: tuple[str, ...]
    expected_rows: Counter[tuple[Any, ...]]  # the model's live rows; ts as naive UTC datetime
    stats: Mapping[str, int] = field(default_factory=dict)  # what was done (commit and row counts)
    snapshot_id: int | None = None  # current snapshot when the workload finished


# Model -----------------------------------------------------------------------------------------------------------
def ts_from_micros(micros: int) -> _dt.datetime:
    """Int micros since epoch -> naive UTC datetime (the oracle's canonical timestamp)."""
    return _EPOCH + _dt.timedelta(microseconds=micros)


def _public_row(row: ModelRow) -> tuple[Any, ...]:
    return (row[0], row[1], ts_from_micros(row[2]), row[3], row[4])


class _Model:
    """The table as the generator believes it is: key -> live row (one live row per key, always)."""

    def __init__(self, key_columns: Sequence[str]) -> None:
        self.key_idx = tuple(COLUMNS.index(c) for c in key_columns)
        self.live: dict[Key, ModelRow] = {}
        self.dead: dict[Key, None] = {}  # keys that were live once and are deleted now (insertion-ordered set)

    def key_of(self, row: ModelRow) -> Key:
        return tuple(row[i] for i in self.key_idx)

    def insert(self, row: ModelRow) -> None:
        key = self.key_of(row)
        if key in self.live:
            raise AssertionError(f"workload bug: key {key} inserted twice")
        self.live[key] = row
        self.dead.pop(key, None)

    def delete(self, key: Key) -> None:
        del self.live[key]
        self.dead[key] = None

    def update(self, row: ModelRow) -> None:
        key = self.key_of(row)
        if key not in self.live:
            raise AssertionError(f"workload bug: update of missing key {key}")
        self.live[key] = row

    def rows(self) -> Counter[tuple[Any, ...]]:
        return Counter(_public_row(r) for r in self.live.values())


# SQL helpers -----------------------------------------------------------------------------------------------------
def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _key_predicate(key_columns: Sequence[str], keys: Sequence[Key]) -> str:
    if len(key_columns) == 1:
        col = key_columns[0]
        values = [k[0] for k in keys if k[0] is not None]
        parts = []
        if values:
            parts.append(f"{col} IN ({', '.join(_sql_literal(v) for v in values)})")
        if any(k[0] is None for k in keys):
            parts.append(f"{col} IS NULL")
        return " OR ".join(parts) or "FALSE"
    return " OR ".join(
        "(" + " AND ".join(f"{c} <=> {_sql_literal(v)}" for c, v in zip(key_columns, k)) + ")" for k in keys
    ) or "FALSE"


def _join_condition(key_columns: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{c} <=> {right}.{c}" for c in key_columns)


class _Writer:
    """Spark side of the workload: one table, SQL statements only.

    Small inputs are inlined as ``VALUES`` (a local relation: no Python worker, about half the cost of
    ``createDataFrame``); inputs above :data:`_MAX_INLINE_ROWS` go through a temporary view of a DataFrame."""

    def __init__(self, spark: SparkSession, table: str, spec: WorkloadSpec) -> None:
        self.spark = spark
        self.table = table
        self.keys = tuple(spec.key_columns)
        self.view_prefix = f"wl_src_{uuid.uuid4().hex[:8]}"
        self._views = 0
        self._open_views: list[str] = []

    def sql(self, statement: str) -> None:
        self.spark.sql(statement)

    # sources ------------------------------------------------------------------------------------------------
    def _relation(self, rows: Sequence[tuple[Any, ...]], names: Sequence[str], types: Sequence[str]) -> str:
        """A SQL relation (parenthesized query or temp view name) with typed columns ``names``."""
        if len(rows) <= _MAX_INLINE_ROWS:
            values = ", ".join("(" + ", ".join(_sql_literal(v) for v in r) + ")" for r in rows)
            casts = ", ".join(f"CAST({n} AS {t}) AS {n}" for n, t in zip(names, types))
            return f"(SELECT {casts} FROM VALUES {values} AS v({', '.join(names)}))"
        self._views += 1
        view = f"{self.view_prefix}_{self._views}"
        schema = ", ".join(f"{n} {t}" for n, t in zip(names, types))
        from pyspark.sql.functions import broadcast

        # Sources are a small fraction of the table: broadcast them (their size is unknown to the planner).
        broadcast(self.spark.createDataFrame(list(rows), schema)).createOrReplaceTempView(view)
        self._open_views.append(view)
        return view

    def _rows_relation(self, rows: Sequence[tuple[Any, ...]], extra: Sequence[tuple[str, str]] = ()) -> str:
        """Full rows ``(id, region, ts_us, amount, note, *extra)`` as a relation with a ``ts`` timestamp column."""
        names = ["id", "region", "ts_us", "amount", "note", *(n for n, _ in extra)]
        types = ["BIGINT", "STRING", "BIGINT", "INT", "STRING", *(t for _, t in extra)]
        inner = self._relation(rows, names, types)
        select = ", ".join(["id", "region", "timestamp_micros(ts_us) AS ts", "amount", "note", *(n for n, _ in extra)])
        return f"(SELECT {select} FROM {inner} r)"

    def _keys_relation(self, keys: Sequence[Key]) -> str:
        return self._relation(keys, self.keys, ["BIGINT" if c == "id" else "STRING" for c in self.keys])

    def _release(self) -> None:
        while self._open_views:
            self.spark.catalog.dropTempView(self._open_views.pop())

    def _run(self, statement: str) -> None:
        try:
            self.sql(statement)
        finally:
            self._release()

    # statements ---------------------------------------------------------------------------------------------
    def append(self, rows: Sequence[ModelRow]) -> None:
        self._run(f"INSERT INTO {self.table} SELECT * FROM {self._rows_relation(rows)}")

    def delete_statement(self, keys: Sequence[Key]) -> None:
        self._run(f"DELETE FROM {self.table} WHERE {_key_predicate(self.keys, keys)}")

    def merge_delete(self, keys: Sequence[Key]) -> None:
        self._run(
            f"MERGE INTO {self.table} t USING {self._keys_relation(keys)} s "
            f"ON {_join_condition(self.keys, 't', 's')} WHEN MATCHED THEN DELETE"
        )

    def update_statement(self, keys: Sequence[Key], note: str) -> None:
        self._run(
            f"UPDATE {self.table} SET amount = amount + 1, note = {_sql_literal(note)} "
            f"WHERE {_key_predicate(self.keys, keys)}"
        )

    def merge_update(self, rows: Sequence[ModelRow]) -> None:
        self._run(
            f"MERGE INTO {self.table} t USING {self._rows_relation(rows)} s "
            f"ON {_join_condition(self.keys, 't', 's')} "
            "WHEN MATCHED THEN UPDATE SET t.ts = s.ts, t.amount = s.amount, t.note = s.note"
        )

    def merge_delete_update(self, deleted: Sequence[Key], updated: Sequence[ModelRow]) -> None:
        """One MERGE that deletes some keys and updates others (CDC apply of a mixed batch)."""
        key_idx = [COLUMNS.index(c) for c in self.keys]
        source: list[tuple[Any, ...]] = [(*r, False) for r in updated]
        for key in deleted:
            row: list[Any] = [None] * len(COLUMNS)
            for i, v in zip(key_idx, key):
                row[i] = v
            source.append((*row, True))
        self._run(
            f"MERGE INTO {self.table} t USING {self._rows_relation(source, [('is_delete', 'BOOLEAN')])} s "
            f"ON {_join_condition(self.keys, 't', 's')} "
            "WHEN MATCHED AND s.is_delete THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET t.ts = s.ts, t.amount = s.amount, t.note = s.note"
        )

    def locate(self, keys: Sequence[Key]) -> list[tuple[Key, int, Any]]:
        """(key, spec id, Spark ``_partition`` struct) of the live row of every key."""
        select = ", ".join(f"t.{c}" for c in self.keys)
        try:
            rows = self.spark.sql(
                f"SELECT {select}, t._spec_id AS spec_id, t._partition AS part FROM {self.table} t "
                f"LEFT SEMI JOIN {self._keys_relation(keys)} s ON {_join_condition(self.keys, 't', 's')}"
                if len(keys) > _MAX_PREDICATE_KEYS
                else f"SELECT {select}, t._spec_id AS spec_id, t._partition AS part FROM {self.table} t "
                f"WHERE {_key_predicate(self.keys, keys)}"
            ).collect()
        finally:
            self._release()
        return [(tuple(r[c] for c in self.keys), int(r["spec_id"]), r["part"]) for r in rows]


# Generator -------------------------------------------------------------------------------------------------------
def _split_table_name(catalog: CatalogConfig, table_name: str) -> tuple[str, str]:
    parts = table_name.split(".")
    if len(parts) == 3 and parts[0] == catalog.name:
        parts = parts[1:]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"table name must be 'namespace.name', not {table_name!r}")
    return parts[0], parts[1]


def _table_properties(spec: WorkloadSpec) -> dict[str, str]:
    props = {
        "format-version": str(spec.format_version),
        "write.delete.mode": "merge-on-read",
        "write.update.mode": "merge-on-read",
        "write.merge.mode": "merge-on-read",
        # No shuffle before writing (tiny tables: a shuffle costs more than the write); fanout writers keep one
        # open file per partition, the way streaming CDC writers (Flink) do.
        "write.distribution-mode": "none",
        "write.spark.fanout.enabled": "true",
    }
    if spec.format_version == 2:
        props["write.delete.granularity"] = spec.delete_granularity
    return props


def create_table(spark: SparkSession, table: str, spec: WorkloadSpec, *, replace: bool = False) -> None:
    from compaction.demo.tables import create_table as create_iceberg_table

    create_iceberg_table(spark, table, TABLE_DDL_COLUMNS, PARTITIONINGS[spec.partitioning], _table_properties(spec),
                         replace=replace)


class _Generator:
    def __init__(self, spark: SparkSession, table: str, spec: WorkloadSpec) -> None:
        self.spark = spark
        self.table = table
        self.spec = spec
        self.rng = random.Random(f"workload-{spec.seed}")
        self.model = _Model(spec.key_columns)
        self.writer = _Writer(spark, table, spec)
        self.stats: Counter[str] = Counter()
        self.next_id = 1
        self.used_ids: list[int] = []
        self.evolve_round = max(1, spec.commits // 2) if spec.evolve_spec else -1

    # value generation ---------------------------------------------------------------------------------------
    def _ts(self) -> int:
        return BASE_TS_US + self.rng.randrange(self.spec.days_span * DAY_US)

    def _region(self, allow_null: bool = True) -> str | None:
        if allow_null and self.rng.random() < self.spec.null_key_fraction:
            return None
        return self.rng.choice(REGIONS)

    def _note(self, round_: int, i: int) -> str | None:
        return None if self.rng.random() < 0.1 else f"r{round_}-{i}"

    def _new_key_row(self, round_: int, i: int) -> ModelRow:
        spec = self.spec
        for _ in range(20):
            region = self._region()
            if self.rng.random() < spec.null_key_fraction:
                id_: int | None = None
            elif len(spec.key_columns) == 2 and self.used_ids and self.rng.random() < 0.15:
                id_ = self.rng.choice(self.used_ids)  # same id under another region: a different key
            else:
                id_ = self.next_id
            row: ModelRow = (id_, region, self._ts(), self.rng.randrange(1000), self._note(round_, i))
            key = self.model.key_of(row)
            if key not in self.model.live and key not in self.model.dead:
                if id_ == self.next_id:
                    self.next_id += 1
                    self.used_ids.append(id_)
                if any(v is None for v in key):
                    self.stats["null_key_rows"] += 1
                return row
        row = (self.next_id, self._region(allow_null=False), self._ts(), self.rng.randrange(1000), self._note(round_, i))
        self.used_ids.append(self.next_id)
        self.next_id += 1
        return row

    def _row_for_key(self, key: Key, round_: int, i: int) -> ModelRow:
        """A fresh row for an existing (dead) key: re-insert."""
        values = dict(zip(self.spec.key_columns, key))
        region = values["region"] if "region" in values else self._region()
        return (values["id"], region, self._ts(), self.rng.randrange(1000), f"re{round_}-{i}")

    def _new_version(self, old: ModelRow, round_: int) -> ModelRow:
        ts = self._ts() if self.rng.random() < 0.3 else old[2]  # may move the row to another day partition
        return (old[0], old[1], ts, self.rng.randrange(1000), f"u{round_}")

    def _count(self, fraction: float, population: int) -> int:
        if fraction <= 0 or population == 0:
            return 0
        return min(population, max(1, round(fraction * population)))

    # rounds ---------------------------------------------------------------------------------------------------
    def run(self) -> None:
        for round_ in range(self.spec.commits):
            if round_ == self.evolve_round:
                self.writer.sql(f"ALTER TABLE {self.table} {EVOLUTIONS[self.spec.partitioning]}")
                self.stats["spec_evolutions"] += 1
            self._round(round_)

    def _round(self, round_: int) -> None:
        spec, rng, model = self.spec, self.rng, self.model
        live_keys = list(model.live)
        n_del = self._count(spec.delete_fraction, len(live_keys)) if round_ > 0 else 0
        n_upd = min(self._count(spec.update_fraction, len(live_keys)), len(live_keys) - n_del) if round_ > 0 else 0
        chosen = rng.sample(live_keys, n_del + n_upd) if n_del + n_upd else []
        del_keys, upd_keys = chosen[:n_del], chosen[n_del:]
        if spec.use_equality_deletes:
            n_eq_del = round(len(del_keys) * spec.eq_delete_fraction)
            n_eq_upd = round(len(upd_keys) * spec.eq_delete_fraction)
        else:
            n_eq_del = n_eq_upd = 0
        eq_del, dml_del = del_keys[:n_eq_del], del_keys[n_eq_del:]
        eq_upd, dml_upd = upd_keys[:n_eq_upd], upd_keys[n_eq_upd:]

        # Re-inserts are drawn before this round's deletes: a key never comes back in the round it dies.
        reinserts = [k for k in model.dead if rng.random() < spec.reinsert_fraction] if round_ > 0 else []

        # 1. CDC deletes and the delete half of CDC updates: equality deletes, committed before the append.
        if eq_del or eq_upd:
            self._equality_deletes(eq_del + eq_upd)
            for k in eq_del:
                model.delete(k)
            self.stats["eq_deleted_keys"] += len(eq_del)
        new_versions = [self._new_version(model.live[k], round_) for k in eq_upd]
        self.stats["eq_updated_keys"] += len(eq_upd)

        # 2. One append: new keys, re-inserted keys, new versions of CDC-updated rows. The model is updated while
        #    drawing, so that two new rows of one batch never share a key.
        rows = []
        for i in range(spec.rows_per_commit):
            rows.append(self._new_key_row(round_, i))
            model.insert(rows[-1])
        for i, k in enumerate(reinserts):
            rows.append(self._row_for_key(k, round_, i))
            model.insert(rows[-1])
        for r in new_versions:
            model.update(r)
        self.writer.append(rows + new_versions)
        self.stats["insert_commits"] += 1
        self.stats["rows_inserted"] += len(rows) + len(new_versions)
        self.stats["reinserted_keys"] += len(reinserts)

        # 3./4. Spark DML: deletes and updates (position deletes / DVs + rewritten rows; a DELETE that covers whole
        #       files drops them instead). Either separate DELETE/UPDATE statements, separate MERGEs, or one MERGE
        #       with a delete and an update clause.
        if not dml_del and not dml_upd:
            return
        small = len(dml_del) + len(dml_upd) <= _MAX_PREDICATE_KEYS
        style = rng.choice(("statements", "merges", "one_merge")) if small else rng.choice(("merges", "one_merge"))
        if dml_del and dml_upd and style == "one_merge":
            updated = [self._new_version(model.live[k], round_) for k in dml_upd]
            self.writer.merge_delete_update(dml_del, updated)
            self.stats["spark_merge_delete_update"] += 1
        else:
            if dml_del:
                if style == "statements":
                    self.writer.delete_statement(dml_del)
                    self.stats["spark_delete"] += 1
                else:
                    self.writer.merge_delete(dml_del)
                    self.stats["spark_merge_delete"] += 1
            if dml_upd and style == "statements":
                note = f"s{round_}"
                self.writer.update_statement(dml_upd, note)
                updated = [(o[0], o[1], o[2], o[3] + 1, note) for o in (model.live[k] for k in dml_upd)]
                self.stats["spark_update"] += 1
            elif dml_upd:
                updated = [self._new_version(model.live[k], round_) for k in dml_upd]
                self.writer.merge_update(updated)
                self.stats["spark_merge_update"] += 1
            else:
                updated = []
        for k in dml_del:
            model.delete(k)
        for r in updated:
            model.update(r)
        self.stats["dml_deleted_keys"] += len(dml_del)
        self.stats["dml_updated_keys"] += len(dml_upd)

    def _equality_deletes(self, keys: Sequence[Key]) -> None:
        from compaction.spark import jvm as J
        from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit

        located = self.writer.locate(keys)
        found = Counter(k for k, _, _ in located)
        wrong = [k for k in keys if found.get(k) != 1]
        if wrong or len(located) != len(keys):
            raise AssertionError(f"workload model diverged from the table: keys {wrong[:5]} not found exactly once")
        table = J.load_table(self.spark, self.table)
        table.refresh()
        specs = {sid: table.specs().get(sid) for sid in J.spec_ids(table)}
        unpartitioned = [sid for sid, s in specs.items() if not s.isPartitioned()]
        groups: dict[tuple[int, tuple[Any, ...]], list[Key]] = defaultdict(list)
        if self.spec.global_eq_deletes and unpartitioned:
            # Global: an unpartitioned delete file applies to every partition of every spec.
            groups[(unpartitioned[0], ())] = list(keys)
        else:
            fields = {sid: J.partition_fields(table, s) for sid, s in specs.items()}
            for key, spec_id, part in located:
                groups[(spec_id, J.spark_partition_values(fields[spec_id], part))].append(key)
        deletes = []
        for (spec_id, partition), group in groups.items():
            rows = list(group)
            if self.spec.noise_eq_deletes and self.rng.random() < 0.3:
                rows.append(self._noise_key())
            deletes.append(EqualityDeleteSpec(tuple(self.spec.key_columns), tuple(rows), spec_id, partition))
        write_and_commit(self.spark, table, deletes)
        self.stats["eq_delete_commits"] += 1
        self.stats["eq_delete_files"] += len(deletes)

    def _noise_key(self) -> Key:
        """A key no row ever has (negative ids are never generated)."""
        values = {"id": -self.rng.randrange(1, 1_000_000), "region": self.rng.choice(REGIONS)}
        return tuple(values[c] for c in self.spec.key_columns)


def generate(
    spark: SparkSession, catalog: CatalogConfig, table_name: str, spec: WorkloadSpec, *, replace: bool = False
) -> WorkloadResult:
    """Create ``catalog.table_name`` (``table_name`` = ``namespace.name``) and run the workload ``spec`` on it.

    The catalog must be registered in ``spark`` under ``catalog.name``. With ``replace`` an existing table of that
    name is dropped (PURGE) first; otherwise an existing table is an error.
    """
    namespace, name = _split_table_name(catalog, table_name)
    table = f"{catalog.name}.{namespace}.{name}"
    create_table(spark, table, spec, replace=replace)
    gen = _Generator(spark, table, spec)
    gen.run()
    from compaction.spark.jvm import load_table

    jtable = load_table(spark, table)
    jtable.refresh()
    snapshot = jtable.currentSnapshot()
    return WorkloadResult(
        table=table,
        identifier=(namespace, name),
        spec=spec,
        columns=COLUMNS,
        expected_rows=gen.model.rows(),
        stats=dict(gen.stats),
        snapshot_id=int(snapshot.snapshotId()) if snapshot is not None else None,
    )


DEMO_SPEC = WorkloadSpec(
    seed=20240101,
    format_version=2,
    partitioning="days_ts",
    key_columns=("id",),
    commits=4,
    rows_per_commit=250,
    delete_fraction=0.06,
    update_fraction=0.08,
    reinsert_fraction=0.3,
    eq_delete_fraction=0.5,
    null_key_fraction=0.02,
    evolve_spec=False,
    use_equality_deletes=True,
    global_eq_deletes=False,
    delete_granularity="file",
    days_span=5,
)


def demo_table(spark: SparkSession, catalog: CatalogConfig, name: str = "demo.events", *,
               spec: WorkloadSpec = DEMO_SPEC, replace: bool = True) -> WorkloadResult:
    """The demo table (``make demo``): format v2, partitioned by ``days(ts)`` over five days, with position deletes
    from Spark DELETE/UPDATE/MERGE and equality-delete files in several partitions. Replaces an existing table."""
    return generate(spark, catalog, name, spec, replace=replace)


def spark_rows(spark: SparkSession, table: str, snapshot_id: int | None = None) -> Counter[tuple[Any, ...]]:
    """Spark's read of a workload table as the same multiset as :attr:`WorkloadResult.expected_rows` (``ts`` read
    as micros and converted here, so the Python process's time zone does not matter)."""
    sql = f"SELECT id, region, unix_micros(ts) AS ts_us, amount, note FROM {table}"
    if snapshot_id is not None:
        sql += f" VERSION AS OF {int(snapshot_id)}"
    return Counter(
        (r[0], r[1], None if r[2] is None else ts_from_micros(r[2]), r[3], r[4]) for r in spark.sql(sql).collect()
    )


def delete_file_summary(spark: SparkSession, table: str) -> dict[tuple[int, str], int]:
    """``{(content, file_format): count}`` of the table's live delete files (content 1 = position, incl. DVs with
    format PUFFIN; 2 = equality)."""
    rows = spark.sql(
        f"SELECT content, file_format, count(*) AS n FROM {table}.delete_files GROUP BY content, file_format"
    ).collect()
    return {(int(r["content"]), str(r["file_format"])): int(r["n"]) for r in rows}


def iter_specs(seeds: Iterable[int], **overrides: Any) -> list[WorkloadSpec]:
    """Random specs for several seeds (convenience for parametrized tests and benchmarks)."""
    return [WorkloadSpec.random(s, **overrides) for s in seeds]
