"""The bulk CDC generator builds the production shape it promises, and Spark, the reference reader and the
generator's own model agree on its rows."""

from __future__ import annotations

from collections import Counter

import pytest

from icecompact_testing.bulk import MIB, SIZES, BulkSpec, generate_bulk
from icecompact_testing.oracle import read_table, rows_diff, spark_rows


def test_named_sizes_grow_and_keep_several_segments_per_partition() -> None:
    sizes = [SIZES[name] for name in ("xs", "s", "m", "l")]
    assert [s.base_bytes for s in sizes] == sorted(s.base_bytes for s in sizes)
    assert 5 * MIB <= SIZES["xs"].base_bytes <= 15 * MIB and SIZES["l"].base_bytes >= 1500 * MIB
    for spec in sizes:
        per_partition = spec.base_bytes / spec.partitions / spec.target_file_size
        assert 2.5 <= per_partition <= 5, spec  # the generator rounds to whole files just under the target
        assert spec.streamed_partitions * spec.rounds >= 50, "at least 50 equality-delete files"
    assert BulkSpec.named("m", 3).format_version == 3
    assert BulkSpec.named("xs", seed=7).seed == 7


@pytest.mark.parametrize("changes", [
    {"format_version": 1}, {"partitions": 0}, {"update_fraction": 0.5}, {"active_partitions": 9},
    {"payload_chars": (400, 100)}, {"target_file_size": 1000}, {"position_delete_every": -1},
])
def test_spec_rejects_invalid_shapes(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BulkSpec(**changes)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size must be one of"):
        BulkSpec.named("xl")


@pytest.mark.parametrize("format_version", [2, 3])
def test_xs_table_is_read_alike_by_spark_oracle_and_model(spark, sqlite_catalog, format_version: int) -> None:  # type: ignore[no-untyped-def]
    spec = BulkSpec.named("xs", format_version, seed=11)
    result = generate_bulk(spark, sqlite_catalog, "bulk.events", spec)
    table = sqlite_catalog.load().load_table("bulk.events")

    # Three independent opinions of the live rows.
    oracle = read_table(table)
    spark_read = spark_rows(spark, result.table)
    model = result.expected_rows(table.io)
    assert oracle.rows == spark_read, rows_diff(oracle.rows, spark_read)
    assert model == spark_read, rows_diff(model, spark_read)
    assert result.live_rows == sum(model.values())
    ids = Counter(row[0] for row in model)
    assert max(ids.values()) == 1, "every key is live at most once"

    # The shape: segment files near the target, small fragments, equality deletes on id, position deletes.
    target = spec.target_file_size
    files = spark.sql(f"SELECT content, file_format, file_path, file_size_in_bytes, partition, "
                      f"equality_ids, referenced_data_file FROM {result.table}.files").collect()
    data = [f for f in files if f.content == 0]
    segments = [f for f in data if f.file_size_in_bytes >= target / 2]
    fragments = [f for f in data if f.file_size_in_bytes < target / 8]
    assert len(segments) + len(fragments) == len(data)
    assert all(f.file_size_in_bytes <= target for f in segments)
    per_partition = Counter(f.partition for f in segments)
    assert len(per_partition) == spec.partitions and min(per_partition.values()) >= 3
    assert len(fragments) == spec.partitions * spec.rounds
    eq = [f for f in files if f.content == 2]
    assert len(eq) >= 50 and all(list(f.equality_ids) == [1] for f in eq)
    positional = [f for f in files if f.content == 1]
    assert positional and all(f.referenced_data_file in {s.file_path for s in segments} for f in positional)
    if format_version == 3:
        assert {f.file_format for f in positional} == {"PUFFIN"}
        assert len({f.referenced_data_file for f in positional}) == len(positional), "one DV per data file"
    else:
        assert {f.file_format for f in positional} == {"PARQUET"}

    fragment_bytes = sum(f.file_size_in_bytes for f in fragments)
    assert fragment_bytes <= 0.15 * sum(f.file_size_in_bytes for f in data)
    deleted = result.stats["deleted_rows"] / result.stats["data_rows"]
    assert 0.02 <= deleted <= 0.10, deleted

    # Real sequence numbers: the base, then one commit per round and per position-delete commit.
    snapshots = spark.sql(f"SELECT operation FROM {result.table}.snapshots").collect()
    expected_commits = 1 + spec.rounds + spec.rounds // spec.position_delete_every
    assert len(snapshots) == expected_commits == result.stats["commits"]
    seqs = spark.sql(f"SELECT data_file.content AS content, min(sequence_number) AS lo, max(sequence_number) AS hi "
                     f"FROM {result.table}.entries WHERE status < 2 GROUP BY data_file.content").collect()
    by_content = {r.content: (r.lo, r.hi) for r in seqs}
    assert by_content[0][0] == 1 and by_content[2][0] == 2 and by_content[2][1] == 1 + spec.rounds + (
        spec.rounds - 1) // spec.position_delete_every


def test_same_seed_same_table(spark, sqlite_catalog) -> None:  # type: ignore[no-untyped-def]
    spec = BulkSpec.named("xs", rounds=2, position_delete_every=1, base_bytes=2 * MIB, seed=5)
    first = generate_bulk(spark, sqlite_catalog, "bulk.a", spec)
    second = generate_bulk(spark, sqlite_catalog, "bulk.b", spec)
    catalog = sqlite_catalog.load()
    assert first.expected_rows(catalog.load_table("bulk.a").io) == second.expected_rows(catalog.load_table("bulk.b").io)
    other = generate_bulk(spark, sqlite_catalog, "bulk.c", spec.replace(seed=6))
    assert other.expected_rows(catalog.load_table("bulk.c").io) != first.expected_rows(catalog.load_table("bulk.a").io)
