"""Matching a MINOR's equality deletes against its data files on the driver, with pyarrow.

A MINOR converts equality deletes into position deletes / DVs by finding, in every data file an equality delete
applies to, the positions of the rows whose key columns equal a delete row's. In a Spark job that costs ~2 s
whatever the size (a Parquet read, a delete read and two broadcast joins); a health-triggered MINOR of a streaming
table reads a few hundred thousand rows, where pyarrow on the driver does the same in a tenth of a second
(``bench/position_read.py``). This module is that driver-side match; :func:`compaction.spark.minor.
equality_matched_positions` decides when it is used (small work, key types compared exactly) and falls back to
the Spark job otherwise.

The semantics are the Spark path's, which are Iceberg's:

* Columns are found by Iceberg field id (names may have changed since a file was written); a field a file does not
  hold reads as nulls (a column added after the file was written, with no ``initial-default``: the caller checks).
* Values are compared at the table's current type: a file written before a type promotion (int -> long, decimal
  widening) is cast up, as Iceberg's readers widen on read.
* A delete row matches a data row when every key column is equal, a null equal to a null (Iceberg's equality
  deletes compare nulls as equal values).
* A data row is matched only against the delete files the spec lets apply to its data file (the caller's
  ``eq_targets``: sequence numbers, spec and partition).
* A row's position is its ordinal in its file. No delete is applied first: a row an earlier delete removed may match
  too, and ends up in the same position set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

_FIELD_ID = b"PARQUET:field_id"

#: (path, position in the file) of a delete file: the work's reference of an equality delete.
DeleteRef = tuple[str, int]


class DriverMatchUnsupported(Exception):
    """The driver cannot read these files the way Iceberg would (the caller uses the Spark job instead)."""


@dataclass(frozen=True)
class KeyColumns:
    """The equality columns of one or more delete files: Iceberg field ids and the Arrow type each is compared at
    (the table's current type)."""

    field_ids: tuple[int, ...]
    types: tuple[Any, ...]


class KeySet:
    """The key tuples of a set of equality-delete rows, for matching many data rows against them.

    One column: Arrow's hash set (``is_in``, nulls matching nulls). Several: each column's values are numbered
    within the deletes' distinct values of that column, and the tuple's number is built column by column,
    renumbered after each step among the prefixes the deletes hold, so it never exceeds the number of delete rows
    (no overflow whatever the column count or cardinality). A data row whose prefix no delete holds drops out."""

    def __init__(self, columns: Sequence[Any]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not columns:
            raise ValueError("a key needs at least one column")
        self._steps: list[tuple[Any, Any | None]] = []
        prefix = None
        for column in columns:
            values = pc.unique(column)
            if len(columns) == 1:
                self._steps.append((values, None))
                break
            index = pc.cast(pc.index_in(column, value_set=values, skip_nulls=False), pa.int64())
            combined = index if prefix is None else pc.add(pc.multiply(prefix, len(values)), index)
            distinct = pc.unique(combined)
            prefix = pc.cast(pc.index_in(combined, value_set=distinct), pa.int64())
            self._steps.append((values, distinct))

    def positions(self, columns: Sequence[Any]) -> Any:
        """The ordinals (a NumPy array) of the rows of ``columns`` (one array per key column, in the key's order,
        of equal length) whose key tuple is in the set."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(columns) != len(self._steps):
            raise ValueError(f"{len(columns)} columns for a key of {len(self._steps)}")
        values, distinct = self._steps[0]
        if distinct is None:
            hit = pc.is_in(columns[0], value_set=values, skip_nulls=False)
            return np.flatnonzero(pc.fill_null(hit, False).to_numpy(zero_copy_only=False))
        prefix = None
        for column, (values, distinct) in zip(columns, self._steps):
            index = pc.cast(pc.index_in(column, value_set=values, skip_nulls=False), pa.int64())
            combined = index if prefix is None else pc.add(pc.multiply(prefix, len(values)), index)
            prefix = pc.index_in(combined, value_set=distinct)  # null: no delete holds this prefix
        assert prefix is not None
        return np.flatnonzero(pc.is_valid(prefix).to_numpy(zero_copy_only=False))


def _top_level_columns(arrow_schema: Any) -> dict[int, str]:
    ids: dict[int, str] = {}
    for f in arrow_schema:
        raw = (f.metadata or {}).get(_FIELD_ID)
        if raw is not None:
            ids[int(raw)] = f.name
    return ids


def read_key_columns(source: Any, key: KeyColumns) -> list[Any]:
    """The key columns of the Parquet file ``source`` (a path or a seekable file) at the key's types, by field id:
    only those columns' chunks are read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(source)
    try:
        by_id = _top_level_columns(parquet.schema_arrow)
        if not by_id:
            # Files without field ids (imported, read through a name mapping): Iceberg resolves their columns in
            # ways this reader does not copy.
            raise DriverMatchUnsupported("a file without Parquet field ids")
        wanted = sorted({by_id[i] for i in key.field_ids if i in by_id})
        table = parquet.read(columns=wanted, use_threads=False)
        out = []
        for field_id, arrow_type in zip(key.field_ids, key.types):
            name = by_id.get(field_id)
            if name is None:
                out.append(pa.nulls(table.num_rows, arrow_type))
                continue
            column = table.column(name).combine_chunks()
            if column.type != arrow_type:
                try:
                    column = column.cast(arrow_type)  # safe cast: a value that would change fails, not matches
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise DriverMatchUnsupported(f"column {name} of type {column.type} read as {arrow_type}: {e}") from e
            out.append(column)
        return out
    finally:
        parquet.close()


#: (location, field ids, column names) -> what pyarrow opens for the columns of those field ids or names: a path or a
#: file (the caller's storage, see compaction.spark.minor).
OpenFile = Callable[[str, frozenset[int], frozenset[str]], Any]


def equality_reads(eq_targets: Mapping[str, Iterable[DeleteRef]],
                   key_of: Mapping[DeleteRef, KeyColumns]) -> dict[str, frozenset[int]]:
    """The files :func:`match_equality_deletes` reads and the field ids of the columns it reads from each: to fetch
    them ahead (object stores)."""
    reads: dict[str, set[int]] = {}
    for path, refs in eq_targets.items():
        for ref in refs:
            reads.setdefault(ref[0], set()).update(key_of[ref].field_ids)
            reads.setdefault(path, set()).update(key_of[ref].field_ids)
    return {location: frozenset(ids) for location, ids in reads.items()}


def match_equality_deletes(open_file: OpenFile, eq_targets: Mapping[str, Iterable[DeleteRef]],
                           key_of: Mapping[DeleteRef, KeyColumns]) -> dict[str, set[int]]:
    """Positions (data path -> ordinals) of the rows of every data file of ``eq_targets`` that an equality delete
    applying to it deletes. ``eq_targets``: data path -> the equality deletes that apply to it; ``key_of``: each
    delete's key columns; ``open_file``: see :data:`OpenFile`."""
    import pyarrow as pa

    deletes: dict[DeleteRef, list[Any]] = {}
    for ref in sorted({r for refs in eq_targets.values() for r in refs}):
        deletes[ref] = read_key_columns(open_file(ref[0], frozenset(key_of[ref].field_ids), frozenset()), key_of[ref])
    key_sets: dict[tuple[KeyColumns, frozenset[DeleteRef]], KeySet] = {}
    out: dict[str, set[int]] = {}
    for path in sorted(eq_targets):
        by_key: dict[KeyColumns, list[DeleteRef]] = {}
        for ref in sorted(eq_targets[path]):
            by_key.setdefault(key_of[ref], []).append(ref)
        if not by_key:
            continue
        # All key columns of this file in one read, each key's columns picked from it.
        field_types: dict[int, Any] = {}
        for key in by_key:
            field_types.update(zip(key.field_ids, key.types))
        every = KeyColumns(tuple(sorted(field_types)), tuple(field_types[i] for i in sorted(field_types)))
        source = open_file(path, frozenset(every.field_ids), frozenset())
        read = dict(zip(every.field_ids, read_key_columns(source, every)))
        hits: set[int] = set()
        for key, refs in by_key.items():
            cache_key = (key, frozenset(refs))
            key_set = key_sets.get(cache_key)
            if key_set is None:
                columns = [pa.concat_arrays([deletes[r][i] for r in refs]) for i in range(len(key.field_ids))]
                key_set = key_sets[cache_key] = KeySet(columns)
            hits.update(key_set.positions([read[i] for i in key.field_ids]).tolist())
        if hits:
            out[path] = hits
    return out


def read_position_deletes(open_file: OpenFile, locations: Iterable[str],
                          live_paths: Iterable[str]) -> dict[str, set[int]]:
    """Positions (data path -> positions) that the Parquet position-delete files at ``locations`` name in the data
    files ``live_paths``; rows naming other files are left out (the spec's columns ``file_path`` and ``pos``, by
    their reserved names as every writer names them)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    live = pa.array(sorted(set(live_paths)), pa.string())
    out: dict[str, set[int]] = {}
    for location in locations:
        parquet = pq.ParquetFile(open_file(location, frozenset(), frozenset({"file_path", "pos"})))
        try:
            rows = parquet.read(columns=["file_path", "pos"], use_threads=False)
        finally:
            parquet.close()
        index = pc.index_in(rows.column("file_path").combine_chunks().cast(pa.string()), value_set=live)
        which = pc.fill_null(index, -1).to_numpy(zero_copy_only=False)
        positions = rows.column("pos").combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False)
        for k in np.unique(which[which >= 0]).tolist():
            out.setdefault(live[k].as_py(), set()).update(positions[which == k].tolist())
    return out
