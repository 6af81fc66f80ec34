"""Scale benchmark: metadata-only ``inspect + plan`` versus the Spark ways of getting the same statistics.

What is compared, measured side by side in one run (median of ``--repeat`` runs of each, interleaved):

* ``inspect+plan``   - ``compaction.metadata.inspect.inspect_table`` + ``compaction.core.planner.plan`` in this Python
                       process (pyiceberg reads the manifests; no JVM). Also split into ``inspect`` and ``plan``.
* ``fresh python``   - the same in a new Python process (interpreter start + imports + inspect + plan): what an
                       Airflow task that shells out would pay.
* ``spark-submit``   - what the alternative costs a DAG: a spark-submit process (JVM start, catalog + table load)
                       that aggregates ``<table>.files`` per spec_id/partition/content (file count, bytes,
                       records) and hands the rows back (JSON file). Whole subprocess wall clock.
* ``spark in-session`` - the same query in an already-running SparkSession (this process's).

Wall clock is what a DAG waits for, but on a shared machine it swings with other people's load (spark-submit took
11 s on a quiet and 20 s on a busy machine), so CPU times are recorded too: ``process_time`` of inspect and of
plan, and ``getrusage(RUSAGE_CHILDREN)`` around each subprocess (the fresh python child; spark-submit execs the
JVM, so that is the JVM's CPU time over all its threads).

The table is metadata only: data files are fake paths with realistic sizes, record counts and column statistics,
registered with pyiceberg (``fast_append`` of ``DataFile`` objects, ~20k files per commit); position and equality
delete files are registered through the Iceberg Java API in this process's SparkSession
(``FileMetadata.deleteFileBuilder`` + ``newRowDelta``), since pyiceberg 0.12 cannot write delete manifests.
By default the manifests are then rewritten by Spark's ``rewrite_manifests`` procedure, so that inspect reads
Java-written manifests as on a Spark-maintained table (pyiceberg writes one Avro block per entry: ~3.5x larger
manifests that take ~1.6x longer to inspect; ``--manifests pyiceberg`` keeps them). Partitioning is
``(days(ts), region)``. Catalog: SQLite in a temp folder (single writer).

Correctness check (before anything is reported): the per-(spec, partition, content) totals of inspect, of both
Spark paths and of the generator itself must be identical, and the fresh-python child must see the same digest.

Peak memory: the fresh-python child records its own ``getrusage(RUSAGE_SELF).ru_maxrss`` right after inspect +
plan (before the correctness digest), so the figure is interpreter + imports + inspect + plan and nothing of the
table building or of Spark in the parent process; its RSS before inspect (after imports) is recorded beside it.

The Spark contenders get ``--spark-timeout`` seconds each (default 900): a timeout or a failure (e.g. driver out of
memory) is recorded in the results as infeasible, with the reason, and that contender is not run again.

Usage::

    .venv/bin/python bench/inspect_scale.py              # 10,000 partitions x 10 files (+ deletes), repeat 3
    .venv/bin/python bench/inspect_scale.py --million    # 100,000 partitions x 10 files, 5 % with deletes, repeat 1
    .venv/bin/python bench/inspect_scale.py --small      # 200 partitions, quick smoke
    .venv/bin/python bench/inspect_scale.py --partitions 2000 --files-per-partition 5 --repeat 5 --profile

Results: ``bench/results/inspect_scale.json`` + ``.txt`` (``inspect_scale_small.*`` for ``--small``,
``inspect_scale_1m.*`` for ``--million``).
Absolute times are noisy: the machine has 2 cores and other people run Spark on it concurrently.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as _dt
import gc
import hashlib
import io
import json
import os
import platform
import pstats
import random
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

from lib.common import BENCH_DIR, RESULTS_DIR, ROOT, timing_line  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)

AGG_SCRIPT = BENCH_DIR / "lib" / "spark_files_agg.py"

CATALOG_NAME = "bench"
NAMESPACE = "ns"
TABLE = "t"
TABLE_NAME = f"{NAMESPACE}.{TABLE}"
SPARK_TABLE = f"{CATALOG_NAME}.{TABLE_NAME}"

GOAL_SPEEDUP_VS_SPARK_SUBMIT = 10.0
GOAL_INSPECT_PLAN_S = 10.0
GOAL_PARTITIONS, GOAL_FILES = 10_000, 100_000
# The 1M case: a neglected streaming table.
MILLION_PARTITIONS, MILLION_FILES_PER_PARTITION, MILLION_DELETE_FRACTION = 100_000, 10, 0.05
MILLION_FILES_PER_COMMIT = 100_000
GOAL_1M_FILES = 1_000_000
GOAL_1M_INSPECT_PLAN_S = 15.0
GOAL_1M_PEAK_BYTES = 2 * 1024**3
GOAL_1M_REPLAN_S = 1.0  # re-plan after a one-partition commit, with the watcher's caches
GIB = 1024**3

REGIONS = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1", "eu-west-1", "eu-west-2",
    "eu-west-3", "eu-central-1", "eu-north-1", "eu-south-1", "me-south-1", "af-south-1", "ap-south-1",
    "ap-east-1", "ap-northeast-1", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2",
)
FIRST_DAY = _dt.date(2023, 1, 1)
EPOCH = _dt.date(1970, 1, 1)
MB = 1024 * 1024

# Content ids of the Iceberg spec: 0 data, 1 position deletes, 2 equality deletes.
DATA, POS, EQ = 0, 1, 2

StatKey = tuple[int, tuple[Any, ...], int]  # (spec_id, partition values (internal repr), content)
Stats = dict[StatKey, tuple[int, int, int]]  # -> (file count, bytes, records)


# ------------------------------------------------------------------------------------------------------------
# Table generation
# ------------------------------------------------------------------------------------------------------------
def partition_values(n: int) -> list[tuple[int, str]]:
    """``n`` partitions (days since epoch, region): ``len(REGIONS)`` regions per day, consecutive days."""
    first = (FIRST_DAY - EPOCH).days
    per_day = min(len(REGIONS), n)
    return [(first + i // per_day, REGIONS[i % per_day]) for i in range(n)]


def day_string(day: int) -> str:
    return (EPOCH + _dt.timedelta(days=day)).isoformat()


def data_file_size(rng: random.Random) -> int:
    """Mostly small streaming-writer files, some compacted large ones (target 512 MB)."""
    if rng.random() < 0.25:
        return rng.randint(256 * MB, 512 * MB)
    return int(min(200 * MB, max(64 * 1024, rng.lognormvariate(15.5, 1.2))))  # median ~5 MB


class Generator:
    """Deterministic description of the benchmark table (what we register, hence what every path must see)."""

    def __init__(self, partitions: int, files_per_partition: int, delete_fraction: float, eq_fraction: float, seed: int):
        self.partitions = partition_values(partitions)
        self.files_per_partition = files_per_partition
        self.rng = random.Random(seed)
        self.delete_fraction = delete_fraction
        self.eq_fraction = eq_fraction
        self.expected: dict[StatKey, list[int]] = defaultdict(lambda: [0, 0, 0])
        self.data_paths: dict[tuple[int, str], list[str]] = defaultdict(list)

    def _count(self, part: tuple[int, str], content: int, size: int, records: int) -> None:
        acc = self.expected[(0, part, content)]
        acc[0] += 1
        acc[1] += size
        acc[2] += records

    def data_files(self, location: str) -> Iterable[tuple[tuple[int, str], int, str, int, int]]:
        """(partition, round, path, size, records) ordered by round then partition: a writer that appends one
        file to every partition per batch (so files of one partition have different sequence numbers)."""
        rng = self.rng
        for rnd in range(self.files_per_partition):
            for day, region in self.partitions:
                size = data_file_size(rng)
                records = max(1, size // rng.randint(80, 160))
                path = f"{location}/data/ts_day={day_string(day)}/region={region}/{rnd:05d}-{rng.getrandbits(64):016x}.parquet"
                self.data_paths[(day, region)].append(path)
                self._count((day, region), DATA, size, records)
                yield (day, region), rnd, path, size, records

    def delete_files(self, location: str) -> list[dict[str, Any]]:
        rng = self.rng
        chosen = sorted(rng.sample(range(len(self.partitions)), round(len(self.partitions) * self.delete_fraction)))
        out: list[dict[str, Any]] = []
        for idx in chosen:
            part = self.partitions[idx]
            day, region = part
            base = f"{location}/data/ts_day={day_string(day)}/region={region}"
            for _ in range(rng.randint(1, 3)):
                records = rng.randint(1, 2000)
                size = 1500 + records * rng.randint(20, 40)
                ref = rng.choice(self.data_paths[part]) if rng.random() < 0.5 else None
                out.append(dict(content=POS, partition=part, path=f"{base}/pos-{rng.getrandbits(64):016x}.parquet",
                                size=size, records=records, referenced=ref))
                self._count(part, POS, size, records)
            if rng.random() < self.eq_fraction:
                for _ in range(rng.randint(1, 2)):
                    records = rng.randint(1, 1000)
                    size = 1200 + records * rng.randint(10, 20)
                    out.append(dict(content=EQ, partition=part, path=f"{base}/eq-{rng.getrandbits(64):016x}.parquet",
                                    size=size, records=records, referenced=None))
                    self._count(part, EQ, size, records)
        return out

    def expected_stats(self) -> Stats:
        return {k: (v[0], v[1], v[2]) for k, v in self.expected.items()}


def create_table(catalog_cfg: Any) -> Any:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    catalog = catalog_cfg.load()
    catalog.create_namespace(NAMESPACE)
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "region", StringType(), required=True),
        NestedField(4, "payload", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=3, field_id=1001, transform=IdentityTransform(), name="region"),
    )
    return catalog.create_table(
        TABLE_NAME, schema, partition_spec=spec,
        properties={"format-version": "2", "write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
                    "write.merge.mode": "merge-on-read"},
    )


def append_data_files(table: Any, gen: Generator, files_per_commit: int) -> int:
    """Register the data files with pyiceberg fast appends; returns the number of commits (= manifests)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    pack_q = struct.Struct("<q").pack
    spec_id = table.spec().spec_id
    commits = 0
    batch: list[Any] = []

    total = len(gen.partitions) * gen.files_per_partition
    done = 0
    t0 = time.perf_counter()

    def flush() -> None:
        nonlocal commits, batch, done
        if not batch:
            return
        with table.transaction() as tx:
            with tx.update_snapshot().fast_append() as append:
                for f in batch:
                    append.append_data_file(f)
        commits += 1
        done += len(batch)
        batch = []
        print(f"\n    commit {commits}: {done}/{total} data files, {time.perf_counter() - t0:.1f} s", end="", flush=True)

    next_id = 0
    for (day, region), rnd, path, size, records in gen.data_files(table.location()):
        ts_lo = day * 86_400_000_000 + rnd * 1_000_000
        ts_hi = ts_lo + 3_600_000_000
        df = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=Record(day, region),
            record_count=records,
            file_size_in_bytes=size,
            column_sizes={1: records * 4, 2: records * 3, 3: 200, 4: size - records * 7 - 200},
            value_counts={1: records, 2: records, 3: records, 4: records},
            null_value_counts={1: 0, 2: 0, 3: 0, 4: records // 50},
            nan_value_counts={},
            lower_bounds={1: pack_q(next_id), 2: pack_q(ts_lo), 3: region.encode(), 4: b"aaaaaaaaaaaaaaaa"},
            upper_bounds={1: pack_q(next_id + records - 1), 2: pack_q(ts_hi), 3: region.encode(), 4: b"zzzzzzzzzzzzzzzz"},
            split_offsets=[4],
            sort_order_id=0,
        )
        df.spec_id = spec_id
        next_id += records
        batch.append(df)
        if len(batch) >= files_per_commit:
            flush()
    flush()
    return commits


