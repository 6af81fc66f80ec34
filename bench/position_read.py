"""Where a MINOR's position read spends its time: the equality-delete conversion's read of a streaming table, our
Spark path against a driver-side read of the same key columns, side by side on the same table in one run.

A health-triggered MINOR of a streaming table (large segments plus a fragment and an equality-delete file per
partition per checkpoint) reads, every run, the key column of every data file an equality delete applies to and
matches it against the deletes' keys (``compaction.spark.minor.matched_positions``: Spark reads the files as plain
Parquet with ``_metadata.row_index`` and joins them with the delete keys and the (data file, delete file) pairs the
spec allows). This bench splits that read and sets beside it a driver-side lower bound of the same work.

The table: the bulk generator's streaming shape (``icecompact_testing.bulk``, sizes ``s`` / ``m``), local disk.
Contenders, on the table's current snapshot, order rotated, median of ``--repeat`` after one untimed run of each:

* ``scan_decide``: the partitions' files from the manifests and the work decided on them (``scan_partition`` +
  ``decide_work``, py4j per file; shared by both paths, not a contender of its own);
* ``spark_matched``: ``matched_positions`` collected (the Spark jobs; above ``compaction.minor.driver-match-max-rows``
  and where the driver declines);
* ``driver_matched``: ``driver_matched_positions``, the product's driver-side match (pyarrow, files by local path);
* ``driver_file_io``: the same, every file read through the table's FileIO (as on an object store: the footer and
  the key columns' chunks cross py4j);
* ``arrow_lower_bound``: the ``id`` column of the same files read by pyarrow and matched against exactly the
  deletes the work pairs each file with, with nothing else (no field-id mapping, type promotion, several key
  columns or FileIO).

Correctness (the bench aborts otherwise): all give the same positions for every data file.

Ratios: ``spark_matched_over_driver_matched`` and ``driver_file_io_over_driver_matched``. There is no goal: the
figures say how much of a MINOR the driver-side match saves (docs/benchmarks.md, "position_read.py").

Usage::

    .venv/bin/python bench/position_read.py                        # s and m, v2 and v3, repeat 5
    .venv/bin/python bench/position_read.py --sizes s --formats 3 --repeat 2

Results: ``bench/results/position_read.{txt,json}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, embedded_spark  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import BenchmarkError

CATALOG_NAME = "posread"
NAMESPACE = "bench"
CONTENDERS = ("spark_matched", "driver_matched", "driver_file_io", "arrow_lower_bound")


def _local(path: str) -> str:
    if not path.startswith("file:"):
        raise BenchmarkError(f"local files only: {path}")
    return path.removeprefix("file://").removeprefix("file:")


def arrow_lower_bound(merged: Any) -> dict[str, set[int]]:
    """The positions of every data file of ``merged`` whose key matches an equality delete the work pairs it with."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    keys = {ref: pq.read_table(_local(ref[0]), columns=["id"]).column(0).combine_chunks()
            for ref in merged.equality}
    out: dict[str, set[int]] = {}
    for path, refs in merged.eq_targets.items():
        values = pa.concat_arrays([keys[r] for r in sorted(refs)]) if refs else pa.array([], pa.int64())
        column = pq.read_table(_local(path), columns=["id"]).column(0)
        hit = pc.is_in(column, value_set=values, skip_nulls=False)
        positions = pc.indices_nonzero(pc.fill_null(hit, False)).to_numpy()
        if len(positions):
            out[path] = set(int(p) for p in positions)
    return out


