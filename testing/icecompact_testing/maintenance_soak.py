"""Maintenance soak: a streaming writer, scheduled compaction and scheduled maintenance on one table, on
PostgreSQL (catalog and ledger), with the metadata sampled over time and every retained snapshot re-read.

* **writer** (a thread of this process, its own Spark jobs): every ``commit_interval_s`` an append of
  ``rows_per_commit`` rows into an identity-partitioned table, every ``overwrite_every``-th commit an upsert of one
  group instead (``overwrite(grp = g)``: the group's rows replaced, Iceberg ``OverwriteFiles``). Each commit carries
  a marker in its snapshot summary, so the writer finds *its* snapshot even when a compaction committed right
  after it, and records for that snapshot id, **at commit time**, the row count and an order-independent checksum
  (``sum(xxhash64(columns))``, read by time travel) next to its own model's row count;
* **compaction**: ``compaction.ops.runner.run_table`` (plan, ledger, spark-submit jobs) every ``compact_interval_s``;
* **maintenance**: ``compaction.ops.maintenance.maintain_table`` every ``maintain_interval_s`` with the table's own
  retention (``history.expire.max-snapshot-age-ms`` = ``retention_s``, ``min-snapshots-to-keep`` 1), manifest
  rewrites, and orphan removal of files older than ``orphan_age_s``; in-flight compaction runs are in the ledger,
  so the expiry protects their snapshots;
* **sampler** every ``sample_interval_s``: snapshots, metadata-file bytes, manifests (current snapshot) and their
  bytes, the live table's bytes (data + delete files of the current snapshot) from metadata
  (``compaction.ops.fleet.sample_table``, recorded in the ledger as health samples like the UI's), and the bytes on
  storage under the table's location (a local listing).

At the end (writer stopped, loops stopped): the table against the writer's model (ids and values: 0 rows lost or
resurrected), and every snapshot still in the table re-read by time travel against what was recorded when it was
committed (a compaction snapshot must read what the writer's last snapshot before it read; up to
``reread_max`` of them, spread over the retained history, the oldest retained one always included).

:func:`evaluate` turns the report into the goals (plateau of snapshots, metadata bytes and manifests: the last
third's maximum within 20 % of the first third's; storage <= 2x the live bytes at the end; 0 rows lost or
resurrected; every re-read snapshot equal). ``bench/soak.py --maintenance`` runs it and writes
``bench/results/maintenance_soak.{txt,json,png}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from compaction.catalog import CatalogConfig

NAMESPACE = "msoak"
TABLE = "events"
MARKER = "soak.commit-id"
PLATEAU_TOLERANCE = 0.20
STORAGE_OVER_LIVE_MAX = 2.0
PLATEAU_SERIES = ("snapshots", "metadata_file_bytes", "manifests")


@dataclass(frozen=True)
class MaintenanceSoakConfig:
    duration_s: float = 1800.0
    format_version: int = 2
    commit_interval_s: float = 2.0
    rows_per_commit: int = 50
    #: Bytes of random payload per row: a table whose data outweighs its metadata, as in production (a few bytes
    #: per row would make the metadata files most of the storage, whatever maintenance does).
    payload_bytes: int = 1000
    #: Partitions, and an upsert replacing one partition every ``overwrite_every``-th commit: the table keeps
    #: growing (a sixteenth of it is rewritten at each upsert, not a quarter), as a streaming table does; with
    #: fewer, larger partitions the upserts alone would replace the table every few minutes and no retention of
    #: 5 min could keep storage within 2x of it.
    groups: int = 16
    overwrite_every: int = 30
    #: The upserts replace only the last ``hot_groups`` partitions (a streaming table's current aggregate
    #: partition, rewritten every minute); the other partitions hold the history.
    hot_groups: int = 1
    #: Compacted history the table starts with, in the non-hot partitions: one file of ~this / (groups -
    #: hot_groups) bytes each (a table that has streamed for a while: large files plus streaming small ones).
    #: Without it the table is only what the soak's minutes wrote, and everything the retention window keeps
    #: (5 minutes of appends, rewrites and upserts) weighs as much as the table itself.
    base_bytes: int = 72 * 1024 * 1024
    #: Compaction's target file size for the table (the base files are not small at it) and its fragment ratio:
    #: files under target / ratio are fragments merged by MINOR; the rest wait for a MAJOR of small segments.
    target_file_size_bytes: int = 4 * 1024 * 1024
    fragment_ratio: int = 16
    #: The writer reads its snapshot's row count and checksum at commit time every this many commits (and at every
    #: upsert): a full scan of the table every 2 s would be most of the machine's work.
    checksum_every: int = 10
    compact_interval_s: float = 60.0
    maintain_interval_s: float = 60.0
    retention_s: float = 300.0  # history.expire.max-snapshot-age-ms
    orphan_age_s: float = 600.0
    #: Every process of the soak runs on one machine (one clock): the in-flight protection's skew margin can be
    #: small, so that the retention, not the margin, bounds the history (the policy's default is 300 s).
    clock_skew_s: float = 30.0
    #: ``local``: a SQL catalog on PostgreSQL, the warehouse on local disk; ``s3``: a REST catalog with the table on
    #: S3 (a throwaway SeaweedFS). The ledger is on PostgreSQL either way.
    storage: str = "local"
    sample_interval_s: float = 10.0
    reread_max: int = 12
    seed: int = 24

    @property
    def table(self) -> str:
        return f"{NAMESPACE}.{TABLE}"

    def properties(self) -> dict[str, str]:
        return {
            "format-version": str(self.format_version),
            "write.delete.mode": "merge-on-read",
            "history.expire.max-snapshot-age-ms": str(int(self.retention_s * 1000)),
            "history.expire.min-snapshots-to-keep": "1",
            "write.metadata.previous-versions-max": "10",
            "write.metadata.delete-after-commit.enabled": "true",
            "compaction.ops.maintenance.delete-orphans.enabled": "true",
            "compaction.ops.maintenance.delete-orphans.older-than": str(int(self.orphan_age_s)),
            "compaction.ops.maintenance.clock-skew": str(int(self.clock_skew_s)),
            "compaction.target-file-size-bytes": str(int(self.target_file_size_bytes)),
            "compaction.fragment-ratio": str(int(self.fragment_ratio)),
        }


@dataclass
class MaintenanceSoakReport:
    config: MaintenanceSoakConfig
    started: float = 0.0
    commits: list[dict[str, Any]] = field(default_factory=list)  # the writer's, with what each snapshot read
    samples: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["config"] = dataclasses.asdict(self.config)
        return out


def _local(uri: str) -> Path:
    return Path(urlparse(uri).path) if uri.startswith("file:") else Path(uri)


def _key(uri: str) -> str:
    """One spelling per file: a local path for ``file:`` URIs and plain paths, the URI itself on object storage."""
    return uri if uri.startswith(("s3://", "s3a://")) else str(_local(uri))


def list_storage(location: str, properties: dict[str, str] | None = None) -> list[tuple[str, int, float]]:
    """``(path, bytes, last modified)`` of every file under the table's location, referenced or not: a local walk,
    or an S3 listing (pyarrow, with the catalog's ``s3.*`` properties) for ``s3://`` locations."""
    if location.startswith(("s3://", "s3a://")):
        from pyarrow import fs

        props = properties or {}
        endpoint = urlparse(props.get("s3.endpoint", ""))
        s3 = fs.S3FileSystem(access_key=props.get("s3.access-key-id"), secret_key=props.get("s3.secret-access-key"),
                             region=props.get("s3.region", "us-east-1"),
                             endpoint_override=endpoint.netloc or None, scheme=endpoint.scheme or "https",
                             force_virtual_addressing=False)
        scheme, rest = location.split("://", 1)
        infos = s3.get_file_info(fs.FileSelector(rest.rstrip("/"), recursive=True, allow_not_found=True))
        return [(f"{scheme}://{i.path}", int(i.size or 0), i.mtime.timestamp() if i.mtime else 0.0)
                for i in infos if i.type == fs.FileType.File]
    out = []
    for root, _dirs, files in os.walk(_local(location)):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except OSError:  # deleted while listing (expiry, orphan removal)
                continue
            out.append((path, int(st.st_size), st.st_mtime))
    return out


def storage_bytes(location: str, properties: dict[str, str] | None = None) -> int:
    """Bytes under the table's location on storage: everything, referenced or not."""
    return sum(size for _p, size, _m in list_storage(location, properties))


#: Where the bytes on storage go (:func:`storage_profile`), in the order a reader should look at them.
STORAGE_CLASSES = ("live", "current_metadata", "retained_history", "unreferenced_young", "unreferenced_old")


def storage_profile(spark: Any, ref: str, location: str, orphan_age_s: float, now: float | None = None,
                    properties: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Every file under the table's location, classified from the table's metadata tables: ``live`` (data
    and delete files of the current snapshot), ``current_metadata`` (its manifests and manifest list, and the
    metadata.json files of the log), ``retained_history`` (referenced only by older snapshots the retention keeps),
    ``unreferenced_young`` (no metadata references it and it is younger than the orphan age: a commit's leftovers
    waiting for orphan removal, or files of work in flight) and ``unreferenced_old``. Files and bytes per class."""
    now = time.time() if now is None else now

    def paths(sql: str) -> set[str]:
        return {_key(str(r[0])) for r in spark.sql(sql).collect() if r[0] is not None}

    current_files = paths(f"SELECT file_path FROM {ref}.files")
    all_files = paths(f"SELECT file_path FROM {ref}.all_files")
    current_manifests = paths(f"SELECT path FROM {ref}.manifests")
    all_manifests = paths(f"SELECT path FROM {ref}.all_manifests")
    current_id = spark.sql(f"SELECT snapshot_id FROM {ref}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    lists = {int(r[0]): _key(str(r[1]))
             for r in spark.sql(f"SELECT snapshot_id, manifest_list FROM {ref}.snapshots").collect()}
    head = spark.sql(f"SELECT snapshot_id FROM {ref}.refs WHERE name = 'main'").collect()
    head_id = int(head[0][0]) if head else (int(current_id[0][0]) if current_id else None)
    metadata_files = paths(f"SELECT file FROM {ref}.metadata_log_entries")
    current_meta = current_manifests | metadata_files | ({lists[head_id]} if head_id in lists else set())
    history = (all_files | all_manifests | set(lists.values())) - current_files - current_meta
    out = {c: {"files": 0, "bytes": 0} for c in STORAGE_CLASSES}
    for path, size, mtime in list_storage(location, properties):
        if path in current_files:
            cls = "live"
        elif path in current_meta:
            cls = "current_metadata"
        elif path in history:
            cls = "retained_history"
        elif now - mtime < orphan_age_s:
            cls = "unreferenced_young"
        else:
            cls = "unreferenced_old"
        out[cls]["files"] += 1
        out[cls]["bytes"] += size
    return out


def _checksum(spark: Any, ref: str, snapshot_id: int) -> tuple[int, int]:
    """(rows, sum of xxhash64 over every column) of the table at ``snapshot_id``: order-independent; summed as
    decimal, since a 64-bit sum overflows, an error under ANSI mode (Spark 4's default)."""
    row = spark.sql(f"SELECT count(*) AS n, coalesce(sum(cast(xxhash64(id, grp, v) AS decimal(38,0))), 0) AS h "
                    f"FROM {ref} VERSION AS OF {int(snapshot_id)}").collect()[0]
    return int(row["n"]), int(row["h"])


class _Writer:
    def __init__(self, spark: Any, ref: str, config: MaintenanceSoakConfig, report: MaintenanceSoakReport,
                 log: Callable[[str], None]) -> None:
        import random

        self.spark, self.ref, self.config, self.report, self.log = spark, ref, config, report, log
        self.rng = random.Random(config.seed)
        self.model: dict[int, tuple[int, str]] = {}  # id -> (grp, v)
        self.next_id = 0
        self.commit_no = 0

    def _rows(self, n: int, grp: int | None = None) -> list[tuple[int, int, str]]:
        out = []
        for _ in range(n):
            g = grp if grp is not None else self.rng.randrange(self.config.groups)
            out.append((self.next_id, g, self.rng.randbytes(self.config.payload_bytes // 2).hex()))
            self.next_id += 1
        return out

    def _snapshot_of(self, commit_id: str) -> int:
        rows = self.spark.sql(f"SELECT snapshot_id FROM {self.ref}.snapshots "
                              f"WHERE summary['{MARKER}'] = '{commit_id}'").collect()  # our own uuid hex
        if len(rows) != 1:
            raise RuntimeError(f"commit {commit_id}: {len(rows)} snapshot(s) carry its marker")
        return int(rows[0][0])

    def preload(self) -> None:
        """The compacted history: ``base_bytes`` of rows in the non-hot partitions, one large file each (one task
        per partition), committed as the table's first snapshot (recorded like any commit)."""
        cold = max(1, self.config.groups - self.config.hot_groups)
        row_bytes = self.config.payload_bytes // 2 + 24  # hex of random bytes: ~half compresses away
        per_group = max(1, self.config.base_bytes // row_bytes // cold)
        rows = [row for g in range(cold) for row in self._rows(per_group, g)]
        df = self.spark.createDataFrame(rows, "id bigint, grp int, v string").repartition(cold, "grp")
        commit_id = uuid.uuid4().hex
        df.sortWithinPartitions("grp").writeTo(self.ref).option(f"snapshot-property.{MARKER}", commit_id).append()
        for i, g, v in rows:
            self.model[i] = (g, v)
        sid = self._snapshot_of(commit_id)
        n, h = _checksum(self.spark, self.ref, sid)
        self.report.commits.append({"t": time.time(), "snapshot_id": sid, "kind": "base", "rows": n, "checksum": h,
                                    "model_rows": len(self.model), "latency_s": 0.0, "attempts": 1})
        if n != len(self.model):
            self.report.errors.append(f"base snapshot {sid} read {n} rows, the model holds {len(self.model)}")
        self.log(f"msoak: base of {len(rows)} rows in {cold} partitions committed")

    def commit(self) -> None:
        from pyspark.sql import functions as F

        self.commit_no += 1
        commit_id = uuid.uuid4().hex
        upsert = self.commit_no % self.config.overwrite_every == 0
        hot = max(1, min(self.config.hot_groups, self.config.groups))
        grp = self.config.groups - 1 - self.rng.randrange(hot) if upsert else None
        rows = self._rows(self.config.rows_per_commit, grp)
        df = self.spark.createDataFrame(rows, "id bigint, grp int, v string")
        writer = df.writeTo(self.ref).option(f"snapshot-property.{MARKER}", commit_id)
        t0 = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                if upsert:
                    writer.overwrite(F.col("grp") == F.lit(grp))
                else:
                    writer.append()
                break
            except Exception as e:  # noqa: BLE001 - a conflict (e.g. a compaction of the group): retried
                if attempt >= 10:
                    raise
                self.report.errors.append(f"writer commit {self.commit_no} attempt {attempt}: {str(e)[:200]}")
                time.sleep(0.5 * attempt)
        latency = time.monotonic() - t0
        if upsert:
            self.model = {k: v for k, v in self.model.items() if v[0] != grp}
        for i, g, v in rows:
            self.model[i] = (g, v)
        sid = self._snapshot_of(commit_id)
        checked = upsert or self.commit_no % max(1, self.config.checksum_every) == 0
        n, h = _checksum(self.spark, self.ref, sid) if checked else (None, None)
        self.report.commits.append({"t": time.time(), "snapshot_id": sid, "kind": "upsert" if upsert else "append",
                                    "rows": n, "checksum": h, "model_rows": len(self.model),
                                    "latency_s": round(latency, 3), "attempts": attempt})
        if n is not None and n != len(self.model):
            self.report.errors.append(f"snapshot {sid} read {n} rows at commit time, the model holds {len(self.model)}")


def _loop(name: str, interval: float, stop: threading.Event, fn: Callable[[], None], report: MaintenanceSoakReport,
          log: Callable[[str], None], first_delay: float = 0.0) -> None:
    if stop.wait(first_delay):
        return
    while not stop.is_set():
        started = time.monotonic()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - recorded; the soak goes on (a goal fails if it matters)
            report.errors.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            log(f"msoak: {name} failed: {type(e).__name__}: {str(e)[:300]}")
            log(traceback.format_exc()[-1500:])
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def run_maintenance_soak(config: MaintenanceSoakConfig, workdir: Path, *,
                         log: Callable[[str], None] = lambda m: print(m, flush=True)) -> MaintenanceSoakReport:
    from compaction.ops.fleet import record_sample, sample_table
    from compaction.ledger import Ledger, RunTrigger
    from compaction.ops.maintenance import maintain_table
    from compaction.ops.runner import run_table
    from compaction.spark.session import SparkSettings, build_session
    from icecompact_testing.postgres import start_cluster

    workdir.mkdir(parents=True, exist_ok=True)
    report = MaintenanceSoakReport(config)
    cluster = start_cluster()
    spark = None
    server = None
    saved_env = {k: os.environ.get(k) for k in ("ICECOMPACT_LEDGER_URL", "ICECOMPACT_HOME")}
    try:
        if config.storage == "s3":
            from compaction.demo.object_store import start_object_store

            server = start_object_store(workdir / "objectstore")
            catalog = server.catalog(f"ms{uuid.uuid4().hex[:8]}")
        else:
            catalog = CatalogConfig(f"ms{uuid.uuid4().hex[:8]}", {
                "type": "sql", "uri": cluster.sqlalchemy_uri(cluster.create_database("msoak_catalog")),
                "warehouse": (workdir / "warehouse").as_uri()})
            (workdir / "warehouse").mkdir(exist_ok=True)
        ledger_url = cluster.sqlalchemy_uri(cluster.create_database("msoak_ledger"))
        # The compaction jobs (spark-submit) and the ledger defaults read these.
        os.environ["ICECOMPACT_LEDGER_URL"] = ledger_url
        os.environ["ICECOMPACT_HOME"] = str(workdir / "home")
        spark = build_session([catalog], SparkSettings(master="local[2]", app_name="icecompact-maintenance-soak"))
        ref = f"{catalog.name}.{config.table}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.{NAMESPACE}")
        props = ", ".join(f"'{k}' = '{v}'" for k, v in config.properties().items())  # our own constants
        spark.sql(f"CREATE TABLE {ref} (id bigint, grp int, v string) USING iceberg PARTITIONED BY (grp) "
                  f"TBLPROPERTIES ({props})")
        location = str(catalog.load().load_table(config.table).metadata.location)
        if server is not None:
            from compaction.demo.object_store import DATA_FOLDER, TABLE_PROPERTIES

            extra = {**TABLE_PROPERTIES, "write.data.path": f"{location.rstrip('/')}/{DATA_FOLDER}"}
            spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ("
                      + ", ".join(f"'{k}' = '{v}'" for k, v in extra.items()) + ")")  # our own constants
        writer = _Writer(spark, ref, config, report, log)
        if config.base_bytes > 0:
            writer.preload()
        ledger = Ledger.open(ledger_url)
        stop = threading.Event()

        def compact() -> None:
            t0 = time.time()
            with Ledger.open(ledger_url) as own:
                rep = run_table(catalog, config.table, ledger=own, trigger=RunTrigger.CLI,
                                spark_settings=SparkSettings(master="local[1]"))
            report.compactions.append({"t": t0, "s": round(time.time() - t0, 1), "run_id": rep.run_id,
                                       "status": str(getattr(rep.status, "value", rep.status))})

        def maintain() -> None:
            t0 = time.time()
            with Ledger.open(ledger_url) as own:
                rep = maintain_table(catalog, config.table, spark=spark, ledger=own)
            report.maintenance.append({
                "t": t0, "s": round(time.time() - t0, 1), "run_id": rep.run_id, "status": rep.status,
                "actions": [{"action": r.action.value, "status": r.status, "files_removed": r.files_removed,
                             "bytes_removed": r.bytes_removed, "error": r.error} for r in rep.results]})

        def sample() -> None:
            s, _state = sample_table(catalog, config.table, ledger=ledger)
            record_sample(s, "soak", ledger=ledger)
            report.samples.append({
                "t": time.time(), "snapshots": s.snapshots, "metadata_file_bytes": s.metadata_file_bytes,
                "manifests": s.manifests, "manifest_bytes": s.manifest_bytes,
                "live_bytes": s.data_bytes + s.delete_bytes, "data_files": s.data_files,
                "delete_files": s.delete_files, "storage_bytes": storage_bytes(location, catalog.properties)})

        threads = [
            threading.Thread(target=_loop, args=("compaction", config.compact_interval_s, stop, compact, report, log,
                                                 config.compact_interval_s / 2), daemon=True),
            threading.Thread(target=_loop, args=("maintenance", config.maintain_interval_s, stop, maintain, report,
                                                 log, config.maintain_interval_s), daemon=True),
            threading.Thread(target=_loop, args=("sampler", config.sample_interval_s, stop, sample, report, log),
                             daemon=True),
        ]
        report.started = start = time.time()
        log(f"msoak: writer, compaction every {config.compact_interval_s:.0f} s, maintenance every "
            f"{config.maintain_interval_s:.0f} s (retention {config.retention_s:.0f} s) for {config.duration_s:.0f} s")
        for t in threads:
            t.start()
        last_log = start
        while time.time() - start < config.duration_s:
            tick = time.monotonic()
            writer.commit()
            if time.time() - last_log > 60 and report.samples:
                last_log = time.time()
                s = report.samples[-1]
                log(f"msoak: t={last_log - start:.0f}s commits {len(report.commits)}, snapshots {s['snapshots']}, "
                    f"metadata {s['metadata_file_bytes']} B, manifests {s['manifests']}, storage "
                    f"{s['storage_bytes'] / 1e6:.1f} MB / live {s['live_bytes'] / 1e6:.1f} MB, compactions "
                    f"{len(report.compactions)}, maintenance runs {len(report.maintenance)}")
            time.sleep(max(0.0, config.commit_interval_s - (time.monotonic() - tick)))
        log("msoak: stopping the loops ...")
        stop.set()
        for t in threads:
            t.join(timeout=900)
        sample()  # the end state
        report.checks["storage_profile"] = storage_profile(spark, ref, location, config.orphan_age_s,
                                                           properties=catalog.properties)
        _final_checks(config, report, spark, ref, writer, log)
        ledger.close()
        return report
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if spark is not None:
            spark.stop()
        if server is not None:
            server.stop()
        cluster.stop()


def _final_checks(config: MaintenanceSoakConfig, report: MaintenanceSoakReport, spark: Any, ref: str, writer: _Writer,
                  log: Callable[[str], None]) -> None:
    rows = spark.sql(f"SELECT id, grp, v FROM {ref}").collect()
    got = {int(r["id"]): (int(r["grp"]), str(r["v"])) for r in rows}
    missing = sorted(set(writer.model) - set(got))
    extra = sorted(set(got) - set(writer.model))
    changed = sorted(k for k in set(got) & set(writer.model) if got[k] != writer.model[k])
    duplicates = len(rows) - len(got)
    report.checks["rows"] = {"expected": len(writer.model), "got": len(rows), "missing": len(missing),
                             "extra": len(extra), "changed": len(changed), "duplicates": duplicates,
                             "sample_missing": missing[:10], "sample_extra": extra[:10]}
    # What every retained snapshot must read: its own commit-time record (writer snapshots) or, for a compaction's
    # or a maintenance manifest rewrite's snapshot, the record of the writer's last snapshot among its ancestors.
    snaps = spark.sql(f"SELECT snapshot_id, parent_id, committed_at, operation FROM {ref}.snapshots").collect()
    by_id = {int(s["snapshot_id"]): s for s in snaps}
    writer_snapshots = {c["snapshot_id"]: c for c in report.commits}
    recorded = {k: c for k, c in writer_snapshots.items() if c.get("checksum") is not None}

    def expected(sid: int) -> dict[str, Any] | None:
        """What ``sid`` must read: the record of the writer's last snapshot among its ancestors (itself included),
        if the writer read that one at commit time (every ``checksum_every``-th commit)."""
        cur: int | None = sid
        while cur is not None:
            if cur in writer_snapshots:
                return recorded.get(cur)
            parent = by_id.get(cur)
            cur = None if parent is None or parent["parent_id"] is None else int(parent["parent_id"])
        return None

    ordered = [s for s in sorted(by_id, key=lambda s: by_id[s]["committed_at"]) if expected(s) is not None]
    step = max(1, len(ordered) // max(1, config.reread_max - 1))
    chosen = sorted(set(ordered[::step]) | {ordered[0], ordered[-1]}) if ordered else []
    checked, mismatches, unknown = [], [], []
    for sid in chosen:
        exp = expected(sid)
        if exp is None:
            unknown.append(sid)  # older than every recorded commit's history: only when nothing was recorded
            continue
        n, h = _checksum(spark, ref, sid)
        ok = (n, h) == (exp["rows"], exp["checksum"])
        checked.append({"snapshot_id": sid, "operation": by_id[sid]["operation"], "rows": n, "ok": ok,
                        "recorded_at_commit_of": exp["snapshot_id"]})
        if not ok:
            mismatches.append(sid)
    oldest = min((by_id[s]["committed_at"] for s in by_id), default=None)
    report.checks["retained_snapshots"] = {
        "in_table": len(by_id), "reread": len(checked), "mismatches": mismatches, "unknown": unknown,
        "oldest_retained": str(oldest), "detail": checked,
        "writer_snapshots_recorded": len(recorded),
        "writer_snapshots_retained": sum(1 for s in by_id if s in writer_snapshots),
        "checkable_retained": len(ordered)}
    log(f"msoak: rows {report.checks['rows']}; re-read {len(checked)} retained snapshot(s), "
        f"{len(mismatches)} mismatch(es)")


def _third_max(values: list[float], which: int) -> float | None:
    n = len(values)
    if n < 3:
        return None
    part = values[: n // 3] if which == 0 else values[n - n // 3:]
    return max(part) if part else None


def evaluate(report: MaintenanceSoakReport) -> dict[str, dict[str, Any]]:
    goals: dict[str, dict[str, Any]] = {}
    samples = [s for s in report.samples if s.get("snapshots") is not None]
    for key in PLATEAU_SERIES:
        values = [float(s[key]) for s in samples if s.get(key) is not None]
        first, last = _third_max(values, 0), _third_max(values, 2)
        met = first is not None and last is not None and last <= first * (1 + PLATEAU_TOLERANCE)
        goals[f"plateau_{key}"] = {
            "met": met, "first_third_max": first, "last_third_max": last,
            "text": (f"last third's max {last:.0f} vs first third's max {first:.0f} "
                     f"({(last / first - 1) * 100 if first else 0:+.0f} %, goal <= +20 %)" if first and last is not None
                     else f"too few samples ({len(values)})")}
    end = samples[-1] if samples else {}
    ratio = (end["storage_bytes"] / end["live_bytes"]) if end.get("live_bytes") else None
    goals["storage_within_2x_live"] = {
        "met": ratio is not None and ratio <= STORAGE_OVER_LIVE_MAX, "ratio": ratio,
        "text": (f"{end['storage_bytes'] / 1e6:.2f} MB on storage vs {end['live_bytes'] / 1e6:.2f} MB live = "
                 f"{ratio:.2f}x (goal <= 2x)" if ratio is not None else "no end sample")}
    rows = report.checks.get("rows", {})
    goals["no_rows_lost_or_resurrected"] = {
        "met": bool(rows) and rows["missing"] == rows["extra"] == rows["changed"] == rows["duplicates"] == 0,
        "text": f"expected {rows.get('expected')}, got {rows.get('got')}: missing {rows.get('missing')}, "
                f"resurrected/extra {rows.get('extra')}, changed {rows.get('changed')}, duplicates "
                f"{rows.get('duplicates')}"}
    kept = report.checks.get("retained_snapshots", {})
    goals["retained_snapshots_read_what_they_read"] = {
        "met": bool(kept.get("reread")) and not kept.get("mismatches"),
        "text": f"{kept.get('reread')} of {kept.get('in_table')} retained snapshot(s) re-read by time travel "
                f"(oldest {kept.get('oldest_retained')}): mismatches {kept.get('mismatches')}"}
    runs = report.maintenance
    failed = [m for m in runs if m["status"] != "succeeded"]
    goals["maintenance_runs_succeed"] = {
        "met": bool(runs) and not failed,
        "text": f"{len(runs)} maintenance run(s), {len(failed)} not succeeded "
                f"{[a['error'] for m in failed for a in m['actions'] if a.get('error')][:3]}"}
    return goals


def chart(report: MaintenanceSoakReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = [s for s in report.samples if s.get("snapshots") is not None]
    t = [(s["t"] - report.started) / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    panels = (("snapshots", "snapshots", 1), ("metadata_file_bytes", "metadata file (KB)", 1e3),
              ("manifests", "manifests (current snapshot)", 1))
    for ax, (key, label, scale) in zip(axes, panels):
        ax.plot(t, [s[key] / scale for s in samples], drawstyle="steps-post")
        ax.set_ylabel(label)
    ax = axes[3]
    ax.plot(t, [s["storage_bytes"] / 1e6 for s in samples], label="on storage", drawstyle="steps-post")
    ax.plot(t, [s["live_bytes"] / 1e6 for s in samples], label="live (data + deletes)", drawstyle="steps-post")
    ax.plot(t, [2 * s["live_bytes"] / 1e6 for s in samples], ":", label="2x live")
    ax.set_ylabel("MB")
    ax.legend(loc="upper left")
    for a in axes:
        for m in report.maintenance:
            a.axvline((m["t"] - report.started) / 60, color="#15803d" if m["status"] == "succeeded" else "#b91c1c",
                      alpha=0.25, lw=1)
    axes[-1].set_xlabel("minutes (green lines: maintenance runs)")
    fig.suptitle(f"maintenance soak, v{report.config.format_version}, retention {report.config.retention_s:.0f} s")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def render(report: MaintenanceSoakReport, goals: dict[str, dict[str, Any]]) -> str:
    c = report.config
    where = ("REST catalog + S3 (SeaweedFS), ledger on PostgreSQL" if c.storage == "s3"
             else "PostgreSQL catalog + ledger, local warehouse")
    lines = [f"maintenance soak: {c.duration_s / 60:.1f} min, v{c.format_version}, {where}; writer "
             f"every {c.commit_interval_s:.0f} s ({c.rows_per_commit} rows of ~{c.payload_bytes} B, an upsert every "
             f"{c.overwrite_every} replacing {'the last partition' if c.hot_groups == 1 else f'one of {c.hot_groups} hot partitions'} of {c.groups}), "
             f"starting from {c.base_bytes / 2**20:.0f} MiB of compacted history, target file size "
             f"{c.target_file_size_bytes / 2**20:.0f} MiB (fragments < 1/{c.fragment_ratio}), "
             f"compaction every {c.compact_interval_s:.0f} s, maintenance every {c.maintain_interval_s:.0f} s, "
             f"retention {c.retention_s:.0f} s, orphans older than {c.orphan_age_s:.0f} s",
             f"writer commits {len(report.commits)}, compaction runs {len(report.compactions)} "
             f"({sum(1 for r in report.compactions if r['status'] == 'succeeded')} succeeded), maintenance runs "
             f"{len(report.maintenance)}, samples {len(report.samples)}, errors {len(report.errors)}", ""]
    for name, g in goals.items():
        lines.append(f"  {'MET    ' if g['met'] else 'NOT MET'}  {name}: {g['text']}")
    lines.append("")
    removed: dict[str, list[int]] = {}
    for m in report.maintenance:
        for a in m["actions"]:
            agg = removed.setdefault(a["action"], [0, 0, 0])
            agg[0] += 1
            agg[1] += int(a["files_removed"] or 0)
            agg[2] += int(a["bytes_removed"] or 0)
    for action, (n, files, b) in removed.items():
        lines.append(f"  {action}: {n} run(s), {files} file(s), {b / 1e6:.2f} MB removed")
    profile = report.checks.get("storage_profile")
    if profile:
        total = sum(v["bytes"] for v in profile.values()) or 1
        lines.append("  storage at the end, by what references it (files, MB, share):")
        for cls in STORAGE_CLASSES:
            v = profile.get(cls, {"files": 0, "bytes": 0})
            lines.append(f"    {cls:<20} {v['files']:>6} {v['bytes'] / 1e6:>9.2f} {v['bytes'] / total * 100:>5.1f} %")
    for e in report.errors[:10]:
        lines.append(f"  error: {e}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - bench/soak.py --maintenance is the entry
    import argparse

    ap = argparse.ArgumentParser(description="maintenance soak")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/msoak"))
    args = ap.parse_args(argv)
    report = run_maintenance_soak(MaintenanceSoakConfig(duration_s=args.minutes * 60), args.workdir)
    print(render(report, evaluate(report)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


__all__ = ["MaintenanceSoakConfig", "MaintenanceSoakReport", "run_maintenance_soak", "evaluate", "chart", "render",
           "storage_bytes", "storage_profile", "STORAGE_CLASSES"]
