"""A throwaway Hive Metastore (Thrift) for the tests: the catalog server behind ``type: hive`` catalogs::

    server = start_hive_metastore()
    catalog = server.catalog("hms")        # CatalogConfig(type=hive, uri=thrift://127.0.0.1:<port>, warehouse=...)
    ...
    server.stop()

The server is the Hive Metastore that PySpark already ships (``pyspark/jars``: ``hive-metastore``, ``hive-exec``,
DataNucleus, Derby, libthrift; Hive 2.3.x, the version Iceberg's own HiveCatalog tests run against), started as
``org.apache.hadoop.hive.metastore.HiveMetaStore`` in its own JVM with nothing to download: its class path is the
installed PySpark's ``jars`` folder, with a private ``conf`` folder (``hive-site.xml``, ``hive-log4j2.properties``)
ahead of it. It stores its catalog in an embedded Derby database that DataNucleus creates on start
(``datanucleus.schema.autoCreateAll``, schema verification off). The lock calls of both Iceberg's Java
``HiveCatalog`` and pyiceberg's ``HiveCatalog`` (each takes an HMS table lock around every commit) need the
metastore's transaction tables (``HIVE_LOCKS``, ``TXNS``, ...), which DataNucleus does not create. Hive makes them
itself (``TxnDbUtil.prepDb``) only with ``hive.in.test``, a mode that also refuses every lock request of a client
that leaves a lock's operation type unset - Iceberg's and pyiceberg's both do. So the metastore boots twice on the
same Derby database: once with ``hive.in.test`` until its transaction handler has made the tables (one ``SHOW
LOCKS``), then for good without it (a few seconds more, in the background like the rest with ``wait=False``). Tables
live under the server's warehouse, a ``file://`` folder of the same temp folder, which every client of this machine
reads directly.

Hive 2.3's metastore has no bind-address setting: it listens on a free port of every interface of this machine; the
clients here only ever connect to 127.0.0.1. The JVM runs with a small heap and C1 only (a 2-core machine shared with
Spark); its log (``server.log``) and Derby's (``derby.log``) stay in the temp folder, removed by :meth:`stop`.

This module is test rig only: the product never imports it (import-linter contract in setup.cfg).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from icecompact_testing.processes import free_port as _free_port

__all__ = ["HIVE_METASTORE_MAIN", "HiveMetastore", "hive_jars", "hive_version", "start_hive_metastore"]

HIVE_METASTORE_MAIN = "org.apache.hadoop.hive.metastore.HiveMetaStore"
#: Heap of the metastore JVM: it holds a Derby database of a few tables.
DEFAULT_HEAP = "512m"
#: Seconds a metastore may take to start (JVM, DataNucleus creating its Derby schema, the default database).
DEFAULT_TIMEOUT = 180.0
#: The packages Hive 2.3 and DataNucleus reach into by reflection on Java 17 (the list Spark's launcher opens).
_OPENS = ("java.base/java.lang", "java.base/java.lang.invoke", "java.base/java.lang.reflect", "java.base/java.io",
          "java.base/java.net", "java.base/java.nio", "java.base/java.util", "java.base/java.util.concurrent",
          "java.base/java.util.concurrent.atomic", "java.base/sun.nio.ch", "java.base/sun.nio.cs",
          "java.base/sun.security.action", "java.base/sun.util.calendar")


def hive_jars() -> Path:
    """The folder of jars the metastore runs from: ``$SPARK_HOME/jars`` when it holds a Hive metastore, else the
    installed PySpark's ``jars``; :class:`ConfigError` when neither does."""
    candidates = []
    if os.environ.get("SPARK_HOME"):
        candidates.append(Path(os.environ["SPARK_HOME"]) / "jars")
    try:
        import pyspark

        candidates.append(Path(pyspark.__file__).parent / "jars")
    except ImportError:
        pass
    for folder in candidates:
        if any(folder.glob("hive-metastore-*.jar")) and any(folder.glob("derby-*.jar")):
            return folder
    raise ConfigError(f"no Hive metastore jars (hive-metastore-*.jar, derby-*.jar) in {[str(c) for c in candidates]}")


def hive_version(jars: Path | None = None) -> str:
    """The Hive release of the metastore jars (``2.3.10`` for PySpark 4.1)."""
    for jar in sorted((jars or hive_jars()).glob("hive-metastore-*.jar")):
        match = re.fullmatch(r"hive-metastore-(\d[\w.]*)\.jar", jar.name)
        if match:
            return match.group(1)
    raise ConfigError("no hive-metastore-<version>.jar found")


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise ConfigError("java not found: install a Java 17 or 21 runtime (apt-get install openjdk-17-jre-headless)")
    return found


