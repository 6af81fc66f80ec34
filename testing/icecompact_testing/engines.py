"""Other engines' read of an Iceberg table: DuckDB (``iceberg_scan``) and pyiceberg (``scan().to_arrow()``).

A table is compacted so that every engine reading it gets the right rows. This module returns the rows of a given
snapshot as another engine reads them, normalized like the reference reader's rows
(:func:`icecompact_testing.oracle.normalize_row`, :func:`icecompact_testing.oracle.spark_rows`), so that tests and
benchmarks can compare them as multisets with Spark's read::

    read_rows("duckdb", table) .rows == spark_rows(spark, "cat.db.t")

* DuckDB: ``iceberg_scan('<metadata file>')`` on the table's metadata file (``snapshot_from_id`` for an older
  snapshot). The ``iceberg`` and ``avro`` extensions are loaded from the installed PyPI wheels
  (``duckdb-extension-iceberg``, ``duckdb-extension-avro``); automatic extension install and load are switched
  off, so nothing is ever downloaded at run time (a missing wheel is an error, not a download).
* ``duckdb_nocache``: the same with DuckDB's external file cache off (``SET enable_external_file_cache = false``).
  DuckDB 1.5.5 with its default settings can apply the wrong deletion vector to a data file when a Puffin file holds
  several DVs: a read through its external file cache returns another blob's bytes (a valid DV of the same size, so
  nothing fails). Spark's own v3 DVs are misread the same way; with the cache off the same metadata reads right.
  Both configurations are reported: the default is what a user gets, the other shows whether our files are right.
* pyiceberg: ``table.scan(snapshot_id=...).to_arrow()``.

Tables on S3 (``s3://`` metadata, e.g. a REST catalog's): DuckDB loads its ``httpfs`` extension from its wheel
(``duckdb-extension-httpfs``) too and gets a temporary S3 secret from the table's own FileIO properties
(``s3.endpoint``, ``s3.access-key-id``, ... as pyiceberg holds them), so every engine reads with the credentials the
catalog gave; pyiceberg reads through that FileIO anyway.

An engine that cannot read a feature of the table (pyiceberg refuses equality deletes, for example) raises; such a
refusal is returned as :attr:`EngineRead.error` with the engine's own message and :attr:`EngineRead.unsupported`
set when it matches one of the known "not supported" messages of :data:`UNSUPPORTED_MESSAGES`, and re-raised
otherwise (unless ``strict=False``): an unexpected error is never mistaken for a documented limitation, and a
limitation never passes as rows.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import pyarrow as pa

from icecompact_testing.oracle import NAN, normalize_value

if TYPE_CHECKING:
    import duckdb
    from pyiceberg.table import Table

__all__ = [
    "DUCKDB",
    "DUCKDB_NO_CACHE",
    "ENGINES",
    "PYICEBERG",
    "UNSUPPORTED_MESSAGES",
    "EngineRead",
    "arrow_rows",
    "describe",
    "duckdb_connect",
    "duckdb_extension_paths",
    "duckdb_scan_sql",
    "duckdb_use_s3",
    "is_unsupported",
    "pyiceberg_arrow",
    "read_rows",
    "snapshot_columns",
]

DUCKDB = "duckdb"
DUCKDB_NO_CACHE = "duckdb_nocache"
PYICEBERG = "pyiceberg"
ENGINES: tuple[str, ...] = (DUCKDB, DUCKDB_NO_CACHE, PYICEBERG)

#: Messages by which an engine says it cannot read a feature of the table (matched case-insensitively against the
#: exception text). Anything else an engine raises is re-raised by :func:`read_rows`.
UNSUPPORTED_MESSAGES: dict[str, tuple[str, ...]] = {
    PYICEBERG: (
        r"does not yet support equality deletes",
        r"not (yet )?(been )?(supported|implemented)",
        r"deletion vector",
        r"puffin",
    ),
    DUCKDB: (
        r"not (yet )?(been )?(supported|implemented)",
        r"unsupported",
    ),
}
UNSUPPORTED_MESSAGES[DUCKDB_NO_CACHE] = UNSUPPORTED_MESSAGES[DUCKDB]

# The extensions this module loads, in load order: the iceberg extension needs avro (and tries to download it
# when it is not loaded yet, which fails offline).
_DUCKDB_EXTENSIONS = ("avro", "iceberg")


# --------------------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineRead:
    """One engine's read of one snapshot: the rows, or the engine's error."""

    engine: str
    snapshot_id: int | None
    rows: Counter[tuple[Any, ...]] | None
    #: The engine's own message when it failed to read the snapshot; None when it returned rows.
    error: str | None
    #: True when ``error`` is one of the engine's known "not supported" messages (:data:`UNSUPPORTED_MESSAGES`).
    unsupported: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def row_count(self) -> int | None:
        return None if self.rows is None else sum(self.rows.values())


def duckdb_extension_paths(names: Iterable[str] = _DUCKDB_EXTENSIONS) -> list[Path]:
    """The ``.duckdb_extension`` files of the installed extension wheels for the installed DuckDB version."""
    import importlib.util

    import duckdb

    version = duckdb.__version__
    paths = []
    for name in names:
        spec = importlib.util.find_spec(f"duckdb_extension_{name}")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"the Python package duckdb-extension-{name} is not installed (pip install "
                               f"-c constraints.txt -e .[test])")
        folder = Path(list(spec.submodule_search_locations)[0]) / "extensions" / f"v{version}"
        path = folder / f"{name}.duckdb_extension"
        if not path.is_file():
            found = sorted(p.name for p in folder.parent.glob("*/")) if folder.parent.is_dir() else []
            raise RuntimeError(f"duckdb-extension-{name} has no extension for DuckDB {version} "
                               f"(it has {found or 'none'}): pin both to the same version")
        paths.append(path)
    return paths


def duckdb_connect(threads: int | None = None, *, external_file_cache: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the iceberg extension loaded from the installed wheels; automatic
    extension install/load off (never a download), session time zone UTC. ``external_file_cache=False`` switches
    DuckDB's external file cache off (see the module doc: it can return the wrong deletion vector)."""
    import duckdb

    config: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    if threads is not None:
        config["threads"] = threads
    con = duckdb.connect(config=config)
    for path in duckdb_extension_paths():
        con.execute(f"LOAD {_sql_string(str(path))}")
    con.execute("SET TimeZone = 'UTC'")
    if not external_file_cache:
        con.execute("SET enable_external_file_cache = false")
    return con


