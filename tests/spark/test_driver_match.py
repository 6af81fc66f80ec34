"""The driver-side equality-delete match (compaction.spark.driver_match) against a plain-Python reading of the
spec's rule: a row is deleted by an equality delete that applies to its file when every key column equals the delete
row's, a null equal to a null; columns found by field id, compared at the table's current type."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compaction.spark.driver_match import DriverMatchUnsupported, KeyColumns, KeySet, match_equality_deletes


def _field(name: str, arrow_type: Any, field_id: int) -> pa.Field:
    return pa.field(name, arrow_type, metadata={b"PARQUET:field_id": str(field_id).encode()})


def _write(path: Path, fields: list[pa.Field], columns: list[list[Any]]) -> str:
    table = pa.Table.from_arrays([pa.array(c, type=f.type) for f, c in zip(fields, columns)], schema=pa.schema(fields))
    pq.write_table(table, path, row_group_size=7)  # several row groups: positions run across them
    return str(path)


def _oracle(data: list[tuple[Any, ...]], deletes: list[tuple[Any, ...]]) -> set[int]:
    keys = set(deletes)  # Python tuples: None == None, as the spec's equality deletes compare nulls
    return {i for i, row in enumerate(data) if row in keys}


@pytest.mark.parametrize("seed", range(12))
def test_random_multi_column_keys_with_nulls_match_the_spec(seed: int) -> None:
    rng = random.Random(seed)
    width = 1 + seed % 3

    def value() -> Any:
        return None if rng.random() < 0.15 else rng.randrange(4)

    data = [tuple(value() for _ in range(width)) for _ in range(rng.randrange(0, 60))]
    deletes = [tuple(value() for _ in range(width)) for _ in range(rng.randrange(0, 12))]
    columns = [pa.array([r[i] for r in deletes], pa.int64()) for i in range(width)]
    got = KeySet(columns).positions([pa.array([r[i] for r in data], pa.int64()) for i in range(width)])
    assert set(got.tolist()) == _oracle(data, deletes)


def test_files_are_read_by_field_id_at_the_current_type_and_only_applicable_deletes_match(tmp_path: Path) -> None:
    # The data file was written before a rename (id 1 was called "key") and an int -> long promotion; the second
    # key column (id 3, a decimal widened since) is missing in the old file: read as nulls.
    old = _write(tmp_path / "old.parquet", [_field("key", pa.int32(), 1), _field("other", pa.string(), 2)],
                 [[1, 2, 3, None, 5, 1], ["a", "b", "c", "d", "e", "f"]])
    new = _write(tmp_path / "new.parquet",
                 [_field("id", pa.int64(), 1), _field("amount", pa.decimal128(12, 2), 3)],
                 [[1, 2, 5, None], [Decimal("1.00"), None, Decimal("2.50"), None]])
    by_id = _write(tmp_path / "eq1.parquet", [_field("key", pa.int32(), 1)], [[1, None]])
    pair = _write(tmp_path / "eq2.parquet",
                  [_field("amount", pa.decimal128(10, 2), 3), _field("id", pa.int64(), 1)],
                  [[None, Decimal("2.50")], [2, 5]])
    one = KeyColumns((1,), (pa.int64(),))
    two = KeyColumns((1, 3), (pa.int64(), pa.decimal128(12, 2)))
    eq_targets = {old: {(by_id, -1), (pair, -1)}, new: {(pair, -1)}}  # eq1 does not apply to the new file
    got = match_equality_deletes(lambda location, ids, names: location, eq_targets, {(by_id, -1): one, (pair, -1): two})
    # old: id 1 (positions 0, 5) and the null id (3) by eq1; (2, null) by eq2 at position 1 (amount missing: null).
    # new: (2, null) at 1 and (5, 2.50) at 2 by eq2; id 1 and the null id are not deleted there.
    assert got == {old: {0, 1, 3, 5}, new: {1, 2}}


def test_a_value_that_would_change_in_the_cast_is_not_matched_but_refused(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.parquet", [_field("id", pa.int64(), 1)], [[1, 2 ** 40]])
    deletes = _write(tmp_path / "e.parquet", [_field("id", pa.int64(), 1)], [[2 ** 40]])
    key = KeyColumns((1,), (pa.int32(),))
    with pytest.raises(DriverMatchUnsupported):
        match_equality_deletes(lambda location, ids, names: location, {data: {(deletes, -1)}}, {(deletes, -1): key})


def test_files_without_field_ids_are_left_to_spark(tmp_path: Path) -> None:
    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), data)
    deletes = _write(tmp_path / "e.parquet", [_field("id", pa.int64(), 1)], [[2]])
    key = KeyColumns((1,), (pa.int64(),))
    with pytest.raises(DriverMatchUnsupported):
        match_equality_deletes(lambda location, ids, names: location, {str(data): {(deletes, -1)}}, {(deletes, -1): key})


def test_position_deletes_are_read_for_the_live_data_files_only(tmp_path: Path) -> None:
    from compaction.spark.driver_match import read_position_deletes

    first = tmp_path / "p1.parquet"
    pq.write_table(pa.table({"file_path": ["a", "a", "b", "gone"], "pos": pa.array([3, 5, 0, 9], pa.int64())}), first)
    second = tmp_path / "p2.parquet"
    pq.write_table(pa.table({"file_path": ["b", "c"], "pos": pa.array([7, 1], pa.int64())}), second)
    got = read_position_deletes(lambda location, ids, names: location, [str(first), str(second)], ["a", "b"])
    assert got == {"a": {3, 5}, "b": {0, 7}}