def _site_xml(properties: dict[str, str]) -> str:
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in properties.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


#: Logging of the metastore JVM (its stdout goes to ``server.log``): warnings only. Without this file Hive's own
#: default writes ``hive.log`` under ``$TMPDIR/<user>``, outside the server's folder.
_LOG4J2 = """\
status = error
name = icecompact-hms
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{2}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = error
logger.hive.name = hive
logger.hive.level = error
"""


@dataclass
class HiveMetastore:
    root: Path
    port: int
    version: str
    process: subprocess.Popen[bytes] | None = None
    #: Seconds from the start until :meth:`wait_ready` first saw the final metastore answer (None before).
    startup_seconds: float | None = None
    _started_at: float = field(default_factory=time.monotonic)
    _argv: list[str] = field(default_factory=list)
    _site: dict[str, str] = field(default_factory=dict)
    _boot: threading.Thread | None = None
    _boot_error: BaseException | None = None
    _stopped: bool = False

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> str:
        """The metastore's ``hive.metastore.warehouse.dir`` (a ``file://`` URI): where a database created without a
        location lives (``<warehouse>/<database>.db``)."""
        return (self.root / "warehouse").as_uri()

    def catalog_properties(self) -> dict[str, str]:
        """pyiceberg-style properties of a catalog on this metastore (what a ``.pyiceberg.yaml`` would hold)."""
        self.wait_ready()
        return {"type": "hive", "uri": self.uri, "warehouse": self.warehouse}

    def catalog(self, name: str) -> CatalogConfig:
        return CatalogConfig(name, self.catalog_properties())

    # Start-up ---------------------------------------------------------------------------------------------------
    def _launch(self, port: int, in_test: bool) -> None:
        conf = self.root / "conf"
        (conf / "hive-site.xml").write_text(_site_xml({**self._site, "hive.in.test": str(in_test).lower()}))
        with (self.root / "server.log").open("ab") as log:
            self.process = subprocess.Popen([*self._argv, "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.root, start_new_session=True, env=_env())

    def _await(self, port: int, deadline: float) -> None:
        while not _answers(port):
            if self._stopped:
                raise ConfigError("the Hive metastore was stopped while starting")
            if self.process is None or self.process.poll() is not None:
                raise ConfigError(f"the Hive metastore exited during start-up:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ConfigError(f"the Hive metastore did not answer within {DEFAULT_TIMEOUT:.0f} s:\n"
                                  f"{self.log_tail()}")
            time.sleep(0.2)

    def _boot_sequence(self, timeout: float) -> None:
        try:
            from hive_metastore.ttypes import ShowLocksRequest
            from pyiceberg.catalog.hive import _HiveClient

            deadline = self._started_at + timeout
            first_port = _free_port()
            while first_port == self.port:
                first_port = _free_port()
            self._launch(first_port, in_test=True)
            self._await(first_port, deadline)
            with _HiveClient(f"thrift://127.0.0.1:{first_port}") as client:
                client.show_locks(ShowLocksRequest())  # the transaction handler makes its tables
            self._halt(kill=True)  # Derby has committed them; its log replays whatever else on the next boot
            (self.root / "metastore_db" / "db.lck").unlink(missing_ok=True)
            for attempt in range(2):
                self._launch(self.port, in_test=False)
                try:
                    self._await(self.port, deadline)
                    break
                except ConfigError:
                    # Its port, free when chosen, may have been taken meanwhile by another process: once more.
                    if attempt or self._stopped or self.process is None or self.process.poll() is None:
                        raise
                    self.port = _free_port()
        except BaseException as e:  # handed to wait_ready
            self._boot_error = e

    def start(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._boot = threading.Thread(target=self._boot_sequence, args=(timeout,), name="hive-metastore-boot",
                                      daemon=True)
        self._boot.start()

    def wait_ready(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Return once the metastore answers; :class:`ConfigError` (with the log's tail) when it exits or is not
        ready ``timeout`` s after its start."""
        if self.startup_seconds is not None:
            return
        if self._boot is not None:
            self._boot.join(max(0.0, self._started_at + timeout - time.monotonic()) + 5)
        error = self._boot_error or (ConfigError(f"the Hive metastore did not start within {timeout:.0f} s")
                                     if self._boot is None or self._boot.is_alive() else None)
        if error is not None:
            tail = self.log_tail()
            self.stop()
            if isinstance(error, ConfigError):
                raise error
            raise ConfigError(f"the Hive metastore did not start: {error}\n{tail}") from error
        self.startup_seconds = time.monotonic() - self._started_at

    def ready(self) -> bool:
        return self.startup_seconds is not None or (self._boot is not None and not self._boot.is_alive()
                                                    and self._boot_error is None)

    # Shut-down --------------------------------------------------------------------------------------------------
    def log_tail(self, chars: int = 6000) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-chars:] if path.is_file() else ""

    def _halt(self, *, kill: bool = False) -> None:
        if self.process is not None and self.process.poll() is None:
            from icecompact_testing.processes import stop_process_group

            if kill:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            else:
                stop_process_group(self.process, timeout=20)

    def stop(self) -> None:
        self._stopped = True
        if self._boot is not None and self._boot is not threading.current_thread():
            self._boot.join(30)
        self._halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HiveMetastore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("HIVE_CONF_DIR", "HADOOP_CONF_DIR")}


def _answers(port: int) -> bool:
    """Whether a metastore on ``port`` answers a Thrift call (its port opens only once it has created its schema
    and default database)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    except OSError:
        return False
    from pyiceberg.catalog.hive import _HiveClient

    try:
        with _HiveClient(f"thrift://127.0.0.1:{port}") as client:
            return "default" in client.get_all_databases()
    except Exception:  # not serving yet
        return False


def start_hive_metastore(*, heap: str = DEFAULT_HEAP, timeout: float = DEFAULT_TIMEOUT,
                         wait: bool = True) -> HiveMetastore:
    """Start a metastore on a free port, its Derby database and warehouse in a fresh temp folder; returns once it
    answers, or at once with ``wait=False`` (it then starts in the background while the caller does other work;
    :meth:`HiveMetastore.catalog` and :meth:`HiveMetastore.wait_ready` wait for it). The caller must call
    ``stop()``."""
    try:
        import thrift  # noqa: F401
    except ImportError:
        raise ConfigError("the Hive metastore's clients need the thrift package (pip install 'pyiceberg[hive]')") from None
    jars = hive_jars()
    version = hive_version(jars)
    java = _java()
    root = Path(tempfile.mkdtemp(prefix="icecompact-hms-"))
    conf = root / "conf"
    conf.mkdir()
    (root / "warehouse").mkdir()
    site = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        # PySpark ships no BoneCP (Hive 2.3's default pool); DBCP and commons-pool it does.
        "datanucleus.connectionPoolingType": "DBCP",
        "hive.metastore.warehouse.dir": (root / "warehouse").as_uri(),
        "hive.metastore.try.direct.sql": "false",
        "hive.metastore.server.min.threads": "4",
    }
    (conf / "hive-log4j2.properties").write_text(_LOG4J2)
    argv = [
        java, f"-Xmx{heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m",
        "-XX:+IgnoreUnrecognizedVMOptions", *(f"--add-opens={p}=ALL-UNNAMED" for p in _OPENS),
        f"-Dderby.stream.error.file={root / 'derby.log'}", f"-Dderby.system.home={root}",
        f"-Dlog4j.configurationFile={conf / 'hive-log4j2.properties'}", f"-Djava.io.tmpdir={root}",
        "-Duser.timezone=UTC",
        "-cp", f"{conf}{os.pathsep}{jars / '*'}", HIVE_METASTORE_MAIN,
    ]
    server = HiveMetastore(root, _free_port(), version, _argv=argv, _site=site)
    server.start(timeout)
    if wait:
        server.wait_ready(timeout)
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icecompact_testing.hive_metastore",
                                     description="Run a throwaway Hive metastore in the foreground (Ctrl-C stops it "
                                                 "and deletes its data).")
    parser.add_argument("command", choices=("serve", "print"))
    args = parser.parse_args(argv)
    try:
        if args.command == "print":
            print(f"Hive metastore {hive_version()} from {hive_jars()}")
            return 0
        server = start_hive_metastore()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    try:
        print(f"Hive metastore {server.version} at {server.uri} (started in {server.startup_seconds:.1f} s)")
        for key, value in server.catalog_properties().items():
            print(f"export PYICEBERG_CATALOG__HMS__{key.upper()}={value}")
        server.process.wait()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
