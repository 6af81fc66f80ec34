"""A throwaway Flink upsert writer: the real engine that writes the equality deletes we compact in production.

A PyFlink job (Flink's local mini-cluster, in a process of its own) reads a CDC stream in Debezium JSON from a
directory (Flink's filesystem source, watching for new files) and writes it with Iceberg's Flink sink in upsert
mode (``write.upsert.enabled``, a PRIMARY KEY = the table's identifier fields) into Iceberg tables of a JDBC
(SQLite) catalog, checkpointing every second; every checkpoint that wrote something commits (and every tenth empty
one, Iceberg's ``flink.max-continuous-empty-commits``). That is the production shape:

* a checkpoint's data files and equality deletes land in one commit (a RowDelta that does not validate the data
  files its deletes reference, so a compaction never fails it);
* a key upserted twice within one checkpoint gets a *position* delete on the file the writer has open (Iceberg's
  ``BaseEqualityDeltaWriter`` keeps the rows it inserted since the last checkpoint), any other key an equality
  delete.

The stream is deterministic (:func:`cdc_events`, seeded) and fed in batches by the test (:meth:`FlinkWriter.feed`),
one file per batch; :func:`expected_rows` is the stream's oracle: the live row per key after the first ``n``
batches. The test waits until the table holds that state before it feeds the next batch (so it knows which batches
are committed), runs compactions between and beside the batches, and at the end stops the job
(:meth:`FlinkWriter.stop`, a cancel) and reads its final status: with Flink's restart strategy off and no failed
checkpoint tolerated, any failed checkpoint or commit fails the job, which the status file and the exit code say.

PyFlink pins a py4j that PySpark 4.1 cannot share, so it has a venv of its own, ``.venv-flink``, built by
``scripts/install.sh`` with :data:`PYFLINK_PIN` and ``testing/flink-constraints.txt``; the jars the job loads
(:data:`FLINK_JARS`) are fetched pinned and digest-checked into the project's Maven cache like Spark's
(``python -m icecompact_testing.flink fetch``). This file is also the job's script: run by ``.venv-flink``'s python
(``python flink.py job WORKDIR``) it imports nothing but the standard library and PyFlink.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from compaction.catalog import CatalogConfig

#: The Flink line: the newest one Iceberg publishes a Flink runtime for. Iceberg 1.12.0 (the project's default for
#: Spark) published no ``iceberg-flink-runtime-*`` on Maven Central, so the writer is Iceberg 1.11.0's runtime for
#: Flink 2.1 - an older writer beside a newer compactor, as in production when the streaming jobs lag an upgrade.
FLINK_LINE = "2.1"
PYFLINK_PIN = "apache-flink==2.1.3"
ICEBERG_FLINK_VERSION = "1.11.0"
#: (group, artifact, version, sha256) as Maven Central publishes them. Hadoop's shaded client (the version Iceberg
#: 1.11 builds against): the Flink runtime carries no Hadoop, and its catalog loader needs a Hadoop Configuration.
FLINK_JARS: tuple[tuple[str, str, str, str], ...] = (
    ("org.apache.iceberg", f"iceberg-flink-runtime-{FLINK_LINE}", ICEBERG_FLINK_VERSION,
     "39e658d876f253815b4b17c6676bebf6a24d517afe93a21298106d1d7fa97331"),
    ("org.apache.hadoop", "hadoop-client-api", "3.4.1", "a964d4daa054c9615bbafb4553efbb140fa7fb9ac6f358a24393f183a5703438"),
    ("org.apache.hadoop", "hadoop-client-runtime", "3.4.1",
     "f6a800a159f918670db533606d33560d6c13b7e13f14eda493280ae33b9eeb2f"),
)
FLINK_VENV_ENV = "ICECOMPACT_FLINK_VENV"
REPO_ROOT = Path(__file__).resolve().parents[2]

REGIONS = ("emea", "amer", "apac", "latam")
#: The table's columns (Flink SQL types); ``region`` is the partition source column, so it is in the primary key
#: (Iceberg's upsert needs every partition source column in the identifier fields).
COLUMNS = (("region", "STRING NOT NULL"), ("id", "BIGINT NOT NULL"), ("seq", "BIGINT"), ("payload", "STRING"))
PRIMARY_KEY = ("region", "id")
JOB_CONFIG = "job.json"
STATUS = "status.json"
STOP = "stop"


# ------------------------------------------------------------------------------------------- the CDC stream
@dataclass(frozen=True)
class StreamSpec:
    seed: int = 1
    keys: int = 400  # distinct primary keys
    regions: int = 4  # partitions: the first ``regions`` of REGIONS (a key's region never changes)
    batch_events: int = 150
    delete_fraction: float = 0.12
    #: Every this-many-th event updates the key of the event before it again: both land in the same batch, read
    #: within one checkpoint, so the writer answers the second with a position delete.
    repeat_every: int = 4


def _key(spec: StreamSpec, i: int) -> tuple[str, int]:
    if i % spec.repeat_every == 1:
        return _key(spec, i - 1)
    ident = random.Random(spec.seed * 1_000_003 + i).randrange(spec.keys)
    return REGIONS[ident % spec.regions], ident


def cdc_events(spec: StreamSpec, batches: int | None) -> Iterator[list[dict[str, Any]]]:
    """The first ``batches`` batches of the stream (``None``: endless), Debezium change events (``op`` c/u/d with
    before/after images) as a CDC source emits them: an insert for an absent key, an update of a present one, deletes
    of present keys."""
    state: dict[tuple[str, int], dict[str, Any]] = {}
    i = 0
    while batches is None or batches > 0:
        if batches is not None:
            batches -= 1
        batch: list[dict[str, Any]] = []
        for _ in range(spec.batch_events):
            key = _key(spec, i)
            before = state.get(key)
            rng = random.Random(spec.seed * 7_919 + i)
            if before is not None and i % spec.repeat_every != 1 and rng.random() < spec.delete_fraction:
                batch.append({"before": before, "after": None, "op": "d"})
                del state[key]
            else:
                after = {"region": key[0], "id": key[1], "seq": i, "payload": f"p{i}-{rng.randrange(1 << 30):x}"}
                batch.append({"before": before, "after": after, "op": "u" if before else "c"})
                state[key] = after
            i += 1
        yield batch


def expected_rows(spec: StreamSpec, batches: int) -> dict[tuple[str, int], tuple[str, int, int, str]]:
    """The live row per primary key after the first ``batches`` batches (columns in table order)."""
    live: dict[tuple[str, int], tuple[str, int, int, str]] = {}
    for batch in cdc_events(spec, batches):
        for event in batch:
            row = event["after"] or event["before"]
            key = (row["region"], row["id"])
            if event["op"] == "d":
                live.pop(key, None)
            else:
                live[key] = (row["region"], row["id"], row["seq"], row["payload"])
    return live


# ------------------------------------------------------------------------------------------- host side
def flink_venv() -> Path:
    return Path(os.environ.get(FLINK_VENV_ENV) or REPO_ROOT / ".venv-flink")


def flink_python() -> Path:
    python = flink_venv() / "bin" / "python"
    if not python.is_file():
        raise RuntimeError(f"{python} is missing: run `make install` (scripts/install.sh builds the Flink venv)")
    return python


def _maven_jars() -> tuple[Any, ...]:
    from compaction.spark.artifacts import MavenJar

    return tuple(MavenJar(g, a, v, sha) for g, a, v, sha in FLINK_JARS)


def fetch_jars() -> list[Path]:
    """Fetch the pinned jars (idempotent, digests checked) into the project's Maven cache."""
    from compaction.spark.artifacts import JDBC_DRIVERS, fetch

    return fetch((*_maven_jars(), *JDBC_DRIVERS))