def add_delete_files(spark: Any, deletes: list[dict[str, Any]], commits: int = 2) -> dict[str, Any]:
    """Register delete files through the Iceberg Java API (pyiceberg 0.12 cannot write delete manifests)."""
    jvm = spark.sparkContext._jvm
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, SPARK_TABLE)
    jtable.refresh()
    spec = jtable.spec()
    file_metadata = jvm.org.apache.iceberg.FileMetadata
    parquet = jvm.org.apache.iceberg.FileFormat.PARQUET
    eq_ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    eq_ids[0] = 1  # equality on "id"
    paths: dict[tuple[int, str], str] = {}

    referenced_supported = True
    chunks = [deletes[i::commits] for i in range(commits)] if deletes else []
    t0 = time.perf_counter()
    for n, chunk in enumerate(chunks, 1):
        if not chunk:
            continue
        print(f"\n    row delta {n}/{len(chunks)}: {len(chunk)} delete files, {time.perf_counter() - t0:.1f} s",
              end="", flush=True)
        row_delta = jtable.newRowDelta()
        for d in chunk:
            part = d["partition"]
            ppath = paths.get(part)
            if ppath is None:
                ppath = paths[part] = f"ts_day={day_string(part[0])}/region={part[1]}"
            builder = file_metadata.deleteFileBuilder(spec)
            builder = builder.ofPositionDeletes() if d["content"] == POS else builder.ofEqualityDeletes(eq_ids)
            builder = (builder.withPath(d["path"]).withFormat(parquet).withFileSizeInBytes(d["size"])
                       .withRecordCount(d["records"]).withPartitionPath(ppath))
            if d["referenced"] is not None and referenced_supported:
                try:
                    builder = builder.withReferencedDataFile(d["referenced"])
                except Exception:  # older runtime: file-scoped position deletes become partition-scoped
                    referenced_supported = False
            row_delta = row_delta.addDeletes(builder.build())
        row_delta.commit()
    return {"commits": len([c for c in chunks if c]), "referenced_data_file_supported": referenced_supported}


# ------------------------------------------------------------------------------------------------------------
# The measured paths
# ------------------------------------------------------------------------------------------------------------
def stats_from_state(state: Any) -> Stats:
    from compaction.core.model import DeleteContent

    acc: dict[StatKey, list[int]] = defaultdict(lambda: [0, 0, 0])
    for p in state.partitions:
        values = tuple(f.value for f in p.key.fields)
        if p.data_files:
            a = acc[(p.key.spec_id, values, DATA)]
            for f in p.data_files:
                a[0] += 1
                a[1] += f.size_bytes
                a[2] += f.record_count
        for d in p.delete_files:
            a = acc[(p.key.spec_id, values, EQ if d.content is DeleteContent.EQUALITY else POS)]
            a[0] += 1
            a[1] += d.size_bytes
            a[2] += d.record_count
    return {k: (v[0], v[1], v[2]) for k, v in acc.items()}


