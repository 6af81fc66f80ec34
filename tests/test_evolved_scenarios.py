"""Every compaction mode on seeded random CDC scenarios over tables whose partition spec and schema
evolved (:mod:`icecompact_testing.evolution`), with real Spark + Iceberg.

Each seed's table is generated once (renamed key and partition-source columns, widened types, a dropped and re-added
column, reordered columns, nested types; equality deletes before and after the renames, global ones on tables that
started unpartitioned; position deletes / DVs from Spark DML) and checked against the generator's model. Each mode
then runs on its own clone of that table (registered from the same metadata file) through the job's own entry point
(:func:`compaction.spark.job.run_group`, in this process's Spark session), and the result is checked:

* content: the reference reader (:mod:`icecompact_testing.oracle`) and Spark read exactly the rows of before;
* full-rewrite MAJOR: no delete file applies to any live data file, both by the spec's rule computed from metadata
  by the reference reader (equality: data seq < delete seq and same spec + partition or an unpartitioned delete;
  position / DV: data seq <= delete seq, same spec + partition, naming the data file) and by Iceberg's own scan
  planning (``table.newScan().planFiles()``, each task's ``deletes()``);
* MINOR: no equality-delete file is left in a partition it committed;
* pyiceberg and DuckDB read what Spark reads (pyiceberg may refuse, with its equality-delete message, only while
  equality deletes are live; DuckDB's default configuration may only show its known deletion-vector cache defect,
  see :mod:`icecompact_testing.engines`).
"""

from __future__ import annotations

import datetime as dt
import uuid
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.spark import jvm as J
from compaction.spark.job import COMMITTED, run_group
from compaction.spark.validation import ValidationLevel
from icecompact_testing import engines as E
from icecompact_testing.evolution import (
    PARTITION_PLANS,
    REQUIRED_SCHEMA_STEPS,
    SCHEMA_STEPS,
    EvolutionSpec,
    EvolvedScenario,
    generate,
)
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import OracleResult, read_table, rows_diff, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
#: Seeds chosen so that together they cover the scenario space (checked by test_seeds_cover_the_scenario_space).
SEEDS = [5, 3, 18, 1]
MODES = ("auto", "minor", "major", "major_full", "major_sort", "major_zorder")
_MODE = {"auto": CompactionMode.AUTO, "minor": CompactionMode.MINOR, "major": CompactionMode.MAJOR,
         "major_full": CompactionMode.MAJOR, "major_sort": CompactionMode.MAJOR, "major_zorder": CompactionMode.MAJOR}
#: The clustering strategies on columns that were renamed / widened and a partition source: every MAJOR
#: of theirs is a full rewrite of its partitions.
_LAYOUT = {"major_sort": {"major_strategy": "sort", "major_sort_columns": "qty DESC NULLS LAST, key_id"},
           "major_zorder": {"major_strategy": "zorder", "major_sort_columns": "qty, ts"}}
_FULL = ("major_full", "major_sort", "major_zorder")


def _spec(seed: int) -> EvolutionSpec:
    return EvolutionSpec.random(seed)


# Scenario space -----------------------------------------------------------------------------------------------
def test_seeds_cover_the_scenario_space() -> None:
    specs = [_spec(s) for s in SEEDS]
    assert {s.format_version for s in specs} == {2, 3}
    assert any(s.start_partitioning == "" for s in specs), "unpartitioned -> partitioned"
    assert any(s.start_partitioning for s in specs), "partitioned -> more fields"
    assert any(len(s.partition_steps) > 1 for s in specs), "two partition evolutions"
    assert any(s.global_eq_deletes for s in specs), "global equality deletes"
    assert {tuple(s.key_columns) for s in specs} == {("id",), ("id", "region")}
    assert set(SCHEMA_STEPS) == {step for s in specs for step in s.schema_steps}
    assert all(set(REQUIRED_SCHEMA_STEPS) <= set(s.schema_steps) for s in specs)
    assert {"file", "partition"} <= {s.delete_granularity for s in specs if s.format_version == 2}
    assert all(s.start_partitioning in PARTITION_PLANS for s in specs)
    # Deterministic: the same seed draws the same scenario.
    assert [_spec(s) for s in SEEDS] == specs