def jar_paths() -> list[Path]:
    from compaction.spark.artifacts import JDBC_DRIVERS, cached_path

    return [cached_path(j) for j in (*_maven_jars(), *JDBC_DRIVERS)]


def flink_catalog_options(catalog: CatalogConfig) -> dict[str, str]:
    """Flink's Iceberg catalog for ``catalog`` (a SQL one: SQLite or PostgreSQL): Iceberg's JdbcCatalog on the same
    database, under the same catalog name (the JDBC catalog keys its rows by it), with pyiceberg's V1 schema, as
    CatalogConfig.spark_conf sets up Spark's (the password included: the options go to the job's 0600 config file)."""
    spark = {**catalog.spark_conf(), **catalog.spark_secret_conf()}
    prefix = f"spark.sql.catalog.{catalog.name}"
    if spark.get(f"{prefix}.type") != "jdbc" or not spark[f"{prefix}.uri"].startswith(("jdbc:sqlite:",
                                                                                          "jdbc:postgresql:")):
        raise ValueError(f"catalog {catalog.name!r}: the Flink writer supports SQLite and PostgreSQL catalogs only")
    options = {"type": "iceberg", "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
               "uri": spark[f"{prefix}.uri"], "warehouse": spark[f"{prefix}.warehouse"],
               "jdbc.schema-version": "V1"}
    for key in ("jdbc.user", "jdbc.password"):
        if f"{prefix}.{key}" in spark:
            options[key] = spark[f"{prefix}.{key}"]
    return options


