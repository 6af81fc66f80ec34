"""The contenders the compaction benchmarks measure side by side on clones of one base table: our compaction
in-process (phase timers installed), Iceberg's ``CALL rewrite_data_files`` and its action per partition, a plain
Parquet read + write of the same data files; the clones they run on (``register_table`` from the base's metadata
file: the same snapshots, sequence numbers and files), and the order of contenders between repeats."""

from __future__ import annotations

import datetime as _dt
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lib.phases import PhaseTimer
from lib.scans import full_scan

CATALOG_NAME = "bench"
NAMESPACE = "ns"


class BenchmarkError(RuntimeError):
    pass


def procedure_table(catalog_name: str, namespace: str, name: str) -> str:
    """A procedure's ``table`` argument (``CALL cat.system.x(table => ...)``), named with its catalog: a bare
    ``ns.t`` is first tried as catalog ``ns``, which logs a CatalogNotFoundException stack trace on every call."""
    return f"{catalog_name}.{namespace}.{name}"


def register_clone(spark: Any, catalog_name: str, namespace: str, name: str, metadata_file: str) -> None:
    """A clone of a base table: ``namespace.name`` registered from the base's metadata file (its snapshots, sequence
    numbers and files, shared)."""
    spark.sql(f"CALL {catalog_name}.system.register_table(table => '{procedure_table(catalog_name, namespace, name)}', "
              f"metadata_file => '{metadata_file}')").collect()


def drop_clone(spark: Any, table_ref: str, base_snapshots: set[int]) -> int:
    """Delete the files a clone's own commits added (never the base's, ``base_snapshots``', which every clone shares)
    and unregister it; returns how many files were deleted. With repeats the outputs would otherwise pile up (~2 GB
    per contender at l)."""
    from compaction.spark import jvm as J
    from compaction.spark.compat import snapshot_changes

    table = J.load_table(spark, table_ref)
    io, deleted = table.io(), 0
    for snapshot in table.snapshots():
        if int(snapshot.snapshotId()) in base_snapshots:
            continue
        changed = snapshot_changes(table, snapshot)
        for files in (changed.addedDataFiles(), changed.addedDeleteFiles()):
            for f in files:
                io.deleteFile(str(f.location()))
                deleted += 1
    spark.sql(f"DROP TABLE {table_ref}")  # no PURGE: the base's files stay
    return deleted


def parquet_codec(data_file: str) -> str:
    """The codec Iceberg actually wrote the data files with (read from a file footer)."""
    import pyarrow.parquet as pq

    path = data_file[len("file:"):] if data_file.startswith("file:") else data_file
    while path.startswith("//"):
        path = path[1:]
    md = pq.ParquetFile(path).metadata
    return str(md.row_group(0).column(0).compression).lower()


