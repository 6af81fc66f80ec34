"""A throwaway PostgreSQL cluster for tests and benchmarks (initdb + pg_ctl on 127.0.0.1, temp folder)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from icecompact_testing.processes import free_port as _free_port


def _pg_bin() -> Path:
    explicit = os.environ.get("ICECOMPACT_PG_BIN")
    candidates = [explicit] if explicit else sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for c in candidates:
        if c and (Path(c) / "initdb").exists():
            return Path(c)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise ConfigError("PostgreSQL server binaries not found: apt-get install postgresql (or set ICECOMPACT_PG_BIN)")


@dataclass
class PostgresCluster:
    root: Path
    port: int
    user: str = "icecompact"
    password: str = "icecompact-test"
    options: str = ""  # the server's command-line options (pg_ctl -o), kept for restart()
    run_as: tuple[str, ...] = ()  # runuser prefix when the cluster belongs to the postgres system user

    def sqlalchemy_uri(self, database: str) -> str:
        return f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        name = name or f"cat_{uuid.uuid4().hex[:10]}"
        self._psql(f'CREATE DATABASE "{name}"')
        return name

    def sql_catalog(self, prefix: str, warehouse: Path) -> CatalogConfig:
        """A SQL catalog on a database of its own in this cluster (``prefix`` and a random suffix as its name), its
        warehouse the folder ``warehouse`` (created)."""
        warehouse.mkdir(parents=True, exist_ok=True)
        return CatalogConfig(f"{prefix}_{uuid.uuid4().hex[:8]}", {
            "type": "sql", "uri": self.sqlalchemy_uri(self.create_database()), "warehouse": warehouse.as_uri()})

    def _psql(self, sql: str) -> None:
        env = {**os.environ, "PGPASSWORD": self.password}
        subprocess.run(
            [str(_pg_bin() / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres",
             "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
            check=True, env=env, capture_output=True,
        )

    def stop(self) -> None:
        subprocess.run([*self.run_as, str(_pg_bin() / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def stop_server(self) -> None:
        """Stop the server (fast shutdown: open sessions are terminated), keeping its data: an outage."""
        subprocess.run([*self.run_as, str(_pg_bin() / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w",
                        "stop"], check=True, capture_output=True)

    def start_server(self) -> None:
        """Start the server again on the same port and data (after :meth:`stop_server`); waits until it accepts."""
        subprocess.run([*self.run_as, str(_pg_bin() / "pg_ctl"), "-D", str(self.root / "data"), "-o", self.options,
                        "-l", str(self.root / "log"), "-w", "start"], check=True, capture_output=True)
        _wait_for_port(self.port)


def start_cluster() -> PostgresCluster:
    """Start a private cluster on 127.0.0.1 and a free port; the caller must call ``stop()``.

    initdb refuses to run as root, so under root the cluster runs as the ``postgres`` system user."""
    bindir = _pg_bin()
    root = Path(tempfile.mkdtemp(prefix="icecompact-pg-"))
    port = _free_port()
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200"
    run_as: tuple[str, ...] = ()
    if os.geteuid() == 0:
        run_as = ("runuser", "-u", "postgres", "--")
    cluster = PostgresCluster(root, port, options=opts, run_as=run_as)
    pwfile = root / "pw"
    pwfile.write_text(cluster.password)
    data = root / "data"
    if run_as:
        # initdb refuses to run as root; hand the folder to the postgres system user.
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    subprocess.run(
        [*run_as, str(bindir / "initdb"), "-D", str(data), "-U", cluster.user, f"--pwfile={pwfile}",
         "-A", "scram-sha-256", "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True,
    )
    subprocess.run(
        [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"],
        check=True, capture_output=True,
    )
    _wait_for_port(port)
    return cluster


def _wait_for_port(port: int, seconds: float = 20) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