class FlinkWriter:
    """The running job. ``start`` creates the tables (in Flink, as a Flink user does) and starts one upsert job
    writing all of them (one Flink start-up, the costly part, for several tables), each from a source directory of
    its own that gets the same stream; ``feed(n)`` drops the stream's next batches; ``wait_committed`` waits until a
    table holds the state after every batch fed; ``stop`` cancels the job and returns its final status."""

    def __init__(self, workdir: Path, proc: subprocess.Popen[bytes], spec: StreamSpec, tables: dict[str, int],
                 batches_fed: int = 0) -> None:
        self.workdir, self.proc, self.spec, self.tables, self.batches_fed = workdir, proc, spec, tables, batches_fed
        # The stream read on as batches are fed (generating it from its start at every feed is quadratic).
        self._stream = cdc_events(spec, None)
        for _ in range(batches_fed):
            next(self._stream)
        self.log_path = workdir / "flink.log"

    def source_dir(self, table: str) -> Path:
        return self.workdir / "source" / table

    @classmethod
    def start(cls, catalog: CatalogConfig, tables: dict[str, int], workdir: Path, *, spec: StreamSpec = StreamSpec(),
              checkpoint_interval_ms: int = 1000, timeout_s: float = 300) -> FlinkWriter:
        """``tables``: ``namespace.name`` -> format version (2 or 3)."""
        workdir.mkdir(parents=True, exist_ok=True)
        for table in tables:
            (workdir / "source" / table).mkdir(parents=True, exist_ok=True)
        config = {"catalog_name": catalog.name, "catalog": flink_catalog_options(catalog),
                  "tables": [{"namespace": t.split(".")[0], "table": t.split(".")[1], "format_version": v,
                              "source_dir": str(workdir / "source" / t)} for t, v in tables.items()],
                  "checkpoint_interval_ms": checkpoint_interval_ms, "spec": asdict(spec)}
        (workdir / JOB_CONFIG).write_text(json.dumps(config, indent=2))
        os.chmod(workdir / JOB_CONFIG, 0o600)  # a PostgreSQL catalog's password
        log = open(workdir / "flink.log", "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_", "PYTHONPATH"))}
        env["FLINK_LOG_DIR"] = str(workdir / "log")  # the mini-cluster's own log4j files, for a failure's cause
        # On the JVM's own class path (PyFlink's gateway adds HADOOP_CLASSPATH), not in pipeline.jars: the catalog is
        # created in the client before any job, outside the user-code class loader, and it needs Hadoop's
        # Configuration; JDBC's DriverManager, too, only sees drivers of the caller's loader.
        env["HADOOP_CLASSPATH"] = os.pathsep.join(str(p) for p in jar_paths())
        proc = subprocess.Popen([str(flink_python()), str(Path(__file__).resolve()), "job", str(workdir)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=workdir)
        writer = cls(workdir, proc, spec, dict(tables))
        deadline = time.monotonic() + timeout_s
        while writer.status().get("state") != "RUNNING":
            if proc.poll() is not None or time.monotonic() > deadline:
                writer.kill()
                raise RuntimeError(f"the Flink job did not start (exit {proc.returncode}):\n{writer.log_tail()}")
            time.sleep(0.5)
        return writer

    def status(self) -> dict[str, Any]:
        try:
            status: dict[str, Any] = json.loads((self.workdir / STATUS).read_text())
            return status
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def feed(self, batches: int = 1, *, one_file: bool = False) -> list[list[dict[str, Any]]]:
        """Drop the next ``batches`` batches, one file each (``one_file``: all in one file, in order), and return
        them; the source picks a file up only once it has its final name (files starting with ``.`` are hidden from
        it), so it never reads half a batch. Files found in one scan of the directory are not read in name order:
        feed the next file only once the previous one is committed (or read), or the stream's order is lost."""
        fed = [next(self._stream) for _ in range(batches)]
        files = [(self.batches_fed, fed)] if one_file else [(self.batches_fed + i, [b]) for i, b in enumerate(fed)]
        for number, content in files:
            for table in self.tables:
                tmp = self.source_dir(table) / f".batch-{number:05d}.json"
                tmp.write_text("".join(json.dumps(e) + "\n" for batch in content for e in batch))
                tmp.rename(self.source_dir(table) / f"batch-{number:05d}.json")
        self.batches_fed += batches
        return fed

    def expected(self) -> dict[tuple[str, int], tuple[str, int, int, str]]:
        """The live row per key once every batch fed is committed."""
        return expected_rows(self.spec, self.batches_fed)

    def wait_committed(self, catalog: CatalogConfig, table: str, timeout_s: float = 180) -> int:
        """Wait until ``table``'s current snapshot, read by the reference reader, holds exactly the state after
        every batch fed (each checkpoint commits a prefix of the stream, so that state means "all fed batches are
        committed"); returns the snapshot id. Raises if the job dies or the timeout (a hang guard) passes."""
        from collections import Counter

        from icecompact_testing.oracle import read_table

        want = Counter(self.expected().values())
        identifier = tuple(table.split("."))
        deadline = time.monotonic() + timeout_s
        while True:
            tbl = catalog.load().load_table(identifier)
            snapshot = tbl.current_snapshot()
            if snapshot is not None and read_table(tbl, snapshot.snapshot_id).rows == want:
                return snapshot.snapshot_id
            if not self.alive():
                raise RuntimeError(f"the Flink job is not running: {self.status()}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{table}: batches up to {self.batches_fed} not committed in {timeout_s} s")
            time.sleep(0.5)

    def alive(self) -> bool:
        return self.proc.poll() is None and self.status().get("state") == "RUNNING"

    def stop(self, timeout_s: float = 120) -> dict[str, Any]:
        """Cancel the job (the test has seen every batch it fed committed) and return its final status."""
        (self.workdir / STOP).touch()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        return {**self.status(), "exit_code": self.proc.returncode}

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# ------------------------------------------------------------------------------------------- the job (.venv-flink)
def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"{_sql_literal(k)} = {_sql_literal(v)}" for k, v in options.items())


