"""A JVM class-data-sharing archive for the test session's Spark drivers.

The suite starts a few hundred Spark JVMs (every ``spark-submit`` job, the resident executors, ``airflow dags test``).
Spark 4.1 loads ~3 s more classes at start than 3.5 did; a dynamic CDS archive (JDK 13+) of the classes a typical
Iceberg session loads maps them in instead of parsing and verifying them again, which roughly halves each start. It
changes nothing a test observes: the JVM uses the archive only when it matches its class path exactly and silently
loads classes from the jars otherwise (``-Xshare:auto``).

The archive is built once per Spark line, JDK and set of jars (one Iceberg session run with
``-XX:ArchiveClassesAtExit``) into ``~/.cache/icecompact/cds`` and handed to every Spark JVM of the session through
``SPARK_SUBMIT_OPTS``, which Spark's launcher adds to the driver's command line (local and client mode).
``ICECOMPACT_TEST_JVM_ARCHIVE=0`` turns it off.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

DISABLE_ENV = "ICECOMPACT_TEST_JVM_ARCHIVE"
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "icecompact" / "cds"
# The archive is a cache: a JVM that cannot use it must say nothing on stdout (tests parse job output there).
QUIET_JVM_LOG = "-Xlog:disable -Xlog:all=error:stderr"

# One session as a compaction job runs it: a JDBC (SQLite) catalog, a merge-on-read table written, deleted from,
# merged into and read, Iceberg's rewrite procedures and metadata tables, so their classes are in the archive.
_WORKLOAD = r"""
import os, sys, tempfile
from pathlib import Path
from compaction.catalog import CatalogConfig
from compaction.spark.session import SparkSettings, build_session, register_catalog
root = Path(tempfile.mkdtemp(prefix="icecompact-cds-"))
catalog = CatalogConfig.sqlite("cds", root / "catalog.db", root / "warehouse")
spark = build_session([catalog], SparkSettings(master="local[2]", app_name="icecompact-cds"))
print(spark._jvm.java.lang.ProcessHandle.current().pid(), flush=True)
sql = spark.sql
sql("CREATE NAMESPACE IF NOT EXISTS cds.db")
for version in (2, 3):
    t = f"cds.db.t{version}"
    sql(f"CREATE TABLE {t} (id BIGINT, p STRING, v STRING, d DECIMAL(18,2), ts TIMESTAMP) USING iceberg "
        f"PARTITIONED BY (p) TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')")
    for i in range(3):
        sql(f"INSERT INTO {t} SELECT id, CAST(id % 3 AS STRING), uuid(), CAST(id AS DECIMAL(18,2)), "
            f"current_timestamp() FROM range({i * 100}, {(i + 1) * 100})")
    sql(f"DELETE FROM {t} WHERE id % 7 = 0")
    sql(f"UPDATE {t} SET v = 'u' WHERE id % 11 = 0")
    sql(f"MERGE INTO {t} t USING (SELECT id, 'm' AS v FROM range(0, 50)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v")
    sql(f"SELECT p, count(*), sum(CAST(xxhash64(id, v) AS DECIMAL(38,0))) FROM {t} GROUP BY p").collect()
    for meta in ("files", "delete_files", "snapshots", "manifests", "partitions", "entries"):
        sql(f"SELECT * FROM {t}.{meta}").collect()
    sql(f"CALL cds.system.rewrite_position_delete_files(table => 'db.t{version}')").collect()
    sql(f"CALL cds.system.rewrite_data_files(table => 'db.t{version}', "
        "options => map('delete-file-threshold', '1'))").collect()
    sql(f"CALL cds.system.expire_snapshots(table => 'db.t{version}', retain_last => 1)").collect()
    spark.read.format("iceberg").load(t).filter("id > 10").collect()
spark.stop()
"""


def _jdk_identity() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stderr


def _class_path_identity() -> list[str]:
    """What the archive depends on: every jar of the driver's class path (Spark's own and ours), by name and size."""
    import pyspark

    from compaction.spark.session import SparkSettings, jar_paths

    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    ours = jar_paths(SparkSettings.from_environment())
    return [f"{p}:{p.stat().st_size}" for p in (*ours, *spark_jars)]


def archive_path() -> Path:
    digest = hashlib.sha256("\n".join([sys.executable, _jdk_identity(), *_class_path_identity()]).encode())
    return CACHE_DIR / f"spark-driver-{digest.hexdigest()[:20]}.jsa"


def _wait_for_exit(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _build(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
    env = dict(os.environ, SPARK_SUBMIT_OPTS=f"-XX:ArchiveClassesAtExit={partial} {QUIET_JVM_LOG}")
    try:
        done = subprocess.run([sys.executable, "-c", _WORKLOAD], env=env, capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"the archive's workload failed: {done.stderr[-2000:]}")
        # The JVM writes the archive while it exits, after the Python side has gone.
        _wait_for_exit(int(done.stdout.split()[0]), timeout_s=120)
        if not partial.exists() or partial.stat().st_size == 0:
            raise RuntimeError("the JVM wrote no archive")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def spark_submit_opts() -> str | None:
    """``SPARK_SUBMIT_OPTS`` for the session (the archive built first if needed), or None when turned off or when
    this JDK cannot build one (then every JVM starts as it would without)."""
    if os.environ.get(DISABLE_ENV, "").strip().lower() in ("0", "false", "no"):
        return None
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    # The suite runs in several worker processes (pytest-xdist): one builds, the others wait for its archive.
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            started = time.monotonic()
            try:
                _build(target)
            except (OSError, RuntimeError, subprocess.SubprocessError, ValueError, IndexError) as e:
                print(f"\nJVM class-data archive not built ({e}); Spark JVMs start without it", file=sys.stderr)
                return None
            print(f"\nJVM class-data archive built in {time.monotonic() - started:.0f} s: {target}", file=sys.stderr)
    existing = os.environ.get("SPARK_SUBMIT_OPTS", "")
    return f"{existing} -XX:SharedArchiveFile={target} {QUIET_JVM_LOG}".strip()