def stats_from_rows(rows: Iterable[Any]) -> Stats:
    out: Stats = {}
    for spec_id, values, content, count, size, records in rows:
        key = (int(spec_id), tuple(values), int(content))
        if key in out:
            raise AssertionError(f"duplicate Spark row for {key}")
        out[key] = (int(count), int(size), int(records))
    return out


def stats_digest(stats: Stats) -> str:
    return hashlib.sha256(json.dumps(sorted([list(k[:1]) + list(k[1]) + [k[2]] + list(v) for k, v in stats.items()]),
                                     separators=(",", ":")).encode()).hexdigest()


def inspect_and_plan(catalog_cfg: Any) -> tuple[float, float, float, float, Any, Any]:
    """One measured run: (inspect seconds, plan seconds, inspect CPU seconds, plan CPU seconds, state, plan)."""
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table

    c0, t0 = time.process_time(), time.perf_counter()
    state = inspect_table(catalog_cfg, TABLE_NAME)
    c1, t1 = time.process_time(), time.perf_counter()
    result = plan(state, CompactionPolicy.resolve(state.properties), "auto", _dt.datetime.now(_dt.timezone.utc))
    c2, t2 = time.process_time(), time.perf_counter()
    return t1 - t0, t2 - t1, c1 - c0, c2 - c1, state, result


def children_cpu() -> float:
    """CPU seconds (user + system) of the terminated, waited-for child processes so far: around one
    subprocess.run, the CPU time of that child (spark-submit execs the JVM, so that is the JVM's)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_main(config_json: str) -> int:
    """``--child``: inspect + plan in a fresh interpreter; prints one JSON line."""
    from compaction.catalog import CatalogConfig

    cfg = json.loads(config_json)
    catalog_cfg = CatalogConfig(cfg["name"], cfg["properties"])
    rss_before = current_rss_bytes()
    t_inspect, t_plan, _, _, state, result = inspect_and_plan(catalog_cfg)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB; before the digest below
    rss_after = current_rss_bytes()
    print(json.dumps({"inspect_s": t_inspect, "plan_s": t_plan, "partitions": len(state.partitions),
                      "decisions": len(result.decisions), "peak_rss_bytes": peak,
                      "rss_before_inspect_bytes": rss_before, "rss_after_plan_bytes": rss_after,
                      "digest": stats_digest(stats_from_state(state))}))
    return 0


def current_rss_bytes() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_fresh_python(catalog_cfg: Any) -> tuple[float, float, dict[str, Any]]:
    """(wall seconds, CPU seconds, the child's JSON line)."""
    cfg = json.dumps({"name": catalog_cfg.name, "properties": dict(catalog_cfg.properties)})
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", cfg],
                          capture_output=True, text=True, cwd=str(ROOT), env=child_env())
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"fresh-python inspect failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return elapsed, cpu, json.loads(proc.stdout.strip().splitlines()[-1])


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_GATEWAY", "_PYSPARK"))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def spark_submit_command(catalog_cfg: Any, script: Path, out_json: Path, workdir: Path) -> list[str]:
    """The spark-submit a DAG would run, from compaction.spark.session (the single source of Spark conf/jars)."""
    from compaction.spark.session import SparkSettings, jar_paths, spark_conf

    settings = SparkSettings.from_environment(app_name="inspect-scale-files-agg")
    submit = ROOT / ".venv" / "bin" / "spark-submit"
    if not submit.exists():
        submit = Path(shutil.which("spark-submit") or "spark-submit")
    cmd = [str(submit), "--master", settings.master, "--name", settings.app_name]
    jars = [str(j) for j in jar_paths(settings)]
    if jars:
        cmd += ["--jars", ",".join(jars), "--driver-class-path", os.pathsep.join(jars)]
    secrets = catalog_cfg.spark_secret_conf()
    if secrets:  # never in argv
        props = workdir / "secret.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in secrets.items()))
        props.chmod(0o600)
        cmd += ["--properties-file", str(props)]
    for key, value in sorted(spark_conf(settings, [catalog_cfg]).items()):
        cmd += ["--conf", f"{key}={value}"]
    return cmd + [str(script), SPARK_TABLE, str(out_json)]


class Infeasible(Exception):
    """A Spark contender that timed out or failed (recorded in the results, not run again)."""


def _error_tail(text: str, markers: tuple[str, ...] = ("OutOfMemoryError", "Exception", "Error")) -> str:
    """The most telling line of a JVM error output (the first line naming an OOM / exception), shortened."""
    for marker in markers:
        for line in text.splitlines():
            if marker in line:
                return line.strip()[:300]
    return text.strip().splitlines()[-1][:300] if text.strip() else "no output"


def run_spark_submit(cmd: list[str], out_json: Path, timeout: float) -> tuple[float, float, list[Any]]:
    """(wall seconds, CPU seconds of the spark-submit process tree that was waited for, the rows)."""
    if out_json.exists():
        out_json.unlink()
    cpu0, t0 = children_cpu(), time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(out_json.parent), env=child_env(),
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Infeasible(f"spark-submit did not finish within {timeout:g} s (killed)") from None
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode != 0 or "ROWS " not in proc.stdout:
        print(f"spark-submit failed ({proc.returncode}):\nSTDOUT:\n{proc.stdout[-2000:]}\n"
              f"STDERR:\n{proc.stderr[-6000:]}", file=sys.stderr, flush=True)
        raise Infeasible(f"spark-submit failed after {elapsed:.0f} s (exit {proc.returncode}): "
                         f"{_error_tail(proc.stderr)}")
    return elapsed, cpu, json.loads(out_json.read_text())


def run_in_session(spark: Any, timeout: float) -> tuple[float, list[Any]]:
    """The files aggregation in this process's SparkSession; its Spark jobs are cancelled after ``timeout``."""
    from lib.spark_files_agg import aggregate

    sc = spark.sparkContext
    group = f"inspect-scale-files-agg-{time.monotonic_ns()}"
    timed_out = threading.Event()

    def cancel() -> None:
        timed_out.set()
        sc.cancelJobGroup(group)

    sc.setJobGroup(group, "inspect_scale files aggregation", interruptOnCancel=True)
    timer = threading.Timer(timeout, cancel)
    timer.daemon = True
    t0 = time.perf_counter()
    timer.start()
    try:
        rows = aggregate(spark, SPARK_TABLE)
    except Exception as e:
        elapsed = time.perf_counter() - t0
        if timed_out.is_set():
            raise Infeasible(f"in-session Spark did not finish within {timeout:g} s (jobs cancelled)") from None
        raise Infeasible(f"in-session Spark failed after {elapsed:.0f} s: {_error_tail(str(e))}") from None
    finally:
        timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)
    return time.perf_counter() - t0, rows


# ------------------------------------------------------------------------------------------------------------
# Reporting helpers
# ------------------------------------------------------------------------------------------------------------
def summary(samples: list[float]) -> dict[str, Any]:
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "samples_s": [round(s, 4) for s in samples]}


