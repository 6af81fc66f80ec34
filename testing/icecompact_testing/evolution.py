"""Seeded CDC scenarios on tables whose partition spec *and* schema evolved.

:func:`generate` creates a merge-on-read table (format v2 with position deletes, or v3 with deletion vectors) and
drives a change stream into it while its partition spec and its schema change under it, tracking the live rows in a
plain Python model (key -> row) the way :mod:`compaction.demo.workload` does. The model's rows are in the
canonical form of the reference reader (:func:`icecompact_testing.oracle.normalize_value`), in the table's *current*
column order, so ``oracle.read_table(t).rows``, ``oracle.spark_rows(spark, ref)`` and
:attr:`EvolvedScenario.expected_rows` compare as multisets.

The scenario space (:meth:`EvolutionSpec.random` draws one shape from a seed; everything is deterministic):

* columns of every kind: the key ``id`` (int), ``region`` (string, partition source, part of a two-column key),
  ``ts`` (timestamp with zone, source of ``days(ts)``), ``ts_ntz`` (timestamp without zone), ``qty`` (int),
  ``amount`` (decimal(9,2)), ``score`` (float, NaN included), ``day`` (date), ``payload`` (binary), ``note``
  (string), ``info`` (struct<a: int, b: string>), ``tags`` (array<string>) and ``attrs`` (map<string, int>);
* partition evolution: unpartitioned -> partitioned (``ADD PARTITION FIELD``), partitioned -> more fields, once or
  twice (:data:`PARTITION_PLANS`);
* schema evolution (:data:`SCHEMA_STEPS`): the key column renamed (``id`` -> ``key_id``), the partition-source
  column renamed (``region`` -> ``zone``), int -> bigint (the key itself, ``qty`` and the nested ``info.a``),
  decimal(9,2) -> decimal(12,2), float -> double, ``note`` dropped and re-added later (same name, new field id: the
  old values are gone, older rows read null), columns reordered (``score`` first, ``day`` after the key);
* equality deletes (real files, :mod:`compaction.spark.equality_deletes`) every round after the first, so that they
  are written both before and after the renames and widenings (equality ids are field ids: a delete written under the
  old name must still apply); with ``global_eq_deletes`` on a table that started unpartitioned they are written with
  the unpartitioned spec (global deletes), also after the evolution; occasionally keys that match nothing;
* position deletes / DVs from Spark ``DELETE``, ``UPDATE``, ``MERGE ... DELETE`` and ``MERGE ... UPDATE`` (some
  updates move rows to another ``days(ts)`` partition).

Each round ``r`` (``r = 0 .. rounds-1``) makes, in this order::

    the schema and partition steps scheduled for round r (ALTER TABLE ...)
    [r > 0] RowDelta: equality deletes for the keys deleted and updated "CDC style" this round
    append: new rows + re-inserted keys + new versions of the rows updated CDC style
    [r > 0] Spark DELETE or MERGE ... WHEN MATCHED THEN DELETE   (position deletes / DVs)
    [r > 0] Spark UPDATE or MERGE ... WHEN MATCHED THEN UPDATE   (position deletes / DVs + new rows)

The renames are scheduled in round 2 or later, so the equality deletes of round 1 are written under the old names.
Every key is live at most once and an equality delete is written into the partition of the data file that holds the
live row (or globally), so the model predicts exactly what Iceberg applies; a key not found exactly once aborts.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from compaction.catalog import CatalogConfig
from icecompact_testing.oracle import NAN

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Logical column -> (initial name, initial Spark SQL type), in the initial column order.
COLUMNS: Mapping[str, tuple[str, str]] = {
    "id": ("id", "INT"),
    "region": ("region", "STRING"),
    "ts": ("ts", "TIMESTAMP"),
    "ts_ntz": ("ts_ntz", "TIMESTAMP_NTZ"),
    "qty": ("qty", "INT"),
    "amount": ("amount", "DECIMAL(9,2)"),
    "score": ("score", "FLOAT"),
    "day": ("day", "DATE"),
    "payload": ("payload", "BINARY"),
    "note": ("note", "STRING"),
    "info": ("info", "STRUCT<a: INT, b: STRING>"),
    "tags": ("tags", "ARRAY<STRING>"),
    "attrs": ("attrs", "MAP<STRING, INT>"),
}
KEY_CHOICES: tuple[tuple[str, ...], ...] = (("id",), ("id", "region"))
REGIONS: tuple[str, ...] = ("EU", "US", "APAC")
BASE_TS_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
DAY_US = 86_400_000_000
_EPOCH = _dt.datetime(1970, 1, 1)

#: Schema steps: name -> what it does (the SQL is built from the current names by :class:`_Table`).
SCHEMA_STEPS: Mapping[str, str] = {
    "rename_key": "RENAME COLUMN id TO key_id (a key column)",
    "rename_region": "RENAME COLUMN region TO zone (a partition-source column, in a two-column key)",
    "widen_key": "ALTER COLUMN id TYPE bigint (a key and bucket-partition source column)",
    "widen_int": "ALTER COLUMN qty TYPE bigint",
    "widen_decimal": "ALTER COLUMN amount TYPE decimal(12,2)",
    "widen_float": "ALTER COLUMN score TYPE double",
    "widen_nested": "ALTER COLUMN info.a TYPE bigint",
    "drop_note": "DROP COLUMN note",
    "readd_note": "ADD COLUMN note string (same name, new field id)",
    "reorder": "ALTER COLUMN score FIRST; ALTER COLUMN day AFTER <key>",
}
#: Always part of a scenario (renamed key and partition-source columns are what it tests); the others are drawn.
REQUIRED_SCHEMA_STEPS = ("rename_key", "rename_region")

#: Start partitioning -> possible evolutions (each a sequence of partition fields added one after the other).
#: Transforms name logical columns in braces; they are resolved to the current names when applied.
PARTITION_PLANS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "": (("bucket(4, {id})",), ("{region}",), ("days({ts})",), ("{region}", "bucket(2, {id})"),
         ("bucket(4, {id})", "days({ts})")),
    "{region}": (("days({ts})",), ("bucket(2, {id})",)),
    "bucket(4, {id})": (("{region}",),),
    "days({ts})": (("{region}",), ("bucket(2, {id})",)),
}

_MAX_ROUNDS = 5

Key = tuple[Any, ...]
Row = dict[str, Any]  # logical column -> canonical value (a dropped column is absent)


@dataclass(frozen=True)
class EvolutionSpec:
    """Shape of one scenario. :meth:`random` draws one from a seed; fields can be set explicitly too."""

    seed: int = 0
    format_version: int = 2
    start_partitioning: str = ""  # a key of PARTITION_PLANS ("" = unpartitioned)
    partition_steps: tuple[str, ...] = ("bucket(4, {id})",)  # ADD PARTITION FIELD, one per step
    key_columns: tuple[str, ...] = ("id",)
    schema_steps: tuple[str, ...] = REQUIRED_SCHEMA_STEPS
    rounds: int = 4
    rows_per_round: int = 25
    delete_fraction: float = 0.12
    update_fraction: float = 0.12
    reinsert_fraction: float = 0.3
    eq_delete_fraction: float = 0.5  # of the round's deletes + updates, done CDC style with equality deletes
    global_eq_deletes: bool = False  # only when the table started unpartitioned
    delete_granularity: str = "file"  # v2 position deletes: 'file' or 'partition'
    null_region_fraction: float = 0.05
    days_span: int = 2
    #: round -> steps, in order ("schema:<name>" / "partition:<transform>"); filled by __post_init__ when empty.
    schedule: tuple[tuple[int, str], ...] = ()

    def __post_init__(self) -> None:
        if self.format_version not in (2, 3):
            raise ValueError(f"format_version must be 2 or 3, not {self.format_version}")
        if self.start_partitioning not in PARTITION_PLANS:
            raise ValueError(f"start_partitioning must be one of {sorted(PARTITION_PLANS)}")
        if tuple(self.key_columns) not in KEY_CHOICES:
            raise ValueError(f"key_columns must be one of {KEY_CHOICES}")
        unknown = set(self.schema_steps) - set(SCHEMA_STEPS)
        if unknown:
            raise ValueError(f"unknown schema steps {sorted(unknown)}")
        if "readd_note" in self.schema_steps and "drop_note" not in self.schema_steps:
            raise ValueError("readd_note needs drop_note")
        if not 3 <= self.rounds <= _MAX_ROUNDS:
            raise ValueError(f"rounds must be within [3, {_MAX_ROUNDS}]")
        if self.global_eq_deletes and self.start_partitioning:
            raise ValueError("global equality deletes need a table that started unpartitioned")
        if self.delete_granularity not in ("file", "partition"):
            raise ValueError("delete_granularity must be 'file' or 'partition'")
        if not self.schedule:
            object.__setattr__(self, "schedule", self._draw_schedule())

    def _draw_schedule(self) -> tuple[tuple[int, str], ...]:
        """Partition steps from round 1 on, one per round; renames in round 2 or later (so round 1's equality
        deletes are written under the old names); the rest anywhere in rounds 1..rounds-1; re-add after drop."""
        rng = random.Random(f"evolution-schedule-{self.seed}")
        last = self.rounds - 1
        out: list[tuple[int, str]] = []
        for i, transform in enumerate(self.partition_steps):
            out.append((min(1 + i, last), f"partition:{transform}"))
        drop_round = None
        for step in self.schema_steps:
            if step in REQUIRED_SCHEMA_STEPS:
                r = rng.randint(2, last)
            elif step == "readd_note":
                continue
            else:
                r = rng.randint(1, last)
            if step == "drop_note":
                drop_round = r
            out.append((r, f"schema:{step}"))
        if "readd_note" in self.schema_steps:
            assert drop_round is not None
            out.append((rng.randint(drop_round, last), "schema:readd_note"))
        # Stable order within a round: partition steps, then schema steps in a drawn order (drop before re-add).
        order = {s: rng.random() for _, s in out}
        order["schema:readd_note"] = 2.0
        return tuple(sorted(out, key=lambda rs: (rs[0], not rs[1].startswith("partition:"), order[rs[1]])))

    @classmethod
    def random(cls, seed: int, **overrides: Any) -> EvolutionSpec:
        rng = random.Random(f"evolution-spec-{seed}")
        start = rng.choice(sorted(PARTITION_PLANS))
        steps = list(REQUIRED_SCHEMA_STEPS)
        for step in SCHEMA_STEPS:
            if step not in steps and step != "readd_note" and rng.random() < 0.6:
                steps.append(step)
        if "drop_note" in steps and rng.random() < 0.8:
            steps.append("readd_note")
        values: dict[str, Any] = dict(
            seed=seed,
            format_version=rng.choice((2, 3)),
            start_partitioning=start,
            partition_steps=rng.choice(PARTITION_PLANS[start]),
            key_columns=rng.choice(KEY_CHOICES),
            schema_steps=tuple(s for s in SCHEMA_STEPS if s in steps),  # canonical order
            rounds=rng.randint(3, 4),
            rows_per_round=rng.randint(15, 35),
            delete_fraction=round(rng.uniform(0.05, 0.2), 3),
            update_fraction=round(rng.uniform(0.05, 0.2), 3),
            reinsert_fraction=round(rng.uniform(0.1, 0.5), 3),
            eq_delete_fraction=round(rng.uniform(0.3, 0.7), 3),
            global_eq_deletes=start == "" and rng.random() < 0.7,
            delete_granularity=rng.choice(("file", "partition")),
            null_region_fraction=rng.choice((0.0, 0.05, 0.1)),
            days_span=rng.randint(1, 3),
        )
        values.update(overrides)
        return cls(**values)

    def replace(self, **changes: Any) -> EvolutionSpec:
        return dataclasses.replace(self, **{"schedule": (), **changes})

    def describe(self) -> str:
        start = self.start_partitioning.format(id="id", region="region", ts="ts") or "unpartitioned"
        adds = " -> ".join(s.format(id="id", region="region", ts="ts") for s in self.partition_steps)
        keys = ", ".join(self.key_columns)
        steps = "; ".join(f"r{r} {s}" for r, s in self.schedule)
        return (f"seed {self.seed}: v{self.format_version}, {start} + {adds}, key ({keys}), {self.rounds} rounds x "
                f"{self.rows_per_round} rows, {'global ' if self.global_eq_deletes else ''}equality deletes, "
                f"{self.delete_granularity}-scoped position deletes; {steps}")


@dataclass(frozen=True)
class EvolvedScenario:
    table: str  # Spark identifier: catalog.namespace.name
    identifier: tuple[str, str]  # (namespace, name) for pyiceberg's load_table
    spec: EvolutionSpec
    columns: tuple[str, ...]  # current column names, in table order
    expected_rows: Counter[tuple[Any, ...]]  # the model's live rows, canonical values, current column order
    stats: Mapping[str, int] = field(default_factory=dict)
    statements: tuple[str, ...] = ()  # the DDL applied, in order (for failure reports)
    snapshot_id: int | None = None


# Values ----------------------------------------------------------------------------------------------------------
def ts_from_micros(micros: int) -> _dt.datetime:
    return _EPOCH + _dt.timedelta(microseconds=micros)


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_literal(value: Any, sql_type: str) -> str:
    """A typed Spark SQL literal for a canonical model value of ``sql_type``."""
    t = sql_type.upper()
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if t in ("INT", "BIGINT"):
        return f"CAST({int(value)} AS {t})"
    if t == "STRING":
        return _q(value)
    if t == "TIMESTAMP":
        delta = value - _EPOCH
        return f"timestamp_micros({(delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds})"
    if t == "TIMESTAMP_NTZ":
        return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ', timespec='microseconds')}'"
    if t.startswith("DECIMAL"):
        return f"CAST('{value}' AS {t})"
    if t in ("FLOAT", "DOUBLE"):
        return f"CAST('{'NaN' if value is NAN else repr(value)}' AS {t})"
    if t == "DATE":
        return f"DATE '{value.isoformat()}'"
    if t == "BINARY":
        return f"X'{value.hex()}'"
    if t.startswith("STRUCT"):
        a_type = "BIGINT" if "A: BIGINT" in t else "INT"
        return f"named_struct('a', {sql_literal(value[0], a_type)}, 'b', {sql_literal(value[1], 'STRING')})"
    if t.startswith("ARRAY"):
        if not value:
            return "CAST(array() AS ARRAY<STRING>)"
        return f"array({', '.join(sql_literal(v, 'STRING') for v in value)})"
    if t.startswith("MAP"):
        if not value:
            return "CAST(map() AS MAP<STRING, INT>)"
        pairs = ", ".join(_q(k) + ", " + sql_literal(v, "INT") for k, v in sorted(value))
        return f"map({pairs})"
    raise ValueError(f"no literal for type {sql_type}")


class _Values:
    """Random canonical values per logical column."""

    def __init__(self, rng: random.Random, spec: EvolutionSpec) -> None:
        self.rng, self.spec = rng, spec

    def region(self) -> str | None:
        return None if self.rng.random() < self.spec.null_region_fraction else self.rng.choice(REGIONS)

    def ts(self) -> _dt.datetime:
        return ts_from_micros(BASE_TS_US + self.rng.randrange(self.spec.days_span * DAY_US))

    def value(self, column: str, tag: str) -> Any:
        rng = self.rng
        nullable = rng.random() < 0.08
        if column == "ts":
            return self.ts()
        if nullable:
            return None
        if column == "ts_ntz":
            return _dt.datetime(2023, 6, 1) + _dt.timedelta(microseconds=rng.randrange(90 * DAY_US))
        if column == "qty":
            return rng.randint(-(2**31), 2**31 - 1) if rng.random() < 0.1 else rng.randint(-1000, 1000)
        if column == "amount":
            return Decimal(rng.randint(-9_999_999, 9_999_999)).scaleb(-2)
        if column == "score":
            return NAN if rng.random() < 0.05 else rng.randint(-4000, 4000) / 8  # exact in float32
        if column == "day":
            return _dt.date(2024, 1, 1) + _dt.timedelta(days=rng.randrange(400))
        if column == "payload":
            return rng.randbytes(rng.randint(0, 6))
        if column == "note":
            return tag
        if column == "info":
            return (rng.choice((None, rng.randint(-50, 50))), rng.choice((None, tag)))
        if column == "tags":
            return tuple(rng.choice(("a", "b", "c", None)) for _ in range(rng.randint(0, 3)))
        if column == "attrs":
            keys = rng.sample(("k1", "k2", "k3"), rng.randint(0, 3))
            return frozenset((k, rng.choice((None, rng.randint(0, 9)))) for k in keys)
        raise ValueError(column)


# The table as the generator believes it is ---------------------------------------------------------------------
class _Table:
    """Names, types and order of the columns now, plus the live rows (key -> row)."""

    def __init__(self, spec: EvolutionSpec) -> None:
        self.names = {c: n for c, (n, _) in COLUMNS.items()}
        self.types = {c: t for c, (_, t) in COLUMNS.items()}
        self.order = list(COLUMNS)
        self.keys = tuple(spec.key_columns)
        self.live: dict[Key, Row] = {}
        self.dead: dict[Key, None] = {}

    def key_of(self, row: Row) -> Key:
        return tuple(row[c] for c in self.keys)

    def insert(self, row: Row) -> None:
        key = self.key_of(row)
        if key in self.live:
            raise AssertionError(f"generator bug: key {key} inserted twice")
        self.live[key] = row
        self.dead.pop(key, None)

    def delete(self, key: Key) -> None:
        del self.live[key]
        self.dead[key] = None

    def name(self, column: str) -> str:
        return self.names[column]

    def rows(self) -> Counter[tuple[Any, ...]]:
        return Counter(tuple(r.get(c) for c in self.order) for r in self.live.values())

    def schema_step(self, step: str, table: str) -> list[str]:
        """Apply ``step`` to the model; return the SQL statements that do it."""
        n = self.name
        if step == "rename_key":
            old, self.names["id"] = n("id"), "key_id"
            return [f"ALTER TABLE {table} RENAME COLUMN {old} TO key_id"]
        if step == "rename_region":
            old, self.names["region"] = n("region"), "zone"
            return [f"ALTER TABLE {table} RENAME COLUMN {old} TO zone"]
        widen = {"widen_key": ("id", "BIGINT"), "widen_int": ("qty", "BIGINT"),
                 "widen_decimal": ("amount", "DECIMAL(12,2)"), "widen_float": ("score", "DOUBLE")}
        if step in widen:
            column, new_type = widen[step]
            self.types[column] = new_type
            return [f"ALTER TABLE {table} ALTER COLUMN {n(column)} TYPE {new_type}"]
        if step == "widen_nested":
            self.types["info"] = "STRUCT<a: BIGINT, b: STRING>"
            return [f"ALTER TABLE {table} ALTER COLUMN info.a TYPE bigint"]
        if step == "drop_note":
            self.order.remove("note")
            for row in self.live.values():
                row.pop("note", None)
            return [f"ALTER TABLE {table} DROP COLUMN note"]
        if step == "readd_note":
            self.order.append("note")
            for row in self.live.values():
                row["note"] = None  # a new field id: no old value is visible
            return [f"ALTER TABLE {table} ADD COLUMN note string"]
        if step == "reorder":
            self.order.remove("score")
            self.order.insert(0, "score")
            self.order.remove("day")
            self.order.insert(self.order.index("id") + 1, "day")
            return [f"ALTER TABLE {table} ALTER COLUMN score FIRST",
                    f"ALTER TABLE {table} ALTER COLUMN day AFTER {n('id')}"]
        raise ValueError(step)

    def transform(self, template: str) -> str:
        return template.format(id=self.name("id"), region=self.name("region"), ts=self.name("ts"))


def _table_properties(spec: EvolutionSpec) -> dict[str, str]:
    props = {
        "format-version": str(spec.format_version),
        "write.delete.mode": "merge-on-read",
        "write.update.mode": "merge-on-read",
        "write.merge.mode": "merge-on-read",
        "write.distribution-mode": "none",
        "write.spark.fanout.enabled": "true",
    }
    if spec.format_version == 2:
        props["write.delete.granularity"] = spec.delete_granularity
    return props


class _Generator:
    def __init__(self, spark: SparkSession, table: str, spec: EvolutionSpec) -> None:
        self.spark, self.table, self.spec = spark, table, spec
        self.rng = random.Random(f"evolution-{spec.seed}")
        self.values = _Values(self.rng, spec)
        self.model = _Table(spec)
        self.stats: Counter[str] = Counter()
        self.statements: list[str] = []
        self.next_id = 1
        self.renamed = False

    def sql(self, statement: str) -> list[Any]:
        return self.spark.sql(statement).collect()

    def ddl(self, statement: str) -> None:
        self.statements.append(statement)
        self.sql(statement)

    # rows ---------------------------------------------------------------------------------------------------
    def _row(self, key: Key | None, tag: str) -> Row:
        m = self.model
        row: Row = {c: self.values.value(c, tag) for c in m.order if c not in ("id", "region")}
        if key is None:
            row["id"] = self.next_id
            self.next_id += 1
            row["region"] = self.values.region()
        else:
            values = dict(zip(m.keys, key))
            row["id"] = values["id"]
            row["region"] = values["region"] if "region" in values else self.values.region()
        return row

    def _literal_row(self, row: Row) -> str:
        m = self.model
        return "(" + ", ".join(sql_literal(row.get(c), m.types[c]) for c in m.order) + ")"

    def _key_predicate(self, keys: Sequence[Key], alias: str = "") -> str:
        m = self.model
        prefix = f"{alias}." if alias else ""
        if len(m.keys) == 1:
            return f"{prefix}{m.name('id')} IN ({', '.join(str(k[0]) for k in keys)})"
        return " OR ".join(
            f"({prefix}{m.name('id')} = {k[0]} AND {prefix}{m.name('region')} <=> "
            f"{sql_literal(k[1], 'STRING')})" for k in keys)

    def _source(self, rows: Sequence[Sequence[str]], names: Sequence[str]) -> str:
        values = ", ".join("(" + ", ".join(r) + ")" for r in rows)
        return f"(SELECT * FROM VALUES {values} AS v({', '.join(names)}))"

    def _key_source_columns(self, key: Key) -> list[str]:
        m = self.model
        return [sql_literal(v, m.types[c]) for c, v in zip(m.keys, key)]

    def _join(self) -> str:
        m = self.model
        return " AND ".join(f"t.{m.name(c)} <=> s.k{i}" for i, c in enumerate(m.keys))

    # run ----------------------------------------------------------------------------------------------------
    def create(self) -> None:
        from compaction.demo.tables import create_table

        m = self.model
        columns = ", ".join(f"{m.name(c)} {m.types[c]}" for c in m.order)
        create_table(self.spark, self.table, columns, m.transform(self.spec.start_partitioning),
                     _table_properties(self.spec))
        self.statements.append(f"CREATE TABLE {self.table} PARTITIONED BY "
                               f"({m.transform(self.spec.start_partitioning) or 'nothing'}) v{self.spec.format_version}")

    def run(self) -> None:
        for round_ in range(self.spec.rounds):
            for r, step in self.spec.schedule:
                if r == round_:
                    self._step(step)
            self._round(round_)

    def _step(self, step: str) -> None:
        kind, _, what = step.partition(":")
        if kind == "partition":
            self.ddl(f"ALTER TABLE {self.table} ADD PARTITION FIELD {self.model.transform(what)}")
            self.stats["partition_evolutions"] += 1
            return
        for statement in self.model.schema_step(what, self.table):
            self.ddl(statement)
        self.stats[f"schema_{what}"] += 1
        if what in REQUIRED_SCHEMA_STEPS:
            self.renamed = True

    def _count(self, fraction: float, population: int) -> int:
        if population == 0:
            return 0
        return min(population, max(1, round(fraction * population)))

    def _round(self, round_: int) -> None:
        spec, rng, m = self.spec, self.rng, self.model
        live = list(m.live)
        n_del = self._count(spec.delete_fraction, len(live)) if round_ else 0
        n_upd = min(self._count(spec.update_fraction, len(live)), len(live) - n_del) if round_ else 0
        chosen = rng.sample(live, n_del + n_upd) if n_del + n_upd else []
        del_keys, upd_keys = chosen[:n_del], chosen[n_del:]
        # At least one key of each kind CDC style, so that every round writes equality deletes.
        n_eq_del = max(1, round(len(del_keys) * spec.eq_delete_fraction)) if del_keys else 0
        n_eq_upd = max(1, round(len(upd_keys) * spec.eq_delete_fraction)) if upd_keys else 0
        eq_del, dml_del = del_keys[:n_eq_del], del_keys[n_eq_del:]
        eq_upd, dml_upd = upd_keys[:n_eq_upd], upd_keys[n_eq_upd:]
        reinserts = [k for k in m.dead if rng.random() < spec.reinsert_fraction] if round_ else []

        if eq_del or eq_upd:
            self._equality_deletes(eq_del + eq_upd)
            for k in eq_del:
                m.delete(k)
        new_versions = [self._new_version(m.live[k], round_) for k in eq_upd]

        rows = []
        for i in range(spec.rows_per_round):
            rows.append(self._row(None, f"r{round_}-{i}"))
            m.insert(rows[-1])
        for i, k in enumerate(reinserts):
            rows.append(self._row(k, f"re{round_}-{i}"))
            m.insert(rows[-1])
        for r in new_versions:
            m.live[m.key_of(r)] = r
        batch = rows + new_versions
        self.sql(f"INSERT INTO {self.table} VALUES " + ", ".join(self._literal_row(r) for r in batch))
        self.stats["appends"] += 1
        self.stats["rows_appended"] += len(batch)

        if dml_del:
            if rng.random() < 0.5:
                self.sql(f"DELETE FROM {self.table} WHERE {self._key_predicate(dml_del)}")
                self.stats["spark_delete"] += 1
            else:
                source = self._source([self._key_source_columns(k) for k in dml_del],
                                      [f"k{i}" for i in range(len(m.keys))])
                self.sql(f"MERGE INTO {self.table} t USING {source} s ON {self._join()} WHEN MATCHED THEN DELETE")
                self.stats["spark_merge_delete"] += 1
            for k in dml_del:
                m.delete(k)
        if dml_upd:
            self._dml_update(dml_upd, round_)

    def _updatable(self) -> list[str]:
        return [c for c in self.model.order if c not in ("id", "region")]

    def _new_version(self, old: Row, round_: int) -> Row:
        row = dict(old)
        for c in self.rng.sample(self._updatable(), 3):
            row[c] = self.values.value(c, f"u{round_}")  # ts too: may move the row to another day partition
        return row

    def _dml_update(self, keys: Sequence[Key], round_: int) -> None:
        m, rng = self.model, self.rng
        columns = rng.sample(self._updatable(), 3)
        if rng.random() < 0.5:
            # UPDATE: the same new values for every matched row.
            new = {c: self.values.value(c, f"s{round_}") for c in columns}
            sets = ", ".join(f"{m.name(c)} = {sql_literal(v, m.types[c])}" for c, v in new.items())
            self.sql(f"UPDATE {self.table} SET {sets} WHERE {self._key_predicate(keys)}")
            for k in keys:
                m.live[k].update(new)
            self.stats["spark_update"] += 1
            return
        updated = {k: {c: self.values.value(c, f"m{round_}") for c in columns} for k in keys}
        rows = [self._key_source_columns(k) + [sql_literal(v[c], m.types[c]) for c in columns]
                for k, v in updated.items()]
        names = [f"k{i}" for i in range(len(m.keys))] + [f"c{i}" for i in range(len(columns))]
        sets = ", ".join(f"t.{m.name(c)} = s.c{i}" for i, c in enumerate(columns))
        self.sql(f"MERGE INTO {self.table} t USING {self._source(rows, names)} s ON {self._join()} "
                 f"WHEN MATCHED THEN UPDATE SET {sets}")
        for k, v in updated.items():
            m.live[k].update(v)
        self.stats["spark_merge_update"] += 1

    def _equality_deletes(self, keys: Sequence[Key]) -> None:
        from compaction.spark import jvm as J
        from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit

        m = self.model
        key_names = [m.name(c) for c in m.keys]
        rows = self.spark.sql(
            f"SELECT {', '.join(key_names)}, _spec_id AS spec_id, _partition AS part FROM {self.table} "
            f"WHERE {self._key_predicate(keys)}").collect()
        located = [(tuple(r[n] for n in key_names), int(r["spec_id"]), r["part"]) for r in rows]
        found = Counter(k for k, _, _ in located)
        wrong = [k for k in keys if found.get(k) != 1]
        if wrong or len(located) != len(keys):
            raise AssertionError(f"model diverged from the table: keys {wrong[:5]} not found exactly once")
        table = J.load_table(self.spark, self.table)
        table.refresh()
        specs = {sid: table.specs().get(sid) for sid in J.spec_ids(table)}
        unpartitioned = [sid for sid, s in specs.items() if not s.isPartitioned()]
        groups: dict[tuple[int, tuple[Any, ...]], list[Key]] = defaultdict(list)
        if self.spec.global_eq_deletes and unpartitioned:
            groups[(unpartitioned[0], ())] = list(keys)
        else:
            fields = {sid: J.partition_fields(table, s) for sid, s in specs.items()}
            for key, spec_id, part in located:
                groups[(spec_id, J.spark_partition_values(fields[spec_id], part))].append(key)
        current = int(table.spec().specId())
        deletes = []
        for (spec_id, partition), group in sorted(groups.items(), key=lambda g: repr(g[0])):
            group = list(group)
            if self.rng.random() < 0.3:
                group.append((-self.rng.randrange(1, 1_000_000), *([self.rng.choice(REGIONS)] * (len(m.keys) - 1))))
            deletes.append(EqualityDeleteSpec(tuple(key_names), tuple(group), spec_id, partition))
            when = "after" if self.renamed else "before"
            self.stats[f"eq_delete_files_{when}_rename"] += 1
            if spec_id in unpartitioned:
                evolved = any(s.isPartitioned() for s in specs.values())
                self.stats["global_eq_delete_files_after_evolution" if evolved else "unpartitioned_eq_delete_files"] += 1
            if spec_id != current:
                self.stats["eq_delete_files_in_old_spec"] += 1
        write_and_commit(self.spark, table, deletes)
        self.stats["eq_delete_commits"] += 1


def generate(spark: SparkSession, catalog: CatalogConfig, table_name: str, spec: EvolutionSpec) -> EvolvedScenario:
    """Create ``catalog.table_name`` (``namespace.name``; must not exist) and run the scenario ``spec`` on it. The
    catalog must be registered in ``spark`` under ``catalog.name``."""
    namespace, _, name = table_name.partition(".")
    if not namespace or not name or "." in name:
        raise ValueError(f"table name must be 'namespace.name', not {table_name!r}")
    table = f"{catalog.name}.{namespace}.{name}"
    gen = _Generator(spark, table, spec)
    gen.create()
    gen.run()
    from compaction.spark.jvm import load_table

    jtable = load_table(spark, table)
    jtable.refresh()
    snapshot = jtable.currentSnapshot()
    m = gen.model
    return EvolvedScenario(
        table=table,
        identifier=(namespace, name),
        spec=spec,
        columns=tuple(m.name(c) for c in m.order),
        expected_rows=m.rows(),
        stats=dict(gen.stats),
        statements=tuple(gen.statements),
        snapshot_id=int(snapshot.snapshotId()) if snapshot is not None else None,
    )
