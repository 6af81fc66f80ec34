"""Soak: a live CDC writer and the scheduled compaction DAG together on PostgreSQL, with faults.

Everything real, in separate processes, the way a user runs the platform:

* a throwaway PostgreSQL cluster holding the Iceberg catalog (JDBC) and the ledger;
* a table of the production shape (:mod:`icecompact_testing.bulk`), format v2 or v3;
* a **writer process** (:class:`SoakWriter`, ``python -m icecompact_testing.soak writer CONFIG``) committing every
  ``commit_interval_s``: upserts as fragment files plus equality deletes on the key in one RowDelta (Flink's
  pattern), and every ``dml_interval_s`` a Spark ``DELETE``, ``UPDATE`` or ``MERGE`` (position deletes / DVs), under a
  write lease when ``cooperative`` (docs/operations.md "Writers and compaction"). It keeps its own
  model of the live rows (the bulk generator's, extended by its DML) and logs every commit attempt, with its outcome
  and latency, to ``writer.jsonl``. Its retry is a streaming writer's: a failed commit is retried (after checking,
  by a marker in the snapshot summary, that it did not land) until it lands;
* Airflow's scheduler and api-server (LocalExecutor) running ``iceberg_compaction`` on a cron schedule, mode
  ``auto``, window ``all``, two parallel Spark jobs (spark-submit);
* faults: one compaction job killed with SIGKILL while its rewrite's Spark stage runs (``ICECOMPACT_FAULT_INJECT``
  ``signal`` mode arms exactly one job), the scheduler killed with SIGKILL and restarted, PostgreSQL stopped for a
  few seconds and started again;
* a sampler every ``sample_interval_s``: files by kind per partition, the delete ratio, a full scan's time.

At the end the writer stops, one last compaction runs, and :func:`run_soak` checks the table against the writer's
model (Spark, and the reference reader of :mod:`icecompact_testing.oracle`), the ledger (every run terminal, what
each fault did), and every snapshot our jobs committed (each one belongs to a committed, validated outcome).
``bench/soak.py`` runs it for 15 minutes and writes figures and a chart; ``tests/test_soak.py`` runs a short one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from compaction.catalog import CatalogConfig
from compaction.core.planner import READ_COST_REASON
from compaction.spark.session import SparkSettings
from icecompact_testing.airflow_processes import AirflowProcesses

NAMESPACE = "soak"
TABLE = "events"
CATALOG_PREFIX = "soak"
COMMIT_MARKER = "soak.commit-id"
WRITER_CONFIG = "writer-config.json"


@dataclass(frozen=True)
class SoakConfig:
    duration_s: float = 900.0
    size: str = "s"  # bulk generator size of the base table
    format_version: int = 2
    seed: int = 7
    commit_interval_s: float = 2.0
    dml_interval_s: float = 30.0
    dml_keys: int = 200  # keys per DELETE / UPDATE / MERGE
    #: The writer's DML holds a write lease on the table (compaction.ops.leases.write_lease) while it runs.
    cooperative: bool = False
    schedule: str = "*/1 * * * *"
    sample_interval_s: float = 10.0
    scan_every: int = 1  # a timed full scan at every N-th sample
    #: After the run, on the quiet machine, this many of the scanned samples after the first compaction (evenly
    #: spread) are scanned again at their snapshot, each against a compacted copy of its own rows (0: none).
    quiet_rescans: int = 12
    faults: bool = True
    kill_job_at: float = 0.15  # fractions of duration_s
    #: From the killed job's rewrite stage starting to its SIGKILL. The rewrite of a small partition can commit
    #: within it, so the kill may land after one of the job's commits (that commit is then checked post hoc).
    kill_delay_s: float = 0.3
    kill_scheduler_at: float = 0.40
    postgres_outage_at: float | None = 0.60  # None: no outage
    postgres_outage_s: float = 10.0
    policy: Mapping[str, str] = field(default_factory=dict)  # table properties (compaction.*)
    final_timeout_s: float = 900.0
    #: ``cron``: iceberg_compaction on ``schedule``, a spark-submit per job group; ``health``: the event-driven
    #: iceberg_compaction_on_health (a triggerer watches the table) feeding the catalog's resident executor.
    path: str = "cron"
    health_poll_s: float = 1.0
    health_min_interval_s: float = 5.0
    #: How long the run may go on past ``duration_s`` while a fault is still pending: on a slow machine the armed
    #: job may not reach its rewrite within the run, and a soak whose fault never happened proves nothing.
    fault_extension_s: float = 300.0
    #: ``spark``: our writer process (:class:`SoakWriter`); ``flink``: a Flink upsert job
    #: (:mod:`icecompact_testing.flink_soak`) on a table of its own schema, fed ``flink_batch_events`` CDC events
    #: over ``flink_keys`` primary keys every ``commit_interval_s``, after ``flink_base_batches`` for the base.
    writer: str = "spark"
    flink_keys: int = 200_000
    flink_batch_events: int = 2_000
    flink_base_batches: int = 60
    flink_checkpoint_ms: int = 1_000

    @property
    def dag_id(self) -> str:
        return "iceberg_compaction_on_health" if self.path == "health" else "iceberg_compaction"

    @property
    def table(self) -> str:
        return f"{NAMESPACE}.{TABLE}"


# ---------------------------------------------------------------------------------------------------- writer
def _java_error(error: BaseException) -> str:
    """The Java exception class behind a py4j error (or the Python class)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            return str(java.getClass().getName())
        except Exception:  # noqa: BLE001  (the gateway may be the problem)
            pass
    return type(error).__name__