def compare(name: str, got: Stats, expected: Stats) -> None:
    if got == expected:
        return
    missing = sorted(set(expected) - set(got))[:5]
    extra = sorted(set(got) - set(expected))[:5]
    differ = [(k, got[k], expected[k]) for k in sorted(set(got) & set(expected)) if got[k] != expected[k]][:5]
    raise AssertionError(f"{name}: per-partition statistics differ from the generator's: {len(got)} vs "
                         f"{len(expected)} keys; missing {missing}; extra {extra}; different {differ}")


def _profile_label(code: Any) -> tuple[str, int, str]:
    """cProfile's function label, made unique for generated code: pstats keys functions by (file, line, name) and
    *overwrites* on a clash, so the two compiled manifest block readers (with / without bounds) and the dataclass
    ``__init__`` of every class (all ``<string>:2(__init__)``) would hide each other's figures. Generated
    functions get their argument names and a digest of their bytecode appended."""
    if isinstance(code, str):
        return ("~", 0, code)
    name = code.co_name
    if code.co_filename.startswith("<"):
        args = f"({', '.join(code.co_varnames[1:code.co_argcount])})" if name == "__init__" else ""
        name = f"{name}{args}#{hashlib.sha1(code.co_code).hexdigest()[:6]}"
    return (code.co_filename, code.co_firstlineno, name)


def profile_inspect_plan(catalog_cfg: Any, path: Path) -> list[dict[str, Any]]:
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table

    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    state = inspect_table(catalog_cfg, TABLE_NAME)
    plan(state, CompactionPolicy.resolve(state.properties), "auto", _dt.datetime.now(_dt.timezone.utc))
    prof.disable()
    original_label = cProfile.label
    cProfile.label = _profile_label  # used by Profile.snapshot_stats
    buf = io.StringIO()
    try:
        st = pstats.Stats(prof, stream=buf)  # snapshots the profile's stats
    finally:
        cProfile.label = original_label
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumulative").print_stats(40)
    path.write_text(buf.getvalue())
    top = []
    raw = st.stats  # type: ignore[attr-defined]
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in sorted(
            raw.items(), key=lambda kv: kv[1][2], reverse=True)[:15]:
        top.append({"function": f"{Path(filename).name}:{line}({func})", "ncalls": ncalls,
                    "tottime_s": round(tottime, 3), "cumtime_s": round(cumtime, 3)})
    return top


def breakdown_inspect_plan(catalog_cfg: Any) -> dict[str, float]:
    """Where inspect + plan spend their time, one unprofiled run of each part (seconds): loading the table,
    decoding the manifests (``live_rows``), building the TableState from the rows (table_state - decoding), the
    planner without the plan id, and the plan's content id (``plan()`` - ``plan(plan_id=...)``: each decision's
    canonical JSON and SHA-256, then one SHA-256 over the digests, compaction/core/plan.py)."""
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import load_table, table_state
    from compaction.metadata.manifests import BOUNDS_DELETES, live_rows

    gc.collect()
    t0 = time.perf_counter()
    identity, table = load_table(catalog_cfg, TABLE_NAME)
    t1 = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as table_state does
    try:
        rows = sum(len(r) for _, r in live_rows(table, bounds=BOUNDS_DELETES))
    finally:
        if gc_was_enabled:
            gc.enable()
    t2 = time.perf_counter()
    state = table_state(table, identity)
    t3 = time.perf_counter()
    policy = CompactionPolicy.resolve(state.properties)
    now = _dt.datetime.now(_dt.timezone.utc)
    plan(state, policy, "auto", now, plan_id="fixed")
    t4 = time.perf_counter()
    plan(state, policy, "auto", now)
    t5 = time.perf_counter()
    return {"load_table_s": t1 - t0, "manifest_decode_s": t2 - t1, "live_rows": rows,
            "table_state_s": t3 - t2, "table_state_build_s": max(0.0, (t3 - t2) - (t2 - t1)),
            "plan_without_id_s": t4 - t3, "plan_s": t5 - t4, "plan_content_id_s": max(0.0, (t5 - t4) - (t4 - t3))}


# ------------------------------------------------------------------------------------------------------------
# Re-planning after a commit (the health watcher's path)
# ------------------------------------------------------------------------------------------------------------
def _one_partition_rewrite(spark: Any, partition: Any) -> dict[str, Any]:
    """A compaction-like commit of one partition through Iceberg's Java API: its data files replaced by one new
    file, its delete files removed (metadata only; no data file is read by inspect or plan)."""
    jvm = spark.sparkContext._jvm
    jtable = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, SPARK_TABLE)
    jtable.refresh()
    values = {f.name: f.value for f in partition.fields}
    day, region = int(values["ts_day"]), str(values["region"])
    E = jvm.org.apache.iceberg.expressions.Expressions
    and_ = getattr(E, "and")  # a Python keyword
    expr = and_(E.equal("region", region), and_(E.greaterThanOrEqual("ts", day * 86_400_000_000),
                                                  E.lessThan("ts", (day + 1) * 86_400_000_000)))
    rewrite = jtable.newRewrite().validateFromSnapshot(jtable.currentSnapshot().snapshotId())
    data, deletes, records, size = set(), set(), 0, 0
    tasks = jtable.newScan().filter(expr).planFiles()
    try:
        it = tasks.iterator()
        while it.hasNext():
            task = it.next()
            f = task.file()
            if f.location() not in data:
                data.add(f.location())
                records += f.recordCount()
                size += f.fileSizeInBytes()
                rewrite = rewrite.deleteFile(f)
            for d in task.deletes():
                key = (d.location(), d.contentOffset())
                if key not in deletes:
                    deletes.add(key)
                    rewrite = rewrite.deleteFile(d)
    finally:
        tasks.close()
    new_file = (jvm.org.apache.iceberg.DataFiles.builder(jtable.spec())
                .withPath(f"{jtable.location()}/data/ts_day={day_string(day)}/region={region}/compacted-0.parquet")
                .withFormat("parquet").withFileSizeInBytes(size).withRecordCount(records)
                .withPartitionPath(f"ts_day={day_string(day)}/region={region}").build())
    rewrite.addFile(new_file).commit()
    return {"partition": partition.label(), "data_files_replaced": len(data), "delete_files_removed": len(deletes)}


