"""Bulk generator of production-shape streaming CDC tables: gigabytes of wide rows in minutes, not hours.

The seeded workload generator (:mod:`compaction.demo.workload`) drives Spark DML round by round, which is right
for exploring table *shapes* but costs minutes per megabyte. This module builds the shape users actually run, at
the sizes they run it, by writing the files itself and committing them through Iceberg's Java API, so sequence
numbers, partition specs, manifests and metrics are Iceberg's own:

* data files: Parquet written by pyarrow with Iceberg field ids (``PARQUET:field_id``), zstd like Iceberg's default
  codec, one row group per file, and the metrics Iceberg computes from the footer
  (``ParquetUtil.fileMetrics(..., MetricsConfig.forTable(table))``) plus the row groups' split offsets;
* equality deletes: Parquet files on ``id`` (:func:`compaction.spark.equality_deletes.write_equality_delete_file`);
* position deletes: file-scoped Parquet files on v2, one deletion vector per data file (merged with the file's
  previous DV, which the commit replaces) on v3, written by the same code as MINOR's output
  (:mod:`compaction.spark.minor`);
* commits: one ``append`` for the base, one ``RowDelta`` per streaming round (fragment files and equality deletes
  together, the way Flink commits a checkpoint: an equality delete with sequence number S removes the old versions,
  with S' < S, never the new ones committed with it), one ``RowDelta`` per position-delete commit.

The shape ("streaming CDC", :class:`BulkSpec`):

* 16 columns, 0.5-1 KB per row raw: key ``id bigint``, ``ts timestamp``, low-cardinality ``region``, eight numeric
  columns, ``sku``, a ``payload`` of 100-400 characters, ``attributes`` of 50-250 characters (10 % null),
  ``updated_at`` and a boolean; partitioned by ``days(ts)``;
* a base of *segment* files just under the table's ``write.target-file-size-bytes`` in every partition;
* streaming rounds: per active partition one small *fragment* file (new versions of existing keys + new keys) and
  one equality-delete file on ``id`` (the updated keys + the keys deleted by the change stream);
* every few rounds a position-delete commit on segment files (the pattern of Spark ``DELETE``/``MERGE``).

Row contents are vectorized (numpy, pyarrow compute; strings are zero-copy slices of a random text pool): no Python
loop runs per row. The generator keeps its own model of the table, independent of Iceberg's delete rules: for every
file it wrote, which of its rows are still live (a key's old version dies when the generator updates or deletes the
key, whatever deletes it writes to say so). :meth:`BulkResult.expected_rows` reads the files back and keeps those
rows, a third opinion beside Spark and the reference reader (:mod:`icecompact_testing.oracle`).

Named sizes (:data:`SIZES`): ``xs`` (~10 MB, for tests), ``s`` (~100 MB), ``m`` (~500 MB), ``l`` (~2 GB), each for
format v2 and v3. Command line::

    .venv/bin/python -m icecompact_testing.bulk --size m --format-version 3 --table bench.events [--catalog NAME]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from compaction.catalog import CatalogConfig

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]
    from pyspark.sql import SparkSession

MIB = 1024 * 1024
DAY_US = 86_400_000_000
FIRST_DAY = 19_723  # 2024-01-01, days since epoch
REGIONS: tuple[str, ...] = ("us-east", "us-west", "eu-west", "eu-central", "ap-south", "ap-east", "sa-east", "af-south")

COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "BIGINT"),
    ("ts", "TIMESTAMP"),
    ("region", "STRING"),
    ("customer_id", "BIGINT"),
    ("quantity", "INT"),
    ("unit_price", "DOUBLE"),
    ("discount", "FLOAT"),
    ("tax", "DOUBLE"),
    ("total", "DOUBLE"),
    ("score", "INT"),
    ("version", "BIGINT"),
    ("sku", "STRING"),
    ("payload", "STRING"),
    ("attributes", "STRING"),
    ("updated_at", "TIMESTAMP"),
    ("is_priority", "BOOLEAN"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)
KEY_COLUMN = "id"
ATTRIBUTES_CHARS = (50, 250)
_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,"  # 64 symbols: 6 bits of entropy each
_SYMBOL_OF_BYTE = bytes(_ALPHABET[b % len(_ALPHABET)] for b in range(256))
_PARQUET_COMPRESSION_LEVEL = 3  # parquet-mr's zstd default, i.e. Iceberg's write.parquet.compression-level unset


@dataclass(frozen=True)
class BulkSpec:
    """Shape of one bulk CDC table. Fractions are of a partition's base rows, per round and active partition."""

    seed: int = 0
    format_version: int = 2
    partitions: int = 4  # days(ts) partitions, consecutive days from 2024-01-01
    base_bytes: int = 100 * MIB  # the segment files of all partitions together
    target_file_size: int = 8 * MIB  # write.target-file-size-bytes: segment files are written just under it
    rounds: int = 16  # streaming rounds: one RowDelta each
    active_partitions: int | None = None  # the most recent N partitions receive the stream (None: all)
    update_fraction: float = 0.0025  # keys updated per round (new version in the fragment + equality delete)
    delete_fraction: float = 0.0005  # keys deleted per round (equality delete only)
    insert_fraction: float = 0.003  # new keys per round (fragment)
    position_delete_every: int = 4  # a position-delete commit after every N-th round (0: none)
    position_delete_fraction: float = 0.005  # rows of segment files deleted by each position-delete commit
    payload_chars: tuple[int, int] = (100, 400)
    #: Updates, deletes and position deletes only hit rows the stream wrote (fragment files): the segments carry no
    #: delete (equality deletes are ruled out for them by the key column's bounds), as a streaming table's large
    #: files usually do.
    deletes_in_fragments_only: bool = False
    #: v3: the segment files hold the row-lineage columns (``_row_id``, ``_last_updated_sequence_number``) for every
    #: row, as the files an earlier compaction wrote do.
    segment_row_lineage: bool = False

    def __post_init__(self) -> None:
        if self.format_version not in (2, 3):
            raise ValueError(f"format_version must be 2 or 3, not {self.format_version}")
        if self.partitions < 1 or self.rounds < 0 or self.base_bytes < 1 or self.target_file_size < 64 * 1024:
            raise ValueError("partitions >= 1, rounds >= 0, base_bytes >= 1 and target_file_size >= 64 KiB required")
        if self.active_partitions is not None and not 1 <= self.active_partitions <= self.partitions:
            raise ValueError("active_partitions must be within [1, partitions]")
        for name in ("update_fraction", "delete_fraction", "insert_fraction", "position_delete_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 0.2:
                raise ValueError(f"{name} must be within [0, 0.2], not {value}")
        if self.position_delete_every < 0:
            raise ValueError("position_delete_every must be >= 0")
        if self.segment_row_lineage and self.format_version < 3:
            raise ValueError("segment_row_lineage needs format_version 3 (row lineage)")
        low, high = self.payload_chars
        if not 1 <= low <= high <= 4096:
            raise ValueError("payload_chars must be (low, high) with 1 <= low <= high <= 4096")

    @classmethod
    def named(cls, size: str, format_version: int = 2, **overrides: Any) -> BulkSpec:
        """One of the named sizes of :data:`SIZES` (``xs``, ``s``, ``m``, ``l``), fields replaced by ``overrides``."""
        if size not in SIZES:
            raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
        return dataclasses.replace(SIZES[size], format_version=format_version, **overrides)

    def replace(self, **changes: Any) -> BulkSpec:
        return dataclasses.replace(self, **changes)

    @property
    def streamed_partitions(self) -> int:
        return self.partitions if self.active_partitions is None else self.active_partitions


# Every size has 3-4 segment files per partition (a smaller target for the smaller sizes) and >= 50 equality-delete
# files; the defaults delete ~6 % of the rows and leave fragments at ~8 % of the bytes.
SIZES: Mapping[str, BulkSpec] = {
    "xs": BulkSpec(partitions=3, base_bytes=9 * MIB, target_file_size=1 * MIB, rounds=17),
    "s": BulkSpec(partitions=4, base_bytes=92 * MIB, target_file_size=8 * MIB),
    "m": BulkSpec(partitions=4, base_bytes=460 * MIB, target_file_size=32 * MIB),
    "l": BulkSpec(partitions=4, base_bytes=1840 * MIB, target_file_size=128 * MIB),
}


@dataclass
class _File:
    """A data file the generator wrote, and which of its rows it believes are live."""

    location: str
    partition: int  # index of the day partition
    kind: str  # "segment" or "fragment"
    live: np.ndarray  # bool per row position
    java: Any = None  # the committed org.apache.iceberg.DataFile


@dataclass
class _Partition:
    """The live keys of one partition and where their live version is: (file index, row position)."""

    day: int
    base_rows: int
    ids: np.ndarray
    file: np.ndarray
    pos: np.ndarray


@dataclass(frozen=True)
class BulkResult:
    table: str  # Spark identifier: catalog.namespace.name
    identifier: tuple[str, str]  # (namespace, name) for pyiceberg's load_table
    spec: BulkSpec
    columns: tuple[str, ...]
    stats: Mapping[str, float]  # what was written and how fast
    snapshot_id: int
    files: tuple[tuple[str, str, int], ...] = ()  # every data file written: (location, kind, partition index)
    live_masks: tuple[Any, ...] = field(default=(), repr=False)  # per file: np.ndarray of bool, live rows

    @property
    def live_rows(self) -> int:
        """Rows the generator believes live (the sum of its masks)."""
        return int(sum(int(mask.sum()) for mask in self.live_masks))

    def expected_rows(self, io: Any) -> Counter[tuple[Any, ...]]:
        """The generator's model as a multiset of rows normalized like the reference reader's: every data file it
        wrote, read back with pyarrow through ``io`` (a pyiceberg ``FileIO``, e.g. ``table.io``), keeping the rows it
        never updated or deleted. Meant for small sizes (every row becomes a Python tuple)."""
        import pyarrow.parquet as pq

        from icecompact_testing.oracle import normalize_row

        rows: Counter[tuple[Any, ...]] = Counter()
        for (location, _kind, _partition), mask in zip(self.files, self.live_masks):
            if not mask.any():
                continue
            data = pq.read_table(io.new_input(location).open()).filter(mask)
            for values in zip(*(data.column(c).to_pylist() for c in self.columns)):
                rows[normalize_row(values)] += 1
        return rows


class BulkGenerator:
    """Builds one table of shape ``spec``; :meth:`run` returns the :class:`BulkResult`."""

    def __init__(self, spark: SparkSession, table: str, spec: BulkSpec, *,
                 log: Callable[[str], None] | None = None, threads: int = 2,
                 after_round: Callable[[int], None] | None = None) -> None:
        import numpy as np

        self.spark, self.table_ref, self.spec = spark, table, spec
        self.after_round = after_round
        self.log = log or (lambda _msg: None)
        self.threads = max(1, threads)
        self.np = np
        self.rng = np.random.default_rng([spec.seed, 1])
        self.files: list[_File] = []
        self.parts: list[_Partition] = []
        self.next_id = 1
        self.stats: Counter[str] = Counter()
        self.current_dv: dict[str, Any] = {}  # v3: data file location -> its live DV
        self._pool: pa.Buffer | None = None
        self._pool_size = 0

    # -- values ------------------------------------------------------------------------------------------------
    def _text_pool(self, size: int) -> pa.Buffer:
        """Random text (64 symbols) that string columns are sliced from; grown on demand, never shrunk."""
        import pyarrow as pa

        if self._pool is None or self._pool_size < size:
            size = max(size, 16 * MIB)
            rng = self.np.random.default_rng([self.spec.seed, 2, size])
            self._pool = pa.py_buffer(rng.bytes(size).translate(_SYMBOL_OF_BYTE))
            self._pool_size = size
        return self._pool

    def _text(self, rng: np.random.Generator, n: int, low: int, high: int, pool: pa.Buffer) -> pa.Array:
        """``n`` strings of ``low..high`` characters: consecutive slices of the pool from a random start (offsets are
        monotonic, so the array is built over the pool without copying it)."""
        import pyarrow as pa

        np = self.np
        lengths = rng.integers(low, high + 1, size=n, dtype=np.int64)
        total = int(lengths.sum())
        start = int(rng.integers(0, pool.size - total + 1))
        offsets = np.empty(n + 1, dtype=np.int32)
        offsets[0] = start
        np.cumsum(lengths, out=offsets[1:])
        offsets[1:] += start
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pool)

    def _rows(self, rng: np.random.Generator, ids: np.ndarray, day: int, version: int, schema: pa.Schema) -> pa.Table:
        """A batch of rows with these keys in partition ``day``, all columns drawn from ``rng``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        np = self.np
        n = len(ids)
        pool = self._pool
        assert pool is not None
        quantity = rng.integers(1, 100, size=n, dtype=np.int32)
        unit_price = np.round(rng.uniform(0.5, 500.0, size=n), 2)
        discount = rng.uniform(0.0, 0.3, size=n).astype(np.float32)
        tax = np.round(quantity * unit_price * 0.08, 2)
        total = np.round(quantity * unit_price * (1.0 - discount.astype(np.float64)) + tax, 2)
        skus = pc.utf8_lpad(pc.cast(pa.array(rng.integers(0, 10**8, size=n, dtype=np.int64)), pa.string()), 8, "0")
        discount_arr = pa.array(discount, mask=rng.random(n) < 0.05)  # some nulls
        attributes = self._text(rng, n, *ATTRIBUTES_CHARS, pool)
        attributes = pc.if_else(pa.array(rng.random(n) < 0.1), pa.scalar(None, pa.string()), attributes)
        region_codes = pa.array(rng.integers(0, len(REGIONS), size=n, dtype=np.int32))
        updated = (FIRST_DAY + self.spec.partitions) * DAY_US + version * 60_000_000
        arrays = {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(day * DAY_US + rng.integers(0, DAY_US, size=n, dtype=np.int64), pa.int64()),
            "region": pa.DictionaryArray.from_arrays(region_codes, pa.array(REGIONS)).cast(pa.string()),
            "customer_id": pa.array(rng.integers(1, 5_000_000, size=n, dtype=np.int64)),
            "quantity": pa.array(quantity),
            "unit_price": pa.array(unit_price),
            "discount": discount_arr,
            "tax": pa.array(tax),
            "total": pa.array(total),
            "score": pa.array(rng.integers(0, 1000, size=n, dtype=np.int32)),
            "version": pa.array(np.full(n, version, dtype=np.int64)),
            "sku": pc.binary_join_element_wise(pa.scalar("SKU-"), skus, ""),
            "payload": self._text(rng, n, *self.spec.payload_chars, pool),
            "attributes": attributes,
            "updated_at": pa.array(updated + rng.integers(0, 60_000_000, size=n, dtype=np.int64), pa.int64()),
            "is_priority": pa.array(rng.random(n) < 0.1),
        }
        columns = []
        for f in schema:
            values = arrays[f.name]
            columns.append(values.view(f.type) if pa.types.is_timestamp(f.type) else values.cast(f.type))
        return pa.Table.from_arrays(columns, schema=schema)

    # -- files -------------------------------------------------------------------------------------------------
    def _encode(self, rows: pa.Table) -> tuple[bytes, list[int]]:
        """Parquet bytes the way Iceberg writes data files (zstd, one row group, statistics on every column,
        dictionaries only for the low-cardinality columns) and the row groups' start offsets (split offsets)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        collected: list[Any] = []
        pq.write_table(rows, sink, compression="zstd", compression_level=_PARQUET_COMPRESSION_LEVEL,
                       use_dictionary=["region", "quantity", "is_priority"], row_group_size=max(1, rows.num_rows),
                       store_schema=False, metadata_collector=collected)
        meta = collected[0]
        offsets = []
        for g in range(meta.num_row_groups):
            column = meta.row_group(g).column(0)
            start = column.data_page_offset
            if column.has_dictionary_page and column.dictionary_page_offset is not None:
                start = min(start, column.dictionary_page_offset)
            offsets.append(int(start))
        return sink.getvalue().to_pybytes(), offsets

    def _data_file(self, jtable: Any, spec: Any, location: str, size: int, split_offsets: list[int],
                   partition: Any, metrics_config: Any) -> Any:
        from compaction.spark import jvm as J

        parquet_util, arrays, long_stream, data_files, io = self._java
        metrics = parquet_util.fileMetrics(io.newInputFile(location), metrics_config)
        offsets = arrays.asList(long_stream.of(J.long_array(self.spark, split_offsets)).boxed().toArray())
        return (data_files.builder(spec).withPath(location).withFormat("parquet").withFileSizeInBytes(size)
                .withMetrics(metrics).withSplitOffsets(offsets).withPartition(partition).build())

    # -- the run -----------------------------------------------------------------------------------------------
    def run(self) -> BulkResult:
        from compaction.spark import jvm as J
        from compaction.spark.equality_deletes import TableFileWriter, arrow_schema

        np, spec = self.np, self.spec
        started = time.perf_counter()
        jtable = J.load_table(self.spark, self.table_ref)
        jtable.refresh()
        j = J.jvm(self.spark)
        self.schema = arrow_schema(jtable, COLUMN_NAMES)
        self.writer = TableFileWriter(self.spark, jtable)
        self.metrics_config = j.org.apache.iceberg.MetricsConfig.forTable(jtable)
        # Every py4j call is a socket round trip (~0.5-1 ms here): the Java classes used per file are resolved once.
        self._java = (j.org.apache.iceberg.parquet.ParquetUtil, j.java.util.Arrays, j.java.util.stream.LongStream,
                      j.org.apache.iceberg.DataFiles, jtable.io())
        self.jspec = jtable.spec()
        self.partition_data = {}
        for p in range(spec.partitions):
            self.partition_data[p] = J.partition_data(self.spark, self.jspec, (FIRST_DAY + p,))

        # Rows per segment file from a sample encoded exactly like the real files.
        self._text_pool(16 * MIB)
        sample = self._rows(np.random.default_rng([spec.seed, 3]), np.arange(20_000, dtype=np.int64), FIRST_DAY, 0,
                            self.schema)
        bytes_per_row = len(self._encode(sample)[0]) / sample.num_rows
        rows_per_segment = max(1, int(spec.target_file_size * 0.97 / bytes_per_row))
        segments = max(1, round(spec.base_bytes / spec.partitions / (rows_per_segment * bytes_per_row)))
        max_chars = spec.payload_chars[1] + ATTRIBUTES_CHARS[1]
        self._text_pool(rows_per_segment * max_chars + MIB)
        self.log(f"bulk: {spec.partitions} partitions x {segments} segment files x {rows_per_segment:,} rows "
                 f"(~{bytes_per_row:.0f} B/row on disk, target {spec.target_file_size / MIB:.0f} MiB)")

        self._write_base(jtable, segments, rows_per_segment)
        base_done = time.perf_counter()
        self.log(f"bulk: base {self.stats['segment_bytes'] / MIB:,.0f} MiB in {base_done - started:.1f} s "
                 f"({self.stats['segment_bytes'] / MIB / max(base_done - started, 1e-9):.0f} MiB/s)")
        for round_ in range(1, spec.rounds + 1):
            self._stream_round(jtable, round_)
            if spec.position_delete_every and round_ % spec.position_delete_every == 0:
                self._position_delete_commit(jtable, round_)
            if round_ % 4 == 0 or round_ == spec.rounds:
                self.log(f"bulk: round {round_}/{spec.rounds} ({time.perf_counter() - started:.1f} s)")
            if self.after_round is not None:
                # e.g. a compaction between checkpoints (a streaming run); our next commit sees its snapshot. The
                # model stays right for equality deletes (by key); position deletes name the generator's own
                # files, so a run that rewrites files in between sets position_delete_every=0.
                self.after_round(round_)
                jtable.refresh()

        elapsed = time.perf_counter() - started
        written = sum(self.stats[k] for k in ("segment_bytes", "fragment_bytes", "eq_delete_bytes",
                                              "position_delete_bytes"))
        live = sum(int(f.live.sum()) for f in self.files)
        total_rows = sum(len(f.live) for f in self.files)
        self.stats.update({
            "seconds": round(elapsed, 3), "bytes_written": written,
            "mib_per_second": round(written / MIB / max(elapsed, 1e-9), 1),
            "base_seconds": round(base_done - started, 3),
            "live_rows": live, "data_rows": total_rows, "deleted_rows": total_rows - live,
            "segment_files_per_partition": segments, "rows_per_segment": rows_per_segment,
        })
        self.log(f"bulk: {written / MIB:,.0f} MiB in {elapsed:.1f} s = {self.stats['mib_per_second']} MiB/s; "
                 f"{self.stats['segment_files']} segment + {self.stats['fragment_files']} fragment files, "
                 f"{self.stats['eq_delete_files']} equality-delete files, {self.stats['position_delete_files']} "
                 f"position-delete files / DVs; {total_rows - live:,} of {total_rows:,} rows deleted "
                 f"({100 * (total_rows - live) / max(total_rows, 1):.1f} %), fragments "
                 f"{100 * self.stats['fragment_bytes'] / max(written, 1):.1f} % of bytes")
        jtable.refresh()
        namespace, name = self.table_ref.split(".")[-2:]
        return BulkResult(
            table=self.table_ref, identifier=(namespace, name), spec=spec, columns=COLUMN_NAMES,
            stats=dict(self.stats), snapshot_id=int(jtable.currentSnapshot().snapshotId()),
            files=tuple((f.location, f.kind, f.partition) for f in self.files),
            live_masks=tuple(f.live for f in self.files),
        )

    def _new_location(self, jtable: Any, partition: int, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4()}.parquet"
        return str(jtable.locationProvider().newDataLocation(self.jspec, self.partition_data[partition], name))

    def _write_base(self, jtable: Any, segments: int, rows_per_segment: int) -> None:
        """Every partition's segment files, encoded on ``threads`` threads (numpy, pyarrow and the file write release
        the GIL), registered with Iceberg's metrics, and committed in one append."""
        np, spec = self.np, self.spec
        jobs = []
        for p in range(spec.partitions):
            first = self.next_id
            self.next_id += segments * rows_per_segment
            for s in range(segments):
                jobs.append((p, s, first + s * rows_per_segment))
            ids = np.arange(first, self.next_id, dtype=np.int64)
            self.parts.append(_Partition(
                FIRST_DAY + p, segments * rows_per_segment, ids,
                np.repeat(np.arange(segments, dtype=np.int32) + p * segments, rows_per_segment),
                np.tile(np.arange(rows_per_segment, dtype=np.int64), segments)))

        def build(job: tuple[int, int, int]) -> tuple[int, str, int, list[int]]:
            p, s, first_id = job
            rng = np.random.default_rng([spec.seed, 4, p, s])
            rows = self._rows(rng, np.arange(first_id, first_id + rows_per_segment, dtype=np.int64), FIRST_DAY + p, 0,
                              self.schema)
            if spec.segment_row_lineage:
                rows = _with_row_lineage(rows, first_id - 1, LINEAGE_BASE_SEQUENCE_NUMBER)
            payload, offsets = self._encode(rows)
            location = self._new_location(jtable, p, f"segment-{p:03d}-{s:03d}")
            self.writer.write(location, payload)
            return p, location, len(payload), offsets

        with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
            written = list(pool.map(build, jobs))
        append = jtable.newAppend()
        for p, location, size, offsets in written:
            data_file = self._data_file(jtable, self.jspec, location, size, offsets, self.partition_data[p],
                                        self.metrics_config)
            self.files.append(_File(location, p, "segment", np.ones(rows_per_segment, dtype=bool), data_file))
            append = append.appendFile(data_file)
            self.stats["segment_files"] += 1
            self.stats["segment_bytes"] += size
        append.commit()
        self.stats["commits"] += 1

    def _segment_mask(self) -> np.ndarray:
        return self.np.array([f.kind == "segment" for f in self.files], dtype=bool)

    def _kill(self, part: _Partition, chosen: np.ndarray) -> None:
        """Mark the live versions at ``chosen`` (indexes into the partition's arrays) dead in their files."""
        files, positions = part.file[chosen], part.pos[chosen]
        for f in self.np.unique(files):
            self.files[int(f)].live[positions[files == f]] = False

    def _stream_round(self, jtable: Any, round_: int) -> None:
        """One CDC checkpoint: per active partition a fragment file (updated + new keys) and an equality-delete file
        (updated + deleted keys), all in one RowDelta."""
        data_files, delete_files = self.stream_files(jtable, round_)
        delta = jtable.newRowDelta()
        for data_file in data_files:
            delta = delta.addRows(data_file)
        for delete_file in delete_files:
            delta = delta.addDeletes(delete_file)
        delta.commit()
        self.stats["commits"] += 1

    def stream_files(self, jtable: Any, round_: int) -> tuple[list[Any], list[Any]]:
        """The files of one CDC checkpoint (fragment data files, equality-delete files), written but not committed;
        the model already counts them as committed (a caller that commits them itself must not give up)."""
        import pyarrow as pa

        from compaction.spark.equality_deletes import write_equality_delete_file

        np, spec = self.np, self.spec
        rng = np.random.default_rng([spec.seed, 5, round_])
        data_files: list[Any] = []
        delete_files: list[Any] = []
        for p in range(spec.partitions - spec.streamed_partitions, spec.partitions):
            part = self.parts[p]
            n_live = len(part.ids)
            n_upd = min(n_live, round(spec.update_fraction * part.base_rows))
            n_del = min(n_live - n_upd, round(spec.delete_fraction * part.base_rows))
            n_new = round(spec.insert_fraction * part.base_rows)
            if spec.deletes_in_fragments_only:
                streamed = np.flatnonzero(~self._segment_mask()[part.file])
                n_upd = min(n_upd, len(streamed))
                n_del = min(n_del, len(streamed) - n_upd)
                chosen = (rng.choice(streamed, n_upd + n_del, replace=False) if n_upd + n_del
                          else np.empty(0, np.int64))
            else:
                chosen = (rng.choice(n_live, n_upd + n_del, replace=False) if n_upd + n_del
                          else np.empty(0, np.int64))
            updated, deleted = chosen[:n_upd], chosen[n_upd:]
            eq_ids = np.sort(part.ids[chosen])
            new_ids = np.arange(self.next_id, self.next_id + n_new, dtype=np.int64)
            self.next_id += n_new
            fragment_ids = np.concatenate([part.ids[updated], new_ids])
            self._kill(part, chosen)
            index = len(self.files)
            if len(fragment_ids):
                rows = self._rows(rng, fragment_ids, part.day, round_, self.schema)
                payload, offsets = self._encode(rows)
                location = self._new_location(jtable, p, f"fragment-{round_:04d}")
                self.writer.write(location, payload)
                data_file = self._data_file(jtable, self.jspec, location, len(payload), offsets,
                                            self.partition_data[p], self.metrics_config)
                data_files.append(data_file)
                self.files.append(_File(location, p, "fragment", np.ones(len(fragment_ids), dtype=bool), data_file))
                self.stats["fragment_files"] += 1
                self.stats["fragment_bytes"] += len(payload)
                self.stats["fragment_rows"] += len(fragment_ids)
            # The updated keys' live versions move to the fragment; deleted keys leave; new keys arrive after them.
            part.file[updated] = index
            part.pos[updated] = np.arange(n_upd, dtype=np.int64)
            keep = np.ones(n_live, dtype=bool)
            keep[deleted] = False
            part.ids = np.concatenate([part.ids[keep], new_ids])
            part.file = np.concatenate([part.file[keep], np.full(n_new, index, dtype=np.int32)])
            part.pos = np.concatenate([part.pos[keep], np.arange(n_upd, n_upd + n_new, dtype=np.int64)])
            if len(eq_ids):
                keys = pa.table({KEY_COLUMN: pa.array(eq_ids, pa.int64())})
                eq = write_equality_delete_file(self.spark, jtable, (KEY_COLUMN,), keys, partition=(part.day,),
                                                partition_struct=self.partition_data[p], writer=self.writer)
                delete_files.append(eq)
                self.stats["eq_delete_files"] += 1
                self.stats["eq_delete_bytes"] += int(eq.fileSizeInBytes())
                self.stats["eq_deleted_keys"] += len(eq_ids)
        return data_files, delete_files

    def _position_delete_commit(self, jtable: Any, round_: int) -> None:
        """A Spark ``DELETE``'s footprint: scattered rows of segment files in every active partition, one
        file-scoped position-delete file per data file (v2) or one DV per data file replacing its previous DV
        (v3), in one RowDelta."""
        from compaction.spark.minor import write_deletion_vectors, write_position_delete_files

        np, spec = self.np, self.spec
        rng = np.random.default_rng([spec.seed, 6, round_])
        is_segment = self._segment_mask()
        if spec.deletes_in_fragments_only:
            is_segment = ~is_segment  # the "DELETE" hits rows the stream wrote
        positions: dict[str, list[int]] = {}
        data_files: dict[str, Any] = {}
        for p in range(spec.partitions - spec.streamed_partitions, spec.partitions):
            part = self.parts[p]
            candidates = np.flatnonzero(is_segment[part.file])
            k = min(len(candidates), round(spec.position_delete_fraction * part.base_rows))
            if k == 0:
                continue
            chosen = rng.choice(candidates, k, replace=False)
            files, rows = part.file[chosen], part.pos[chosen]
            for f in np.unique(files):
                record = self.files[int(f)]
                positions[record.location] = sorted(int(x) for x in rows[files == f])
                data_files[record.location] = record.java
            self._kill(part, chosen)
            keep = np.ones(len(part.ids), dtype=bool)
            keep[chosen] = False
            part.ids, part.file, part.pos = part.ids[keep], part.file[keep], part.pos[keep]
            self.stats["position_deleted_rows"] += k
        if not positions:
            return
        # Validated from the snapshot the positions were chosen at, as Spark's DELETE does; without a starting
        # snapshot Iceberg checks the whole history and takes the DV being replaced for a concurrent one.
        delta = jtable.newRowDelta().validateFromSnapshot(jtable.currentSnapshot().snapshotId())
        if spec.format_version >= 3:
            # At most one DV per data file (v3): the new DV holds the old one's positions too and replaces it.
            previous = {path: [self.current_dv[path]] for path in positions if path in self.current_dv}
            new_files = write_deletion_vectors(self.spark, jtable, data_files, positions, previous)
            for old in previous.values():
                delta = delta.removeDeletes(old[0])
            for dv in new_files:
                self.current_dv[str(dv.referencedDataFile())] = dv
        else:
            new_files = write_position_delete_files(self.spark, jtable, data_files, positions)
        sizes = set()
        for f in new_files:
            delta = delta.addDeletes(f)
            sizes.add((str(f.location()), int(f.fileSizeInBytes())))
        delta.commit()
        self.stats["commits"] += 1
        self.stats["position_delete_commits"] += 1
        self.stats["position_delete_files"] += len(new_files)
        self.stats["position_delete_bytes"] += sum(size for _, size in sizes)


