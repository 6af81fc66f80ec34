"""Other Iceberg REST catalog servers than SeaweedFS's built-in one, throwaway, for the tests: users run these.

* **Nessie** (:data:`NESSIE_VERSION`): the server's uber-jar from Maven Central (``nessie-quarkus:<v>:runner``, run
  with ``java -jar``), version store ``IN_MEMORY``, Iceberg REST under ``http://127.0.0.1:<port>/iceberg``;
* **Iceberg's REST reference server** (``org.apache.iceberg.rest.RESTCatalogServer``, Iceberg
  :data:`REST_FIXTURE_ICEBERG`): what the ``apache/iceberg-rest-fixture`` image runs, assembled from the bare jars
  Maven Central has (``iceberg-open-api:<v>:test-fixtures``, ``iceberg-core:<v>:tests``) plus their runtime
  dependencies, which those jars do not declare and :data:`REST_FIXTURE_DEPENDENCIES` lists (Jetty 12 ee10,
  sqlite-jdbc, Hadoop's client for the ``Configuration`` the server builds its catalog with, ``iceberg-aws`` +
  the AWS bundle for ``S3FileIO``); its backend is a ``JdbcCatalog`` on a SQLite file of the server's temp folder.

Both keep their tables on the session's SeaweedFS S3 endpoint (:class:`compaction.demo.object_store.ObjectStoreServer`),
each in a plain bucket of its own (SeaweedFS's table bucket is its own catalog's), and both bind 127.0.0.1 where they
can, on free ports, with config and data in a private temp folder: ``stop()`` ends the process group and removes it.
S3 secrets go only into a 0600 file (Nessie's ``config/application.properties``) or the process environment (the
reference server reads ``CATALOG_*`` variables), never into argv.

Install (``make test-rig``: ``python -m icecompact_testing.catalog_servers fetch``, through ``mvn`` like every jar
of the project, so the machine's Maven settings apply) puts them into ``~/.cache/icecompact/catalog-servers/``: the
Nessie jar checked against its pinned SHA-256, the reference server's jar folder against the digest of its sorted
jar list (as :mod:`icecompact_testing.trino` does). Nothing of it is committed.

What each server does differently, as found here (docs/catalogs.md, "Tested catalog servers"):

* Nessie 0.99.0 (the newest ``nessie-quarkus`` runner the Maven Central here serves; Java 21 class files, so it runs
  on the newest JDK >= 21 under ``/usr/lib/jvm``) writes table metadata itself from its own model: the metadata its
  REST API serves holds the *current snapshot only* (history lives in Nessie's commits), which is why our catalog
  layer gives Spark Nessie's own API (``compaction.catalog``); spec v1/v2 only (asked for v3 through REST it makes
  a v2 table); it signs S3 requests for its clients by default (turned off here: pyarrow's FileIO cannot use a
  remote signer) and vends no S3 credential, so clients bring their own; no OAuth2 endpoint (no ``credential``);
  ``gc.enabled=false`` on every table.
* The reference server writes metadata through the backend JdbcCatalog (every snapshot kept); it vends the S3
  credentials of its own configuration in every table load when ``include-credentials`` is set (set here: its
  clients are configured without S3 keys); it accepts any OAuth2 client credential; its config answer overrides the
  namespace separator (``%2E``); the ``warehouse`` a client sends is ignored (one warehouse per server). Jetty binds
  every interface (the stock main has no host setting), on a free port.

This module is test rig only: the product never imports it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from compaction import settings
from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from compaction.spark.artifacts import MAVEN_DEPENDENCY_PLUGIN, sha256_of
from icecompact_testing.processes import ServerProcess, free_port as _free_port

__all__ = [
    "NESSIE",
    "NESSIE_VERSION",
    "REST_FIXTURE",
    "REST_FIXTURE_ICEBERG",
    "SERVERS",
    "CatalogServer",
    "fetch",
    "start_catalog_server",
    "start_nessie",
    "start_rest_fixture",
]

NESSIE = "nessie"
REST_FIXTURE = "iceberg-rest"
SERVERS = (NESSIE, REST_FIXTURE)

#: The newest ``nessie-quarkus`` runner jar on the Maven Central reached here (its metadata lists 0.99.0 as the
#: release; later Nessie releases, 0.100+, are not served there as runner jars).
NESSIE_VERSION = "0.99.0"
NESSIE_ARTIFACT = f"org.projectnessie.nessie:nessie-quarkus:{NESSIE_VERSION}:jar:runner"
NESSIE_SHA256 = "ce9fa33e2878bf5ea3981876b9e6204cabc0362b3dd82326b10e47271a78c417"

#: Iceberg's REST fixture jars of 1.12.0 (the project's default Iceberg) are not on Maven Central; 1.11.0's are, so
#: the server runs 1.11.0 beside clients of 1.12.0 - a catalog a release behind its clients, as in production.
REST_FIXTURE_ICEBERG = "1.11.0"
#: Versions of Iceberg 1.11.0's own build (gradle/libs.versions.toml) for what its fixture jars need at run time.
_JETTY = "12.1.8"
#: The fixture's runtime: (group, artifact, version, classifier); each with its runtime dependencies.
REST_FIXTURE_DEPENDENCIES: tuple[tuple[str, str, str, str], ...] = (
    ("org.apache.iceberg", "iceberg-open-api", REST_FIXTURE_ICEBERG, "test-fixtures"),
    ("org.apache.iceberg", "iceberg-core", REST_FIXTURE_ICEBERG, "tests"),
    ("org.apache.iceberg", "iceberg-core", REST_FIXTURE_ICEBERG, ""),
    ("org.apache.iceberg", "iceberg-aws", REST_FIXTURE_ICEBERG, ""),
    ("org.apache.iceberg", "iceberg-aws-bundle", REST_FIXTURE_ICEBERG, ""),
    ("org.apache.hadoop", "hadoop-client-api", "3.4.1", ""),
    ("org.apache.hadoop", "hadoop-client-runtime", "3.4.1", ""),
    ("org.eclipse.jetty.ee10", "jetty-ee10-servlet", _JETTY, ""),
    ("org.eclipse.jetty.compression", "jetty-compression-server", _JETTY, ""),
    ("org.eclipse.jetty.compression", "jetty-compression-gzip", _JETTY, ""),
    ("org.xerial", "sqlite-jdbc", "3.53.0.0", ""),
    ("org.slf4j", "slf4j-simple", "2.0.17", ""),
)
#: SHA-256 of the fixture's jar list: ``<jar> <sha256 of the jar>`` lines, sorted (:func:`_tree_digest`).
REST_FIXTURE_SHA256 = "921187f8585ff47fe93d1bd79d36878b68fbb2c106a4b10e5c291078c571826b"
REST_FIXTURE_MAIN = "org.apache.iceberg.rest.RESTCatalogServer"

#: Heap of each server: metadata only (data files are written by the clients), beside Spark on a 2-core machine.
DEFAULT_HEAP = "512m"
REGION = "us-east-1"
JAVA_HOME_ENV = "ICECOMPACT_CATALOG_SERVERS_JAVA_HOME"
#: Nessie 0.99's classes are Java 21 class files (the reference server runs on the default Java 17).
NESSIE_MIN_JAVA = 21


# --------------------------------------------------------------------------------------------------------------
# Install (make test-rig)
# --------------------------------------------------------------------------------------------------------------


def install_root() -> Path:
    return settings.cache_dir() / "catalog-servers"


def nessie_jar() -> Path:
    return install_root() / f"nessie-quarkus-{NESSIE_VERSION}-runner.jar"


def rest_fixture_dir() -> Path:
    return install_root() / f"iceberg-rest-fixture-{REST_FIXTURE_ICEBERG}"


def _stamp(path: Path) -> Path:
    return path / ".icecompact-sha256"


def installed(server: str) -> Path:
    """The installed jar (Nessie) or jar folder (reference server); :class:`ConfigError` when it is missing."""
    if server == NESSIE:
        path = nessie_jar()
        if path.is_file():
            return path
    else:
        path = rest_fixture_dir()
        if _stamp(path).is_file() and _stamp(path).read_text().strip() == REST_FIXTURE_SHA256:
            return path
    raise ConfigError(f"the {server} catalog server is not installed in {path}: run `make test-rig` "
                      f"(or `python -m icecompact_testing.catalog_servers fetch`)")


def _tree_digest(root: Path) -> str:
    lines = sorted(f"{jar.name} {sha256_of(jar)}" for jar in root.glob("*.jar"))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _mvn(args: list[str], what: str) -> None:
    result = subprocess.run(["mvn", "-B", "-q", *args], capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ConfigError(f"mvn could not fetch {what} (exit {result.returncode}):\n{tail}")


def _fetch_nessie(log: Callable[[str], None]) -> Path:
    target = nessie_jar()
    if target.is_file() and sha256_of(target) == NESSIE_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="icecompact-nessie-", dir=target.parent) as tmp:
        log(f">> mvn dependency:copy {NESSIE_ARTIFACT}")
        _mvn([f"{MAVEN_DEPENDENCY_PLUGIN}:copy", f"-Dartifact={NESSIE_ARTIFACT}", f"-DoutputDirectory={tmp}",
              "-Dmdep.overWriteReleases=true"], NESSIE_ARTIFACT)
        fetched = Path(tmp) / target.name
        actual = sha256_of(fetched)
        if actual != NESSIE_SHA256:
            raise ConfigError(f"{NESSIE_ARTIFACT}: SHA-256 {actual} does not match the pinned {NESSIE_SHA256}; "
                              f"nothing was installed (a mirror serving another file?)")
        fetched.replace(target)
    return target


def _pom(dependencies: tuple[tuple[str, str, str, str], ...]) -> str:
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        + (f"<classifier>{c}</classifier>" if c else "") + "</dependency>"
        for g, a, v, c in dependencies)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>icecompact</groupId><artifactId>iceberg-rest-fixture-deps</artifactId><version>1</version>"
            f"<packaging>pom</packaging><dependencies>{deps}</dependencies></project>")


def _fetch_rest_fixture(log: Callable[[str], None]) -> Path:
    target = rest_fixture_dir()
    try:
        return installed(REST_FIXTURE)
    except ConfigError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="icecompact-rest-fixture-", dir=target.parent) as tmp:
        work = Path(tmp)
        staged = work / "lib"
        (work / "pom.xml").write_text(_pom(REST_FIXTURE_DEPENDENCIES))
        log(f">> mvn dependency:copy-dependencies: Iceberg {REST_FIXTURE_ICEBERG}'s REST fixture and its runtime")
        _mvn(["-f", str(work / "pom.xml"), f"{MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
              f"-DoutputDirectory={staged}"], f"Iceberg {REST_FIXTURE_ICEBERG}'s REST fixture")
        actual = _tree_digest(staged)
        if actual != REST_FIXTURE_SHA256:
            raise ConfigError(f"Iceberg's REST fixture: the jar list's SHA-256 {actual} does not match the pinned "
                              f"{REST_FIXTURE_SHA256}; nothing was installed (a mirror serving other files?)")
        _stamp(staged).write_text(REST_FIXTURE_SHA256 + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    return target


def fetch(log: Callable[[str], None] = print) -> dict[str, Path]:
    """Install both servers unless they are there already (idempotent, digests checked)."""
    if shutil.which("mvn") is None:
        raise ConfigError("mvn not found: install Maven (apt-get install maven) to fetch the catalog servers")
    return {NESSIE: _fetch_nessie(log), REST_FIXTURE: _fetch_rest_fixture(log)}


def java(min_major: int = 17) -> Path:
    """A ``java`` of release ``min_major`` or newer: ``$ICECOMPACT_CATALOG_SERVERS_JAVA_HOME``, else ``$JAVA_HOME`` or
    the ``java`` on the PATH when new enough, else the newest JDK under ``/usr/lib/jvm`` that is."""
    from icecompact_testing.trino import _java_major

    explicit = os.environ.get(JAVA_HOME_ENV)
    candidates = [Path(explicit) / "bin" / "java"] if explicit else []
    if not explicit:
        if os.environ.get("JAVA_HOME"):
            candidates.append(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        if shutil.which("java"):
            candidates.append(Path(str(shutil.which("java"))))
        candidates += [home / "bin" / "java" for home in sorted(Path("/usr/lib/jvm").glob("*"), reverse=True)
                       if not home.is_symlink()]
    for candidate in candidates:
        if candidate.is_file():
            major = _java_major(candidate)
            if major is not None and major >= min_major:
                return candidate
    raise ConfigError(f"no Java {min_major}+ found ({explicit or '$JAVA_HOME, PATH, /usr/lib/jvm'}; set "
                      f"{JAVA_HOME_ENV})")


# --------------------------------------------------------------------------------------------------------------
# The servers
# --------------------------------------------------------------------------------------------------------------


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def create_bucket(object_store: Any, bucket: str) -> None:
    """A plain bucket on the session's SeaweedFS (the servers' warehouses: its table bucket is its own catalog's)."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(endpoint_override=object_store.s3_endpoint.split("://", 1)[1], scheme="http",
                         access_key=object_store.access_key, secret_key=object_store.secret_key, region=REGION,
                         force_virtual_addressing=False, allow_bucket_creation=True)
    s3.create_dir(bucket)