def _one_file_append(table: Any, partition: Any) -> dict[str, Any]:
    """A streaming writer's commit: one small data file appended to one partition (pyiceberg fast append)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    values = {f.name: f.value for f in partition.fields}
    df = DataFile.from_args(content=DataFileContent.DATA,
                            file_path=f"{table.location()}/data/appended-{uuid.uuid4().hex}.parquet",
                            file_format=FileFormat.PARQUET, partition=Record(int(values["ts_day"]), values["region"]),
                            record_count=10, file_size_in_bytes=4096)
    df.spec_id = table.spec().spec_id
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            append.append_data_file(df)
    return {"partition": partition.label(), "data_files_added": 1}


def replan_after_commits(spark: Any, catalog_cfg: Any, plan_before: Any) -> dict[str, Any]:
    """What the health watcher pays to re-evaluate the table after a commit touching one partition: load the table,
    inspect with its caches (decoded manifests, the previous state: :class:`TableStateCache`) and plan with the
    previous plan's per-partition work (:class:`PlanCache`), content id included. Each re-plan is checked equal to a
    full inspect + plan of the same snapshot (not timed)."""
    from compaction.core.planner import PlanCache, plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import TableStateCache, load_table, table_state
    from compaction.metadata.manifests import ManifestCache

    manifests, states, plans = ManifestCache(), TableStateCache(), PlanCache()
    now = _dt.datetime.now(_dt.timezone.utc)

    def look() -> tuple[float, float, float, Any, Any, Any]:
        gc.collect()
        t0 = time.perf_counter()
        identity, table = load_table(catalog_cfg, TABLE_NAME)
        t1 = time.perf_counter()
        state = table_state(table, identity, manifest_cache=manifests, state_cache=states)
        t2 = time.perf_counter()
        result = plan(state, CompactionPolicy.resolve(state.properties), "auto", now, cache=plans)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, identity, table, result

    t_load, t_inspect, t_plan, identity, table, first = look()
    out: dict[str, Any] = {"cold_with_caches": {"load_s": round(t_load, 3), "inspect_s": round(t_inspect, 3),
                                                 "plan_s": round(t_plan, 3),
                                                 "total_s": round(t_load + t_inspect + t_plan, 3)}}
    print(f"  re-plan: cold inspect + plan with the watcher's caches {t_load + t_inspect + t_plan:.2f} s", flush=True)
    work = [d.partition for d in plan_before.decisions if str(getattr(d.kind, "value", d.kind)) != "none"]
    quiet = [d.partition for d in plan_before.decisions if str(getattr(d.kind, "value", d.kind)) == "none"]
    # The first rewrite after rewrite_manifests also merges the table's small manifests (Iceberg's merge of every
    # bin of manifests under the target size that holds no new manifest): every manifest changes once. The second
    # is the steady state: the manifest holding the partition's entries is rewritten, the others are kept.
    commits = (("append one data file to one partition", lambda: _one_file_append(table, quiet[0])),
               ("rewrite one partition, manifests merged by it", lambda: _one_partition_rewrite(spark, work[0])),
               ("rewrite another partition (steady state)", lambda: _one_partition_rewrite(spark, work[1])))
    out["after_commit"] = []
    for label, commit in commits:
        info = commit()
        t_load, t_inspect, t_plan, identity, table, result = look()
        full_state = table_state(table, identity)
        full = plan(full_state, CompactionPolicy.resolve(full_state.properties), "auto", now)
        if result.plan_id != full.plan_id or result != full:
            raise AssertionError(f"re-plan after '{label}' differs from a full inspect + plan")
        total = t_load + t_inspect + t_plan
        out["after_commit"].append({
            "commit": label, **info, "manifests": len(table.current_snapshot().manifests(table.io)), "load_s": round(t_load, 3), "inspect_s": round(t_inspect, 3),
            "plan_s": round(t_plan, 3), "total_s": round(total, 3), "rebuilt_partitions": states.rebuilt_partitions,
            "reused_decisions": plans.reused, "decisions": len(result.decisions),
            "manifest_cache": {"hits": manifests.hits, "misses": manifests.misses}})
        print(f"  re-plan after '{label}': {total:.2f} s (load {t_load:.2f}, inspect {t_inspect:.2f}, plan "
              f"{t_plan:.2f}); {states.rebuilt_partitions} partitions rebuilt, {plans.reused} decisions reused; "
              f"equal to a full inspect + plan", flush=True)
    out["full_builds"] = states.full_builds
    return out


def spark_driver_memory() -> str | None:
    """The driver memory both Spark contenders run with (local mode: executors live in the driver JVM)."""
    from compaction.spark.session import SparkSettings, spark_conf

    return spark_conf(SparkSettings.from_environment(), []).get("spark.driver.memory")


def timed(label: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    print(f"  {label} ...", end="", flush=True)
    t0 = time.perf_counter()
    value = fn()
    elapsed = time.perf_counter() - t0
    print(f" {elapsed:.2f} s", flush=True)
    return elapsed, value


# ------------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=None,
                    help="number of partitions (default 10000; --small 200; --million 100000)")
    ap.add_argument("--files-per-partition", type=int, default=10, help="data files per partition (default 10)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="repeats of each measurement; medians are reported (default 3; --million 1)")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help="quick smoke: 200 partitions, results *_small.*")
    size.add_argument("--million", action="store_true",
                      help=f"the 1,000,000-data-file case: {MILLION_PARTITIONS} partitions x "
                           f"{MILLION_FILES_PER_PARTITION} files, delete fraction {MILLION_DELETE_FRACTION}, "
                           f"{MILLION_FILES_PER_COMMIT} files per commit, repeat 1; results *_1m.*")
    ap.add_argument("--delete-fraction", type=float, default=None,
                    help="share of partitions with delete files (default 0.2; --million 0.05)")
    ap.add_argument("--eq-fraction", type=float, default=0.3,
                    help="share of the delete partitions that also get 1-2 equality delete files")
    ap.add_argument("--files-per-commit", type=int, default=None,
                    help="data files per pyiceberg commit (default 20000; --million 100000)")
    ap.add_argument("--manifests", choices=("java", "pyiceberg"), default="java",
                    help="java (default): finally rewrite all manifests with Spark's rewrite_manifests, as on a "
                         "Spark-maintained table; pyiceberg: keep the manifests pyiceberg wrote (one Avro block per "
                         "entry, ~3.5x larger and slower to decode than Java-written ones)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile inspect+plan and time its parts (automatic with --million and when an "
                         "inspect+plan goal is not met)")
    ap.add_argument("--skip-spark-submit", action="store_true", help="debugging only: no spark-submit path")
    ap.add_argument("--spark-timeout", type=float, default=900.0,
                    help="seconds each Spark contender may take before it is reported infeasible (default 900)")
    ap.add_argument("--output", type=Path, default=None, help="result path stem (default bench/results/inspect_scale)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (catalog + metadata)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child_main(args.child)

    if args.million:
        partitions = args.partitions or MILLION_PARTITIONS
        if args.files_per_partition == ap.get_default("files_per_partition"):
            args.files_per_partition = MILLION_FILES_PER_PARTITION
    else:
        partitions = args.partitions or (200 if args.small else GOAL_PARTITIONS)
    if args.repeat is None:
        args.repeat = 1 if args.million else 3
    if args.delete_fraction is None:
        args.delete_fraction = MILLION_DELETE_FRACTION if args.million else 0.2
    if args.files_per_commit is None:
        args.files_per_commit = MILLION_FILES_PER_COMMIT if args.million else 20_000
    if partitions < 1 or args.files_per_partition < 1 or args.repeat < 1 or args.files_per_commit < 1:
        ap.error("--partitions, --files-per-partition, --repeat and --files-per-commit must be >= 1")
    default_stem = "inspect_scale_small" if args.small else "inspect_scale_1m" if args.million else "inspect_scale"
    stem = args.output or (RESULTS_DIR / default_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix="inspect-scale-"))
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    gen = Generator(partitions, args.files_per_partition, args.delete_fraction, args.eq_fraction, args.seed)
    print(f"inspect_scale: {partitions} partitions x {args.files_per_partition} data files, repeat {args.repeat}, "
          f"workdir {workdir}", flush=True)
    spark = None
    try:
        # ---------------- build ----------------
        print("build:", flush=True)
        table = create_table(catalog_cfg)
        t_data, data_commits = timed(f"pyiceberg fast_append of {partitions * args.files_per_partition} data files",
                                     lambda: append_data_files(table, gen, args.files_per_commit))
        deletes = gen.delete_files(table.location())
        t_session, spark = timed("SparkSession start (build_session)",
                                 lambda: build_session([catalog_cfg], SparkSettings.from_environment(
                                     app_name="inspect-scale-bench")))
        t_deletes, delete_info = timed(f"Java API row delta of {len(deletes)} delete files",
                                       lambda: add_delete_files(spark, deletes))
        t_rewrite = None
        if args.manifests == "java":
            print(f"  (rewrite_manifests of {partitions * args.files_per_partition + len(deletes)} entries: no "
                  f"progress output from Spark; ~47 s per 100k entries on this machine)", flush=True)
            t_rewrite, _ = timed("Spark rewrite_manifests (Java-written manifests, clustered by partition)",
                                 lambda: spark.sql(f"CALL {CATALOG_NAME}.system.rewrite_manifests(table => "
                                                   f"'{TABLE_NAME}')").collect())
        expected = gen.expected_stats()
        table = catalog_cfg.load().load_table(TABLE_NAME)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        manifests = snapshot.manifests(table.io)
        n_data = sum(v[0] for k, v in expected.items() if k[2] == DATA)
        n_pos = sum(v[0] for k, v in expected.items() if k[2] == POS)
        n_eq = sum(v[0] for k, v in expected.items() if k[2] == EQ)
        table_info = {
            "partitions": partitions, "data_files": n_data, "position_delete_files": n_pos,
            "equality_delete_files": n_eq, "partitions_with_deletes": len({k[1] for k in expected if k[2] != DATA}),
            "stat_rows": len(expected), "snapshots": len(table.metadata.snapshots), "manifests": len(manifests),
            "manifest_bytes": sum(m.manifest_length for m in manifests), "manifests_written_by": args.manifests,
            "format_version": 2,
            "partitioning": "days(ts), identity(region)",
        }
        print(f"  table: {table_info}", flush=True)

        # ---------------- measurements (interleaved) ----------------
        out_json = workdir / "spark_submit_rows.json"
        script = workdir / AGG_SCRIPT.name
        shutil.copyfile(AGG_SCRIPT, script)
        submit_cmd = spark_submit_command(catalog_cfg, script, out_json, workdir)
        samples: dict[str, list[float]] = defaultdict(list)
        load_before = os.getloadavg()
        checks: dict[str, Any] = {}
        infeasible: dict[str, str] = {}  # Spark contender -> why it was not measured (timeout / failure)
        memory: dict[str, list[int]] = defaultdict(list)
        last_state = last_plan = None
        for r in range(1, args.repeat + 1):
            print(f"repeat {r}/{args.repeat}:", flush=True)
            gc.collect()
            cpu0 = time.process_time()
            t_i, t_p, c_i, c_p, last_state, last_plan = inspect_and_plan(catalog_cfg)
            samples["inspect_plan_cpu"].append(time.process_time() - cpu0)
            samples["inspect_cpu"].append(c_i)
            samples["plan_cpu"].append(c_p)
            samples["inspect"].append(t_i)
            samples["plan"].append(t_p)
            samples["inspect_plan"].append(t_i + t_p)
            print(f"  inspect {t_i:.2f} s + plan {t_p:.2f} s = {t_i + t_p:.2f} s", flush=True)
            compare("inspect", stats_from_state(last_state), expected)

            t_f, c_f, child = run_fresh_python(catalog_cfg)
            samples["fresh_python_inspect_plan"].append(t_f)
            samples["fresh_python_cpu"].append(c_f)
            samples["fresh_python_inner_inspect"].append(child["inspect_s"])
            samples["fresh_python_inner_plan"].append(child["plan_s"])
            samples["fresh_python_inner_inspect_plan"].append(child["inspect_s"] + child["plan_s"])
            for key in ("peak_rss_bytes", "rss_before_inspect_bytes", "rss_after_plan_bytes"):
                if child.get(key) is not None:
                    memory[key].append(int(child[key]))
            print(f"  fresh python process {t_f:.2f} s (inspect {child['inspect_s']:.2f} + plan "
                  f"{child['plan_s']:.2f}), peak RSS {child['peak_rss_bytes'] / GIB:.2f} GiB", flush=True)
            if child["digest"] != stats_digest(expected) or child["decisions"] != partitions:
                raise AssertionError(f"fresh-python child saw different statistics: {child}")

            if "spark_in_session" not in infeasible:
                try:
                    t_s, rows = run_in_session(spark, args.spark_timeout)
                except Infeasible as e:
                    infeasible["spark_in_session"] = str(e)
                    print(f"  spark in-session files aggregation INFEASIBLE: {e}", flush=True)
                else:
                    samples["spark_in_session"].append(t_s)
                    print(f"  spark in-session files aggregation {t_s:.2f} s ({len(rows)} rows)", flush=True)
                    compare("spark in-session", stats_from_rows(rows), expected)

            if not args.skip_spark_submit and "spark_submit" not in infeasible:
                try:
                    t_ss, c_ss, rows = run_spark_submit(submit_cmd, out_json, args.spark_timeout)
                except Infeasible as e:
                    infeasible["spark_submit"] = str(e)
                    print(f"  spark-submit files aggregation INFEASIBLE: {e}", flush=True)
                else:
                    samples["spark_submit"].append(t_ss)
                    samples["spark_submit_cpu"].append(c_ss)
                    print(f"  spark-submit files aggregation {t_ss:.2f} s ({len(rows)} rows)", flush=True)
                    compare("spark-submit", stats_from_rows(rows), expected)
        checks["per_partition_stats_identical"] = ["generator", "inspect", "fresh_python"] + [
            name for name in ("spark_in_session", "spark_submit") if name in samples]
        checks["stat_rows"] = len(expected)
        checks["digest"] = stats_digest(expected)
        assert last_plan is not None and len(last_plan.decisions) == partitions, "plan must decide every partition"
        kinds: dict[str, int] = defaultdict(int)
        for d in last_plan.decisions:
            kinds[str(getattr(d.kind, "value", d.kind))] += 1
        checks["plan_decisions"] = dict(sorted(kinds.items()))
        checks["plan_groups"] = len(last_plan.groups)
        checks["plan_deferred"] = len(last_plan.deferred)

        print("re-plan after a commit (the health watcher's caches):", flush=True)
        replan = replan_after_commits(spark, catalog_cfg, last_plan)

        load_after = os.getloadavg()
        times = {k: summary(v) for k, v in samples.items()}
        ip = times["inspect_plan"]["median_s"]
        ratios = {"fresh_python_over_inspect_plan": times["fresh_python_inspect_plan"]["median_s"] / ip}
        if "spark_in_session" in times:
            ratios["spark_in_session_over_inspect_plan"] = times["spark_in_session"]["median_s"] / ip
        if "spark_submit" in times:
            ratios["spark_submit_over_inspect_plan"] = times["spark_submit"]["median_s"] / ip
            ratios["spark_submit_over_fresh_python"] = (
                times["spark_submit"]["median_s"] / times["fresh_python_inspect_plan"]["median_s"])
            ratios["spark_submit_cpu_over_inspect_plan_cpu"] = (
                times["spark_submit_cpu"]["median_s"] / times["inspect_plan_cpu"]["median_s"])
        peak = max(memory["peak_rss_bytes"]) if memory["peak_rss_bytes"] else None
        mem = {
            "method": "fresh-python child that only imports, inspects and plans: getrusage(RUSAGE_SELF).ru_maxrss "
                      "right after plan (max over repeats); RSS before inspect = interpreter + bench imports",
            "peak_rss_bytes": peak,
            "peak_rss_samples_bytes": memory["peak_rss_bytes"],
            "rss_before_inspect_bytes": max(memory["rss_before_inspect_bytes"], default=None),
            "rss_after_plan_bytes": max(memory["rss_after_plan_bytes"], default=None),
        }
        # Goals are judged at their own table size only (None = not applicable to this run).
        at_100k = partitions == GOAL_PARTITIONS and n_data == GOAL_FILES
        at_1m = n_data >= GOAL_1M_FILES
        in_session = times.get("spark_in_session", {}).get("median_s")
        goals: dict[str, bool | None] = {
            "spark_submit_at_least_10x_slower": (ratios["spark_submit_over_inspect_plan"] >= GOAL_SPEEDUP_VS_SPARK_SUBMIT
                                                 if "spark_submit_over_inspect_plan" in ratios else None),
            "inspect_plan_under_10s_at_10k_partitions_100k_files": (ip < GOAL_INSPECT_PLAN_S) if at_100k else None,
            "inspect_plan_faster_than_spark_in_session_at_100k_files": (
                (ip < in_session if in_session is not None else False) if at_100k else None),
            "inspect_plan_at_most_15s_at_1m_files": (ip <= GOAL_1M_INSPECT_PLAN_S) if at_1m else None,
            "peak_memory_at_most_2gb_at_1m_files": (
                (peak is not None and peak <= GOAL_1M_PEAK_BYTES) if at_1m else None),
            # Judged on the steady-state commits (the manifest-merging one re-reads every manifest: reported apart).
            "replan_after_one_partition_commit_under_1s_at_1m_files": (
                all(c["total_s"] < GOAL_1M_REPLAN_S for c in replan["after_commit"] if "merged" not in c["commit"])
                if at_1m else None),
        }
        time_goals = ("inspect_plan_under_10s_at_10k_partitions_100k_files",
                      "inspect_plan_faster_than_spark_in_session_at_100k_files", "inspect_plan_at_most_15s_at_1m_files",
                      "peak_memory_at_most_2gb_at_1m_files")

        hot_spots: dict[str, Any] | None = None
        if args.profile or args.million or any(goals[g] is False for g in time_goals):
            prof_path = stem.with_name(stem.name + "_profile.txt")
            print(f"profiling inspect+plan -> {prof_path}", flush=True)
            hot_spots = {"file": str(prof_path.relative_to(ROOT) if prof_path.is_relative_to(ROOT) else prof_path),
                         "top_tottime": profile_inspect_plan(catalog_cfg, prof_path), "breakdown": None}
            print("timing the parts of inspect+plan (unprofiled)", flush=True)
            hot_spots["breakdown"] = {k: (round(v, 3) if isinstance(v, float) else v)
                                      for k, v in breakdown_inspect_plan(catalog_cfg).items()}

        notes = explain(times, ratios, hot_spots, at_1m)

        import pyiceberg
        import pyspark

        result = {
            "benchmark": "inspect_scale",
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([".venv/bin/python", "bench/inspect_scale.py", *(argv if argv is not None else sys.argv[1:])]),
            "config": {"case": "1m" if args.million else "small" if args.small else "default",
                       "partitions": partitions, "files_per_partition": args.files_per_partition,
                       "repeat": args.repeat, "delete_fraction": args.delete_fraction,
                       "eq_fraction": args.eq_fraction, "files_per_commit": args.files_per_commit, "seed": args.seed,
                       "spark_timeout_s": args.spark_timeout, "spark_driver_memory": spark_driver_memory()},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "pyiceberg": pyiceberg.__version__,
                        "pyspark": pyspark.__version__, "platform": platform.platform(),
                        "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
                        "loadavg_1_5_15_after": [round(x, 2) for x in load_after],
                        "note": "2-core machine shared with other people's Spark jobs: absolute times are noisy"},
            "table": table_info,
            "build_s": {"pyiceberg_data_files": round(t_data, 3), "data_commits": data_commits,
                        "spark_session_start": round(t_session, 3), "java_delete_files": round(t_deletes, 3),
                        "spark_rewrite_manifests": None if t_rewrite is None else round(t_rewrite, 3),
                        **delete_info},
            "times": times,
            "memory": mem,
            "infeasible": infeasible,
            "ratios": ratios,
            "goals": goals,
            "checks": checks,
            "spark_submit_command": [c if not c.startswith(str(workdir)) else "<tmp>/" + Path(c).name for c in submit_cmd],
            "replan": replan,
            "profile": hot_spots,
            "notes": notes,
        }
        text = render(result)
        print("\n" + text, flush=True)
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        stem.with_suffix(".txt").write_text(text + "\n")
        print(f"\nwrote {stem.with_suffix('.json')} and {stem.with_suffix('.txt')}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def explain(times: dict[str, Any], ratios: dict[str, float], hot_spots: dict[str, Any] | None,
            at_1m: bool) -> list[str]:
    """Plain-language notes on figures that need them (from this run's numbers)."""
    notes = []
    ip = times["inspect_plan"]["median_s"]
    ratio = ratios.get("spark_submit_over_inspect_plan")
    if at_1m and ratio is not None and ratio < GOAL_SPEEDUP_VS_SPARK_SUBMIT:
        notes.append(
            f"the >=10x-vs-spark-submit goal was set for the 100k case; at this size spark-submit is only {ratio:.1f}x "
            f"slower: most of its {times['spark_submit']['median_s']:.0f} s is the fixed JVM/Spark start and table load "
            f"(it takes ~18-20 s at 100k files too), while inspect+plan grows linearly with the number of files")
    in_session = times.get("spark_in_session", {}).get("median_s")
    if in_session is not None and in_session < ip:
        text = (f"in-session Spark is {ip / in_session:.1f}x faster than inspect+plan here (no goal at this size): it "
                f"decodes the manifests in the JVM on both cores (local[2]) and only aggregates, while inspect+plan is "
                f"one Python thread that also builds one object per file and decides and plans every partition")
        b = (hot_spots or {}).get("breakdown")
        if b:
            text += (f". Of inspect+plan, {b['manifest_decode_s']:.1f} s is Avro decoding (pure Python over "
                     f"pyiceberg's Cython decoder, incl. zlib), {b['table_state_build_s']:.1f} s building the "
                     f"TableState, {b['plan_without_id_s']:.1f} s the planner and {b['plan_content_id_s']:.1f} s the "
                     f"plan's content id (each decision's canonical JSON and its SHA-256). What would close the gap: "
                     f"decoding manifests in 2 worker processes (rows pickled back; doubles the decode memory and "
                     f"competes with Spark jobs for the 2 cores), a TableState built without one object per file "
                     f"(columnar), and writing a decision's JSON only when the plan is stored (its digest from the "
                     f"analysis' figures). None is a small, clearly safe change, so none is made here; a re-plan "
                     f"after a commit, which the watcher does, reuses all of it (re-plan section)")
        notes.append(text)
    return notes


def render(r: dict[str, Any]) -> str:
    t, ti, ra = r["times"], r["table"], r["ratios"]
    lines = [
        f"inspect_scale  {r['created_at']}  ({r['machine']['cpus']} cores, shared; absolute times are noisy)",
        f"table: {ti['partitions']} partitions, {ti['data_files']} data files, {ti['position_delete_files']} position + "
        f"{ti['equality_delete_files']} equality delete files ({ti['partitions_with_deletes']} partitions with deletes), "
        f"{ti['manifests']} manifests ({ti['manifests_written_by']}-written), {ti['manifest_bytes'] / MB:.1f} MB of manifests",
        f"build: pyiceberg data files {r['build_s']['pyiceberg_data_files']:.1f} s ({r['build_s']['data_commits']} commits), "
        f"Java delete files {r['build_s']['java_delete_files']:.1f} s, SparkSession start "
        f"{r['build_s']['spark_session_start']:.1f} s"
        + (f", Spark rewrite_manifests {r['build_s']['spark_rewrite_manifests']:.1f} s"
           if r["build_s"]["spark_rewrite_manifests"] is not None else ""),
        f"load average (1 min) {r['machine']['loadavg_1_5_15_before'][0]} before, "
        f"{r['machine']['loadavg_1_5_15_after'][0]} after the measurements",
        (f"median of {r['config']['repeat']} (min-max):" if r["config"]["repeat"] > 1 else
         "single run (--repeat 1: each contender measured once, the table is slow to build; min = max = median):"),
    ]
    rows = [
        ("inspect (pyiceberg manifests -> TableState)", "inspect"),
        ("  (its CPU time)", "inspect_cpu"),
        ("plan (planner over TableState)", "plan"),
        ("  (its CPU time)", "plan_cpu"),
        ("inspect + plan, in process", "inspect_plan"),
        ("  (its CPU time)", "inspect_plan_cpu"),
        ("inspect + plan, fresh python process", "fresh_python_inspect_plan"),
        ("  (its CPU time)", "fresh_python_cpu"),
        ("  (inner inspect + plan of that child)", "fresh_python_inner_inspect_plan"),
        ("Spark files aggregation, in-session", "spark_in_session"),
        ("Spark files aggregation, spark-submit", "spark_submit"),
        ("  (its CPU time: the JVM, all threads)", "spark_submit_cpu"),
    ]
    labels = dict((key, label) for label, key in rows)
    for label, key in rows:
        if key in t:
            lines.append(timing_line(label, t[key], 46))
    for key, why in r.get("infeasible", {}).items():
        lines.append(f"  {labels[key].strip():<46} INFEASIBLE: {why}")
    m = r.get("memory") or {}
    if m.get("peak_rss_bytes"):
        lines.append(f"  {'peak memory of inspect + plan (fresh process)':<46} {m['peak_rss_bytes'] / GIB:8.2f} GiB"
                     f"  (RSS {m['rss_before_inspect_bytes'] / GIB:.2f} GiB before inspect, "
                     f"{m['rss_after_plan_bytes'] / GIB:.2f} GiB after plan; ru_maxrss of a child that only "
                     f"inspects and plans)")
    lines.append(f"  Spark driver memory (both Spark contenders, local mode): {r['config'].get('spark_driver_memory')}")
    lines.append("ratios (median / median):")
    for key, label in (("spark_submit_over_inspect_plan", "spark-submit / inspect+plan"),
                       ("spark_in_session_over_inspect_plan", "in-session Spark / inspect+plan"),
                       ("spark_submit_over_fresh_python", "spark-submit / fresh-python inspect+plan"),
                       ("spark_submit_cpu_over_inspect_plan_cpu", "CPU time: spark-submit / inspect+plan"),
                       ("fresh_python_over_inspect_plan", "fresh-python / in-process inspect+plan")):
        if key in ra:
            lines.append(f"  {label:<46} {ra[key]:8.1f} x")
    rp = r.get("replan")
    if rp:
        c0 = rp["cold_with_caches"]
        lines.append(f"re-plan after a commit, as the health watcher does (decoded manifests, previous state and plan "
                     f"kept; load + inspect + plan with content id; each checked equal to a full inspect + plan):")
        lines.append(f"  {'first look (cold, filling the caches)':<46} {c0['total_s']:8.2f} s  (load {c0['load_s']:.2f}, "
                     f"inspect {c0['inspect_s']:.2f}, plan {c0['plan_s']:.2f})")
        for c in rp["after_commit"]:
            lines.append(f"  {'after: ' + c['commit']:<46} {c['total_s']:8.2f} s  (load {c['load_s']:.2f}, inspect "
                         f"{c['inspect_s']:.2f}, plan {c['plan_s']:.2f}); {c['rebuilt_partitions']} partitions "
                         f"rebuilt, {c['reused_decisions']} of {c['decisions']} decisions reused; "
                         f"{c.get('manifests')} manifests after")
    g = r["goals"]
    labels_g = {
        "spark_submit_at_least_10x_slower": "inspect+plan >= 10x faster than spark-submit",
        "inspect_plan_under_10s_at_10k_partitions_100k_files": "inspect+plan < 10 s at 10k partitions / 100k files",
        "inspect_plan_faster_than_spark_in_session_at_100k_files":
            "inspect+plan faster than in-session Spark at 100k files",
        "inspect_plan_at_most_15s_at_1m_files": "inspect+plan <= 15 s at 1M files",
        "peak_memory_at_most_2gb_at_1m_files": "peak memory of inspect+plan <= 2 GiB at 1M files",
        "replan_after_one_partition_commit_under_1s_at_1m_files": "re-plan after a one-partition commit < 1 s at 1M",
    }
    judged = [(label, g[key]) for key, label in labels_g.items() if g.get(key) is not None]
    lines.append("goals:" if judged else "goals: none applies to this table size / run")
    for label, value in judged:
        lines.append(f"  {label:<58} {'met' if value else 'NOT MET'}")
    c = r["checks"]
    lines.append(f"check: per-partition (spec, partition, content) file count/bytes/records identical across "
                 f"{', '.join(c['per_partition_stats_identical'])} ({c['stat_rows']} rows); plan decisions "
                 f"{c['plan_decisions']}, {c['plan_groups']} groups, {c['plan_deferred']} deferred")
    if r.get("profile"):
        b = r["profile"].get("breakdown")
        if b:
            lines.append(
                f"where inspect+plan time goes (one unprofiled run of each part, after the measurements): load table "
                f"{b['load_table_s']:.2f} s, decode manifests ({b['live_rows']} live entries) "
                f"{b['manifest_decode_s']:.2f} s, build TableState from the rows {b['table_state_build_s']:.2f} s, "
                f"planner {b['plan_without_id_s']:.2f} s, plan content id (each decision's canonical JSON + "
                f"SHA-256, compaction/core/plan.py) {b['plan_content_id_s']:.2f} s")
        lines.append(f"profile: {r['profile']['file']}; top by own time (under cProfile, ~1.5x slower):")
        for h in r["profile"]["top_tottime"][:12]:
            lines.append(f"  {h['tottime_s']:7.2f} s own {h['cumtime_s']:7.2f} s cum {h['ncalls']:>9} calls  {h['function']}")
    for note in r.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