class Bench:
    """One base table's contenders, each on its own clone of the base's metadata file (``clone``)."""

    def __init__(self, spark: Any, catalog_cfg: Any, workdir: Path, metadata_file: str, expected_rows: Counter,
                 reference_scan: tuple[int, str], target_file_size: int, data_paths: list[str], codec: str) -> None:
        self.spark = spark
        self.catalog_cfg = catalog_cfg
        self.catalog = catalog_cfg.load()
        self.workdir = workdir
        self.metadata_file = metadata_file
        self.expected_rows = expected_rows
        self.reference_scan = reference_scan
        self.target_file_size = target_file_size
        self.data_paths = data_paths
        self.codec = codec
        self.timer = PhaseTimer()
        self.clones = 0
        self.run_tag = _dt.datetime.now().strftime("%H%M%S")  # clone names stay unique in a reused --workdir

    # clones ------------------------------------------------------------------------------------------------
    def clone(self, label: str) -> str:
        self.clones += 1
        name = f"{label}_{self.run_tag}_{self.clones}"
        register_clone(self.spark, CATALOG_NAME, NAMESPACE, name, self.metadata_file)
        return name

    def check_copy(self, contender: str, name: str) -> dict[str, Any]:
        """The reference reader of the compacted clone must return the base table's rows exactly."""
        from icecompact_testing.oracle import read_table, rows_diff

        res = read_table(self.catalog.load_table(f"{NAMESPACE}.{name}"))
        if res.rows != self.expected_rows:
            raise BenchmarkError(f"{contender}: rows of the compacted copy {name} differ from the base table's:\n"
                                 + rows_diff(self.expected_rows, res.rows))
        return {"rows": res.row_count, "data_files": len(res.data_files), "delete_files": len(res.delete_files),
                "data_files_with_applicable_deletes": len(res.applicable_deletes),
                "data_files_with_deleted_rows": len(res.deleted_rows_by_data_file),
                "dangling_delete_files": len(res.dangling_delete_files)}

    # ours --------------------------------------------------------------------------------------------------
    def run_ours(self, level_name: str, name: str, one_partition: bool = False) -> tuple[float, dict[str, Any]]:
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table
        from compaction.spark.job import COMMITTED, run_groups
        from compaction.spark.validation import ValidationLevel

        level = ValidationLevel.parse(level_name)
        timer = self.timer
        timer.reset()
        with timer.installed():
            t0 = time.perf_counter()
            with timer.section("inspect"):
                state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
            first = min((p.key for p in state.partitions), key=lambda k: k.sort_key()) if one_partition else None
            with timer.section("plan"):
                the_plan = plan(state, CompactionPolicy.resolve(state.properties), "major",
                                _dt.datetime.now(_dt.timezone.utc),
                                partition_filter=(lambda k: k == first) if one_partition else None)
            with timer.section("run_group"):  # every group at once, as `icecompact run` on one machine
                results = run_groups(self.spark, the_plan, [g.group_id for g in the_plan.groups], level=level,
                                     max_retries=3)
            elapsed = time.perf_counter() - t0
        parts = [p for r in results for p in r.partitions]
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status != COMMITTED]
        if bad or the_plan.deferred:
            raise BenchmarkError(f"ours ({level_name}) did not commit every partition: {bad[:5]}; "
                                 f"deferred {len(the_plan.deferred)}")
        details = {
            "partitions": len(parts), "groups": len(the_plan.groups),
            "rewritten_data_files": sum(p.rewritten_data_files for p in parts),
            "added_data_files": sum(p.added_data_files for p in parts),
            "removed_delete_files": sum(p.removed_delete_files for p in parts),
            "commits": len({sid for p in parts for sid in p.commit_snapshot_ids}),
            "phases": timer.snapshot(),
        }
        return elapsed, details

    # Iceberg ------------------------------------------------------------------------------------------------
    def call_options(self, serial: bool = False) -> dict[str, str]:
        opts = {"delete-file-threshold": "1", "remove-dangling-deletes": "true",
                "use-starting-sequence-number": "true", "target-file-size-bytes": str(self.target_file_size)}
        if serial:
            opts["max-concurrent-file-group-rewrites"] = "1"
        return opts

    def call_sql(self, name: str, serial: bool = False) -> str:
        options = ", ".join(f"'{k}', '{v}'" for k, v in self.call_options(serial).items())
        return (f"CALL {CATALOG_NAME}.system.rewrite_data_files("
                f"table => '{procedure_table(CATALOG_NAME, NAMESPACE, name)}', "
                f"options => map({options}))")

    def run_call(self, name: str, serial: bool = False) -> tuple[float, dict[str, Any]]:
        sql = self.call_sql(name, serial)
        t0 = time.perf_counter()
        row = self.spark.sql(sql).collect()[0].asDict()
        elapsed = time.perf_counter() - t0
        if int(row.get("failed_data_files_count") or 0):
            raise BenchmarkError(f"CALL failed for some files: {row}")
        return elapsed, {"rewritten_data_files": int(row["rewritten_data_files_count"]),
                         "added_data_files": int(row["added_data_files_count"]),
                         "removed_delete_files": int(row.get("removed_delete_files_count") or 0),
                         "rewritten_bytes": int(row.get("rewritten_bytes_count") or 0)}

    def run_action_per_partition(self, name: str) -> tuple[float, dict[str, Any]]:
        """Iceberg's action once per partition, sequentially, with the CALL's options (no cleanup/validation of
        ours): isolates the cost of 'one action per partition' from the cost of our own work."""
        from compaction.core.planner import plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import inspect_table
        from compaction.spark import jvm as J
        from compaction.spark.expressions import java_partition_expression

        t0 = time.perf_counter()
        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
        the_plan = plan(state, CompactionPolicy.resolve(state.properties), "major", _dt.datetime.now(_dt.timezone.utc))
        keys: dict[Any, None] = {}
        for group in the_plan.groups:
            for task in group.tasks:
                keys.setdefault(task.partition, None)
        table = J.load_table(self.spark, f"{CATALOG_NAME}.{NAMESPACE}.{name}")
        actions = J.jvm(self.spark).org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)
        totals = Counter()
        for key in keys:
            table.refresh()
            action = actions.rewriteDataFiles(table).filter(java_partition_expression(self.spark, table, key))
            for k, v in self.call_options().items():
                action = action.option(k, v)
            res = action.execute()
            totals["rewritten_data_files"] += int(res.rewrittenDataFilesCount())
            totals["added_data_files"] += int(res.addedDataFilesCount())
            totals["removed_delete_files"] += int(res.removedDeleteFilesCount())
        elapsed = time.perf_counter() - t0
        return elapsed, {"partitions": len(keys), **totals}

    def run_parquet(self, out: Path) -> tuple[float, dict[str, Any]]:
        t0 = time.perf_counter()
        (self.spark.read.parquet(*self.data_paths).write.mode("overwrite")
         .option("compression", self.codec).parquet(out.as_uri()))
        elapsed = time.perf_counter() - t0
        written = [p for p in out.glob("*.parquet")]
        details = {"input_files": len(self.data_paths), "output_files": len(written),
                   "output_bytes": sum(p.stat().st_size for p in written), "codec": self.codec}
        shutil.rmtree(out, ignore_errors=True)
        return elapsed, details

    # scans -------------------------------------------------------------------------------------------------
    def scan(self, name: str) -> tuple[float, tuple[int, str]]:
        result = full_scan(self.spark, f"{CATALOG_NAME}.{NAMESPACE}.{name}")
        return result

    def warm_up(self) -> dict[str, float]:
        """Untimed: the CALL on a throwaway clone, ours(none) on one partition of another (JVM class loading, JIT,
        first use of every code path), so that this cost does not land on whichever contender runs first."""
        out = {}
        out["call"], _ = self.run_call(self.clone("warmup_call"))
        out["ours_none_one_partition"], _ = self.run_ours("none", self.clone("warmup_ours"), one_partition=True)
        return out


def rotated(items: list[str], k: int) -> list[str]:
    """The contenders' order in repeat ``k``: rotated by ``k``, so that no contender always runs first."""
    k %= len(items)
    return items[k:] + items[:k]
