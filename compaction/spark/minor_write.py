"""Writing MINOR's output: the new v2 position-delete files (pyarrow, handed to Iceberg as ``ContentFileParser``
JSON) and v3 deletion vectors (Iceberg's ``BaseDVFileWriter``), one per data file (or, v2 with
``write.delete.granularity=partition``, one per partition). The DVs of a partition's commit share one Puffin file
(Iceberg's layout), or with ``compaction.one-dv-per-puffin-file`` each has a Puffin file of its own. What to write is decided in
:func:`compaction.spark.minor.decide_work`; the ``RowDelta`` that commits it is
:func:`compaction.spark.minor.commit_changes`.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import uuid
from typing import Any

from compaction.spark import jvm as J

# Reserved field ids of position delete files (Iceberg spec, "Position Delete Files").
FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545

DELETE_GRANULARITY = "write.delete.granularity"  # Iceberg's table property (TableProperties.DELETE_GRANULARITY)


def partition_scoped_output(table: Any) -> bool:
    """Whether new v2 position deletes are written one file per partition (``write.delete.granularity=partition``)
    rather than one per data file (Iceberg's default, ``file``). v3 always writes one DV per data file."""
    if int(table.operations().current().formatVersion()) >= 3:
        return False
    return str(table.properties().getOrDefault(DELETE_GRANULARITY, "file")).strip().lower() == "partition"


def _arrow_position_deletes(path: str, positions: list[int]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    schema = pa.schema([
        pa.field("file_path", pa.string(), nullable=False,
                 metadata={b"PARQUET:field_id": str(FILE_PATH_FIELD_ID).encode()}),
        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
    ])
    return pa.Table.from_arrays([pa.array([path] * len(positions), pa.string()), pa.array(positions, pa.int64())],
                                schema=schema)


def _pos_delete_metrics(meta: Any, first_path: str, last_path: str, min_pos: int, max_pos: int) -> dict[str, Any]:
    """Iceberg's metrics of a position-delete file as ``ContentFileParser`` JSON, as ``ParquetUtil.fileMetrics`` with
    ``MetricsConfig.forPositionDelete`` computes them from the footer (both columns in ``full`` mode: counts,
    sizes and untruncated bounds); the rows are known here (sorted), so the bounds come from them."""
    ids = [FILE_PATH_FIELD_ID, POS_FIELD_ID]
    sizes = [0, 0]
    counts = [0, 0]
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(2):
            sizes[c] += int(group.column(c).total_compressed_size)
            counts[c] += int(group.column(c).num_values)

    def string_bound(value: str) -> str:
        return value.encode("utf-8").hex().upper()

    def long_bound(value: int) -> str:
        return int(value).to_bytes(8, "little", signed=True).hex().upper()

    return {
        "column-sizes": {"keys": ids, "values": sizes},
        "value-counts": {"keys": ids, "values": counts},
        "null-value-counts": {"keys": ids, "values": [0, 0]},
        "nan-value-counts": {"keys": [], "values": []},
        "lower-bounds": {"keys": ids, "values": [string_bound(first_path), long_bound(min_pos)]},
        "upper-bounds": {"keys": ids, "values": [string_bound(last_path), long_bound(max_pos)]},
    }


def describe_files(spark: Any, table: Any, files: dict[str, Any], into: dict[str, dict[str, Any]]) -> None:
    """``ContentFileParser`` JSON of data files (spec id, partition, format) into ``into``, one py4j call per file
    not described yet (asking each attribute separately would cost several)."""
    import json

    parser = J.jvm(spark).org.apache.iceberg.ContentFileParser
    specs = table.specs()
    for path, f in files.items():
        if path not in into:
            into[path] = json.loads(str(parser.toJson(f, specs.get(int(f.specId())))))


def write_position_delete_files(spark: Any, table: Any, data_files: dict[str, Any], positions: dict[str, list[int]],
                                described: dict[str, dict[str, Any]] | None = None) -> list[Any]:
    """v2: new position-delete files for the data files of ``data_files`` (path -> ``DataFile``) that have positions
    (path -> sorted positions), rows sorted by
    (file_path, pos) as the spec requires, with Iceberg's metrics: one file per data file (``referenced_data_file``
    set; Iceberg's default granularity) or, with ``write.delete.granularity=partition``, one per partition.

    Written by pyarrow and handed to Iceberg as ``ContentFileParser`` JSON parsed in bulk: building each
    ``DeleteFile`` through the Java builder and ``ParquetUtil`` costs dozens of py4j round trips per file, which
    dominated MINOR on tables with many small data files (bench/minor.py). ``described``: a cache of the data files'
    ``ContentFileParser`` JSON (filled here)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from compaction.spark.equality_deletes import TableFileWriter

    j = J.jvm(spark)
    targets = {path: f for path, f in data_files.items() if positions.get(path)}
    if not targets:
        return []
    described = {} if described is None else described
    describe_files(spark, table, targets, described)
    per_partition_files = partition_scoped_output(table)
    provider = table.locationProvider()
    # The default provider puts every file of a partition in one directory: ask once per partition.
    same_directory = str(provider.getClass().getName()).endswith("DefaultLocationProvider")
    groups: dict[tuple[int, str, str], list[str]] = {}  # (spec id, partition JSON, data path or "") -> paths
    for path in sorted(targets):
        info = described[path]
        partition = json.dumps(info.get("partition", {}), sort_keys=True)
        groups.setdefault((int(info["spec-id"]), partition, "" if per_partition_files else path), []).append(path)
    directories: dict[tuple[int, str], str] = {}
    writer = TableFileWriter(spark, table)
    entries = []
    for (spec_id, partition, _), paths in groups.items():
        info = described[paths[0]]
        name = f"icecompact-posdel-{uuid.uuid4()}.parquet"
        if not same_directory or (spec_id, partition) not in directories:
            spec = table.specs().get(spec_id)
            if spec.isPartitioned():
                location = str(provider.newDataLocation(spec, targets[paths[0]].partition(), name))
            else:
                location = str(provider.newDataLocation(name))
            directories[(spec_id, partition)] = location[: len(location) - len(name)]
        location = directories[(spec_id, partition)] + name
        parts = [_arrow_position_deletes(path, positions[path]) for path in paths]  # paths sorted, positions too
        rows = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        buf = io.BytesIO()
        pq.write_table(rows, buf)
        payload = buf.getvalue()
        writer.write(location, payload)
        meta = pq.ParquetFile(io.BytesIO(payload)).metadata
        entry = {
            "spec-id": spec_id,
            "content": "POSITION_DELETES",
            "file-path": location,
            "file-format": "PARQUET",
            "partition": info.get("partition", {}),
            "file-size-in-bytes": len(payload),
            "record-count": rows.num_rows,
            **_pos_delete_metrics(meta, paths[0], paths[-1], min(positions[p][0] for p in paths),
                                  max(positions[p][-1] for p in paths)),
        }
        if not per_partition_files:
            entry["referenced-data-file"] = paths[0]
        entries.append(entry)
    nodes = j.org.apache.iceberg.util.JsonUtil.mapper().readTree(json.dumps(entries))
    parser = j.org.apache.iceberg.ContentFileParser
    specs = table.specs()
    return [parser.fromJson(nodes.get(i), specs) for i in range(len(entries))]


class _InputFiles:
    """``Function<DeleteFile, InputFile>`` for Iceberg's delete loader (py4j callback)."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def apply(self, delete_file: Any) -> Any:
        return self._table.io().newInputFile(str(delete_file.location()))

    class Java:
        implements = ["java.util.function.Function"]


class _NoPreviousDeletes:
    """``Function<String, PositionDeleteIndex>`` for ``BaseDVFileWriter``: previous deletes are merged by us."""

    def apply(self, _path: Any) -> Any:
        return None

    class Java:
        implements = ["java.util.function.Function"]


def write_deletion_vectors(spark: Any, table: Any, data_files: dict[str, Any], positions: dict[str, list[int]],
                           previous: dict[str, list[Any]] | None = None, *,
                           one_per_puffin_file: bool = False) -> list[Any]:
    """v3: one DV per data file of ``data_files`` (path -> ``DataFile``) holding its ``positions`` merged with its
    ``previous`` DVs (path -> DVs being replaced), written by Iceberg's ``BaseDVFileWriter``: all in one Puffin file
    (Iceberg's layout), or with ``one_per_puffin_file`` each DV in a Puffin file of its own (a writer per data file,
    its files named by the same ``OutputFileFactory``; ``compaction.one-dv-per-puffin-file``: DuckDB 1.5's external
    file cache can misread a Puffin file holding several DVs). The new positions are staged in one local Parquet
    file that Iceberg turns into one index per data file in a single call (``Deletes.toPositionIndexes``); old DVs
    are read by Iceberg's ``BaseDeleteLoader``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    j = J.jvm(spark)
    by_data = previous or {}
    loader = None
    if by_data:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(J.gateway(spark))
        loader = j.org.apache.iceberg.data.BaseDeleteLoader(_InputFiles(table))
    collections = j.java.util.Collections
    tmp = tempfile.mkdtemp(prefix="icecompact-minor-")
    try:
        staged_indexes = None
        rows = sorted((p, pos) for p, ps in positions.items() for pos in ps)
        if rows:
            staged_path = os.path.join(tmp, "positions.parquet")
            pq.write_table(pa.Table.from_arrays([pa.array([r[0] for r in rows], pa.string()),
                                                 pa.array([r[1] for r in rows], pa.int64())],
                                                schema=_arrow_position_deletes("", []).schema), staged_path)
            staged = (
                j.org.apache.iceberg.InternalData.read(j.org.apache.iceberg.FileFormat.PARQUET,
                                                       j.org.apache.iceberg.Files.localInput(staged_path))
                .project(j.org.apache.iceberg.io.DeleteSchemaUtil.pathPosSchema()).build()
            )
            staged_indexes = j.org.apache.iceberg.deletes.Deletes.toPositionIndexes(staged)  # path -> index
        factory = (
            j.org.apache.iceberg.io.OutputFileFactory.builderFor(table, 0, 0)
            .format(j.org.apache.iceberg.FileFormat.PUFFIN).operationId(f"icecompact-{uuid.uuid4().hex[:12]}").build()
        )
        no_previous = _NoPreviousDeletes()
        writer = j.org.apache.iceberg.deletes.BaseDVFileWriter(factory, no_previous)
        written: list[Any] = []
        specs: dict[int, Any] = {}
        for path, data_file in data_files.items():
            # Each index is a fresh object (the staged map's entries are used once; the loader returns new ones),
            # so merging into it is safe.
            index = staged_indexes.get(path) if staged_indexes is not None and positions.get(path) else None
            for dv in by_data.get(path, []):
                assert loader is not None
                old = loader.loadPositionDeletes(collections.singletonList(dv), path)
                if index is None:
                    index = old
                else:
                    index.merge(old)
            if index is None or index.isEmpty():
                continue
            spec_id = int(data_file.specId())
            if spec_id not in specs:
                specs[spec_id] = table.specs().get(spec_id)
            if one_per_puffin_file:
                # A writer holding one DV writes one Puffin file on close (none when it holds nothing).
                own = j.org.apache.iceberg.deletes.BaseDVFileWriter(factory, no_previous)
                own.delete(path, index, specs[spec_id], data_file.partition())
                own.close()
                written += list(own.result().deleteFiles())
            else:
                writer.delete(path, index, specs[spec_id], data_file.partition())
        writer.close()
        return written + list(writer.result().deleteFiles())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