def run_table(spark: Any, catalog_cfg: Any, size: str, format_version: int, repeat: int, seed: int) -> dict[str, Any]:
    from compaction.metadata.inspect import inspect_table
    from compaction.spark import jvm as J
    from compaction.spark import minor as M
    from compaction.spark.expressions import java_partition_expression
    from compaction.spark.group_reads import rows_predicate
    from compaction.spark.partition_files import scan_partition
    from icecompact_testing.bulk import BulkSpec, generate_bulk

    tag = f"{size}/v{format_version}"
    name = f"{NAMESPACE}.stream_{size}_v{format_version}"
    spec = BulkSpec.named(size, format_version, seed=seed)
    result = generate_bulk(spark, catalog_cfg, name, spec, replace=True,
                           log=lambda m: print(f"[{tag}] {m}", flush=True))
    ref = f"{CATALOG_NAME}.{name}"
    state = inspect_table(catalog_cfg, name)
    table = J.load_table(spark, ref)
    keys = [p.key for p in state.partitions]
    keyed = [(k, java_partition_expression(spark, table, k)) for k in keys]
    row_filter = rows_predicate(spark, table, CATALOG_NAME, set(keys))
    snapshot_id = int(table.currentSnapshot().snapshotId())

    def decide() -> Any:
        scans = {k: scan_partition(spark, table, e, snapshot_id, with_applied=False) for k, e in keyed}
        return M.merge_works(M.decide_work(spark, table, k, f, whole_table=False) for k, f in scans.items())

    merged = decide()
    def driver(through_file_io: bool) -> dict[str, set[int]]:
        found = M.driver_matched_positions(spark, table, merged, max_rows=1 << 40, through_file_io=through_file_io)
        if found is None:
            raise BenchmarkError(f"[{tag}] the driver-side match declined the work")
        return found

    contenders = {
        "spark_matched": lambda: M.collect_positions(
            M.matched_positions(spark, table, ref, snapshot_id, row_filter, merged)),
        "driver_matched": lambda: driver(False),
        "driver_file_io": lambda: driver(True),
        "arrow_lower_bound": lambda: arrow_lower_bound(merged),
    }
    answers = {name: fn() for name, fn in contenders.items()}  # untimed: warm-up, and the check
    for name, answer in answers.items():
        if answer != answers["spark_matched"]:
            differ = sorted(set(answers["spark_matched"]) ^ set(answer))[:3]
            raise BenchmarkError(f"[{tag}] {name} and spark_matched found different positions (files: {differ})")
    samples: dict[str, list[float]] = {name: [] for name in ("scan_decide", *CONTENDERS)}
    for i in range(repeat):
        started = time.perf_counter()
        decide()
        samples["scan_decide"].append(time.perf_counter() - started)
        order = CONTENDERS if i % 2 == 0 else tuple(reversed(CONTENDERS))
        for name in order:
            started = time.perf_counter()
            contenders[name]()
            samples[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    data_rows = sum(int(f.recordCount()) for f in merged.data_files.values())
    return {
        "table": tag, "rows": result.live_rows, "data_files_read": len(merged.eq_targets),
        "equality_delete_files": len(merged.equality), "data_files_with_new_positions": len(merged.data_files),
        "rows_of_those_files": data_rows,
        "positions": sum(len(v) for v in answers["spark_matched"].values()),
        "samples_s": samples, "median_s": medians,
        "spark_matched_over_driver_matched": medians["spark_matched"] / medians["driver_matched"],
        "driver_file_io_over_driver_matched": medians["driver_file_io"] / medians["driver_matched"],
    }


def render(results: list[dict[str, Any]], started: str) -> str:
    lines = [f"position_read  {started}  (2 cores shared, Spark local[2]; medians after one untimed run of each)"]
    for r in results:
        m = r["median_s"]
        lines.append(f"\n== {r['table']}: {r['rows']:,} live rows; the work reads {r['data_files_read']} data files "
                     f"against {r['equality_delete_files']} equality-delete files ({r['positions']:,} positions)")
        for name in ("scan_decide", *CONTENDERS):
            lines.append(f"   {name:17s} median {m[name]:6.2f} s  (samples "
                         + ", ".join(f"{v:.2f}" for v in r["samples_s"][name]) + ")")
        lines.append(f"   ratios: spark_matched_over_driver_matched {r['spark_matched_over_driver_matched']:.1f}x, "
                     f"driver_file_io_over_driver_matched {r['driver_file_io_over_driver_matched']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="s,m")
    ap.add_argument("--formats", default="2,3")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "position_read", help="result stem")
    args = ap.parse_args(argv)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    results: list[dict[str, Any]] = []
    with embedded_spark(CATALOG_NAME, "position-read-bench", NAMESPACE) as (spark, catalog_cfg):
        for size in args.sizes.split(","):
            for fmt in (int(f) for f in args.formats.split(",")):
                results.append(run_table(spark, catalog_cfg, size, fmt, args.repeat, args.seed))
                text = render(results, started)
                print(text.split("\n== ")[-1], flush=True)
                args.output.with_suffix(".txt").write_text(text + "\n")
                args.output.with_suffix(".json").write_text(json.dumps(
                    {"started": started, "args": vars(args) | {"output": str(args.output)}, "results": results},
                    indent=2, default=str) + "\n")
    print(f"wrote {args.output.with_suffix('.txt')}, .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