def duckdb_scan_sql(metadata_location: str, snapshot_id: int | None = None) -> str:
    """The ``iceberg_scan(...)`` table function call reading ``metadata_location`` (at ``snapshot_id``)."""
    args = [_sql_string(_local_path(metadata_location))]
    if snapshot_id is not None:
        args.append(f"snapshot_from_id => {int(snapshot_id)}")
    return f"iceberg_scan({', '.join(args)})"


def pyiceberg_arrow(table: Table, snapshot_id: int | None = None) -> pa.Table:
    return table.scan(snapshot_id=snapshot_id).to_arrow()


def snapshot_columns(table: Table, snapshot_id: int | None = None) -> tuple[str, ...]:
    """Top-level column names of the snapshot's schema, in order (the current schema without a snapshot)."""
    schema = table.schema()
    snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snapshot is not None and snapshot.schema_id is not None:
        schema = table.metadata.schema_by_id(snapshot.schema_id) or schema
    return tuple(f.name for f in schema.fields)


def read_rows(engine: str, table: Table, snapshot_id: int | None = None, *,
              con: duckdb.DuckDBPyConnection | None = None, strict: bool = True) -> EngineRead:
    """The rows of ``table`` at ``snapshot_id`` (default: the current snapshot of ``table``'s metadata) as
    ``engine`` reads them. DuckDB reads ``table.metadata_location`` (``con``: a connection of
    :func:`duckdb_connect` to use instead of a fresh one, configured for the engine). A refusal matching
    :data:`UNSUPPORTED_MESSAGES` is returned with ``unsupported`` set; any other error is raised, or with
    ``strict=False`` returned too (``unsupported`` False)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    columns = snapshot_columns(table, snapshot_id)
    t0 = time.perf_counter()
    try:
        if engine in (DUCKDB, DUCKDB_NO_CACHE):
            own = con is None
            connection = duckdb_connect(external_file_cache=engine == DUCKDB) if con is None else con
            try:
                if _is_s3(table.metadata_location):
                    duckdb_use_s3(connection, table.io.properties)
                result = connection.execute(f"SELECT * FROM {duckdb_scan_sql(table.metadata_location, snapshot_id)}")
                arrow = _fetch_arrow(result)
            finally:
                if own:
                    connection.close()
        else:
            arrow = pyiceberg_arrow(table, snapshot_id)
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised unless a known limitation
        message = f"{type(exc).__name__}: {exc}".split("\n\nStack Trace:")[0].strip()
        known = is_unsupported(engine, message)
        if known or not strict:
            return EngineRead(engine, snapshot_id, None, message, known, time.perf_counter() - t0)
        raise
    seconds = time.perf_counter() - t0
    if tuple(arrow.column_names) != columns:
        raise AssertionError(f"{engine} returned columns {arrow.column_names}, the snapshot's schema has {list(columns)}")
    return EngineRead(engine, snapshot_id, arrow_rows(arrow), None, False, seconds)


def is_unsupported(engine: str, message: str) -> bool:
    return any(re.search(p, message, re.IGNORECASE) for p in UNSUPPORTED_MESSAGES[engine])


def _fetch_arrow(result: Any) -> pa.Table:
    # DuckDB 1.5: to_arrow_table (fetch_arrow_table is deprecated there); older releases: fetch_arrow_table.
    fetch = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
    table = fetch()
    return table.read_all() if isinstance(table, pa.RecordBatchReader) else table


# --------------------------------------------------------------------------------------------------------------
# Normalization (like icecompact_testing.oracle.normalize_value)
# --------------------------------------------------------------------------------------------------------------


def arrow_rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """Multiset of the rows of an Arrow table, values normalized like the oracle's: timestamps naive UTC, NaN the
    single :data:`icecompact_testing.oracle.NAN`, structs and lists tuples, maps frozensets of pairs, UUIDs str."""
    columns = [_normalize_column(table.column(i)) for i in range(table.num_columns)]
    if not columns:
        return Counter({(): table.num_rows}) if table.num_rows else Counter()
    return Counter(zip(*columns))


def _normalize_column(column: pa.ChunkedArray) -> list[Any]:
    values: list[Any] = column.to_pylist()
    t = column.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if _is_canonical(t):
        return values
    return [_normalize(v, t) for v in values]


def _is_canonical(t: pa.DataType) -> bool:
    # to_pylist already gives the canonical value for these (no NaN, no time zone, no nesting).
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_decimal(t)
            or (pa.types.is_timestamp(t) and t.tz is None) or pa.types.is_null(t))


def _normalize(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_struct(t):
        return tuple(_normalize(v.get(t.field(i).name) if isinstance(v, dict) else v[i], t.field(i).type)
                     for i in range(t.num_fields))
    if pa.types.is_map(t):
        return frozenset((_normalize(k, t.key_type), _normalize(x, t.item_type)) for k, x in v)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return tuple(_normalize(x, t.value_type) for x in v)
    if isinstance(t, pa.ExtensionType):
        if t.extension_name in ("arrow.uuid", "uuid") and isinstance(v, (bytes, bytearray)):
            return str(uuid.UUID(bytes=bytes(v)))
        return _normalize(v, t.storage_type)
    if isinstance(v, float):
        return NAN if math.isnan(v) else v
    return normalize_value(v)  # aware datetimes -> naive UTC, bytes-likes -> bytes, ...


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------


def _local_path(location: str) -> str:
    """DuckDB reads local files by path: ``file:///x`` / ``file:/x`` -> ``/x``; other schemes pass through."""
    if location.startswith("file://"):
        return location[len("file://"):]
    if location.startswith("file:/"):
        return location[len("file:"):]
    return location