# Fixtures -------------------------------------------------------------------------------------------------------
#: Iceberg 1.10's executor cache of equality-delete sets (SparkExecutorCache) is keyed without the column types: a
#: set cached before ``ALTER COLUMN id TYPE bigint`` still holds Integers afterwards and the next read fails with
#: "Not an instance of java.lang.Long" (DeleteFilter.applyEqDeletes). It only bites a JVM that lives across the
#: ALTER, as this test session does (a compaction job never does), so it is off while this module runs.
EXECUTOR_CACHE = "spark.sql.iceberg.executor-cache.enabled"


@pytest.fixture(scope="module")
def evolved_catalog(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from compaction.spark.session import register_catalog

    root: Path = tmp_path_factory.mktemp("evolved")
    catalog = CatalogConfig.sqlite(f"ev_{uuid.uuid4().hex[:8]}", root / "catalog.db", root / "warehouse")
    register_catalog(spark, catalog)
    previous = spark.conf.get(EXECUTOR_CACHE, None)
    spark.conf.set(EXECUTOR_CACHE, "false")
    yield catalog
    if previous is None:
        spark.conf.unset(EXECUTOR_CACHE)
    else:
        spark.conf.set(EXECUTOR_CACHE, previous)


@pytest.fixture(scope="module")
def scenarios(spark, evolved_catalog: CatalogConfig):  # type: ignore[no-untyped-def]
    """seed -> (scenario, the reference reader's read of it), generated once per module on first use."""
    made: dict[int, tuple[EvolvedScenario, OracleResult]] = {}

    def get(seed: int) -> tuple[EvolvedScenario, OracleResult]:
        if seed not in made:
            scenario = generate(spark, evolved_catalog, f"evo.s{seed}", _spec(seed))
            before = read_table(evolved_catalog.load().load_table(scenario.identifier))
            made[seed] = (scenario, before)
        return made[seed]

    return get


# Checks ---------------------------------------------------------------------------------------------------------
def iceberg_applied_deletes(spark: Any, table_ref: str) -> dict[str, list[str]]:
    """Iceberg's own scan planning: live data file -> the delete files its FileScanTask carries (non-empty only)."""
    table = J.load_table(spark, table_ref)
    table.refresh()
    tasks = table.newScan().planFiles()
    out: dict[str, list[str]] = {}
    try:
        it = tasks.iterator()
        while it.hasNext():
            task = it.next()
            deletes = [str(d.location()) for d in task.deletes()]
            if deletes:
                out[str(task.file().location())] = sorted(deletes)
    finally:
        tasks.close()
    return out


def _describe_applicable(result: OracleResult) -> str:
    data = {d.path: d for d in result.data_files}
    lines = []
    for path, deletes in sorted(result.applicable_deletes.items()):
        f = data[path]
        lines.append(f"data spec={f.spec_id} part={f.partition} seq={f.data_sequence_number} {path.rsplit('/', 1)[-1]}")
        for d in sorted(deletes, key=lambda d: d.key):
            lines.append(f"    <- {d.delete_kind} spec={d.spec_id} part={d.partition} seq={d.data_sequence_number} "
                         f"{d.path.rsplit('/', 1)[-1]}")
    return "\n".join(lines)


def check_engines(spark: Any, table: Any, ref: str, expected: Counter[tuple[Any, ...]], label: str,
                  request: Any) -> None:
    """pyiceberg and DuckDB read what Spark reads (see the module doc for the known engine limitations)."""
    snapshot_id = table.current_snapshot().snapshot_id
    oracle = read_table(table, snapshot_id)
    has_equality_deletes = any(d.delete_kind == "equality" for d in oracle.delete_files)
    reads = {engine: E.read_rows(engine, table, snapshot_id, strict=False) for engine in E.ENGINES}
    request.node.user_properties.append((f"engines[{label}]", E.describe(reads.values())))

    def detail(engine: str) -> str:
        read = reads[engine]
        return (read.error or "") if read.rows is None else rows_diff(expected, read.rows)

    pyi = reads[E.PYICEBERG]
    if not (pyi.ok and pyi.rows == expected):
        assert has_equality_deletes and pyi.unsupported and "equality deletes" in (pyi.error or ""), \
            f"[{label}] pyiceberg:\n{detail(E.PYICEBERG)}"
    nocache = reads[E.DUCKDB_NO_CACHE]
    assert nocache.ok and nocache.rows == expected, f"[{label}] DuckDB (file cache off):\n{detail(E.DUCKDB_NO_CACHE)}"
    default = reads[E.DUCKDB]
    if not (default.ok and default.rows == expected):
        shared = [p for p, n in Counter(d.path for d in oracle.delete_files
                                        if d.delete_kind == "deletion_vector").items() if n > 1]
        assert default.ok and shared, f"[{label}] DuckDB (default settings):\n{detail(E.DUCKDB)}"
        warnings.warn(f"[{label}] DuckDB's external file cache misread a Puffin file with several DVs (known DuckDB "
                      f"defect); with the cache off it reads Spark's rows", stacklevel=1)


def _overrides(catalog: CatalogConfig, name: str, mode: str) -> dict[str, object]:
    """The policy overrides of ``mode`` at test scale: about half of the files are fragments, none is a small
    segment (as in test_minor)."""
    state = inspect_table(catalog, name)
    sizes = sorted(f.size_bytes for p in state.partitions for f in p.data_files)
    median = sizes[len(sizes) // 2]
    overrides: dict[str, object] = {"target_file_size_bytes": 8 * median, "min_file_size_bytes": median}
    if mode == "major_full":
        overrides["major_full_rewrite"] = True
    overrides.update(_LAYOUT.get(mode, {}))
    return overrides


# Tests ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_scenario_reads_as_generated(spark, scenarios, seed: int) -> None:  # type: ignore[no-untyped-def]
    scenario, before = scenarios(seed)
    spec = scenario.spec
    assert before.rows == scenario.expected_rows, f"{spec.describe()}\n" + rows_diff(scenario.expected_rows, before.rows)
    assert spark_rows(spark, scenario.table) == scenario.expected_rows
    assert before.columns == scenario.columns
    stats = scenario.stats
    # The scenario has what it claims: equality deletes before and after the renames, evolved specs, DML deletes.
    assert stats.get("eq_delete_files_before_rename") and stats.get("eq_delete_files_after_rename"), stats
    assert stats["partition_evolutions"] == len(spec.partition_steps)
    assert len({d.spec_id for d in before.data_files}) > 1, "live data files of more than one spec"
    assert any(d.delete_kind != "equality" for d in before.delete_files), "position deletes / DVs"
    kinds = {d.delete_kind for d in before.delete_files}
    assert ("deletion_vector" in kinds) == (spec.format_version == 3), kinds
    if spec.global_eq_deletes:
        assert stats.get("global_eq_delete_files_after_evolution"), stats
    # Deletes written before the renames still apply to live-at-the-time data files of the evolved table.
    assert before.applicable_deletes


@pytest.mark.parametrize("seed", SEEDS)
def test_the_shared_delete_rule_agrees_with_icebergs_scan_planning(  # type: ignore[no-untyped-def]
        spark, evolved_catalog: CatalogConfig, scenarios, seed: int) -> None:
    """The rule the planner and MINOR share (compaction.core.applicability), on the files of each partition's MINOR
    scan as MINOR converts them (compaction.spark.minor.minor_scope), against Iceberg's own scan planning (each
    FileScanTask's deletes(), position deletes refined to the files they name) and the reference reader's reading of
    the spec. Ours is metadata-only: it may add (a) equality deletes Iceberg prunes by column statistics, which the
    reference reader (no statistics) still applies, (b) partition-scoped position deletes that do not name the data
    file, and (c) position-delete files of a data file a DV applies to (both implementations count them, see the
    module docstring of compaction.core.applicability); nothing else, and it never misses one Iceberg applies."""
    from compaction.core.applicability import scope_applicability
    from compaction.core.model import DeleteContent
    from compaction.spark import partition_files as PF
    from compaction.spark.expressions import java_partition_expression
    from compaction.spark.minor import minor_scope

    scenario, before = scenarios(seed)
    namespace, name = scenario.identifier
    state = inspect_table(evolved_catalog, f"{namespace}.{name}")
    assert state.snapshot_id == before.snapshot_id
    table = J.load_table(spark, f"{evolved_catalog.name}.{namespace}.{name}")
    table.refresh()
    checked = {"equality": 0, "positional": 0}
    for p in state.partitions:
        expression = java_partition_expression(spark, table, p.key)
        files = PF.scan_partition(spark, table, expression, state.snapshot_id)
        kinds = {ref: PF.delete_kind(d) for ref, d in files.deletes.items()}
        multi = [d for ref, d in files.deletes.items()
                 if kinds[ref] is DeleteContent.POSITION and PF.position_delete_target(spark, d) is None]
        named = PF._position_delete_targets(spark, multi, table)
        files.refine_position_deletes(spark, table)
        found = scope_applicability(minor_scope(spark, table, p.key, files, whole_table=p.key.is_unpartitioned))
        own_eq = {ref for ref, d in files.deletes.items()
                  if kinds[ref] is DeleteContent.EQUALITY and int(d.specId()) == p.key.spec_id}
        for path in files.data:
            label = f"[seed {seed}] {p.key.label()} {path.rsplit('/', 1)[-1]}"
            iceberg = files.applied.get(path, set())
            ours_pos = found.positional.get(path, frozenset())
            ice_pos = {ref for ref in iceberg if kinds[ref] is not DeleteContent.EQUALITY}
            assert ice_pos <= ours_pos, f"{label}: Iceberg applies {ice_pos - ours_pos}, ours not"
            has_dv = any(kinds[ref] is DeleteContent.DELETION_VECTOR for ref in ours_pos)
            for ref in ours_pos - ice_pos:
                assert (ref in named and path not in named[ref]) or \
                    (has_dv and kinds[ref] is DeleteContent.POSITION), f"{label}: {ref} applies by ours only"
            ours_eq = found.equality.get(path, frozenset())
            assert {ref for ref in iceberg if ref in own_eq} <= ours_eq, label
            spec_eq = {e.path for e in before.applicable_deletes.get(path, ()) if e.delete_kind == "equality"}
            assert {ref[0] for ref in ours_eq} == spec_eq & {ref[0] for ref in own_eq}, label
            checked["equality"] += len(ours_eq)
            checked["positional"] += len(ice_pos)
    assert checked["equality"] and checked["positional"], checked


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", SEEDS)
def test_compaction_on_evolved_table(spark, evolved_catalog: CatalogConfig, scenarios, request,  # type: ignore[no-untyped-def]
                                     seed: int, mode: str) -> None:
    scenario, before = scenarios(seed)
    namespace, base = scenario.identifier
    name = f"{base}_{mode}"
    metadata_file = evolved_catalog.load().load_table(scenario.identifier).metadata_location
    spark.sql(f"CALL {evolved_catalog.name}.system.register_table(table => '{namespace}.{name}', "
              f"metadata_file => '{metadata_file}')").collect()
    ref = f"{evolved_catalog.name}.{namespace}.{name}"
    label = f"seed {seed} {mode}"
    request.node.user_properties.append(("scenario", scenario.spec.describe()))

    level = ValidationLevel.CHECKSUM if seed % 2 else ValidationLevel.COUNT
    run = compact_in_process(spark, evolved_catalog, f"{namespace}.{name}", _MODE[mode], level=level, now=NOW,
                             overrides=_overrides(evolved_catalog, f"{namespace}.{name}", mode))
    if mode in _FULL:
        assert all(t.full_rewrite for t in run.plan.tasks)
    run.assert_clean()
    outcomes = run.partitions
    kinds = Counter(p.kind for p in outcomes if p.status == COMMITTED)
    request.node.user_properties.append(("committed", dict(kinds)))

    table = evolved_catalog.load().load_table((namespace, name))
    after = read_table(table)
    assert after.rows == before.rows, f"[{label}] reference reader:\n" + rows_diff(before.rows, after.rows)
    spark_after = spark_rows(spark, ref)
    assert spark_after == before.rows, f"[{label}] Spark:\n" + rows_diff(before.rows, spark_after)

    if mode in _FULL:
        assert not after.applicable_deletes, \
            f"[{label}] deletes apply after a full rewrite (spec rule):\n{_describe_applicable(after)}"
        applied = iceberg_applied_deletes(spark, ref)
        assert not applied, f"[{label}] Iceberg's scan planning applies deletes after a full rewrite: {applied}"
    if mode == "minor":
        assert set(kinds) == {"minor"}, kinds
        compacted = {(p.partition["spec_id"], tuple(f["value"] for f in p.partition["fields"]))
                     for p in outcomes if p.status == COMMITTED}
        left = [f"spec={d.spec_id} part={d.partition} {d.path.rsplit('/', 1)[-1]}" for d in after.delete_files
                if d.delete_kind == "equality" and (d.spec_id, tuple(d.partition)) in compacted]
        assert not left, f"[{label}] equality deletes left in partitions MINOR committed: {left}"

    check_engines(spark, table, ref, spark_after, label, request)


def test_minor_converts_equality_deletes_written_before_the_key_was_widened(  # type: ignore[no-untyped-def]
        spark, evolved_catalog: CatalogConfig) -> None:
    """The smallest shape of seeds 5 and 1 above: equality deletes on ``id`` written while it was an int (int32 in the
    delete file), ``ALTER COLUMN id TYPE bigint``, any commit after it (here one more equality delete, int64). MINOR
    must convert both files; Spark 3.5's Parquet reader cannot read an int32 column as bigint, so the delete files
    cannot be read at the current type as plain Parquet."""
    from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit

    ref = f"{evolved_catalog.name}.evo.widened_key"
    spark.sql(f"CREATE TABLE {ref} (id int, v string) USING iceberg TBLPROPERTIES ('format-version'='2', "
              "'write.delete.mode'='merge-on-read')").collect()
    spark.sql(f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ * FROM VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd') "
              "AS v(id, v)").collect()
    spark.sql(f"INSERT INTO {ref} SELECT /*+ REPARTITION(1) */ * FROM VALUES (5, 'e'), (6, 'f') AS v(id, v)").collect()
    table = J.load_table(spark, ref)
    table.refresh()
    write_and_commit(spark, table, [EqualityDeleteSpec(("id",), ((2,), (5,)))])  # int32 in the file
    spark.sql(f"ALTER TABLE {ref} ALTER COLUMN id TYPE bigint").collect()
    table.refresh()
    write_and_commit(spark, table, [EqualityDeleteSpec(("id",), ((3,),))])  # int64 in the file
    expected = {(1, "a"), (4, "d"), (6, "f")}
    assert {tuple(r) for r in spark.sql(f"SELECT * FROM {ref}").collect()} == expected

    state = inspect_table(evolved_catalog, "evo.widened_key")
    policy = CompactionPolicy.resolve(state.properties, {"fragment_ratio": 1 << 40})  # convert, rewrite no file
    the_plan = plan(state, policy, CompactionMode.MINOR, NOW)
    outcomes = [p for g in the_plan.groups
                for p in run_group(spark, the_plan, g.group_id, level=ValidationLevel.COUNT).partitions]
    assert [(p.kind, p.status) for p in outcomes] == [("minor", COMMITTED)], [(p.label, p.error) for p in outcomes]
    after = read_table(evolved_catalog.load().load_table(("evo", "widened_key")))
    assert set(after.rows) == expected and not [d for d in after.delete_files if d.delete_kind == "equality"]
    assert {tuple(r) for r in spark.sql(f"SELECT * FROM {ref}").collect()} == expected