@dataclass
class CatalogServer(ServerProcess):
    """A running catalog server: :meth:`catalog` gives a catalog configuration of it, as a user writes it."""

    kind: str
    root: Path
    port: int
    #: pyiceberg-style properties of a catalog of this server (:meth:`catalog` adds nothing but the name).
    properties: dict[str, str]
    #: The warehouse's base location (``s3://<bucket>/...``).
    warehouse_location: str
    version: str
    process: subprocess.Popen[bytes] | None = None
    ready_path: str = "/v1/config"
    startup_seconds: float | None = None
    _started_at: float = field(default_factory=time.monotonic)

    @property
    def uri(self) -> str:
        return self.properties["uri"]

    def catalog(self, name: str | None = None) -> CatalogConfig:
        prefix = "ns" if self.kind == NESSIE else "ir"
        return CatalogConfig(name or f"{prefix}_{uuid.uuid4().hex[:8]}", dict(self.properties))

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.uri.rstrip("/") + self.ready_path, timeout=2) as resp:
                return resp.status == 200
        except (OSError, ValueError):
            return False

    def wait_ready(self, timeout: float = 120) -> None:
        if self.startup_seconds is not None:
            return
        deadline = self._started_at + timeout
        while not self.ready():
            if self.process is None or self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise ConfigError(f"the {self.kind} catalog server did not start within {timeout:.0f} s:\n{tail}")
            time.sleep(0.2)
        self.startup_seconds = time.monotonic() - self._started_at