#: The sequence number of the generator's first commit (the segments' append), the last update of their rows.
LINEAGE_BASE_SEQUENCE_NUMBER = 1


def _with_row_lineage(rows: pa.Table, first_row_id: int, sequence_number: int) -> pa.Table:
    """``rows`` with ``_row_id`` = ``first_row_id`` + position and ``_last_updated_sequence_number`` written. The
    segments' ids (key - 1) cover exactly the row ids [0, rows of the base) that the base append advances the table's
    ``next-row-id`` past, so no row id is assigned twice."""
    import numpy as np
    import pyarrow as pa

    from compaction.spark.row_group_copy import LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID, ROW_ID_FIELD_ID

    n = rows.num_rows
    row_id = pa.field("_row_id", pa.int64(), metadata={b"PARQUET:field_id": str(ROW_ID_FIELD_ID).encode()})
    seq = pa.field("_last_updated_sequence_number", pa.int64(),
                   metadata={b"PARQUET:field_id": str(LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID).encode()})
    rows = rows.append_column(row_id, pa.array(np.arange(first_row_id, first_row_id + n, dtype=np.int64)))
    return rows.append_column(seq, pa.array(np.full(n, sequence_number, dtype=np.int64)))


def table_properties(spec: BulkSpec) -> dict[str, str]:
    return {
        "format-version": str(spec.format_version),
        "write.delete.mode": "merge-on-read",
        "write.update.mode": "merge-on-read",
        "write.merge.mode": "merge-on-read",
        "write.target-file-size-bytes": str(spec.target_file_size),
        "write.parquet.compression-codec": "zstd",
    }


