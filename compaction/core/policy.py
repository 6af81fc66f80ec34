"""Compaction policy: the thresholds the planner applies, and how they are resolved.

Every knob has a kebab-case table-property key under ``compaction.`` (module constant) and a ``_DEFAULT`` twin,
pyiceberg style. Precedence, lowest to highest::

    code default  <  table property  <  run parameter (``overrides``)

The one exception to "our own key only" is the target file size: when ``compaction.target-file-size-bytes`` is
not set, Iceberg's own ``write.target-file-size-bytes`` table property is used before the code default, so a
compaction writes files of the size the table's writers aim for. The small-file threshold
(``compaction.min-file-size-bytes``) defaults to 75% of the *resolved* target (Iceberg's
``rewrite_data_files`` uses the same fraction).

Run-parameter keys accept three spellings: the full table-property key (``compaction.major.delete-ratio``), the
key without the ``compaction.`` prefix (``major.delete-ratio``) and the dataclass field name
(``major_delete_ratio``). A run parameter whose value is ``None`` counts as "not given". Unknown table properties
are ignored (other tools own other keys); unknown run-parameter keys are an error.

Table-property values are strings (``"0.3"``, ``"true"``); run-parameter values may also be ``int``/``float``/
``bool``. Integers must be written as plain decimal integers (``"134217728"``; an integral float such as ``5.0``
is accepted for counts). Invalid values raise :class:`ConfigError` naming the key and the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Callable, Mapping

from compaction.core.errors import ConfigError
from compaction.core.read_cost import ReadCostCoefficients

__all__ = [
    "CompactionPolicy",
    "parse_duration",
    "PROPERTY_PREFIX",
    "ENABLED",
    "ENABLED_DEFAULT",
    "MAJOR_DELETE_RATIO",
    "MAJOR_DELETE_RATIO_DEFAULT",
    "MAJOR_SMALL_FILE_COUNT",
    "MAJOR_SMALL_FILE_COUNT_DEFAULT",
    "MINOR_DELETE_FILE_COUNT",
    "MINOR_DELETE_FILE_COUNT_DEFAULT",
    "MINOR_ON_EQUALITY_DELETES",
    "MINOR_ON_EQUALITY_DELETES_DEFAULT",
    "MINOR_MAX_POSITION_DELETES_PER_FILE",
    "MINOR_MAX_POSITION_DELETES_PER_FILE_DEFAULT",
    "MINOR_DRIVER_MATCH_MAX_ROWS",
    "MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT",
    "TARGET_FILE_SIZE_BYTES",
    "TARGET_FILE_SIZE_BYTES_DEFAULT",
    "WRITE_TARGET_FILE_SIZE_BYTES",
    "MIN_FILE_SIZE_BYTES",
    "MIN_FILE_SIZE_TARGET_FRACTION",
    "MIN_FILE_SIZE_BYTES_DEFAULT",
    "MAX_BYTES_PER_RUN",
    "MAX_BYTES_PER_RUN_DEFAULT",
    "MAX_PARTITIONS_PER_RUN",
    "MAX_PARTITIONS_PER_RUN_DEFAULT",
    "WEIGHT_RATIO",
    "WEIGHT_RATIO_DEFAULT",
    "PARALLEL_MULTIPLE",
    "PARALLEL_MULTIPLE_DEFAULT",
    "MIN_JOB_GROUP_BYTES",
    "MIN_JOB_GROUP_BYTES_DEFAULT",
    "PARALLELISM",
    "PARALLELISM_DEFAULT",
    "FRAGMENT_RATIO",
    "FRAGMENT_RATIO_DEFAULT",
    "MINOR_FRAGMENT_FILE_COUNT",
    "MINOR_FRAGMENT_FILE_COUNT_DEFAULT",
    "MINOR_INTERVAL",
    "MINOR_INTERVAL_DEFAULT",
    "MAJOR_SEGMENT_DELETE_RATIO",
    "MAJOR_SEGMENT_DELETE_RATIO_DEFAULT",
    "MAJOR_FULL_REWRITE",
    "MAJOR_FULL_REWRITE_DEFAULT",
    "MAJOR_STRATEGY",
    "MAJOR_STRATEGY_DEFAULT",
    "MAJOR_STRATEGIES",
    "MAJOR_SORT_COLUMNS",
    "MAJOR_SORT_COLUMNS_DEFAULT",
    "ONE_DV_PER_PUFFIN_FILE",
    "ONE_DV_PER_PUFFIN_FILE_DEFAULT",
    "ROW_GROUP_COPY_ENABLED",
    "ROW_GROUP_COPY_ENABLED_DEFAULT",
    "ROW_GROUP_COPY_MIN_ROW_GROUP_BYTES",
    "ROW_GROUP_COPY_MIN_ROW_GROUP_BYTES_DEFAULT",
    "READ_COST_MAX_OVERHEAD",
    "READ_COST_MAX_OVERHEAD_DEFAULT",
    "READ_COST_MIN_SAVING_MS",
    "READ_COST_MIN_SAVING_MS_DEFAULT",
    "READ_COST_DATA_FILE_MS",
    "READ_COST_DATA_FILE_MS_DEFAULT",
    "READ_COST_DATA_MIB_MS",
    "READ_COST_DATA_MIB_MS_DEFAULT",
    "READ_COST_POSITION_DELETE_READ_MS",
    "READ_COST_POSITION_DELETE_READ_MS_DEFAULT",
    "READ_COST_POSITION_DELETE_ROW_MS",
    "READ_COST_POSITION_DELETE_ROW_MS_DEFAULT",
    "READ_COST_POSITION_FILTERED_FILE_MS",
    "READ_COST_POSITION_FILTERED_FILE_MS_DEFAULT",
    "READ_COST_DV_READ_MS",
    "READ_COST_DV_READ_MS_DEFAULT",
    "READ_COST_EQUALITY_DELETE_FILE_MS",
    "READ_COST_EQUALITY_DELETE_FILE_MS_DEFAULT",
    "READ_COST_EQUALITY_DELETE_ROW_MS",
    "READ_COST_EQUALITY_DELETE_ROW_MS_DEFAULT",
    "READ_COST_EQUALITY_PROBE_MIB_MS",
    "READ_COST_EQUALITY_PROBE_MIB_MS_DEFAULT",
    "YIELD_DML_DURATION",
    "YIELD_DML_DURATION_DEFAULT",
    "YIELD_DML_HISTORY",
    "YIELD_DML_HISTORY_DEFAULT",
    "YIELD_MAX_WAIT",
    "YIELD_MAX_WAIT_DEFAULT",
    "YIELD_ON_TIMEOUT",
    "YIELD_ON_TIMEOUT_DEFAULT",
    "YIELD_ON_TIMEOUT_CHOICES",
    "SortColumn",
    "parse_sort_columns",
]

PROPERTY_PREFIX = "compaction."

#: Master switch. ``false`` makes the planner return a plan where every partition is NONE.
ENABLED = "compaction.enabled"
ENABLED_DEFAULT = True

#: MAJOR when deleted records / data records of a partition >= this ratio. Range (0, 1].
MAJOR_DELETE_RATIO = "compaction.major.delete-ratio"
MAJOR_DELETE_RATIO_DEFAULT = 0.30

#: MAJOR when a partition has at least this many small data files (see ``MIN_FILE_SIZE_BYTES``). At least 2:
#: a threshold of 1 would re-trigger forever on the single small file a rewrite of a small partition produces.
MAJOR_SMALL_FILE_COUNT = "compaction.major.small-file-count"
MAJOR_SMALL_FILE_COUNT_DEFAULT = 10

#: MINOR when a partition has at least this many *mergeable* delete files (every delete file except a deletion
#: vector / file-scoped position delete file that is the only position delete of its live data file, i.e. the
#: form a MINOR produces; counting those would re-trigger MINOR forever). At least 1.
MINOR_DELETE_FILE_COUNT = "compaction.minor.delete-file-count"
MINOR_DELETE_FILE_COUNT_DEFAULT = 5

#: MINOR as soon as a partition has any equality delete file (they are the most expensive deletes to read).
MINOR_ON_EQUALITY_DELETES = "compaction.minor.on-equality-deletes"
MINOR_ON_EQUALITY_DELETES_DEFAULT = True

#: MINOR when some data file has *more than* this many position delete files / DVs applying to it. At least 1.
MINOR_MAX_POSITION_DELETES_PER_FILE = "compaction.minor.max-position-deletes-per-file"
MINOR_MAX_POSITION_DELETES_PER_FILE_DEFAULT = 1

#: A MINOR matches its equality deletes against the data files' key columns on the driver (pyarrow) when the data
#: files and equality deletes it reads hold at most this many rows together, and reads the Parquet position deletes
#: it merges there when they hold at most this many rows; else in a Spark job. A Spark job's fixed cost (~2 s)
#: dominates small work, which is what a health-triggered MINOR of a streaming table reads; the driver holds only
#: the key columns. ``0``: always Spark.
MINOR_DRIVER_MATCH_MAX_ROWS = "compaction.minor.driver-match-max-rows"
MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT = 4_000_000

#: Target size of the data files a MAJOR writes. Falls back to Iceberg's ``write.target-file-size-bytes``.
TARGET_FILE_SIZE_BYTES = "compaction.target-file-size-bytes"
TARGET_FILE_SIZE_BYTES_DEFAULT = 128 * 1024 * 1024
WRITE_TARGET_FILE_SIZE_BYTES = "write.target-file-size-bytes"

#: Data files strictly smaller than this are "small". Default: 75% of the resolved target file size.
MIN_FILE_SIZE_BYTES = "compaction.min-file-size-bytes"
MIN_FILE_SIZE_TARGET_FRACTION = 0.75
MIN_FILE_SIZE_BYTES_DEFAULT = int(MIN_FILE_SIZE_TARGET_FRACTION * TARGET_FILE_SIZE_BYTES_DEFAULT)

#: Upper bound of the estimated cost (bytes read + written) of all partitions compacted in one run.
MAX_BYTES_PER_RUN = "compaction.max-bytes-per-run"
MAX_BYTES_PER_RUN_DEFAULT = 100 * 1024 * 1024 * 1024

#: Upper bound of the number of partitions compacted in one run.
MAX_PARTITIONS_PER_RUN = "compaction.max-partitions-per-run"
MAX_PARTITIONS_PER_RUN_DEFAULT = 1000

#: A heavy MAJOR partition is split into pieces only when its data bytes / delete bytes >= this (every piece
#: re-reads all delete files of the partition, so splitting a delete-heavy partition multiplies delete reads).
WEIGHT_RATIO = "compaction.weight-ratio"
WEIGHT_RATIO_DEFAULT = 2.0

#: Number of groups (and the average-cost divisor) is ``parallelism * parallel_multiple``.
PARALLEL_MULTIPLE = "compaction.parallel-multiple"
PARALLEL_MULTIPLE_DEFAULT = 2

PARALLELISM = "compaction.parallelism"
PARALLELISM_DEFAULT = 2

#: Smallest estimated cost worth its own job group. Each group is one spark-submit with a fixed cost of ~15-20 s
#: (JVM start, cold first query), so small runs are packed into fewer groups than ``parallelism *
#: parallel_multiple``: groups = min(max_groups, ceil(total cost / this)).
MIN_JOB_GROUP_BYTES = "compaction.min-job-group-bytes"
MIN_JOB_GROUP_BYTES_DEFAULT = 256 * 1024 * 1024

#: Amoro's split of a partition's data files: *fragment* files are smaller than target file size / this ratio
#: (16 MiB at a 128 MiB target); the others are *segment* files. A MINOR merges the fragment files (every delete
#: applied) and converts the equality deletes of the segments; a MAJOR also rewrites the small segments and the
#: segments whose own delete ratio passes ``MAJOR_SEGMENT_DELETE_RATIO``. At least 1.
FRAGMENT_RATIO = "compaction.fragment-ratio"
FRAGMENT_RATIO_DEFAULT = 8

#: MINOR when fragment files + equality delete files of a partition >= this (Amoro's minor trigger). At least 1.
MINOR_FRAGMENT_FILE_COUNT = "compaction.minor.fragment-file-count"
MINOR_FRAGMENT_FILE_COUNT_DEFAULT = 12

#: MINOR when the partition's last successful MINOR (from the ledger) is at least this long ago and it has two or
#: more fragment files or a mergeable delete file. A duration: seconds, or ``30m``, ``2h``, ``1d``; ``0`` = off.
MINOR_INTERVAL = "compaction.minor.interval"
MINOR_INTERVAL_DEFAULT = 0

#: MAJOR rewrites a segment file when its own known deleted rows (file-scoped position deletes / DVs) / its rows
#: >= this ratio; the other segments keep their rows, their equality deletes converted. Range (0, 1].
MAJOR_SEGMENT_DELETE_RATIO = "compaction.major.segment-delete-ratio"
MAJOR_SEGMENT_DELETE_RATIO_DEFAULT = 0.1

#: ``true``: a MAJOR rewrites every data file of the partition that a delete applies to, plus every small file,
#: with all deletes applied (Iceberg's ``rewrite_data_files`` with ``delete-file-threshold=1``), instead of only
#: the fragment, small and delete-heavy segment files.
MAJOR_FULL_REWRITE = "compaction.major.full-rewrite"
MAJOR_FULL_REWRITE_DEFAULT = False

#: How a MAJOR lays out the rows it rewrites: ``binpack`` (files packed to the target size; in the table's sort
#: order when it has one, as ``ALTER TABLE ... WRITE ORDERED BY`` asks of every writer), ``sort`` (rows sorted by
#: ``compaction.major.sort-columns``, else by the table's sort order) or ``zorder`` (rows clustered along a
#: z-order curve of ``compaction.major.sort-columns``). Clustering is a property of a whole partition, so a MAJOR
#: under ``sort`` / ``zorder`` rewrites every data file of its partition (Iceberg's ``rewrite-all``).
MAJOR_STRATEGY = "compaction.major.strategy"
MAJOR_STRATEGY_DEFAULT = "binpack"
MAJOR_STRATEGIES = ("binpack", "sort", "zorder")

#: Columns of the ``sort`` / ``zorder`` strategies, comma separated. ``sort``: ``col [ASC|DESC] [NULLS FIRST|
#: NULLS LAST]`` each (the syntax of Iceberg's ``rewrite_data_files`` ``sort_order``; empty: the table's sort order);
#: ``zorder``: plain column names (two or more are what z-ordering is for). Ignored by ``binpack``.
MAJOR_SORT_COLUMNS = "compaction.major.sort-columns"
MAJOR_SORT_COLUMNS_DEFAULT = ""

#: v3 tables: ``true`` writes each deletion vector (DV) our compaction writes (MINOR, and the delete conversion of a
#: selective MAJOR) into a Puffin file of its own, instead of all DVs of a partition's commit in one Puffin file
#: (Iceberg's ``BaseDVFileWriter`` layout, what Spark writes too). A reader-compatibility switch: DuckDB 1.5.5 with
#: its external file cache on (its default) can apply the wrong DV from a Puffin file holding several
#: (docs/engines.md). It costs a file per DV on storage and a slower MINOR (bench/results/dv_layout.txt). Ignored on
#: v2.
ONE_DV_PER_PUFFIN_FILE = "compaction.one-dv-per-puffin-file"
ONE_DV_PER_PUFFIN_FILE_DEFAULT = False

#: A MAJOR concatenates, at the Parquet row-group level, the files it would rewrite whose rows cannot change
#: (no delete applies, current spec and schema, v3 row lineage written in the file; compaction.core.row_group_copy)
#: instead of decoding and re-encoding them, in the same commit as the files it decodes.
ROW_GROUP_COPY_ENABLED = "compaction.row-group-copy.enabled"
ROW_GROUP_COPY_ENABLED_DEFAULT = True

#: The smallest average compressed row-group size of a file whose row groups are copied. Copied row groups keep
#: their size; Parquet writers (Iceberg's ``write.parquet.row-group-size-bytes``) default to 128 MiB, and a file of
#: many small row groups scans slower than the full-size row groups the decoding rewrite writes.
ROW_GROUP_COPY_MIN_ROW_GROUP_BYTES = "compaction.row-group-copy.min-row-group-bytes"
ROW_GROUP_COPY_MIN_ROW_GROUP_BYTES_DEFAULT = 16 * 1024 * 1024

#: The read-cost model (compaction.core.read_cost): a partition whose estimated full-scan cost is more than this many
#: times a compacted copy's is compacted, by the kind that brings it under this at the least bytes rewritten (a
#: MINOR before a MAJOR before a full MAJOR); the count thresholds above still fire on their own. ``0`` = off.
READ_COST_MAX_OVERHEAD = "compaction.read-cost.max-overhead"
READ_COST_MAX_OVERHEAD_DEFAULT = 1.5
#: The model acts only when a compaction would save at least this many estimated milliseconds per full scan of the
#: partition: a few small files of a tiny partition are "3x a compacted copy" and not worth a commit.
READ_COST_MIN_SAVING_MS = "compaction.read-cost.min-saving-ms"
READ_COST_MIN_SAVING_MS_DEFAULT = 50.0
#: The model's coefficients, milliseconds per unit of what a scan reads (compaction.core.read_cost.ReadShape; the
#: defaults are ReadCostCoefficients'; re-measured on a cluster by ``bench/read_cost.py``, which prints these).
_DEFAULT_COEFFICIENTS = ReadCostCoefficients()
READ_COST_DATA_FILE_MS = "compaction.read-cost.data-file-ms"
READ_COST_DATA_FILE_MS_DEFAULT = _DEFAULT_COEFFICIENTS.data_file_ms
READ_COST_DATA_MIB_MS = "compaction.read-cost.data-mib-ms"
READ_COST_DATA_MIB_MS_DEFAULT = _DEFAULT_COEFFICIENTS.data_mib_ms
READ_COST_POSITION_DELETE_READ_MS = "compaction.read-cost.position-delete-read-ms"
READ_COST_POSITION_DELETE_READ_MS_DEFAULT = _DEFAULT_COEFFICIENTS.position_delete_read_ms
READ_COST_POSITION_DELETE_ROW_MS = "compaction.read-cost.position-delete-row-ms"
READ_COST_POSITION_DELETE_ROW_MS_DEFAULT = _DEFAULT_COEFFICIENTS.position_delete_row_ms
READ_COST_POSITION_FILTERED_FILE_MS = "compaction.read-cost.position-filtered-file-ms"
READ_COST_POSITION_FILTERED_FILE_MS_DEFAULT = _DEFAULT_COEFFICIENTS.position_filtered_file_ms
READ_COST_DV_READ_MS = "compaction.read-cost.dv-read-ms"
READ_COST_DV_READ_MS_DEFAULT = _DEFAULT_COEFFICIENTS.dv_read_ms
READ_COST_EQUALITY_DELETE_FILE_MS = "compaction.read-cost.equality-delete-file-ms"
READ_COST_EQUALITY_DELETE_FILE_MS_DEFAULT = _DEFAULT_COEFFICIENTS.equality_delete_file_ms
READ_COST_EQUALITY_DELETE_ROW_MS = "compaction.read-cost.equality-delete-row-ms"
READ_COST_EQUALITY_DELETE_ROW_MS_DEFAULT = _DEFAULT_COEFFICIENTS.equality_delete_row_ms
READ_COST_EQUALITY_PROBE_MIB_MS = "compaction.read-cost.equality-probe-mib-ms"
READ_COST_EQUALITY_PROBE_MIB_MS_DEFAULT = _DEFAULT_COEFFICIENTS.equality_probe_mib_ms

#: How long a compaction commit waits for the table's announced writers (write leases, docs/operations.md "Writers
#: and compaction") before ``compaction.yield.on-timeout`` applies. A merge-on-read DML fails when a compaction
#: commits between its start and its own commit (Iceberg validates the data files its deletes reference and the
#: delete files added since it started), so a commit waits while a writer holds a lease on the table.
YIELD_MAX_WAIT = "compaction.yield.max-wait"
YIELD_MAX_WAIT_DEFAULT = 600
#: ``skip``: the partitions whose commit waited too long end SKIPPED (nothing of ours committed; the next run plans
#: them again); ``commit``: commit anyway (the writer may then fail its commit and retry).
YIELD_ON_TIMEOUT = "compaction.yield.on-timeout"
YIELD_ON_TIMEOUT_CHOICES = ("skip", "commit")
YIELD_ON_TIMEOUT_DEFAULT = "skip"

#: Writers that do not announce themselves: a commit of ours is timed from the table's history to fall between the
#: row-level DML commits of other writers (compaction.core.dml_history), where none is likely in flight. Off: commits
#: go ahead as soon as they are ready (leases are still honoured).
YIELD_DML_HISTORY = "compaction.yield.dml-history"
YIELD_DML_HISTORY_DEFAULT = True
#: How long the table's DML jobs run, from their start to their commit (the window in which a commit of ours fails
#: them). ``auto`` (0): a quarter of the shortest recent time between their commits, at least
#: ``compaction.core.dml_history.DML_DURATION_MIN_S``.
YIELD_DML_DURATION = "compaction.yield.dml-duration"
YIELD_DML_DURATION_DEFAULT = 0


@dataclass(frozen=True)
class SortColumn:
    """One term of ``compaction.major.sort-columns``: Iceberg's defaults are ascending with nulls first (and
    nulls last for a descending term), as in ``SortOrder.builderFor(schema).asc(name)``."""

    name: str
    ascending: bool = True
    nulls_first: bool = True

    def describe(self) -> str:
        return (f"{self.name} {'ASC' if self.ascending else 'DESC'} "
                f"NULLS {'FIRST' if self.nulls_first else 'LAST'}")


def parse_sort_columns(text: str, *, key: str = MAJOR_SORT_COLUMNS,
                       directions: bool = True) -> tuple[SortColumn, ...]:
    """``"a DESC NULLS LAST, b"`` -> terms; raises ConfigError naming ``key`` for anything else. Column names are
    checked against the schema only where the table is loaded (the Spark job): here their syntax. A nested field
    is written with dots (``info.a``); a name with spaces or commas cannot be given."""
    terms: list[SortColumn] = []
    if not text.strip():
        return ()
    for raw in text.split(","):
        words = raw.split()
        if not words:
            raise _fail(key, text, "an empty column between commas")
        name, rest = words[0], [w.upper() for w in words[1:]]
        if not all(part and (part[0].isalpha() or part[0] == "_") and all(c.isalnum() or c == "_" for c in part)
                   for part in name.split(".")):
            raise _fail(key, text, f"{name!r} is not a column name")
        if rest and not directions:
            raise _fail(key, text, f"z-order columns take no direction ({raw.strip()!r})")
        ascending = True
        if rest and rest[0] in ("ASC", "DESC"):
            ascending = rest.pop(0) == "ASC"
        nulls_first = ascending
        if rest[:1] == ["NULLS"] and len(rest) >= 2 and rest[1] in ("FIRST", "LAST"):
            nulls_first = rest[1] == "FIRST"
            rest = rest[2:]
        if rest:
            raise _fail(key, text, f"expected 'column [ASC|DESC] [NULLS FIRST|NULLS LAST]', got {raw.strip()!r}")
        if any(t.name == name for t in terms):
            raise _fail(key, text, f"column {name!r} given twice")
        terms.append(SortColumn(name, ascending, nulls_first))
    return tuple(terms)


# --------------------------------------------------------------------------------------------------------------
# Value parsing


def _fail(key: str, value: object, why: str) -> ConfigError:
    return ConfigError(f"invalid value {value!r} for {key}: {why}")


def _parse_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
    raise _fail(key, value, "expected true or false")


def _parse_int(key: str, value: object) -> int:
    if isinstance(value, bool):
        raise _fail(key, value, "expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        raise _fail(key, value, "expected an integer")
    if isinstance(value, str):
        text = value.strip()
        body = text[1:] if text[:1] in ("+", "-") else text
        if body and body.isascii() and body.isdigit():
            return int(text)
    raise _fail(key, value, "expected an integer")


def _parse_float(key: str, value: object) -> float:
    if isinstance(value, bool):
        raise _fail(key, value, "expected a number")
    result: float
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            raise _fail(key, value, "expected a number") from None
    else:
        raise _fail(key, value, "expected a number")
    if not math.isfinite(result):
        raise _fail(key, value, "expected a finite number")
    return result


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _parse_text(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _fail(key, value, "expected a string")
    return value.strip()


def _parse_strategy(key: str, value: object) -> str:
    text = _parse_text(key, value).lower()
    if text not in MAJOR_STRATEGIES:
        raise _fail(key, value, f"expected one of {', '.join(MAJOR_STRATEGIES)}")
    return text


def _parse_on_timeout(key: str, value: object) -> str:
    text = _parse_text(key, value).lower()
    if text not in YIELD_ON_TIMEOUT_CHOICES:
        raise _fail(key, value, f"expected one of {', '.join(YIELD_ON_TIMEOUT_CHOICES)}")
    return text


def parse_duration(key: str, value: object) -> int:
    """Seconds: a plain integer, or an integer with one unit ``s``/``m``/``h``/``d`` (``30m``); ``off`` / ``auto`` =
    0 (the key's documented meaning of 0)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("off", "none", "", "auto"):
            return 0
        if text[-1:] in _DURATION_UNITS:
            return _parse_int(key, text[:-1]) * _DURATION_UNITS[text[-1]]
    return _parse_int(key, value)


@dataclass(frozen=True)
class _Knob:
    field: str
    key: str
    parse: Callable[[str, object], object]
    check: Callable[[object], str | None]


def _at_least(minimum: int) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        assert isinstance(value, int)
        return None if value >= minimum else f"must be >= {minimum}"

    return check


def _ratio_in_unit_interval(value: object) -> str | None:
    assert isinstance(value, float)
    return None if 0.0 < value <= 1.0 else "must be in (0, 1]"


def _positive_float(value: object) -> str | None:
    assert isinstance(value, float)
    return None if value > 0.0 else "must be > 0"


def _non_negative_float(value: object) -> str | None:
    assert isinstance(value, float)
    return None if value >= 0.0 else "must be >= 0"


def _off_or_at_least_one(value: object) -> str | None:
    assert isinstance(value, float)
    return None if value == 0.0 or value >= 1.0 else "must be 0 (off) or >= 1"


def _no_check(value: object) -> str | None:
    return None


_COEFFICIENTS = tuple(f.name for f in fields(ReadCostCoefficients))


_KNOBS: tuple[_Knob, ...] = (
    _Knob("enabled", ENABLED, _parse_bool, _no_check),
    _Knob("major_delete_ratio", MAJOR_DELETE_RATIO, _parse_float, _ratio_in_unit_interval),
    _Knob("major_small_file_count", MAJOR_SMALL_FILE_COUNT, _parse_int, _at_least(2)),
    _Knob("minor_delete_file_count", MINOR_DELETE_FILE_COUNT, _parse_int, _at_least(1)),
    _Knob("minor_on_equality_deletes", MINOR_ON_EQUALITY_DELETES, _parse_bool, _no_check),
    _Knob("minor_max_position_deletes_per_file", MINOR_MAX_POSITION_DELETES_PER_FILE, _parse_int, _at_least(1)),
    _Knob("minor_driver_match_max_rows", MINOR_DRIVER_MATCH_MAX_ROWS, _parse_int, _at_least(0)),
    _Knob("target_file_size_bytes", TARGET_FILE_SIZE_BYTES, _parse_int, _at_least(1)),
    _Knob("min_file_size_bytes", MIN_FILE_SIZE_BYTES, _parse_int, _at_least(0)),
    _Knob("max_bytes_per_run", MAX_BYTES_PER_RUN, _parse_int, _at_least(1)),
    _Knob("max_partitions_per_run", MAX_PARTITIONS_PER_RUN, _parse_int, _at_least(1)),
    _Knob("weight_ratio", WEIGHT_RATIO, _parse_float, _positive_float),
    _Knob("parallel_multiple", PARALLEL_MULTIPLE, _parse_int, _at_least(1)),
    _Knob("parallelism", PARALLELISM, _parse_int, _at_least(1)),
    _Knob("min_job_group_bytes", MIN_JOB_GROUP_BYTES, _parse_int, _at_least(1)),
    _Knob("fragment_ratio", FRAGMENT_RATIO, _parse_int, _at_least(1)),
    _Knob("minor_fragment_file_count", MINOR_FRAGMENT_FILE_COUNT, _parse_int, _at_least(1)),
    _Knob("minor_interval_seconds", MINOR_INTERVAL, parse_duration, _at_least(0)),
    _Knob("major_segment_delete_ratio", MAJOR_SEGMENT_DELETE_RATIO, _parse_float, _ratio_in_unit_interval),
    _Knob("major_full_rewrite", MAJOR_FULL_REWRITE, _parse_bool, _no_check),
    _Knob("major_strategy", MAJOR_STRATEGY, _parse_strategy, _no_check),
    _Knob("major_sort_columns", MAJOR_SORT_COLUMNS, _parse_text, _no_check),
    _Knob("one_dv_per_puffin_file", ONE_DV_PER_PUFFIN_FILE, _parse_bool, _no_check),
    _Knob("row_group_copy_enabled", ROW_GROUP_COPY_ENABLED, _parse_bool, _no_check),
    _Knob("row_group_copy_min_row_group_bytes", ROW_GROUP_COPY_MIN_ROW_GROUP_BYTES, _parse_int, _at_least(0)),
    _Knob("read_cost_max_overhead", READ_COST_MAX_OVERHEAD, _parse_float, _off_or_at_least_one),
    _Knob("read_cost_min_saving_ms", READ_COST_MIN_SAVING_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_data_file_ms", READ_COST_DATA_FILE_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_data_mib_ms", READ_COST_DATA_MIB_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_position_delete_read_ms", READ_COST_POSITION_DELETE_READ_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_position_delete_row_ms", READ_COST_POSITION_DELETE_ROW_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_position_filtered_file_ms", READ_COST_POSITION_FILTERED_FILE_MS, _parse_float,
          _non_negative_float),
    _Knob("read_cost_dv_read_ms", READ_COST_DV_READ_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_equality_delete_file_ms", READ_COST_EQUALITY_DELETE_FILE_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_equality_delete_row_ms", READ_COST_EQUALITY_DELETE_ROW_MS, _parse_float, _non_negative_float),
    _Knob("read_cost_equality_probe_mib_ms", READ_COST_EQUALITY_PROBE_MIB_MS, _parse_float, _non_negative_float),
    _Knob("yield_max_wait_seconds", YIELD_MAX_WAIT, parse_duration, _at_least(0)),
    _Knob("yield_on_timeout", YIELD_ON_TIMEOUT, _parse_on_timeout, _no_check),
    _Knob("yield_dml_history", YIELD_DML_HISTORY, _parse_bool, _no_check),
    _Knob("yield_dml_duration_seconds", YIELD_DML_DURATION, parse_duration, _at_least(0)),
)
_KNOB_BY_FIELD: dict[str, _Knob] = {k.field: k for k in _KNOBS}
_DERIVED_THRESHOLD = "small_file_threshold_bytes"
_DERIVED_FRAGMENT = "fragment_threshold_bytes"
_KNOB_BY_ALIAS: dict[str, _Knob] = {}
for _k in _KNOBS:
    _KNOB_BY_ALIAS[_k.key] = _k
    _KNOB_BY_ALIAS[_k.key[len(PROPERTY_PREFIX) :]] = _k
    _KNOB_BY_ALIAS[_k.field] = _k
del _k


def _parse_knob(knob: _Knob, key: str, value: object) -> object:
    parsed = knob.parse(key, value)
    problem = knob.check(parsed)
    if problem is not None:
        raise _fail(key, value, problem)
    return parsed


# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPolicy:
    """Resolved thresholds. Construct directly (values are validated) or with :meth:`resolve`.

    ``min_file_size_bytes=None`` means "75% of ``target_file_size_bytes``" and stays ``None`` (so
    ``dataclasses.replace(policy, target_file_size_bytes=...)`` moves the small-file threshold along); read the
    effective value from :attr:`small_file_threshold_bytes`.
    """

    #: ``compaction.enabled``: master switch.
    enabled: bool = ENABLED_DEFAULT
    #: ``compaction.major.delete-ratio``: MAJOR when deleted records / data records >= this.
    major_delete_ratio: float = MAJOR_DELETE_RATIO_DEFAULT
    #: ``compaction.major.small-file-count``: MAJOR when the partition has >= this many small data files.
    major_small_file_count: int = MAJOR_SMALL_FILE_COUNT_DEFAULT
    #: ``compaction.minor.delete-file-count``: MINOR when the partition has >= this many mergeable delete files.
    minor_delete_file_count: int = MINOR_DELETE_FILE_COUNT_DEFAULT
    #: ``compaction.minor.on-equality-deletes``: MINOR when any equality delete file is present.
    minor_on_equality_deletes: bool = MINOR_ON_EQUALITY_DELETES_DEFAULT
    #: ``compaction.minor.max-position-deletes-per-file``: MINOR when a data file has more position deletes.
    minor_max_position_deletes_per_file: int = MINOR_MAX_POSITION_DELETES_PER_FILE_DEFAULT
    #: ``compaction.minor.driver-match-max-rows``: MINOR matches equality deletes on the driver up to this many rows.
    minor_driver_match_max_rows: int = MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT
    #: ``compaction.target-file-size-bytes``: target size of rewritten data files.
    target_file_size_bytes: int = TARGET_FILE_SIZE_BYTES_DEFAULT
    #: ``compaction.min-file-size-bytes``: data files smaller than this are small (None: 75% of target).
    min_file_size_bytes: int | None = None
    #: ``compaction.max-bytes-per-run``: cap on the summed estimated cost of the partitions of one run.
    max_bytes_per_run: int = MAX_BYTES_PER_RUN_DEFAULT
    #: ``compaction.max-partitions-per-run``: cap on the number of partitions of one run.
    max_partitions_per_run: int = MAX_PARTITIONS_PER_RUN_DEFAULT
    #: ``compaction.weight-ratio``: split a heavy MAJOR partition only if data bytes / delete bytes >= this.
    weight_ratio: float = WEIGHT_RATIO_DEFAULT
    #: ``compaction.parallel-multiple``: groups = parallelism * parallel_multiple.
    parallel_multiple: int = PARALLEL_MULTIPLE_DEFAULT
    #: ``compaction.parallelism``: number of concurrent workers the groups are balanced for.
    parallelism: int = PARALLELISM_DEFAULT
    #: ``compaction.min-job-group-bytes``: smallest estimated cost worth a job group (one spark-submit).
    min_job_group_bytes: int = MIN_JOB_GROUP_BYTES_DEFAULT
    #: ``compaction.fragment-ratio``: fragment files are smaller than target size / this.
    fragment_ratio: int = FRAGMENT_RATIO_DEFAULT
    #: ``compaction.minor.fragment-file-count``: MINOR when fragment files + equality delete files >= this.
    minor_fragment_file_count: int = MINOR_FRAGMENT_FILE_COUNT_DEFAULT
    #: ``compaction.minor.interval``: MINOR when the last successful MINOR is this many seconds ago (0: off).
    minor_interval_seconds: int = MINOR_INTERVAL_DEFAULT
    #: ``compaction.major.segment-delete-ratio``: MAJOR rewrites a segment whose own delete ratio >= this.
    major_segment_delete_ratio: float = MAJOR_SEGMENT_DELETE_RATIO_DEFAULT
    #: ``compaction.major.full-rewrite``: MAJOR rewrites every file a delete applies to (the classic rewrite).
    major_full_rewrite: bool = MAJOR_FULL_REWRITE_DEFAULT
    #: ``compaction.major.strategy``: ``binpack`` | ``sort`` | ``zorder`` (how a MAJOR lays out its rows).
    major_strategy: str = MAJOR_STRATEGY_DEFAULT
    #: ``compaction.major.sort-columns``: the columns of ``sort`` / ``zorder`` (``sort``: empty = table order).
    major_sort_columns: str = MAJOR_SORT_COLUMNS_DEFAULT
    #: ``compaction.one-dv-per-puffin-file``: v3, every DV we write in a Puffin file of its own (reader compatibility).
    one_dv_per_puffin_file: bool = ONE_DV_PER_PUFFIN_FILE_DEFAULT
    #: ``compaction.row-group-copy.enabled``: a MAJOR copies the row groups of files whose rows cannot change.
    row_group_copy_enabled: bool = ROW_GROUP_COPY_ENABLED_DEFAULT
    #: ``compaction.row-group-copy.min-row-group-bytes``: smallest average row group of a file copied that way.
    row_group_copy_min_row_group_bytes: int = ROW_GROUP_COPY_MIN_ROW_GROUP_BYTES_DEFAULT
    #: ``compaction.read-cost.max-overhead``: keep each partition's estimated scan cost under this x a compacted copy's.
    read_cost_max_overhead: float = READ_COST_MAX_OVERHEAD_DEFAULT
    #: ``compaction.read-cost.min-saving-ms``: the least estimated saving per scan the read-cost model acts on.
    read_cost_min_saving_ms: float = READ_COST_MIN_SAVING_MS_DEFAULT
    #: ``compaction.read-cost.*-ms``: the model's coefficients (ReadCostCoefficients).
    read_cost_data_file_ms: float = READ_COST_DATA_FILE_MS_DEFAULT
    read_cost_data_mib_ms: float = READ_COST_DATA_MIB_MS_DEFAULT
    read_cost_position_delete_read_ms: float = READ_COST_POSITION_DELETE_READ_MS_DEFAULT
    read_cost_position_delete_row_ms: float = READ_COST_POSITION_DELETE_ROW_MS_DEFAULT
    read_cost_position_filtered_file_ms: float = READ_COST_POSITION_FILTERED_FILE_MS_DEFAULT
    read_cost_dv_read_ms: float = READ_COST_DV_READ_MS_DEFAULT
    read_cost_equality_delete_file_ms: float = READ_COST_EQUALITY_DELETE_FILE_MS_DEFAULT
    read_cost_equality_delete_row_ms: float = READ_COST_EQUALITY_DELETE_ROW_MS_DEFAULT
    read_cost_equality_probe_mib_ms: float = READ_COST_EQUALITY_PROBE_MIB_MS_DEFAULT
    #: ``compaction.yield.max-wait``: seconds a commit waits for the table's write leases (0: does not wait).
    yield_max_wait_seconds: int = YIELD_MAX_WAIT_DEFAULT
    #: ``compaction.yield.on-timeout``: ``skip`` | ``commit`` once a commit waited ``yield.max-wait``.
    yield_on_timeout: str = YIELD_ON_TIMEOUT_DEFAULT
    #: ``compaction.yield.dml-history``: time our commits between the table's DML commits (from its history).
    yield_dml_history: bool = YIELD_DML_HISTORY_DEFAULT
    #: ``compaction.yield.dml-duration``: seconds a DML of the table runs (0: estimated from its cadence).
    yield_dml_duration_seconds: int = YIELD_DML_DURATION_DEFAULT

    def __post_init__(self) -> None:
        for knob in _KNOBS:
            value = getattr(self, knob.field)
            if knob.field == "min_file_size_bytes" and value is None:
                continue
            parsed = _parse_knob(knob, knob.key, value)
            if type(parsed) is not type(value):
                # e.g. an int given for a float field: store the canonical type so equality/JSON are stable.
                object.__setattr__(self, knob.field, parsed)
        if self.min_file_size_bytes is not None and self.min_file_size_bytes > self.target_file_size_bytes:
            raise ConfigError(
                f"invalid value {self.min_file_size_bytes!r} for {MIN_FILE_SIZE_BYTES}: must be <= "
                f"{TARGET_FILE_SIZE_BYTES} ({self.target_file_size_bytes})"
            )
        columns = self.sort_columns  # their syntax is checked here, before any plan is made
        if self.major_strategy == "zorder" and not columns:
            raise ConfigError(f"{MAJOR_STRATEGY}=zorder needs the columns to cluster by in {MAJOR_SORT_COLUMNS}")

    @property
    def sort_columns(self) -> tuple[SortColumn, ...]:
        """The parsed ``compaction.major.sort-columns`` of the ``sort`` / ``zorder`` strategies (empty for binpack)."""
        if self.major_strategy == "binpack":
            return ()
        return parse_sort_columns(self.major_sort_columns, directions=self.major_strategy == "sort")

    @cached_property
    def read_cost_coefficients(self) -> ReadCostCoefficients:
        return ReadCostCoefficients(**{name: getattr(self, f"read_cost_{name}") for name in _COEFFICIENTS})

    @property
    def read_cost_enabled(self) -> bool:
        return self.read_cost_max_overhead > 0

    @property
    def clusters(self) -> bool:
        """A MAJOR under ``sort`` / ``zorder``: it rewrites every data file of its partitions."""
        return self.major_strategy != "binpack"

    def describe_strategy(self) -> str:
        if self.major_strategy == "binpack":
            return "binpack"
        columns = ", ".join(c.name if self.major_strategy == "zorder" else c.describe() for c in self.sort_columns)
        return f"{self.major_strategy} by {columns}" if columns else f"{self.major_strategy} by the table's sort order"

    # ----------------------------------------------------------------------------------------------------------
    @property
    def small_file_threshold_bytes(self) -> int:
        """Data files strictly smaller than this many bytes are small files: ``min_file_size_bytes`` when set,
        else 75% of ``target_file_size_bytes``."""
        if self.min_file_size_bytes is not None:
            return self.min_file_size_bytes
        return int(MIN_FILE_SIZE_TARGET_FRACTION * self.target_file_size_bytes)

    @property
    def fragment_threshold_bytes(self) -> int:
        """Data files strictly smaller than this many bytes are fragment files: target size // fragment ratio."""
        return self.target_file_size_bytes // self.fragment_ratio

    @property
    def max_groups(self) -> int:
        """Maximum number of job groups of a plan: ``parallelism * parallel_multiple``."""
        return self.parallelism * self.parallel_multiple

    @staticmethod
    def property_keys() -> dict[str, str]:
        """Dataclass field name -> table-property key."""
        return {k.field: k.key for k in _KNOBS}

    @classmethod
    def resolve(
        cls,
        table_properties: Mapping[str, str],
        overrides: Mapping[str, object] | None = None,
    ) -> CompactionPolicy:
        """Resolve a policy: code defaults < table properties < run-parameter overrides."""
        values: dict[str, object] = {}
        # Iceberg's own target file size is the fallback before our key.
        if WRITE_TARGET_FILE_SIZE_BYTES in table_properties:
            knob = _KNOB_BY_FIELD["target_file_size_bytes"]
            raw = table_properties[WRITE_TARGET_FILE_SIZE_BYTES]
            values[knob.field] = _parse_knob(knob, WRITE_TARGET_FILE_SIZE_BYTES, raw)
        for knob in _KNOBS:
            if knob.key in table_properties:
                values[knob.field] = _parse_knob(knob, knob.key, table_properties[knob.key])
        if overrides:
            seen: dict[str, str] = {}
            for raw_key in sorted(overrides):
                if not isinstance(raw_key, str):
                    raise ConfigError(f"unknown compaction run parameter {raw_key!r}")
                value = overrides[raw_key]
                found = _KNOB_BY_ALIAS.get(raw_key.strip())
                if found is None:
                    known = ", ".join(k.key for k in _KNOBS)
                    raise ConfigError(
                        f"unknown compaction run parameter {raw_key!r} (value {value!r}); known keys: {known}"
                    )
                if value is None:
                    continue
                if found.field in seen:
                    raise ConfigError(
                        f"compaction run parameter {found.key} given twice ({seen[found.field]!r} and {raw_key!r})"
                    )
                seen[found.field] = raw_key
                values[found.field] = _parse_knob(found, raw_key, value)
        return cls(**values)  # type: ignore[arg-type]

    # ----------------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """JSON-ready mapping of field name -> value, plus the derived ``small_file_threshold_bytes`` (for
        readers of a plan; ignored by :meth:`from_dict`)."""
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        out[_DERIVED_THRESHOLD] = self.small_file_threshold_bytes
        out[_DERIVED_FRAGMENT] = self.fragment_threshold_bytes
        return out

    def to_properties(self) -> dict[str, str]:
        """The policy as table-property strings (``compaction.*`` keys; an unset min file size is omitted)."""
        out: dict[str, str] = {}
        for knob in _KNOBS:
            value = getattr(self, knob.field)
            if value is None:
                continue
            out[knob.key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CompactionPolicy:
        """Inverse of :meth:`to_dict`. Unknown keys are rejected (a plan written by a newer version)."""
        unknown = sorted(set(data) - set(_KNOB_BY_FIELD) - {_DERIVED_THRESHOLD, _DERIVED_FRAGMENT})
        if unknown:
            raise ConfigError(f"unknown policy field(s) {unknown!r}")
        values: dict[str, object] = {}
        for name, value in data.items():
            if name in (_DERIVED_THRESHOLD, _DERIVED_FRAGMENT):
                continue
            knob = _KNOB_BY_FIELD[name]
            if name == "min_file_size_bytes" and value is None:
                continue
            values[name] = _parse_knob(knob, name, value)
        return cls(**values)  # type: ignore[arg-type]