def _is_s3(location: str) -> bool:
    return location.startswith(("s3://", "s3a://"))


def duckdb_use_s3(con: duckdb.DuckDBPyConnection, properties: Mapping[str, str]) -> None:
    """Let ``con`` read ``s3://`` locations: the ``httpfs`` extension from its wheel (never a download) and a
    temporary S3 secret built from pyiceberg FileIO properties (``s3.endpoint``, ``s3.access-key-id``,
    ``s3.secret-access-key``, ``s3.session-token``, ``s3.region``, ``s3.path-style-access``). Idempotent."""
    from urllib.parse import urlsplit

    loaded = {r[0] for r in con.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()}
    if "httpfs" not in loaded:
        for path in duckdb_extension_paths(("httpfs",)):
            con.execute(f"LOAD {_sql_string(str(path))}")
    options = {"TYPE": "S3", "REGION": _sql_string(properties.get("s3.region") or properties.get("client.region")
                                                   or "us-east-1")}
    if properties.get("s3.access-key-id"):
        options["KEY_ID"] = _sql_string(properties["s3.access-key-id"])
        options["SECRET"] = _sql_string(properties.get("s3.secret-access-key", ""))
    if properties.get("s3.session-token"):
        options["SESSION_TOKEN"] = _sql_string(properties["s3.session-token"])
    endpoint = properties.get("s3.endpoint")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["ENDPOINT"] = _sql_string(parts.netloc + parts.path.rstrip("/"))
        options["USE_SSL"] = "false" if parts.scheme == "http" else "true"
    if str(properties.get("s3.path-style-access", "")).lower() == "true":
        options["URL_STYLE"] = "'path'"
    # A temporary (in-memory) secret of this connection only; never logged.
    con.execute("CREATE OR REPLACE TEMPORARY SECRET icecompact_s3 ("
                + ", ".join(f"{k} {v}" for k, v in options.items()) + ")")


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def describe(reads: Iterable[EngineRead]) -> str:
    """One line per read, for assertion messages."""
    return "\n".join(f"{r.engine}@{r.snapshot_id}: " + (f"{r.row_count} rows" if r.ok else
                                                          f"{'unsupported' if r.unsupported else 'error'} ({r.error})")
                     for r in reads)