def create_table(spark: SparkSession, table: str, spec: BulkSpec, *, replace: bool = False) -> None:
    """The bulk table's DDL (Spark SQL DDL; no DML)."""
    from compaction.core.identifiers import parse_table_identifier, quoted

    catalog, _, rest = table.partition(".")
    identity = parse_table_identifier(rest, catalog)
    from compaction.demo.tables import create_table as create_iceberg_table

    ident = quoted(identity)
    columns = ", ".join(f"{name} {type_}" for name, type_ in COLUMNS)
    create_iceberg_table(spark, ident, columns, "days(ts)", table_properties(spec), replace=replace)


def generate_bulk(spark: SparkSession, catalog: CatalogConfig, table_name: str, spec: BulkSpec, *,
                  replace: bool = False, log: Callable[[str], None] | None = None, threads: int = 2,
                  after_round: Callable[[int], None] | None = None) -> BulkResult:
    """Create ``catalog.table_name`` (``namespace.name``) and fill it with the shape ``spec``. The catalog must be
    registered in ``spark`` under ``catalog.name``; with ``replace`` an existing table is dropped (PURGE) first."""
    from compaction.demo.workload import _split_table_name

    namespace, name = _split_table_name(catalog, table_name)
    table = f"{catalog.name}.{namespace}.{name}"
    create_table(spark, table, spec, replace=replace)
    return BulkGenerator(spark, table, spec, log=log, threads=threads, after_round=after_round).run()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m icecompact_testing.bulk", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="xs")
    ap.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    ap.add_argument("--table", required=True, help="namespace.name of the table to create")
    ap.add_argument("--catalog", default=None, help="configured catalog name (default: the embedded catalog)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replace", action="store_true", help="drop an existing table of that name first (PURGE)")
    args = ap.parse_args(argv)

    from compaction.spark.session import build_session

    catalog = CatalogConfig.resolve(args.catalog)
    spark = build_session([catalog])
    try:
        result = generate_bulk(spark, catalog, args.table, BulkSpec.named(args.size, args.format_version,
                                                                         seed=args.seed),
                               replace=args.replace, log=lambda m: print(m, flush=True))
    finally:
        spark.stop()
    print(f"{result.table}: snapshot {result.snapshot_id}, {result.live_rows:,} live rows")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