def run_job(workdir: Path) -> int:
    """The job's process: create the tables if absent, start one upsert job writing all of them, write its state to
    ``status.json`` and cancel it once ``stop`` exists (or the process that started it is gone, so that a killed
    test leaves no job behind). Exit 0 only if the job ran until we cancelled it."""
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = json.loads((workdir / JOB_CONFIG).read_text())
    parent = os.getppid()
    status_path = workdir / STATUS

    def status(**fields: Any) -> None:
        tmp = status_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**fields, "t": time.time()}))
        tmp.replace(status_path)

    conf = Configuration()
    for key, value in {
        "parallelism.default": "1",  # one reader, one writer: the stream's order per key is the file order
        "execution.checkpointing.interval": f"{config['checkpoint_interval_ms']}ms",
        # Any failure is the test's failure: no restart, no failed checkpoint tolerated (Iceberg commits on the
        # checkpoint-complete notification, a failed commit fails the job).
        "restart-strategy.type": "none",
        "execution.checkpointing.tolerable-failed-checkpoints": "0",
        "rest.port": "0",  # the mini-cluster's web endpoint on a free port: tests run side by side
        # The sink takes the stream's change rows as they are, as production upsert jobs do (no materializer state).
        "table.exec.sink.upsert-materialize": "NONE",
        "table.exec.resource.default-parallelism": "1",
    }.items():
        conf.set_string(key, value)
    t_env = TableEnvironment.create(EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf)
                                    .build())
    cat = config["catalog_name"]
    t_env.execute_sql(f"CREATE CATALOG `{cat}` WITH ({_with(config['catalog'])})")
    columns = ", ".join(f"`{c}` {t}" for c, t in COLUMNS)
    key = ", ".join(f"`{c}`" for c in PRIMARY_KEY)
    statements = t_env.create_statement_set()
    for n, target in enumerate(config["tables"]):
        ns, table = target["namespace"], target["table"]
        t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS `{cat}`.`{ns}`")
        t_env.execute_sql(
            f"CREATE TABLE IF NOT EXISTS `{cat}`.`{ns}`.`{table}` ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) "
            f"PARTITIONED BY (`region`) WITH ("
            + _with({"format-version": str(target["format_version"]), "write.upsert.enabled": "true",
                     "write.format.default": "parquet"}) + ")")
        t_env.execute_sql(
            f"CREATE TEMPORARY TABLE cdc_source_{n} ({columns}) WITH ("
            + _with({"connector": "filesystem", "path": Path(target["source_dir"]).as_uri(),
                     "format": "debezium-json", "source.monitor-interval": "300ms"}) + ")")
        statements.add_insert_sql(f"INSERT INTO `{cat}`.`{ns}`.`{table}` SELECT * FROM cdc_source_{n}")
    client = statements.execute().get_job_client()
    job_id = str(client.get_job_id())
    cancelled, error = False, None
    while True:
        try:
            state = client.get_job_status().result().name
        except Exception as e:  # noqa: BLE001  (a job that failed takes its mini-cluster down with it)
            state, error = "GONE", str(e)[-2000:]
        status(job_id=job_id, state=state, cancelled=cancelled)
        if state in ("FAILED", "CANCELED", "FINISHED", "GONE"):
            break
        if (workdir / STOP).exists() or os.getppid() != parent:
            # Once cancelled, the job's mini-cluster shuts down and answers no status query: the completed cancel
            # is the final state (a failure before it was seen by the status query of this or an earlier turn).
            client.cancel().result()
            state, cancelled = "CANCELED", True
            break
        time.sleep(0.3)
    if state in ("FAILED", "GONE"):
        try:
            client.get_job_execution_result().result()
        except Exception as e:  # noqa: BLE001  (the job's failure, reported)
            error = str(e)[-4000:]
    status(job_id=job_id, state=state, cancelled=cancelled, error=error)
    print(f"flink job {job_id}: {state}" + (f"\n{error}" if error else ""), flush=True)
    return 0 if state == "CANCELED" and cancelled else 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["job"] and len(args) == 2:
        return run_job(Path(args[1]))
    if args == ["fetch"]:
        for path in fetch_jars():
            print(f"  {path}")
        return 0
    print("usage: python -m icecompact_testing.flink fetch | python flink.py job WORKDIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