class WriterProcess:
    """What every soak writer process shares: its settings and catalog from ``<workdir>/writer-config.json``, and
    its event log ``writer.jsonl`` (the soak's writer summary reads it). It builds the table, writes ``ready``,
    writes until ``<workdir>/stop`` exists, then the rows it expects live to ``expected.parquet``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        raw = json.loads((workdir / WRITER_CONFIG).read_text())
        self.config = SoakConfig(**{k: v for k, v in raw["config"].items() if k in SoakConfig.__dataclass_fields__})
        self.catalog = CatalogConfig(raw["catalog"]["name"], raw["catalog"]["properties"])
        self.log_path = workdir / "writer.jsonl"
        self._log = open(self.log_path, "a", buffering=1)

    def event(self, **fields: Any) -> None:
        fields.setdefault("t", time.time())
        self._log.write(json.dumps(fields) + "\n")


DML_KINDS = ("delete", "update", "merge")
#: Why Iceberg fails a merge-on-read DML whose start a commit of another writer (here: only compaction) came after:
#: the data files its deletes name were removed (a MAJOR / fragment merge), or delete files / a DV were added in the
#: rows it touched (a MINOR) - MergingSnapshotProducer / BaseRowDelta validation messages.
CONFLICT_MESSAGES = {
    "missing data files": "Cannot commit, missing data files",
    "conflicting delete files": "Found new conflicting delete files",
    "concurrently added DV": "Found concurrently added DV",
    "conflicting data files": "Found conflicting files that can contain records matching",
    "deleted delete files": "Cannot commit, missing delete files",
}


def conflict_of(message: str) -> str | None:
    """The validation a DML failed, by its message (``None``: not a conflict with another commit)."""
    return next((name for name, text in CONFLICT_MESSAGES.items() if text in message), None)


class SoakWriter(WriterProcess):
    """Our writer: streaming upserts as RowDeltas and Spark DELETE / MERGE, with a model of the live rows."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.merge_dir = workdir / "merge-rows"
        self.merge_dir.mkdir(exist_ok=True)
        self.round = 0

    def run(self) -> int:
        from compaction.spark import jvm as J
        from compaction.spark.session import build_session
        from icecompact_testing.bulk import BulkGenerator, BulkSpec, create_table

        config = self.config
        spark = build_session([self.catalog], SparkSettings(master="local[1]", app_name="icecompact-soak-writer"))
        self.spark = spark
        ref = f"{self.catalog.name}.{config.table}"
        self.ref = ref
        spec = BulkSpec.named(config.size, config.format_version, seed=config.seed, rounds=0, position_delete_every=0)
        create_table(spark, ref, spec)
        for key, value in config.policy.items():
            spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('{key}' = '{value}')")
        gen = BulkGenerator(spark, ref, spec, log=lambda m: print(m, flush=True), threads=2)
        base = gen.run()
        self.gen = gen
        self.jtable = J.load_table(spark, ref)
        (self.workdir / "ready").write_text(json.dumps({"live_rows": base.live_rows, "stats": dict(base.stats)}))
        next_dml = time.monotonic() + config.dml_interval_s
        dml_kind = 0
        while not (self.workdir / "stop").exists():
            tick = time.monotonic()
            if tick >= next_dml:
                self.dml(DML_KINDS[dml_kind % len(DML_KINDS)])
                dml_kind += 1
                next_dml = time.monotonic() + config.dml_interval_s
            else:
                self.stream_commit()
            time.sleep(max(0.0, config.commit_interval_s - (time.monotonic() - tick)))
        self.write_expected()
        spark.stop()
        return 0

    # -- streaming commits ----------------------------------------------------------------------------------
    def _refresh(self) -> None:
        while True:
            try:
                self.jtable.refresh()
                return
            except Exception as e:  # noqa: BLE001  (e.g. the catalog database is down: wait for it)
                self.event(kind="refresh", ok=False, error=_java_error(e))
                time.sleep(1.0)

    def _landed(self, commit_id: str) -> bool:
        """Whether a snapshot carrying our commit marker is in the table (a commit whose outcome was unknown)."""
        self._refresh()
        snapshot = self.jtable.currentSnapshot()
        for _ in range(200):  # the recent history is enough: the writer is the only one with markers
            if snapshot is None:
                return False
            summary = snapshot.summary()
            if summary is not None and summary.get(COMMIT_MARKER) == commit_id:
                return True
            parent = snapshot.parentId()
            snapshot = None if parent is None else self.jtable.snapshot(parent)
        return False

    def stream_commit(self) -> None:
        self.round += 1
        started = time.monotonic()
        # Writing files needs the table's location provider, which re-reads the table from the catalog after a
        # failed commit (Iceberg's table operations refresh lazily): refresh first, waiting out a catalog outage, so
        # that a failure below is ours.
        self._refresh()
        try:
            data_files, delete_files = self.gen.stream_files(self.jtable, self.round)
        except Exception as e:  # noqa: BLE001
            self.event(kind="stream", round=self.round, attempt=0, ok=False, error=_java_error(e), fatal=True)
            raise
        commit_id = uuid.uuid4().hex
        attempt = 0
        while True:
            attempt += 1
            t0 = time.monotonic()
            try:
                delta = self.jtable.newRowDelta().set(COMMIT_MARKER, commit_id)
                for f in data_files:
                    delta = delta.addRows(f)
                for f in delete_files:
                    delta = delta.addDeletes(f)
                delta.commit()
                self.event(kind="stream", round=self.round, attempt=attempt, ok=True,
                           latency=time.monotonic() - t0, total=time.monotonic() - started,
                           files=len(data_files) + len(delete_files))
                return
            except Exception as e:  # noqa: BLE001
                error = _java_error(e)
                self.event(kind="stream", round=self.round, attempt=attempt, ok=False, error=error,
                           message=str(e)[:300], latency=time.monotonic() - t0)
                if self._landed(commit_id):
                    self.event(kind="stream", round=self.round, attempt=attempt, ok=True, landed_anyway=True,
                               latency=time.monotonic() - t0, total=time.monotonic() - started)
                    return
                time.sleep(min(5.0, 0.5 * attempt))

    # -- Spark DML ------------------------------------------------------------------------------------------
    def _choose(self, rng: Any, per_partition: int) -> list[tuple[int, Any]]:
        np = self.gen.np
        out = []
        for p, part in enumerate(self.gen.parts):
            k = min(per_partition, len(part.ids))
            if k:
                out.append((p, np.sort(rng.choice(len(part.ids), k, replace=False))))
        return out

    def _model_rows(self, partition: int, idx: Any) -> Any:
        """The live rows of the model's keys ``ids[idx]`` of ``partition``, in that order, read from their files."""
        import pyarrow as pa

        part = self.gen.parts[partition]
        files, positions = part.file[idx], part.pos[idx]
        order, pieces = [], []
        for f in self.gen.np.unique(files):
            where = self.gen.np.nonzero(files == f)[0]
            order.extend(where.tolist())
            pieces.append(self._read_model_file(self.gen.files[int(f)]).take(pa.array(positions[where])))
        rows = pa.concat_tables(pieces)
        return rows.take(pa.array(self.gen.np.argsort(self.gen.np.array(order))))

    def _read_model_file(self, f: Any) -> Any:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if f.kind == "merge":
            data = pq.read_table(f.location)
        else:
            data = pq.read_table(pa.BufferReader(_read_all(self.jtable.io().newInputFile(f.location))))
        return data.select(list(self.gen.schema.names)).cast(self.gen.schema)

    @contextlib.contextmanager
    def _lease(self) -> Iterator[None]:
        """A write lease on the table around one DML attempt (``cooperative``), waiting out a ledger outage."""
        if not self.config.cooperative:
            yield
            return
        from compaction.ledger import Ledger
        from compaction.ops.leases import acquire

        while True:
            try:
                with Ledger.open() as ledger:
                    t0 = time.monotonic()
                    lease = acquire(ledger, self.config.table, self.catalog.name, holder="soak-writer dml", ttl_s=120)
                    self.event(kind="lease", ok=True, wait=time.monotonic() - t0)
                break
            except Exception as e:  # noqa: BLE001  (the ledger's database may be down: wait for it)
                self.event(kind="lease", ok=False, error=_java_error(e), message=str(e)[:300])
                time.sleep(1.0)
        try:
            yield
        finally:
            for _ in range(60):  # else it expires by its TTL
                try:
                    with Ledger.open() as ledger:
                        ledger.release_write_lease(lease)
                    break
                except Exception as e:  # noqa: BLE001
                    self.event(kind="lease", ok=False, error=_java_error(e), message=str(e)[:300])
                    time.sleep(1.0)

    def dml(self, kind: str) -> None:
        """A Spark ``DELETE``, ``UPDATE`` or ``MERGE`` of ``dml_keys`` live keys; retried when it conflicts (e.g.
        with a compaction that rewrote the files it deletes from); the model changes only once it has landed."""
        import pyarrow.parquet as pq

        np, gen = self.gen.np, self.gen
        self.round += 1
        rng = np.random.default_rng([self.config.seed, 9, self.round])
        chosen = self._choose(rng, max(1, self.config.dml_keys // max(1, len(gen.parts))))
        ids = sorted(int(i) for p, idx in chosen for i in gen.parts[p].ids[idx])
        id_list = ", ".join(str(i) for i in ids)  # our own integers, not user input
        version = 1_000_000 + self.round
        paths: list[Path | None] = [None] * len(chosen)
        if kind in ("merge", "update"):
            if kind == "merge":
                tables = [gen._rows(rng, gen.parts[p].ids[idx], gen.parts[p].day, version, gen.schema)
                          for p, idx in chosen]
            else:  # the same rows with a new version, as the UPDATE below writes them
                import pyarrow as pa

                tables = []
                for p, idx in chosen:
                    rows = self._model_rows(p, idx)
                    column = rows.schema.get_field_index("version")
                    tables.append(rows.set_column(column, rows.schema.field(column),
                                                  pa.array([version] * rows.num_rows, rows.schema.field(column).type)))
            for i, (p, rows) in enumerate(zip((p for p, _ in chosen), tables)):
                path = self.merge_dir / f"{kind}-{self.round:05d}-{p}.parquet"
                pq.write_table(rows, path)
                paths[i] = path
            if kind == "merge":
                self.spark.read.parquet(*[str(x) for x in paths]).createOrReplaceTempView("soak_merge_source")
                statement = (f"MERGE INTO {self.ref} t USING soak_merge_source s ON t.id = s.id "
                             "WHEN MATCHED THEN UPDATE SET *")
            else:
                statement = f"UPDATE {self.ref} SET version = {version} WHERE id IN ({id_list})"
            check = f"SELECT count(*) FROM {self.ref} WHERE id IN ({id_list}) AND version = {version}"
        else:
            statement = f"DELETE FROM {self.ref} WHERE id IN ({id_list})"
            check = f"SELECT count(*) FROM {self.ref} WHERE id IN ({id_list})"
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            t0 = time.monotonic()
            error: Exception | None = None
            with self._lease():
                t0 = time.monotonic()  # the DML's own time, not the wait for its lease
                try:
                    self.spark.sql(statement).collect()
                except Exception as e:  # noqa: BLE001
                    error = e
            if error is None:
                self.event(kind=kind, round=self.round, attempt=attempt, ok=True, latency=time.monotonic() - t0,
                           total=time.monotonic() - started, keys=len(ids))
                break
            else:
                e = error
                self.event(kind=kind, round=self.round, attempt=attempt, ok=False, error=_java_error(e),
                           message=str(e)[:300], conflict=conflict_of(str(e)), latency=time.monotonic() - t0)
                landed = self._dml_landed(check, len(ids) if kind != "delete" else 0)
                if landed:
                    self.event(kind=kind, round=self.round, attempt=attempt, ok=True, landed_anyway=True,
                               latency=time.monotonic() - t0, total=time.monotonic() - started, keys=len(ids))
                    break
                time.sleep(min(5.0, 0.5 * attempt))
        # The model: the chosen keys' live versions die; a MERGE's new versions live in its source files' rows.
        for (p, idx), path in zip(chosen, paths):
            part = gen.parts[p]
            gen._kill(part, idx)
            if path is None:
                keep = np.ones(len(part.ids), dtype=bool)
                keep[idx] = False
                part.ids, part.file, part.pos = part.ids[keep], part.file[keep], part.pos[keep]
            else:
                from icecompact_testing.bulk import _File

                index = len(gen.files)
                gen.files.append(_File(str(path), p, "merge", np.ones(len(idx), dtype=bool)))
                part.file[idx] = index  # row i of the source file is the new version of key ids[idx[i]]
                part.pos[idx] = np.arange(len(idx), dtype=np.int64)

    def _dml_landed(self, check: str, expected: int) -> bool:
        while True:
            try:
                return int(self.spark.sql(check).collect()[0][0]) == expected
            except Exception as e:  # noqa: BLE001  (the catalog may be down: wait)
                self.event(kind="check", ok=False, error=_java_error(e))
                time.sleep(1.0)

    def write_expected(self) -> None:
        """The model's live rows, read back from the files the generator and the MERGEs wrote."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        io = self.jtable.io()
        pieces = []
        for f in self.gen.files:
            if not f.live.any():
                continue
            if f.kind == "merge":
                data = pq.read_table(f.location)
            else:
                stream = io.newInputFile(f.location)
                data = pq.read_table(pa.BufferReader(_read_all(stream)))
            pieces.append(data.select(list(self.gen.schema.names)).cast(self.gen.schema).filter(pa.array(f.live)))
        pq.write_table(pa.concat_tables(pieces), self.workdir / "expected.parquet")
        self.event(kind="expected", rows=sum(p.num_rows for p in pieces))


def _read_all(input_file: Any) -> bytes:
    """A data file's bytes through Iceberg's FileIO (the warehouse may be any file system Iceberg reads)."""
    from urllib.parse import urlparse

    location = str(input_file.location())
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location).read_bytes()
    raise NotImplementedError(f"soak writer reads local warehouses only, not {location}")


# ---------------------------------------------------------------------------------------------------- processes
class _Airflow(AirflowProcesses):
    """The soak's Airflow: api-server, scheduler (killed and restarted by a fault) and, on the health path, the
    triggerer, all of one home."""

    def __init__(self, home: Path, env: dict[str, str], api_port: int, dag_id: str = "iceberg_compaction") -> None:
        super().__init__(home, env)
        self.api_port = api_port
        self.dag_id = dag_id
        self.old_groups: list[int] = []  # process groups of killed schedulers (their workers)

    @property
    def scheduler(self) -> subprocess.Popen[bytes] | None:
        return self.processes.get("scheduler")

    def cli(self, *args: str, check: bool = True, timeout: float = 300,  # type: ignore[override]
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return super().cli(*args, check=check, timeout=timeout, env=env)

    def start_api(self) -> None:
        self.start_api_server(self.api_port)

    def start_scheduler(self) -> None:
        self.start("scheduler", "scheduler")

    def start_triggerer(self) -> None:
        self.start("triggerer", "triggerer")

    def dag_runs(self) -> list[dict[str, Any]]:
        out = self.cli("dags", "list-runs", self.dag_id, "-o", "json", check=False, timeout=120)
        if out.returncode != 0:
            return []
        # Airflow prints warnings (e.g. graphviz missing) on stdout before the JSON.
        text = next((line for line in out.stdout.splitlines() if line.startswith("[")), "[]")
        try:
            return list(json.loads(text))
        except json.JSONDecodeError:
            return []

    def stop(self, name: str | None = None, timeout: float = 60) -> None:
        if name is None:
            import psutil

            # Orphaned LocalExecutor workers ignore SIGTERM. The killed scheduler's pid was its group's id, but it may
            # have been reused by now (the group's other members gone): kill members of the group that are Airflow
            # processes only, never the group blindly (their environment is not readable: setproctitle overwrites it).
            for proc in psutil.process_iter(["pid", "cmdline"]):
                try:
                    if os.getpgid(proc.pid) in self.old_groups and "airflow" in " ".join(proc.info["cmdline"] or []):
                        proc.kill()
                except (ProcessLookupError, psutil.Error):
                    pass
            self.old_groups.clear()
        super().stop(name, timeout=timeout)


def _set_up_airflow(workdir: Path, base_env: Mapping[str, str], config: SoakConfig) -> _Airflow:
    import socket

    from icecompact_airflow.demo import write_airflow_cfg

    home = workdir / "airflow"
    write_airflow_cfg(home)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {
        **base_env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        # A task whose worker died with the scheduler is noticed within a minute, not Airflow's default 5.
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
        "ICECOMPACT_DAG_SCHEDULE": config.schedule if config.path == "cron" else "none",
        "ICECOMPACT_DAG_WINDOW": "all",
    }
    if config.path == "health":
        env.update({"ICECOMPACT_HEALTH_TABLES": config.table, "ICECOMPACT_HEALTH_POLL_S": str(config.health_poll_s),
                    "ICECOMPACT_HEALTH_MIN_INTERVAL_S": str(config.health_min_interval_s)})
    airflow = _Airflow(home, env, port, dag_id=config.dag_id)
    airflow.cli("db", "migrate", timeout=600)
    airflow.cli("pools", "set", "icecompact_spark", "4", "icecompact Spark jobs")
    airflow.cli("dags", "reserialize")
    return airflow


# ---------------------------------------------------------------------------------------------------- report
@dataclass
class SoakReport:
    config: SoakConfig
    samples: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    writer_events: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    goals: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: float = 0.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SoakReport:
        """A report back from :meth:`to_json` (plus ``writer_events``), e.g. to evaluate the goals again."""
        config = SoakConfig(**{k: v for k, v in data["config"].items() if k in SoakConfig.__dataclass_fields__})
        return cls(config, samples=list(data["samples"]), faults=list(data["faults"]),
                   writer_events=list(data.get("writer_events", [])), runs=list(data["runs"]),
                   checks=dict(data["checks"]), started=float(data["started"]))

    def to_json(self) -> dict[str, Any]:
        return {"config": dataclasses.asdict(self.config), "started": self.started, "samples": self.samples,
                "faults": self.faults, "runs": self.runs, "checks": self.checks, "goals": self.goals,
                "writer": writer_summary(self.writer_events, self.faults)}


def writer_summary(events: Sequence[Mapping[str, Any]], faults: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Commit attempts, failures and latencies per kind; a failure during a PostgreSQL outage (from the stop to a
    few seconds after the start) is the outage's, any other failure of a streaming commit is compaction's."""
    outages = [(f["t"], f["t_end"] + 5.0) for f in faults if f["kind"] == "postgres_outage" and "t_end" in f]
    out: dict[str, Any] = {}
    for kind in ("stream", *DML_KINDS):
        mine = [e for e in events if e.get("kind") == kind]
        done = [e for e in mine if e.get("ok") and not e.get("landed_anyway")]
        failed = [e for e in mine if not e.get("ok")]
        in_outage = [e for e in failed if any(a <= e["t"] <= b for a, b in outages)]
        latencies = sorted(float(e["latency"]) for e in done)
        commits = {e["round"] for e in mine if e.get("ok")}
        retried = {e["round"] for e in failed}
        out[kind] = {
            "commits": len(commits),
            "attempts": len(mine) - sum(1 for e in mine if e.get("landed_anyway")),
            "failed_attempts": len(failed),
            "failed_attempts_in_outage": len(in_outage),
            "failed_attempts_otherwise": len(failed) - len(in_outage),
            "errors": dict(Counter(str(e.get("error")) for e in failed)),
            # A DML's validation failed on a commit that came after its start: in the soak, only compaction's.
            "failed_because_of_compaction": sum(1 for e in failed if e.get("conflict")),
            "conflicts": dict(Counter(str(e["conflict"]) for e in failed if e.get("conflict"))),
            "retried_commits": len(retried),
            "landed_after_unknown_outcome": sum(1 for e in mine if e.get("landed_anyway")),
            "latency_p50_s": _quantile(latencies, 0.5),
            "latency_p99_s": _quantile(latencies, 0.99),
            "latency_max_s": latencies[-1] if latencies else None,
        }
    return out


def _work_age(age: dict[str, Any] | None) -> str:
    if not age:
        return "not measured"
    return (f"{age['changes']} partition changes, to our validated compaction p50 {age['to_validated_p50_s']} s, "
            f"p95 {age['to_validated_p95_s']} s, unserved at the end {age['unserved']}")


def _bytes_rewritten(checks: Mapping[str, Any]) -> str:
    if "our_bytes_written" not in checks:
        return "bytes rewritten not recorded in this report"
    return (f"our compaction wrote {checks['our_bytes_written'] / 2**20:.0f} MiB and removed "
            f"{checks.get('our_bytes_removed', 0) / 2**20:.0f} MiB (snapshot summaries)")


def _read_cost_share(runs: list[dict[str, Any]]) -> str:
    """How many committed partition decisions the planner's read-cost model raised above the count rules', by kind."""
    committed = [p for r in runs for p in r["partitions"]]
    raised = Counter(p["kind"] for p in committed if p.get("by_read_cost"))
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(raised.items()))
    return (f"read-cost model raised {sum(raised.values())} of {len(committed)} committed partition decisions"
            + (f" ({kinds})" if kinds else ""))


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return float(values[min(len(values) - 1, int(q * len(values)))])


# ---------------------------------------------------------------------------------------------------- the run
def max_partition_eq_delete_files(sample: Mapping[str, Any]) -> int:
    """The most equality-delete files one partition had in ``sample`` (from its partitions in earlier reports)."""
    if "max_partition_eq_delete_files" in sample:
        return int(sample["max_partition_eq_delete_files"])
    return max((int(p["eq_delete_files"]) for p in sample.get("partitions", [])), default=0)


def _sample(catalog: CatalogConfig, table_name: str) -> dict[str, Any]:
    from compaction.core.model import DeleteContent
    from compaction.metadata.inspect import load_table, table_state

    identity, table = load_table(catalog, table_name)
    state = table_state(table, identity)
    partitions = []
    for p in state.partitions:
        eq = sum(1 for d in p.delete_files if d.content is DeleteContent.EQUALITY)
        partitions.append({"partition": p.key.label(), "data_files": p.data_file_count,
                           "delete_files": len(p.delete_files), "eq_delete_files": eq,
                           "records": sum(f.record_count for f in p.data_files),
                           "delete_records": sum(d.record_count for d in p.delete_files)})
    records = sum(x["records"] for x in partitions)
    delete_records = sum(x["delete_records"] for x in partitions)
    return {
        "snapshot_id": state.snapshot_id,
        "data_files": sum(x["data_files"] for x in partitions),
        "delete_files": sum(x["delete_files"] for x in partitions),
        "eq_delete_files": sum(x["eq_delete_files"] for x in partitions),
        "max_partition_delete_files": max((x["delete_files"] for x in partitions), default=0),
        "max_partition_eq_delete_files": max((x["eq_delete_files"] for x in partitions), default=0),
        "delete_ratio": delete_records / records if records else 0.0,
        "partitions": partitions,
    }


def _scan(spark: Any, ref: str, snapshot_id: int | None = None) -> tuple[float, int]:
    """A fixed full scan: every column of every live row (count and a hash over all columns), of the current
    snapshot or of ``snapshot_id``. (seconds, rows)"""
    spark.sql(f"REFRESH TABLE {ref}")
    columns = ", ".join(f"`{c}`" for c in spark.table(ref).columns)
    source = ref if snapshot_id is None else f"{ref} VERSION AS OF {int(snapshot_id)}"
    t0 = time.perf_counter()
    # decimal: a 64-bit sum of hashes overflows, an error under ANSI mode (Spark 4's default)
    rows = spark.sql(f"SELECT count(*), sum(cast(xxhash64({columns}) AS decimal(38,0))) FROM {source}").collect()[0][0]
    return time.perf_counter() - t0, int(rows)


def _paired_scan(spark: Any, ref: str, reference: str) -> dict[str, float]:
    """The table's scan and, right after it, the scan of a compacted copy (no deletes, files at the target size):
    the same machine load, so their per-row ratio is the table's read cost over a freshly compacted table's."""
    seconds, rows = _scan(spark, ref)
    ref_seconds, ref_rows = _scan(spark, reference)
    ratio = (seconds / max(rows, 1)) / (ref_seconds / max(ref_rows, 1))
    return {"scan_s": seconds, "rows": rows, "reference_scan_s": ref_seconds, "scan_ratio": ratio}


def reference_of(ref: str) -> str:
    return f"{ref}_scan_reference"


def compacted_copy(spark: Any, table_ref: str, target: str, format_version: int, snapshot_id: int | None = None,
                    *, keep_layout: bool = True) -> None:
    """A compacted copy of ``table_ref``'s rows (at ``snapshot_id``, default its current snapshot) as table
    ``target``, written whole by Spark with no delete file and never compacted by us.

    With ``keep_layout`` (the yardstick of the scan goals) the copy has the table's schema, partition spec, sort order
    and read / write properties (``write.target-file-size-bytes``, the codec): what a full rewrite of every partition
    writes, the compacted copy of the read-cost model (compaction.core.read_cost). Without it, the copy is
    unpartitioned at Spark's own file size, fewer and larger files than any compaction of a partitioned table may
    write (reported beside, for comparison)."""
    source = table_ref if snapshot_id is None else f"{table_ref} VERSION AS OF {int(snapshot_id)}"
    if not keep_layout:
        spark.sql(f"CREATE TABLE {target} USING iceberg TBLPROPERTIES ('format-version' = '{int(format_version)}', "
                  f"'compaction.enabled' = 'false') AS SELECT * FROM {source}")
        return
    from compaction.spark import jvm as J

    table = J.load_table(spark, table_ref)
    catalog_name, _, name = target.partition(".")
    iceberg_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(catalog_name).icebergCatalog()
    builder = (iceberg_catalog.buildTable(J.jvm(spark).org.apache.iceberg.catalog.TableIdentifier.parse(name),
                                          table.schema())
               .withPartitionSpec(table.spec()).withSortOrder(table.sortOrder()))
    properties = {k: v for k, v in dict(table.properties()).items() if k.startswith(("write.", "read."))}
    properties.update({"format-version": str(int(format_version)), "compaction.enabled": "false"})
    for key, value in properties.items():
        builder = builder.withProperty(key, value)
    builder.create()
    spark.sql(f"INSERT INTO {target} SELECT * FROM {source}")


#: Scans of each side of a quiet rescan, alternated; the fastest of each side is kept (load only ever adds time).
QUIET_SCAN_ROUNDS = 3


def _quiet_rescans(config: SoakConfig, report: SoakReport, spark: Any, ref: str, log: Callable[[str], None]) -> None:
    """Scan again, with nothing else running, ``config.quiet_rescans`` of the snapshots the sampler scanned after
    the first compaction, each against a compacted copy of that snapshot's own rows in the table's layout (see
    :func:`compacted_copy`), fastest of :data:`QUIET_SCAN_ROUNDS` alternated scans each. The sampler's live pairs run
    beside the writer and the compactions on the same cores, and compare with a copy of the table's rows at the
    start: the reference alone varies several-fold from one sample to the next. Adds ``quiet_scan_s``,
    ``quiet_reference_scan_s`` and ``quiet_scan_ratio`` to each rescanned sample, and the same against an
    unpartitioned copy (``quiet_unpartitioned_*``, for comparison only). When no scanned sample follows the first
    compaction (a short run on a slow machine), the scanned samples before it are rescanned instead (the goals judge
    only those after it)."""
    scanned = [s for s in samples_after_first_compaction(report) if "scan_ratio" in s and s.get("snapshot_id")]
    if not scanned:
        scanned = [s for s in report.samples if "scan_ratio" in s and s.get("snapshot_id") and "error" not in s]
    if config.quiet_rescans <= 0 or not scanned:
        return
    step = max(1, len(scanned) // config.quiet_rescans)
    chosen = scanned[::step][: config.quiet_rescans]
    copies = {"": f"{ref}_quiet_copy", "unpartitioned_": f"{ref}_quiet_unpartitioned_copy"}
    log(f"soak: quiet rescans of {len(chosen)} sampled snapshots, each against a compacted copy of its rows ...")
    for sample in chosen:
        sid = int(sample["snapshot_id"])
        for prefix, copy in copies.items():
            spark.sql(f"DROP TABLE IF EXISTS {copy} PURGE")
            compacted_copy(spark, ref, copy, config.format_version, sid, keep_layout=not prefix)
        seconds: dict[str, list[float]] = {side: [] for side in (ref, *copies.values())}
        rows: set[tuple[str, int]] = set()
        for i in range(QUIET_SCAN_ROUNDS):
            for side in (list(seconds) if i % 2 == 0 else list(seconds)[::-1]):
                took, n = _scan(spark, side, sid if side == ref else None)
                seconds[side].append(took)
                rows.add((side, n))
        if len({n for _, n in rows}) != 1:
            raise RuntimeError(f"quiet rescan of snapshot {sid}: a copy does not hold its rows ({sorted(rows)})")
        sample["quiet_scan_s"] = min(seconds[ref])
        for prefix, copy in copies.items():
            sample[f"quiet_{prefix}reference_scan_s"] = min(seconds[copy])
            sample[f"quiet_{prefix}scan_ratio"] = min(seconds[ref]) / min(seconds[copy])
    for copy in copies.values():
        spark.sql(f"DROP TABLE IF EXISTS {copy} PURGE")


def _kill_tree(pids: Mapping[str, int]) -> list[int]:
    """SIGKILL the job's driver JVM (its parent, when that is a java process) and its Python process."""
    killed = []
    parent = int(pids.get("parent", 0))
    try:
        cmdline = Path(f"/proc/{parent}/cmdline").read_bytes() if parent else b""
    except OSError:
        cmdline = b""
    targets = ([parent] if b"java" in cmdline else []) + [int(pids["python"])]
    for pid in targets:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def _executor_busy(ledger_url: str) -> bool:
    """Whether a resident executor runs a work item now (the health path's "a compaction job runs")."""
    return bool(_running_items(ledger_url))


def _running_items(ledger_url: str | None) -> list[dict[str, Any]]:
    from compaction.core.queue import WorkStatus
    from compaction.ledger import Ledger

    if ledger_url is None:
        return []
    try:
        with Ledger.open(ledger_url, timeout=5) as ledger:
            return [{"item_id": i.item_id, "run_id": i.run_id, "plan_id": i.plan_id}
                    for i in ledger.work_items(status=WorkStatus.RUNNING)]
    except Exception:  # noqa: BLE001 - e.g. during the outage
        return []


def _stop_executors(ledger_url: str, log: Callable[[str], None]) -> None:
    """Stop the resident executors the health path started (their supervisors are detached)."""
    from compaction.ops.executor import stop_executors
    from compaction.ledger import Ledger

    try:
        with Ledger.open(ledger_url, timeout=5) as ledger:
            if stop_executors(ledger, progress=log):
                deadline = time.time() + 60
                while ledger.executors() and time.time() < deadline:
                    time.sleep(0.5)
    except Exception as e:  # noqa: BLE001 - best effort at the end of a run
        log(f"soak: could not stop the executors: {e}")


def _compaction_job_running() -> bool:
    """Whether a spark-submit of a compaction job group runs on this machine (its entry script is in argv)."""
    from compaction.ops.submit import entry_script_path

    marker = str(entry_script_path()).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


SAMPLER_DRIVER_MEMORY = "4g"


def sampler_settings() -> SparkSettings:
    """The sampler's Spark session: local, and with heap for the final ``exceptAll`` of the writer's model against the
    table (~2.5M wide rows at size m; the default 1 GiB driver runs out of heap there)."""
    return SparkSettings(master="local[2]", app_name="icecompact-soak-sampler",
                         extra_conf={"spark.driver.memory": SAMPLER_DRIVER_MEMORY})


def run_soak(config: SoakConfig, workdir: Path, *, spark: Any = None,
             log: Callable[[str], None] = lambda m: print(m, flush=True)) -> SoakReport:
    """One soak run in ``workdir`` (kept: logs, writer events, plans). ``spark``: a session for the sampler's scans
    and the final checks (built here when ``None``)."""
    from icecompact_testing.postgres import start_cluster

    workdir.mkdir(parents=True, exist_ok=True)
    report = SoakReport(config)
    cluster = start_cluster()
    writer: subprocess.Popen[bytes] | None = None
    airflow: _Airflow | None = None
    ledger_url: str | None = None
    own_spark = spark is None
    try:
        # A new name per run: Spark keeps a catalog's instance (and its JDBC pool) for the session's lifetime, so a
        # second run in the same session must not reuse the first run's name for another database.
        catalog = CatalogConfig(f"{CATALOG_PREFIX}{uuid.uuid4().hex[:8]}", {
            "type": "sql", "uri": cluster.sqlalchemy_uri(cluster.create_database("soak_catalog")),
            "warehouse": (workdir / "warehouse").as_uri()})
        (workdir / "warehouse").mkdir(exist_ok=True)
        ledger_url = cluster.sqlalchemy_uri(cluster.create_database("soak_ledger"))
        from icecompact_airflow.connections import connection_env

        # Airflow settings of the calling process (e.g. a test session's AIRFLOW__DATABASE__SQL_ALCHEMY_CONN) would
        # override the soak's own airflow.cfg: the soak's processes start without them.
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        base_env = {**inherited, **connection_env(catalog), "ICECOMPACT_LEDGER_URL": ledger_url,
                    "ICECOMPACT_CATALOG": catalog.name, "ICECOMPACT_HOME": str(workdir / "home"),
                    "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
                    "ICECOMPACT_FAULT_INJECT": f"signal:before-rewrite:{workdir / 'kill-token'}"}
        (workdir / WRITER_CONFIG).write_text(json.dumps({
            "config": dataclasses.asdict(config),
            "catalog": {"name": catalog.name, "properties": dict(catalog.properties)}}))
        os.chmod(workdir / WRITER_CONFIG, 0o600)  # the catalog's password

        table_kind = f"{config.size} table" if config.writer == "spark" else "Flink writer's table"
        log(f"soak: building the {table_kind} (v{config.format_version}) in the writer process ...")
        writer_log = open(workdir / "writer.log", "ab")
        module = "icecompact_testing.flink_soak" if config.writer == "flink" else "icecompact_testing.soak"
        writer = subprocess.Popen([sys.executable, "-m", module, "writer", str(workdir)],
                                  env=base_env, stdout=writer_log, stderr=subprocess.STDOUT, start_new_session=True)
        airflow = _set_up_airflow(workdir, base_env, config)
        while not (workdir / "ready").exists():
            if writer.poll() is not None:
                raise RuntimeError(f"writer exited {writer.returncode}: "
                                   f"{(workdir / 'writer.log').read_text()[-3000:]}")
            time.sleep(1.0)
        log(f"soak: table ready: {json.loads((workdir / 'ready').read_text())['live_rows']:,} live rows")

        if spark is None:
            from compaction.spark.session import build_session

            spark = build_session([catalog], sampler_settings())
        else:
            from compaction.spark.session import register_catalog

            register_catalog(spark, catalog)
        ref = f"{catalog.name}.{config.table}"
        compacted_copy(spark, ref, reference_of(ref), config.format_version)  # the scan's yardstick

        airflow.start_api()
        airflow.start_scheduler()
        if config.path == "health":
            airflow.start_triggerer()
        airflow.cli("dags", "unpause", config.dag_id)
        if config.path == "health":
            # Airflow registers an asset's watchers only for an unpaused DAG, when the DAG file is parsed: a
            # dag-processor does it within its parse interval; here, parse now.
            airflow.cli("dags", "reserialize")
        report.started = start = time.time()
        log(f"soak: writer, scheduler and api-server running for {config.duration_s:.0f} s "
            f"(schedule {config.schedule!r})")
        _main_loop(config, workdir, report, cluster, airflow, spark, catalog, ref, start, log, ledger_url)

        log("soak: stopping the writer ...")
        (workdir / "stop").write_text("")
        writer.wait(timeout=600)
        if writer.returncode != 0:
            raise RuntimeError(f"writer exited {writer.returncode}: {(workdir / 'writer.log').read_text()[-3000:]}")
        _final_compaction(airflow, report, log, config.final_timeout_s)
        _quiesce(airflow, 900)
        airflow.stop()
        _stop_executors(ledger_url, log)
        report.writer_events = [json.loads(line) for line in (workdir / "writer.jsonl").read_text().splitlines()]
        _final_checks(config, workdir, report, spark, catalog, ref, ledger_url, log)
        return report
    finally:
        if writer is not None and writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
        if airflow is not None:
            airflow.stop()
        if cluster is not None and ledger_url is not None:
            _stop_executors(ledger_url, log)
        if own_spark and spark is not None:
            spark.stop()
        cluster.stop()


def _main_loop(config: SoakConfig, workdir: Path, report: SoakReport, cluster: Any, airflow: _Airflow, spark: Any,
               catalog: CatalogConfig, ref: str, start: float, log: Callable[[str], None], ledger_url: str) -> None:
    token = workdir / "kill-token"
    pending = {"kill_job": config.kill_job_at, "kill_scheduler": config.kill_scheduler_at} if config.faults else {}
    if config.faults and config.postgres_outage_at is not None:
        pending["postgres_outage"] = config.postgres_outage_at
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(config, report, spark, catalog, ref, start, stop, log),
                               daemon=True)
    sampler.start()
    try:
        running = _compaction_job_running if config.path == "cron" else lambda: _executor_busy(ledger_url)
        _fault_loop(config, token, pending, report, cluster, airflow, start, log, running, ledger_url)
    finally:
        stop.set()
        sampler.join(timeout=120)
    if "kill_job" in pending:
        report.faults.append({"kind": "kill_job", "t": None, "error": "no compaction job reached a rewrite"})
    if token.exists():
        token.unlink()  # disarm


def _sampler(config: SoakConfig, report: SoakReport, spark: Any, catalog: CatalogConfig, ref: str, start: float,
             stop: threading.Event, log: Callable[[str], None]) -> None:
    """Every ``sample_interval_s``: the table's files and deletes from metadata, and a timed full scan."""
    sample_no = 0
    while not stop.is_set():
        now = time.time()
        sample: dict[str, Any] = {"t": now}
        try:
            sample.update(_sample(catalog, config.table))
            if sample_no % config.scan_every == 0:
                sample.update(_paired_scan(spark, ref, reference_of(ref)))
        except Exception as e:  # noqa: BLE001  (e.g. during the outage; recorded, the soak goes on)
            sample["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        report.samples.append(sample)
        sample_no += 1
        if sample_no % 6 == 1:
            log(f"soak: t={now - start:.0f}s data files {sample.get('data_files')}, delete files "
                f"{sample.get('delete_files')} (eq {sample.get('eq_delete_files')}, max/partition "
                f"{sample.get('max_partition_delete_files')}), scan {sample.get('scan_s', 0):.2f} s "
                f"({sample.get('scan_ratio', 0):.2f}x a compacted copy's per row)")
        stop.wait(max(0.0, now + config.sample_interval_s - time.time()))


def _fault_loop(config: SoakConfig, token: Path, pending: dict[str, float], report: SoakReport, cluster: Any,
                airflow: _Airflow, start: float, log: Callable[[str], None],
                job_running: Callable[[], bool] = lambda: _compaction_job_running(), ledger_url: str | None = None,
                ) -> None:
    """The faults, each once, at its fraction of the run (the job kill: once the armed job's rewrite runs)."""
    armed_at: float | None = None
    extended = False
    while True:
        now = time.time()
        elapsed = now - start
        if elapsed >= config.duration_s:
            if not pending or elapsed >= config.duration_s + config.fault_extension_s:
                break
            if not extended:
                extended = True
                log(f"soak: t={elapsed:.0f}s still pending: {', '.join(sorted(pending))}; the run goes on for up to "
                    f"{config.fault_extension_s:.0f} s more")
        if "kill_job" in pending and elapsed >= pending["kill_job"] * config.duration_s and armed_at is None:
            token.write_text("")
            armed_at = now
            log(f"soak: t={elapsed:.0f}s armed: the next compaction job is killed mid-rewrite")
        pids_file = Path(f"{token}.pids")
        if armed_at is not None and "kill_job" in pending and pids_file.exists():
            pids = json.loads(pids_file.read_text())
            cmdline = _cmdline(int(pids["python"]))
            time.sleep(config.kill_delay_s)
            items = _running_items(ledger_url) if config.path == "health" else []
            killed = _kill_tree(pids)
            report.faults.append({"kind": "kill_job", "t": time.time(), "pids": killed, "cmdline": cmdline,
                                  "work_items": items})
            pending.pop("kill_job")
            log(f"soak: t={time.time() - start:.0f}s SIGKILL compaction job {killed}")
        if ("kill_scheduler" in pending and elapsed >= pending["kill_scheduler"] * config.duration_s
                and (job_running() or elapsed >= (pending["kill_scheduler"] + 0.2) * config.duration_s)):
            # The scheduler dies while a compaction job runs (its hardest moment: the job's task is orphaned and
            # the new scheduler must settle it), not wherever the clock happens to fall; after a grace period
            # without any job it dies anyway.
            assert airflow.scheduler is not None
            during_job = job_running()
            airflow.scheduler.kill()  # SIGKILL, the scheduler process only (its running tasks are on their own)
            airflow.scheduler.wait()
            airflow.old_groups.append(airflow.scheduler.pid)
            t0 = time.time()
            log(f"soak: t={t0 - start:.0f}s SIGKILL scheduler{' during a compaction job' if during_job else ''}; "
                "restarting in 5 s")
            time.sleep(5.0)
            airflow.start_scheduler()
            report.faults.append({"kind": "kill_scheduler", "t": t0, "t_end": time.time(), "during_job": during_job})
            pending.pop("kill_scheduler")
        if ("postgres_outage" in pending and elapsed >= pending["postgres_outage"] * config.duration_s
                and (job_running() or elapsed >= (pending["postgres_outage"] + 0.15) * config.duration_s)):
            # Like the scheduler kill: the outage starts while a compaction job runs (it must wait for the
            # catalog and carry on), after a grace period without one anyway.
            t0 = time.time()
            cluster.stop_server()
            log(f"soak: t={t0 - start:.0f}s PostgreSQL stopped for {config.postgres_outage_s:.0f} s")
            time.sleep(config.postgres_outage_s)
            cluster.start_server()
            report.faults.append({"kind": "postgres_outage", "t": t0, "t_end": time.time()})
            pending.pop("postgres_outage")
        if airflow.scheduler is not None and airflow.scheduler.poll() is not None:
            raise RuntimeError(f"scheduler died: {(airflow.home / 'scheduler.log').read_text()[-3000:]}")
        time.sleep(0.2)


def _quiesce(airflow: _Airflow, timeout: float) -> None:
    """Pause the DAG with no run in flight. A paused DAG's running run freezes (no further task is scheduled), so
    pause only between runs, and if a scheduled run slipped in, unpause until it has finished and try again."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not any(r.get("state") == "running" for r in airflow.dag_runs()):
            airflow.cli("dags", "pause", airflow.dag_id)
            if not any(r.get("state") == "running" for r in airflow.dag_runs()):
                return
            airflow.cli("dags", "unpause", airflow.dag_id)
        time.sleep(3.0)
    raise RuntimeError(f"the DAG still had a running run after {timeout:.0f} s")


def _final_compaction(airflow: _Airflow, report: SoakReport, log: Callable[[str], None], timeout: float) -> None:
    run_id = f"soak_final_{uuid.uuid4().hex[:8]}"
    log("soak: writer stopped; the last compaction (manual DAG run, mode auto) ...")
    conf = {"mode": "auto", "window": "all"} if airflow.dag_id == "iceberg_compaction" else {}
    airflow.cli("dags", "trigger", airflow.dag_id, "--run-id", run_id, "--conf", json.dumps(conf))
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = {r.get("run_id"): r.get("state") for r in airflow.dag_runs()}.get(run_id)
        if state in ("success", "failed"):
            report.checks["final_dag_run"] = {"run_id": run_id, "state": state}
            log(f"soak: last compaction {state}")
            return
        time.sleep(3.0)
    raise RuntimeError(f"the last compaction run did not finish within {timeout:.0f} s")


def _final_checks(config: SoakConfig, workdir: Path, report: SoakReport, spark: Any, catalog: CatalogConfig,
                  ref: str, ledger_url: str, log: Callable[[str], None]) -> None:
    from compaction.ledger import Ledger, OutcomeStatus
    from compaction.spark.major import PLAN_PROPERTY
    from icecompact_testing.oracle import normalize_row, read_table

    checks = report.checks
    # -- content: Spark and the reference reader against the writer's model
    spark.sql(f"REFRESH TABLE {ref}")
    expected_df = spark.read.parquet(str(workdir / "expected.parquet"))
    actual_df = spark.table(ref).select(*expected_df.columns)
    checks["spark_missing_rows"] = expected_df.exceptAll(actual_df).count()
    checks["spark_extra_rows"] = actual_df.exceptAll(expected_df).count()
    checks["expected_rows"] = expected_df.count()
    import pyarrow.parquet as pq

    # Multisets of row hashes, not rows: at size m the model holds ~2.5M wide rows, and two Counters of the rows
    # themselves take most of the machine's memory. A 64-bit hash collision among a few million rows is ~1e-7 likely.
    model: Counter[int] = Counter()
    for batch in pq.ParquetFile(workdir / "expected.parquet").iter_batches(batch_size=65_536):
        for values in zip(*(column.to_pylist() for column in batch.columns)):
            model[hash(normalize_row(values))] += 1
    loaded = catalog.load().load_table((NAMESPACE, TABLE))
    oracle = read_table(loaded)
    actual: Counter[int] = Counter()
    for row, count in oracle.rows.items():
        actual[hash(row)] += count
    del oracle
    checks["oracle_missing_rows"] = sum((model - actual).values())
    checks["oracle_extra_rows"] = sum((actual - model).values())
    log(f"soak: content: model {checks['expected_rows']:,} rows; Spark missing {checks['spark_missing_rows']}, "
        f"extra {checks['spark_extra_rows']}; reference reader missing {checks['oracle_missing_rows']}, extra "
        f"{checks['oracle_extra_rows']}")

    # -- the ledger: every run terminal; which run the killed job belonged to
    with Ledger.open(ledger_url) as ledger:
        runs = ledger.runs(config.table, limit=10_000)
        # Every check of the table's snapshots: by their job, or post hoc by a later plan (a job killed between its
        # commit and the commit's check leaves the snapshot on main for the next plan to check).
        recorded = ledger.snapshot_checks(config.table, catalog.name)
        committed_snapshots: set[int] = set()
        accounted_plans: set[str] = set()  # plans with a validated commit or an undone one
        for run in runs:
            outcomes = ledger.outcomes(run.run_id)
            report.runs.append({
                "run_id": run.run_id, "status": run.status.value, "airflow_run_id": run.airflow_run_id,
                "started_at": run.started_at.timestamp() if run.started_at else None,
                "finished_at": run.finished_at.timestamp() if run.finished_at else None,
                "plan_id": run.plan_id, "dry_run": run.dry_run, "error": (run.error or "")[:600],
                "outcomes": dict(Counter(o.status.value for o in outcomes)),
                "kinds": dict(Counter(o.kind.value for o in outcomes)),
                "conflicts": sum(o.conflicts for o in outcomes), "attempts": sum(o.attempts for o in outcomes),
                "reasons": sorted({(o.reason or "")[:160] for o in outcomes if o.status is not OutcomeStatus.COMMITTED
                                   and o.status is not OutcomeStatus.NO_OP}),
                # What each committed partition did to its files (why a partition's file count still grows).
                "partitions": [{"label": o.partition_label, "kind": o.kind.value, "reason": (o.reason or "")[:200],
                                "by_read_cost": READ_COST_REASON in (o.reason or ""),
                                "data_files": [o.data_files_before, o.data_files_after],
                                "delete_files": [o.delete_files_before, o.delete_files_after]}
                               for o in outcomes if o.status is OutcomeStatus.COMMITTED],
            })
            for o in outcomes:
                if o.status is OutcomeStatus.COMMITTED and o.commit_snapshot_id is not None:
                    committed_snapshots.add(int(o.commit_snapshot_id))
                if o.status in (OutcomeStatus.COMMITTED, OutcomeStatus.ROLLED_BACK):
                    accounted_plans.add(run.plan_id)
    # -- snapshots our jobs committed: each belongs to a committed (validated) outcome, or was undone
    loaded = catalog.load().load_table((NAMESPACE, TABLE))
    ours = []
    for snap in loaded.snapshots():
        summary = snap.summary.additional_properties if snap.summary else {}
        if PLAN_PROPERTY in summary:
            ours.append((snap.snapshot_id, summary[PLAN_PROPERTY]))
    main_chain = set()
    current = loaded.current_snapshot()
    while current is not None:
        main_chain.add(current.snapshot_id)
        current = loaded.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id else None
    checks["our_snapshots"] = len(ours)
    # What our compaction wrote and removed (Iceberg's snapshot summary counts data and delete files together).
    written = removed = 0
    for snap in loaded.snapshots():
        summary = snap.summary.additional_properties if snap.summary else {}
        if PLAN_PROPERTY in summary and snap.snapshot_id in main_chain:
            written += int(summary.get("added-files-size", 0) or 0)
            removed += int(summary.get("removed-files-size", 0) or 0)
    checks["our_bytes_written"] = written
    checks["our_bytes_removed"] = removed
    checks["our_snapshots_on_main"] = sum(1 for sid, _ in ours if sid in main_chain)
    checks["plans_with_snapshots"] = sorted({plan for _, plan in ours})
    checks["committed_outcome_snapshots"] = len(committed_snapshots)
    passed = {c.snapshot_id for c in recorded if c.result == "passed"}
    checks["snapshot_checks"] = [c.to_dict() for c in recorded]
    checks["post_hoc_checks"] = [c for c in checks["snapshot_checks"] if c["source"] == "post-hoc"]
    for c in checks["post_hoc_checks"]:
        log(f"soak: post-hoc check of snapshot {c['snapshot_id']} (plan {c['plan_id']}): {c['result']} ({c['detail']})")
    # A snapshot of ours on main whose run recorded neither a validated commit nor an undo, and that no check of
    # the ledger passed, was never validated.
    checks["unvalidated_snapshots"] = sorted(sid for sid, plan in ours if sid in main_chain
                                             and plan not in accounted_plans and sid not in passed)
    # -- freshness: from each commit that gave a partition work to our validated compaction of it
    from icecompact_testing.freshness import crossings

    with Ledger.open(ledger_url) as ledger:
        checks["freshness"] = crossings(catalog, config.table, ledger, since=report.started,
                                        until=report.started + config.duration_s)
        for fault in report.faults:  # the health path's killed executor: what became of the item it ran
            for entry in fault.get("work_items") or []:
                item = next(iter(ledger.work_items([entry["item_id"]])), None)
                run = ledger.run(entry["run_id"]) if entry.get("run_id") else None
                entry.update({"status": item.status.value if item else None, "attempts": item.attempts if item else None,
                              "error": (item.error or "")[:300] if item else None,
                              "run_status": run.status.value if run else None})
    fresh = checks["freshness"]
    log(f"soak: freshness: {fresh['crossings']} crossings, {fresh['served']} served; to validated p50 "
        f"{fresh['to_validated_p50_s']} s, p95 {fresh['to_validated_p95_s']} s (to commit p50 "
        f"{fresh['to_commit_p50_s']} s); unserved {fresh['unserved_age_s']}")
    for fault in report.faults:
        if fault["kind"] == "kill_job" and fault.get("cmdline"):
            run = next((r for r in report.runs if r["run_id"] in fault["cmdline"]), None)
            fault["run_id"] = run["run_id"] if run else None
            fault["run_status"] = run["status"] if run else None
            fault["snapshots_of_its_plan"] = sum(1 for _, plan in ours if run and plan == run["plan_id"])
            # A kill can land after a commit of the job (the rewrite of a small partition commits within the
            # moment between its stage starting and the signal): such a snapshot must then have passed a check.
            its_own = [sid for sid, plan in ours if run and plan == run["plan_id"] and sid in main_chain]
            fault["snapshots_of_its_plan_on_main"] = its_own
            fault["snapshots_of_its_plan_unchecked"] = [sid for sid in its_own if sid not in passed]
    # -- a full compaction for the scan reference
    from compaction.core.plan import CompactionMode
    from compaction.ops.runner import run_table

    _quiet_rescans(config, report, spark, ref, log)
    before = [_scan(spark, ref)[0] for _ in range(3)]
    with Ledger.open(ledger_url) as ledger:
        report_full = run_table(catalog, config.table, mode=CompactionMode.MAJOR, overrides={"major.full-rewrite": True},
                                spark_settings=SparkSettings.from_environment(), ledger=ledger)
    after = [_scan(spark, ref)[0] for _ in range(3)]
    checks["scan_end_s"] = sorted(before)[1]
    checks["scan_after_full_s"] = sorted(after)[1]
    checks["full_compaction_status"] = report_full.status.value
    checks["spark_missing_rows_after_full"] = expected_df.exceptAll(spark.table(ref).select(*expected_df.columns)).count()
    checks["spark_extra_rows_after_full"] = spark.table(ref).select(*expected_df.columns).exceptAll(expected_df).count()


# ---------------------------------------------------------------------------------------------------- goals
def minor_trigger(config: SoakConfig) -> int:
    """The table's MINOR trigger: ``compaction.minor.delete-file-count`` (the soak's policy or the default)."""
    from compaction.core.policy import CompactionPolicy

    return CompactionPolicy.resolve(dict(config.policy), {}).minor_delete_file_count


def samples_after_first_compaction(report: SoakReport) -> list[dict[str, Any]]:
    """The samples taken after the first run that committed (the goals judge the table once compaction runs)."""
    runs = sorted((r for r in report.runs if not r["dry_run"]), key=lambda r: r["started_at"] or 0)
    first_commit = next((r["finished_at"] for r in runs if r["outcomes"].get("committed")), None)
    return [s for s in report.samples if first_commit and s["t"] > first_commit and "error" not in s]


def evaluate(report: SoakReport, minor_trigger: int) -> dict[str, dict[str, Any]]:
    """The soak's goals, each with its figure and met / not met."""
    checks, start = report.checks, report.started
    writer = writer_summary(report.writer_events, report.faults)
    goals: dict[str, dict[str, Any]] = {}
    lost = checks.get("spark_missing_rows", -1) + checks.get("oracle_missing_rows", -1)
    extra = checks.get("spark_extra_rows", -1) + checks.get("oracle_extra_rows", -1)
    goals["no_rows_lost_or_resurrected"] = {
        "met": lost == 0 and extra == 0,
        "figure": f"missing {checks.get('spark_missing_rows')} / {checks.get('oracle_missing_rows')}, extra "
                  f"{checks.get('spark_extra_rows')} / {checks.get('oracle_extra_rows')} (Spark / reference reader)"}
    stream = writer["stream"]
    goals["writer_streaming_commits_never_fail_because_of_compaction"] = {
        "met": stream["failed_attempts_otherwise"] == 0 and stream["commits"] > 0,
        "figure": f"{stream['commits']} commits; failed attempts {stream['failed_attempts']} "
                  f"({stream['failed_attempts_in_outage']} during the PostgreSQL outage); latency p50 "
                  f"{stream['latency_p50_s']} s, p99 {stream['latency_p99_s']} s, max {stream['latency_max_s']} s"}
    flink_job = next((e for e in report.writer_events if e.get("kind") == "flink_job"), None)
    if flink_job is not None:
        flink_commits = next((e.get("commits") for e in report.writer_events if e.get("kind") == "flink_commits"), None)
        goals["flink_job_never_failed"] = {
            "met": bool(flink_job.get("ok")),
            "figure": f"job {flink_job.get('state')} after {flink_job.get('batches')} batches, {flink_commits} Flink "
                      f"commits (no restart, no failed checkpoint tolerated: any failed commit fails the job)"
                      + (f"; error {flink_job.get('error')}" if flink_job.get("error") else "")}
        kinds = Counter((p["kind"], p["reason"].split(" -> ")[0][:80]) for r in report.runs for p in r["partitions"])
        goals["planner_decisions_on_flink_commits"] = {
            "met": True, "figure": "; ".join(f"{kind} x{n}: {reason}" for (kind, reason), n in kinds.most_common(6))}
    dml = {k: writer[k] for k in DML_KINDS if k in writer and writer[k]["attempts"]}
    if dml:
        attempts = sum(v["attempts"] for v in dml.values())
        by_compaction = sum(v.get("failed_because_of_compaction", 0) for v in dml.values())
        bound = 0.0 if report.config.cooperative else 0.05
        goals["dml_failed_because_of_compaction"] = {
            "met": by_compaction <= bound * attempts,
            "figure": f"{'cooperative (write lease)' if report.config.cooperative else 'non-cooperative'} writer: "
                      f"{by_compaction} of {attempts} DML attempts ({100.0 * by_compaction / attempts:.1f} %, goal "
                      f"<= {100 * bound:.0f} %) failed because of compaction; " + ", ".join(
                          f"{k}: {v['commits']} commits, {v['attempts']} attempts, "
                          f"{v.get('failed_because_of_compaction', 0)} failed {v.get('conflicts', {})}"
                          for k, v in dml.items())}
    runs = sorted((r for r in report.runs if not r["dry_run"]), key=lambda r: r["started_at"] or 0)
    after = samples_after_first_compaction(report)
    worst = max((s["max_partition_delete_files"] for s in after), default=None)
    worst_eq = max((max_partition_eq_delete_files(s) for s in after), default=None)
    # Every streaming commit adds an equality-delete file to each partition it touches (all of them here), so between
    # two compactions of a partition about cycle / commit interval files arrive whatever the policy says.
    commit_ends = sorted(r["finished_at"] for r in runs if r["outcomes"].get("committed") and r["finished_at"])
    gaps = sorted(b - a for a, b in zip(commit_ends, commit_ends[1:]))
    cycle = _quantile(gaps, 0.5)
    arriving = f"{cycle / report.config.commit_interval_s:.0f}" if cycle else "?"
    # Bounded are the equality deletes: the delete files a reader joins on every data file of the partition. What
    # a MINOR leaves is one position delete file / DV per data file (Iceberg's file-scoped deletes, the shape the
    # planner counts as settled), bounded by the data files; its count is in the figure, not the bound.
    goals["equality_delete_files_per_partition_bounded"] = {
        "met": worst_eq is not None and worst_eq <= 2 * minor_trigger,
        "figure": f"max equality-delete files of a partition after the first compaction {worst_eq} (bound 2 x "
                  f"{minor_trigger}); median time between committing compaction runs {cycle or 0:.0f} s, in which "
                  f"the writer adds ~{arriving} equality-delete files to every partition; all delete files of a "
                  f"partition (position deletes / DVs included) max {worst}, median "
                  f"{_quantile(sorted(s['max_partition_delete_files'] for s in after), 0.5)}"}
    live = sorted(s["scan_ratio"] for s in after if "scan_ratio" in s)
    quiet = sorted(s["quiet_scan_ratio"] for s in after if "quiet_scan_ratio" in s)
    # The scan goals are judged on the quiet rescans where there are any (see _quiet_rescans); the live pairs are
    # reported beside them.
    unpartitioned = sorted(s["quiet_unpartitioned_scan_ratio"] for s in after if "quiet_unpartitioned_scan_ratio" in s)
    ratios = quiet or live
    # A report without unpartitioned rescans compared with an unpartitioned copy only (``--from-json`` re-renders).
    beside = (f"against an unpartitioned copy: median {_quantile(unpartitioned, 0.5):.2f}x, p90 "
              f"{_quantile(unpartitioned, 0.9):.2f}x; " if unpartitioned else "")
    layout = " in the table's layout" if unpartitioned else ""
    measured = (f"quiet rescans of {len(quiet)} sampled snapshots, each against a compacted copy of its own rows"
                f"{layout} ({beside}live pairs beside the run: "
                f"median {_quantile(live, 0.5):.2f}x, p90 {_quantile(live, 0.9):.2f}x)"
                if quiet else "live pairs beside the run") if ratios else ""
    goals["scan_within_1_5x_of_after_full_compaction"] = {
        "met": bool(ratios) and ratios[-1] <= 1.5,
        "figure": (f"scan over a compacted copy's after the first compaction, {measured}: median "
                   f"{_quantile(ratios, 0.5):.2f}x, p90 {_quantile(ratios, 0.9):.2f}x, max "
                   f"{ratios[-1]:.2f}x ({len(ratios)} samples); at the end, after the last compaction "
                   f"{checks.get('scan_end_s', 0):.2f} s vs {checks.get('scan_after_full_s', 0):.2f} s after a full "
                   f"compaction") if ratios else "no scans"}
    killed = next((f for f in report.faults if f["kind"] == "kill_job"), None)
    killed_run = killed.get("run_id") if killed else None
    if killed and not killed_run and killed.get("work_items"):
        killed_run = killed["work_items"][0].get("run_id")
    non_terminal = [r["run_id"] for r in runs if r["status"] in ("planned", "running")]
    bad = [r for r in runs if r["run_id"] != killed_run and r["status"] not in ("succeeded", "partial")]
    partial_without_reason = [r for r in runs if r["status"] == "partial" and not r["reasons"]]
    goals["every_run_terminal_and_succeeded"] = {
        "met": not non_terminal and not bad and not partial_without_reason and bool(runs),
        "figure": f"{len(runs)} runs: {dict(Counter(r['status'] for r in runs))}; not terminal {non_terminal}; "
                  f"failed other than the killed one {[(r['run_id'], r.get('error'), r['reasons']) for r in bad]}"}
    after_fault = []
    for fault in report.faults:
        if fault.get("t") is None:
            continue
        end = fault.get("t_end", fault["t"])
        nxt = next((r for r in runs if (r["started_at"] or 0) > end and r["run_id"] != killed_run), None)
        after_fault.append((fault["kind"], nxt["status"] if nxt else None))
    goals["run_after_each_fault_succeeds"] = {
        "met": bool(after_fault) and all(s in ("succeeded", "partial") for _, s in after_fault)
        and len(after_fault) == len([f for f in report.faults]),
        "figure": ", ".join(f"{k}: next run {s}" for k, s in after_fault) or "no faults"}
    if report.config.path == "health":
        # The killed executor's item is taken back when its lease runs out: re-run by the fresh executor (its run
        # then succeeds) or failed with its checkpoint; either way terminal, and its commits validated (below).
        items = (killed or {}).get("work_items") or []
        goals["killed_executor_item_terminal"] = {
            "met": bool(items) and all(i.get("status") in ("done", "failed") and i.get("run_status") in (
                "succeeded", "partial", "failed") for i in items),
            "figure": "; ".join(f"item {i['item_id'][:8]}: {i.get('status')} after {i.get('attempts')} attempt(s), "
                                f"run {i.get('run_status')} ({i.get('error')})" for i in items)
                      or "no executor was killed mid-item"}
        fresh = checks.get("freshness") or {}
        p50, p95 = fresh.get("to_validated_p50_s"), fresh.get("to_validated_p95_s")
        goals["freshness_p50_15s_p95_30s"] = {
            "met": p50 is not None and p95 is not None and p50 <= 15 and p95 <= 30,
            "figure": (f"{fresh.get('crossings')} commits gave a partition work; {fresh.get('served')} served: to our "
                       f"validated compaction p50 {p50} s, p95 {p95} s, max {fresh.get('to_validated_max_s')} s (to "
                       f"its commit p50 {fresh.get('to_commit_p50_s')} s, p95 {fresh.get('to_commit_p95_s')} s); "
                       f"unserved at the end, crossed s ago: {fresh.get('unserved_age_s')}; every writer commit's "
                       f"work (also where the partition already had work): {_work_age(fresh.get('work_age'))}")}
        goals["scan_median_1_5x_p90_2x"] = {
            "met": bool(ratios) and (_quantile(ratios, 0.5) or 9) <= 1.5 and (_quantile(ratios, 0.9) or 9) <= 2.0,
            "figure": (f"median {_quantile(ratios, 0.5):.2f}x, p90 {_quantile(ratios, 0.9):.2f}x ({measured})"
                       if ratios else "no scans")}
        goals["scan_median_1_3x_p90_1_6x"] = {
            "met": bool(ratios) and (_quantile(ratios, 0.5) or 9) <= 1.3 and (_quantile(ratios, 0.9) or 9) <= 1.6,
            "figure": ((f"median {_quantile(ratios, 0.5):.2f}x, p90 {_quantile(ratios, 0.9):.2f}x ({measured})"
                        if ratios else "no scans") + f"; {_bytes_rewritten(checks)}; {_read_cost_share(report.runs)}")}
    else:
        # The table is unchanged by the killed job, or what it committed before the kill passed a check (its own
        # or the post-hoc one of the next plan): nothing it left on main is unvalidated.
        goals["killed_run_failed_and_table_unchanged"] = {
            "met": bool(killed and killed.get("run_status") == "failed" and "snapshots_of_its_plan_unchecked" in killed
                        and not killed["snapshots_of_its_plan_unchecked"]),
            "figure": (f"run {killed.get('run_id')} {killed.get('run_status')}, snapshots of its plan "
                       f"{killed.get('snapshots_of_its_plan')} ({len(killed.get('snapshots_of_its_plan_on_main') or [])}"
                       f" on main, committed before the kill; unchecked "
                       f"{killed.get('snapshots_of_its_plan_unchecked')})") if killed else "no job was killed"}
    goals["no_snapshot_of_ours_unvalidated"] = {
        "met": checks.get("unvalidated_snapshots") == [],
        "figure": f"{checks.get('our_snapshots')} snapshots of ours ({checks.get('our_snapshots_on_main')} on main), "
                  f"{checks.get('committed_outcome_snapshots')} committed outcomes, "
                  f"{len(checks.get('post_hoc_checks') or [])} checked post hoc; unvalidated "
                  f"{checks.get('unvalidated_snapshots')}"}
    report.goals = goals
    return goals


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "writer":
        return SoakWriter(Path(args[1])).run()
    print("usage: python -m icecompact_testing.soak writer WORKDIR (the soak's writer process; see bench/soak.py)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