def _launch(server: CatalogServer, argv: list[str], env: Mapping[str, str], timeout: float) -> CatalogServer:
    log = (server.root / "server.log").open("wb")
    server.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=server.root,
                                      start_new_session=True, env=dict(env))
    server.wait_ready(timeout)
    return server


def _client_s3(object_store: Any) -> dict[str, str]:
    return {"s3.endpoint": object_store.s3_endpoint, "s3.region": REGION, "s3.path-style-access": "true"}


def start_nessie(object_store: Any, *, heap: str = DEFAULT_HEAP, timeout: float = 120) -> CatalogServer:
    """Nessie on 127.0.0.1 (HTTP and management ports free), store ``IN_MEMORY``, its one warehouse
    ``s3://<new bucket>/`` on ``object_store``; returns once ``/iceberg/v1/config`` answers."""
    jar = installed(NESSIE)
    root = Path(tempfile.mkdtemp(prefix="icecompact-nessie-"))
    os.chmod(root, 0o700)
    bucket = f"nessie-{uuid.uuid4().hex[:8]}"
    create_bucket(object_store, bucket)
    port, management = _free_port(), _free_port()
    location = f"s3://{bucket}/warehouse"
    config = {
        "nessie.version.store.type": "IN_MEMORY",
        "quarkus.http.host": "127.0.0.1",
        "quarkus.http.port": str(port),
        "quarkus.management.host": "127.0.0.1",
        "quarkus.management.port": str(management),
        "quarkus.otel.sdk.disabled": "true",
        "quarkus.log.console.level": "INFO",
        "nessie.catalog.default-warehouse": "warehouse",
        "nessie.catalog.warehouses.warehouse.location": location,
        "nessie.catalog.service.s3.default-options.endpoint": object_store.s3_endpoint,
        "nessie.catalog.service.s3.default-options.path-style-access": "true",
        "nessie.catalog.service.s3.default-options.region": REGION,
        # Nessie's clients sign S3 requests through it by default (``s3.remote-signing-enabled``); pyiceberg's
        # pyarrow FileIO has no remote signer, so they use S3 credentials of their own here.
        "nessie.catalog.service.s3.default-options.request-signing-enabled": "false",
        "nessie.catalog.service.s3.default-options.access-key": "urn:nessie-secret:quarkus:icecompact.s3",
        "icecompact.s3.name": object_store.access_key,
        "icecompact.s3.secret": object_store.secret_key,
    }
    (root / "config").mkdir()
    _write_private(root / "config" / "application.properties", "".join(f"{k}={v}\n" for k, v in config.items()))
    uri = f"http://127.0.0.1:{port}/iceberg"
    properties = {"type": "rest", "uri": uri, **_client_s3(object_store),
                  "s3.access-key-id": object_store.access_key, "s3.secret-access-key": object_store.secret_key}
    server = CatalogServer(NESSIE, root, port, properties, location, NESSIE_VERSION)
    argv = [str(java(NESSIE_MIN_JAVA)), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar", str(jar)]
    return _launch(server, argv, os.environ, timeout)


def start_rest_fixture(object_store: Any, *, heap: str = DEFAULT_HEAP, timeout: float = 120) -> CatalogServer:
    """Iceberg's ``RESTCatalogServer`` on a free port, its JdbcCatalog on a SQLite file of its temp folder, its
    warehouse ``s3://<new bucket>/warehouse`` on ``object_store`` through ``S3FileIO``, vending its S3 credentials to
    clients (``include-credentials``); returns once ``/v1/config`` answers."""
    lib = installed(REST_FIXTURE)
    root = Path(tempfile.mkdtemp(prefix="icecompact-iceberg-rest-"))
    os.chmod(root, 0o700)
    bucket = f"iceberg-rest-{uuid.uuid4().hex[:8]}"
    create_bucket(object_store, bucket)
    port = _free_port()
    location = f"s3://{bucket}/warehouse"
    # RCKUtils.environmentCatalogConfig: CATALOG_ prefix dropped, "__" -> "-", "_" -> ".", lower-cased.
    catalog_env = {
        "CATALOG_REST_PORT": str(port),
        "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
        # A file, not the default in-memory database: the JdbcCatalog's pool opens several connections, and each
        # connection to ``jdbc:sqlite::memory:`` is a database of its own.
        "CATALOG_URI": f"jdbc:sqlite:{root / 'catalog.db'}",
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_WAREHOUSE": location,
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": object_store.s3_endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_S3_ACCESS__KEY__ID": object_store.access_key,
        "CATALOG_S3_SECRET__ACCESS__KEY": object_store.secret_key,
        "CATALOG_CLIENT_REGION": REGION,
        "CATALOG_INCLUDE__CREDENTIALS": "true",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")} | catalog_env
    uri = f"http://127.0.0.1:{port}"
    properties = {"type": "rest", "uri": uri, **_client_s3(object_store)}
    server = CatalogServer(REST_FIXTURE, root, port, properties, location, REST_FIXTURE_ICEBERG)
    argv = [str(java()), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{lib}/*", REST_FIXTURE_MAIN]
    return _launch(server, argv, env, timeout)


def start_catalog_server(kind: str, object_store: Any, **kwargs: Any) -> CatalogServer:
    if kind == NESSIE:
        return start_nessie(object_store, **kwargs)
    if kind == REST_FIXTURE:
        return start_rest_fixture(object_store, **kwargs)
    raise ConfigError(f"unknown catalog server {kind!r} (known: {', '.join(SERVERS)})")


def config_response(server: CatalogServer, warehouse: str | None = None) -> dict[str, Any]:
    """The server's ``GET /v1/config`` answer (JSON)."""
    query = f"?warehouse={urllib.request.quote(warehouse)}" if warehouse else ""
    with urllib.request.urlopen(server.uri.rstrip("/") + "/v1/config" + query, timeout=10) as resp:
        return dict(json.loads(resp.read()))


# --------------------------------------------------------------------------------------------------------------
# CLI: python -m icecompact_testing.catalog_servers fetch
# --------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icecompact_testing.catalog_servers",
                                     description="Fetch (make test-rig) or locate the catalog servers of the tests.")
    parser.add_argument("command", choices=("fetch", "print"))
    args = parser.parse_args(argv)
    try:
        paths = fetch() if args.command == "fetch" else {kind: installed(kind) for kind in SERVERS}
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"Nessie {NESSIE_VERSION}: {paths[NESSIE]}")
    print(f"Iceberg {REST_FIXTURE_ICEBERG} REST fixture: {paths[REST_FIXTURE]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
