"""Trino reads what Spark reads: on v2 and v3 tables of the REST catalog with files on S3 (SeaweedFS), before
compaction (equality deletes, position deletes), after our MINOR (position deletes / deletion vectors in Puffin
files) and after our MAJOR, Trino's Iceberg connector returns exactly the multiset of rows Spark and the reference
reader return, for the snapshot pinned by id (``FOR VERSION AS OF``), and its own metadata tables show the layout
we produced (so a stale read of an older snapshot could not pass). The pre-compaction snapshot is read again
after the MAJOR (time travel through our snapshots).

One Trino server for the session (fixture ``trino`` in conftest.py, catalog ``ice``), started in the background
while the first table is generated; every Trino test is in this module, so only one xdist worker starts it.
"""

from __future__ import annotations

import datetime as dt
import os
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.demo.workload import WorkloadSpec, generate
from compaction.spark.validation import ValidationLevel
from icecompact_testing import trino as T
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table, rows_diff, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
CATALOG = "ice"  # the Trino catalog of the ``trino`` fixture
#: Iceberg's content codes, as Trino's ``$files`` table reports them.
DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2


def _trino_files(trino: T.TrinoServer, identifier: tuple[str, str]) -> Counter[tuple[int, str]]:
    """``{(content, file_format): files}`` of the current snapshot as Trino's ``$files`` metadata table lists them."""
    namespace, name = identifier
    result = trino.query(f'SELECT content, file_format, count(*) FROM "{CATALOG}"."{namespace}"."{name}$files" '
                         "GROUP BY content, file_format")
    return Counter({(int(content), str(fmt).upper()): int(n) for content, fmt, n in result.rows})


def _check(spark: Any, trino: T.TrinoServer, catalog: CatalogConfig, identifier: tuple[str, str],
           state: str) -> tuple[int, Counter[tuple[Any, ...]], Any]:
    """Trino's read of the current snapshot (pinned by id) equals Spark's and the reference reader's; returns the
    snapshot id, the rows and the reference reader's result (its files)."""
    table = catalog.load().load_table(identifier)
    snapshot_id = table.current_snapshot().snapshot_id
    ref = f"{catalog.name}.{identifier[0]}.{identifier[1]}"
    expected = spark_rows(spark, ref, snapshot_id)
    oracle = read_table(table, snapshot_id)
    assert oracle.rows == expected, f"[{state}] the reference reader and Spark disagree:\n" + rows_diff(expected, oracle.rows)
    read = T.read_rows(trino, CATALOG, identifier, snapshot_id)
    assert read.rows == expected, f"[{state}] Trino and Spark disagree:\n" + rows_diff(expected, read.rows or Counter())
    # Trino's current snapshot is ours (its REST catalog session does not serve a cached older one).
    (current,) = trino.query(f'SELECT snapshot_id FROM "{CATALOG}"."{identifier[0]}"."{identifier[1]}$snapshots" '
                             "ORDER BY committed_at DESC LIMIT 1").rows
    assert current[0] == snapshot_id, f"[{state}] Trino's newest snapshot is {current[0]}, ours {snapshot_id}"
    print(f"[{state}] {ref}@{snapshot_id}: trino {read.row_count} rows in {read.seconds:.2f}s, files "
          f"{dict(_trino_files(trino, identifier))}")
    return snapshot_id, expected, oracle


@pytest.mark.parametrize("format_version", [2, 3])
def test_trino_reads_what_spark_reads_before_and_after_minor_and_major(spark, rest_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                       trino: T.TrinoServer,
                                                                       format_version: int) -> None:
    """v2: equality + position deletes -> MINOR (equality deletes converted to position deletes, fragments merged)
    -> MAJOR (full rewrite, no delete left). v3: equality deletes + DVs -> MINOR (every delete a DV in a Puffin file)
    -> MAJOR. Trino = Spark = the reference reader at each step; Trino's ``$files`` shows the layout."""
    namespace = f"trino{format_version}"
    identifier = (namespace, "t")
    spec = WorkloadSpec(seed=41 + format_version, format_version=format_version, partitioning="days_ts", days_span=2,
                        commits=3, rows_per_commit=30, eq_delete_fraction=0.6, null_key_fraction=0.1)
    generate(spark, rest_catalog, f"{namespace}.t", spec)

    before_id, before_rows, before = _check(spark, trino, rest_catalog, identifier, "before")
    assert any(d.delete_kind == "equality" for d in before.delete_files), "the scenario needs equality deletes"
    files = _trino_files(trino, identifier)
    assert files[(EQUALITY_DELETES, "PARQUET")] > 0, files

    # No data file is a fragment: every equality delete is converted (to position deletes on v2, DVs on v3) rather
    # than applied by a merge, so Trino reads delete files we wrote.
    compact_in_process(spark, rest_catalog, f"{namespace}.t", CompactionMode.MINOR, level=ValidationLevel.NONE,
                       overrides={"fragment-ratio": 1 << 40}, now=NOW, clean=True)
    _, minor_rows, minor = _check(spark, trino, rest_catalog, identifier, "minor")
    assert minor_rows == before_rows
    assert minor.delete_files and not any(d.delete_kind == "equality" for d in minor.delete_files)
    files = _trino_files(trino, identifier)
    assert files[(EQUALITY_DELETES, "PARQUET")] == 0, files
    if format_version == 3:
        assert all(d.delete_kind == "deletion_vector" for d in minor.delete_files)
        assert files[(POSITION_DELETES, "PUFFIN")] > 0 and files[(POSITION_DELETES, "PARQUET")] == 0, files
    else:
        assert files[(POSITION_DELETES, "PARQUET")] > 0, files

    compact_in_process(spark, rest_catalog, f"{namespace}.t", CompactionMode.MAJOR, level=ValidationLevel.NONE,
                       overrides={"major_full_rewrite": True}, now=NOW, clean=True)
    _, major_rows, major = _check(spark, trino, rest_catalog, identifier, "major")
    assert major_rows == before_rows
    assert not major.delete_files
    assert set(_trino_files(trino, identifier)) == {(DATA, "PARQUET")}

    # Time travel through our snapshots: the pre-compaction snapshot still reads the same rows in Trino.
    assert T.read_rows(trino, CATALOG, identifier, before_id).rows == before_rows


def test_trino_is_private_and_keeps_secrets_out_of_argv_and_logs(trino: T.TrinoServer, object_store) -> None:  # type: ignore[no-untyped-def]
    """The server listens on 127.0.0.1, its catalog file (S3 secret, OAuth2 credential) is 0600 and the secret is
    in neither its command line nor its log; values of every type the workloads use come back normalized."""
    result = trino.query("SELECT CAST(1 AS bigint), 'x', TIMESTAMP '2024-01-02 03:04:05.123456 UTC', "
                         "CAST('1.50' AS decimal(5,2)), nan(), X'0102', ARRAY[1, 2], MAP(ARRAY['a'], ARRAY[1]), "
                         "CAST(ROW(1, 'y') AS ROW(a integer, b varchar)), DATE '2024-01-02', CAST(NULL AS bigint), "
                         "REAL '0.1', DOUBLE '0.1', TIMESTAMP '2024-01-02 03:04:05.123456'")
    import decimal
    import math

    (row,) = result.rows
    assert row[:4] == (1, "x", dt.datetime(2024, 1, 2, 3, 4, 5, 123456), decimal.Decimal("1.50"))
    assert isinstance(row[4], float) and math.isnan(row[4])
    assert row[5:11] == (b"\x01\x02", (1, 2), frozenset({("a", 1)}), (1, "y"), dt.date(2024, 1, 2), None)
    # A real is the float32's exact value, as Spark and Arrow give it (not Trino's shortest print of it, 0.1).
    assert row[11] == struct.unpack("f", struct.pack("f", 0.1))[0] != 0.1 and row[12] == 0.1
    assert row[13] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456)  # microseconds kept (PARAMETRIC_DATETIME)
    catalog_file = trino.root / "etc" / "catalog" / f"{CATALOG}.properties"
    assert (catalog_file.stat().st_mode & 0o777) == 0o600
    assert object_store.secret_key in catalog_file.read_text()
    assert trino.process is not None
    cmdline = Path(f"/proc/{trino.process.pid}/cmdline").read_bytes().decode(errors="replace")
    assert object_store.secret_key not in cmdline and "127.0.0.1" in cmdline
    assert object_store.secret_key not in trino.log_tail(10 ** 8)
    with pytest.raises(T.TrinoQueryError) as refused:
        trino.query(f'SELECT * FROM "{CATALOG}"."no_such_ns"."t"')
    assert refused.value.error_name in ("SCHEMA_NOT_FOUND", "TABLE_NOT_FOUND")
    assert os.path.isdir(trino.root)
