"""Trino as a reader of our tables: a throwaway single-node Trino server, its Iceberg connector on a REST catalog
with tables on S3, and the rows of a snapshot as Trino reads them, normalized like the reference reader's
(:func:`icecompact_testing.oracle.normalize_value`), so that they compare as multisets with Spark's read::

    with start_trino({"ice": rest_catalog_properties(catalog.properties)}) as trino:
        read_rows(trino, "ice", ("ns", "t")).rows == spark_rows(spark, "cat.ns.t")

The server is Trino :data:`TRINO_VERSION`, assembled from its official jars on Maven Central (``trino-main`` and
its runtime dependencies as the class path, ``trino-iceberg`` and its own as the one plugin: a server with one
plugin starts in seconds, not the ~60 of the distribution), the jar list pinned by digest (:data:`TRINO_SHA256`),
fetched by ``make install`` (``python -m icecompact_testing.trino fetch``, through ``mvn`` like the product's jars,
so the machine's Maven settings apply) into ``~/.cache/icecompact/trino/``. Nothing of it is committed.

Trino needs Java 24 or newer (tested on 25; the default ``java`` here is 17): :func:`java_home` takes
``$ICECOMPACT_TRINO_JAVA_HOME``, else the newest JDK >= 24 under ``/usr/lib/jvm``. The server runs the JVM directly
(no launcher script) with a small heap (:data:`DEFAULT_HEAP`, for a 2-core machine shared with Spark), bound to
127.0.0.1 on a free port, with its config, catalogs and data in a private temp folder. A catalog's S3 secret and
OAuth2 credential go only into that catalog's properties file (mode 0600), never into argv or a log.

Queries go through Trino's HTTP protocol (``POST /v1/statement``, then follow ``nextUri``) with urllib: no client
library. Values arrive as JSON and are converted by the column's type signature (timestamps -> naive UTC
``datetime``, decimals -> ``Decimal``, ``varbinary`` base64 -> ``bytes``, rows and arrays -> tuples, maps ->
frozensets of pairs, NaN -> :data:`icecompact_testing.oracle.NAN`).

This module is test rig only: the product never imports it (import-linter contract in setup.cfg).
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import decimal
import hashlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from compaction import settings
from compaction.core.errors import ConfigError
from compaction.spark.artifacts import MAVEN_DEPENDENCY_PLUGIN, sha256_of
from icecompact_testing.engines import EngineRead
from icecompact_testing.oracle import NAN, normalize_value
from icecompact_testing.processes import ServerProcess, free_port as _free_port

__all__ = [
    "DEFAULT_HEAP",
    "TRINO",
    "TRINO_SHA256",
    "TRINO_VERSION",
    "TrinoQueryError",
    "TrinoResult",
    "TrinoServer",
    "fetch",
    "install_dir",
    "java_home",
    "read_rows",
    "rest_catalog_properties",
    "start_trino",
]

TRINO = "trino"
#: Trino 483 reads Iceberg v3 deletion vectors; 476, the newest ``trino-server`` tarball on the Maven Central this
#: project reaches, fails on them ("ICEBERG_BAD_DATA: Unexpected PUFFIN file format"). Newer releases have their
#: jars there but not the tarball, so the server is assembled from the jars (see :func:`fetch`).
TRINO_VERSION = "483"
#: SHA-256 of the assembled server's jar list: ``<folder>/<jar> <sha256 of the jar>`` lines, sorted, one per jar of
#: ``lib/`` and ``plugin/iceberg/`` (:func:`_tree_digest`): every jar is checked, not only the two named.
TRINO_SHA256 = "7b53353973573eb9c24096b2bae409ca01282993bb679940b73e8785fa4ff4ea"
TRINO_MIN_JAVA = 24
JAVA_HOME_ENV = "ICECOMPACT_TRINO_JAVA_HOME"
#: Heap of the server: enough for scans of the bench's ``s`` tables, small beside Spark on a 2-core, 24 GB machine.
DEFAULT_HEAP = "2G"
#: The server's class path (``lib/``: trino-main and its runtime dependencies) and its one plugin.
_SERVER_ARTIFACT = f"io.trino:trino-main:{TRINO_VERSION}"
_PLUGIN_ARTIFACT = f"io.trino:trino-iceberg:{TRINO_VERSION}"
#: Jars a plugin gets from the server (Trino's plugin class loader takes these packages from the parent; its own
#: packaging leaves them out of a plugin folder as ``provided``).
_PROVIDED_BY_SERVER = ("trino-spi", "slice", "jackson-annotations", "opentelemetry-api", "opentelemetry-context",
                       "jol-core")
#: Trino's own main class (``io.trino.server.TrinoServer``, module trino-server-main) is not published for these
#: releases either; it only starts ``io.trino.server.Server`` with the release's version, which this does too.
_MAIN_CLASS = "IcecompactTrinoServer"
_MAIN_SOURCE = """\
public final class IcecompactTrinoServer {
    public static void main(String[] args) {
        new io.trino.server.Server().start(args.length > 0 ? args[0] : "unknown");
    }
}
"""
_USER = "icecompact"


# --------------------------------------------------------------------------------------------------------------
# Install (make install) and discovery
# --------------------------------------------------------------------------------------------------------------


def install_dir() -> Path:
    return settings.cache_dir() / "trino" / f"trino-server-{TRINO_VERSION}"


def _stamp(path: Path) -> Path:
    return path / ".icecompact-sha256"


def installed() -> Path:
    """The assembled server; :class:`ConfigError` when ``make install`` has not put it there."""
    path = install_dir()
    if not (_stamp(path).is_file() and _stamp(path).read_text().strip() == TRINO_SHA256):
        raise ConfigError(f"Trino {TRINO_VERSION} is not installed in {path}: run `make install` "
                          f"(or `python -m icecompact_testing.trino fetch`)")
    return path


def _tree_digest(root: Path) -> str:
    lines = sorted(f"{jar.parent.relative_to(root)}/{jar.name} {sha256_of(jar)}"
                   for folder in ("lib", "plugin/iceberg") for jar in (root / folder).glob("*.jar")
                   if not jar.name.startswith("icecompact-"))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _copy_dependencies(artifact: str, output: Path, work: Path) -> None:
    """``artifact`` and its runtime dependencies into ``output``, through ``mvn dependency:copy-dependencies`` of a
    throwaway POM (so the machine's Maven settings, mirrors and proxies apply, as for the product's jars)."""
    group, name, version = artifact.split(":")
    project = work / f"pom-{name}"
    project.mkdir()
    (project / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>icecompact</groupId><artifactId>{name}-deps</artifactId><version>1</version>"
        "<packaging>pom</packaging><dependencies><dependency>"
        f"<groupId>{group}</groupId><artifactId>{name}</artifactId><version>{version}</version>"
        "</dependency></dependencies></project>")
    result = subprocess.run(["mvn", "-B", "-q", "-f", str(project / "pom.xml"),
                             f"{MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
                             f"-DoutputDirectory={output}"], capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ConfigError(f"mvn could not fetch {artifact} and its dependencies (exit {result.returncode}):\n{tail}")


def fetch(log: Callable[[str], None] = print) -> Path:
    """Assemble the pinned Trino server unless it is there already (idempotent): ``lib/`` = ``trino-main`` and its
    runtime dependencies, ``plugin/iceberg/`` = ``trino-iceberg`` and its own (less what the server provides),
    ``main/`` = the compiled main class; the jar list's digest is checked before the folder is put in place."""
    target = install_dir()
    try:
        return installed()
    except ConfigError:
        pass
    if shutil.which("mvn") is None:
        raise ConfigError("mvn not found: install Maven (apt-get install maven) to fetch Trino")
    jdk = java_home()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="icecompact-trino-", dir=target.parent) as tmp:
        work = Path(tmp)
        staged = work / "staged"
        log(f">> mvn dependency:copy-dependencies {_SERVER_ARTIFACT}, {_PLUGIN_ARTIFACT}")
        _copy_dependencies(_SERVER_ARTIFACT, staged / "lib", work)
        _copy_dependencies(_PLUGIN_ARTIFACT, staged / "plugin" / "iceberg", work)
        for jar in (staged / "plugin" / "iceberg").glob("*.jar"):
            if re.sub(r"-\d[^-]*(-[a-z]+)?\.jar$", "", jar.name) in _PROVIDED_BY_SERVER:
                jar.unlink()
        actual = _tree_digest(staged)
        if actual != TRINO_SHA256:
            raise ConfigError(f"Trino {TRINO_VERSION}: the jar list's SHA-256 {actual} does not match the pinned "
                              f"{TRINO_SHA256}; nothing was installed (a mirror serving other files?)")
        source = work / f"{_MAIN_CLASS}.java"
        source.write_text(_MAIN_SOURCE)
        subprocess.run([str(jdk / "bin" / "javac"), "-cp", str(staged / "lib" / "*"), "-d", str(work / "classes"),
                        str(source)], check=True, capture_output=True)
        (staged / "main").mkdir()
        with zipfile.ZipFile(staged / "main" / "icecompact-trino-main.jar", "w") as archive:
            archive.write(work / "classes" / f"{_MAIN_CLASS}.class", f"{_MAIN_CLASS}.class")
        # The published trino-iceberg jar has no service descriptor (Trino's build writes it into the plugin folder
        # of its distribution); the server finds a plugin through one.
        with zipfile.ZipFile(staged / "plugin" / "iceberg" / "icecompact-plugin-service.jar", "w") as archive:
            archive.writestr("META-INF/services/io.trino.spi.Plugin", "io.trino.plugin.iceberg.IcebergPlugin\n")
        _stamp(staged).write_text(TRINO_SHA256 + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
    log(f"Trino {TRINO_VERSION}: {target}")
    return target


def _java_major(java: Path) -> int | None:
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def java_home() -> Path:
    """A JDK Trino runs on: ``$ICECOMPACT_TRINO_JAVA_HOME``, else the newest JDK >= 24 under ``/usr/lib/jvm``, else
    ``$JAVA_HOME`` when it is new enough."""
    explicit = os.environ.get(JAVA_HOME_ENV)
    candidates = [Path(explicit)] if explicit else []
    if not explicit:
        # Debian's /usr/lib/jvm has symlinks to the same JDKs beside them: each JDK once.
        candidates += sorted((p for p in Path("/usr/lib/jvm").glob("*") if not p.is_symlink()), reverse=True)
        if os.environ.get("JAVA_HOME"):
            candidates.append(Path(os.environ["JAVA_HOME"]))
    best: tuple[int, Path] | None = None
    for home in candidates:
        java = home / "bin" / "java"
        if java.is_file():
            major = _java_major(java)
            if major is not None and major >= TRINO_MIN_JAVA and (best is None or major > best[0]):
                best = (major, home)
    if best is None:
        where = explicit or "/usr/lib/jvm, $JAVA_HOME"
        raise ConfigError(f"Trino {TRINO_VERSION} needs Java {TRINO_MIN_JAVA}+; none found in {where} "
                          f"(set {JAVA_HOME_ENV})")
    return best[1]


# --------------------------------------------------------------------------------------------------------------
# Catalog configuration
# --------------------------------------------------------------------------------------------------------------


def rest_catalog_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Trino Iceberg connector properties for a REST catalog with tables on S3, from the pyiceberg properties of the
    same catalog (``uri``, ``warehouse``, ``credential``, ``s3.endpoint``, ``s3.access-key-id``, ...: what
    :meth:`compaction.demo.object_store.ObjectStoreServer.catalog_properties` gives)."""
    if properties.get("type") != "rest":
        raise ConfigError(f"only REST catalogs are configured for Trino here, not {properties.get('type')!r}")
    out = {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": properties["uri"],
        # Trino's native S3 file system (the legacy Hadoop one is gone in 476).
        "fs.native-s3.enabled": "true",
        "s3.region": properties.get("s3.region") or "us-east-1",
    }
    if properties.get("warehouse"):
        out["iceberg.rest-catalog.warehouse"] = properties["warehouse"]
    if properties.get("credential"):
        out["iceberg.rest-catalog.security"] = "OAUTH2"
        out["iceberg.rest-catalog.oauth2.credential"] = properties["credential"]
        # Iceberg's client warns that its fallback to <uri>/v1/oauth/tokens will go: name it.
        out["iceberg.rest-catalog.oauth2.server-uri"] = properties.get(
            "oauth2-server-uri", properties["uri"].rstrip("/") + "/v1/oauth/tokens")
    if properties.get("s3.endpoint"):
        out["s3.endpoint"] = properties["s3.endpoint"]
    if str(properties.get("s3.path-style-access", "")).lower() == "true":
        out["s3.path-style-access"] = "true"
    if properties.get("s3.access-key-id"):
        out["s3.aws-access-key"] = properties["s3.access-key-id"]
        out["s3.aws-secret-key"] = properties.get("s3.secret-access-key", "")
    return out


# --------------------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------------------


class TrinoQueryError(RuntimeError):
    """A query Trino failed: its error name (``TABLE_NOT_FOUND``, ``NOT_SUPPORTED``, ...) and message."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(f"{error_name}: {message}")
        self.error_name = error_name


@dataclass(frozen=True)
class TrinoResult:
    columns: tuple[str, ...]
    #: Each column's type signature as Trino sent it (``{"rawType": ..., "arguments": [...]}``).
    types: tuple[Mapping[str, Any], ...]
    #: Rows with values converted to the oracle's canonical form.
    rows: tuple[tuple[Any, ...], ...]


@dataclass
class TrinoServer(ServerProcess):
    root: Path
    port: int
    catalogs: tuple[str, ...]
    process: subprocess.Popen[bytes] | None = None
    java: Path = field(default_factory=Path)
    #: Seconds from the JVM's start until :meth:`wait_ready` first saw it accept queries (None before): its start-up
    #: time with ``wait=True``, an upper bound of it with ``wait=False``.
    startup_seconds: float | None = None
    _started_at: float = field(default_factory=time.monotonic)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, sql: str, *, catalog: str | None = None, schema: str | None = None,
              timeout: float = 600) -> TrinoResult:
        """Run ``sql`` and return every row (converted); :class:`TrinoQueryError` when Trino fails it. Waits for a
        server started with ``wait=False`` to be ready first."""
        self.wait_ready()
        # PARAMETRIC_DATETIME: without it Trino rounds every timestamp to milliseconds for "legacy" clients.
        headers = {"X-Trino-User": _USER, "X-Trino-Source": "icecompact-tests", "X-Trino-Time-Zone": "UTC",
                   "X-Trino-Client-Capabilities": "PARAMETRIC_DATETIME"}
        if catalog:
            headers["X-Trino-Catalog"] = catalog
        if schema:
            headers["X-Trino-Schema"] = schema
        deadline = time.monotonic() + timeout
        payload = self._request("POST", f"{self.uri}/v1/statement", sql.encode(), headers)
        columns: list[Mapping[str, Any]] | None = None
        data: list[list[Any]] = []
        while True:
            if payload.get("columns") and columns is None:
                columns = payload["columns"]
            data.extend(payload.get("data") or [])
            error = payload.get("error")
            if error:
                raise TrinoQueryError(str(error.get("errorName", "ERROR")), str(error.get("message", error)))
            next_uri = payload.get("nextUri")
            if not next_uri:
                break
            if time.monotonic() > deadline:
                self._request("DELETE", next_uri, None, headers)
                raise TimeoutError(f"Trino query still running after {timeout:.0f} s: {sql[:200]}")
            payload = self._request("GET", next_uri, None, headers)
        columns = columns or []
        types = tuple(c.get("typeSignature") or {"rawType": c.get("type", ""), "arguments": []} for c in columns)
        rows = tuple(tuple(_convert(v, t) for v, t in zip(row, types)) for row in data)
        return TrinoResult(tuple(c["name"] for c in columns), types, rows)

    def _request(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]) -> dict[str, Any]:
        for attempt in range(20):
            request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
            try:
                with urllib.request.urlopen(request, timeout=120) as resp:
                    text = resp.read()
                return json.loads(text) if text else {}
            except urllib.error.HTTPError as e:
                # 503 is the protocol's "busy, retry the same URI" (client protocol spec); others are failures.
                if e.code in (502, 503, 504) and attempt < 19:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise TrinoQueryError(f"HTTP_{e.code}", e.read().decode(errors="replace")[:2000]) from None
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = 180) -> None:
        """Return once the server accepts queries; :class:`ConfigError` (with the log's tail) when it exits or is not
        ready ``timeout`` s after its start."""
        if self.startup_seconds is not None:
            return
        deadline = self._started_at + timeout
        while not self.ready():
            if self.process is None or self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise ConfigError(f"Trino did not start within {timeout:.0f} s:\n{tail}")
            time.sleep(0.25)
        self.startup_seconds = time.monotonic() - self._started_at

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/info", timeout=2) as resp:
                return not json.loads(resp.read()).get("starting", True)
        except (OSError, ValueError):
            return False


def _properties_text(props: Mapping[str, str]) -> str:
    for key, value in props.items():
        if "\n" in key or "\n" in value:
            raise ConfigError(f"a Trino property cannot hold a newline ({key})")
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` with mode 0600 before anything is written into it (it may hold secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def start_trino(catalogs: Mapping[str, Mapping[str, str]], *, heap: str = DEFAULT_HEAP,
                timeout: float = 180, wait: bool = True) -> TrinoServer:
    """Start a single-node Trino (coordinator that also schedules work on itself) on 127.0.0.1 and a free port,
    with one catalog per entry of ``catalogs`` (name -> connector properties, e.g. :func:`rest_catalog_properties`);
    returns once it accepts queries, or at once with ``wait=False`` (its JVM then starts while the caller does
    other work; the first :meth:`TrinoServer.query` waits for it). The caller must call ``stop()``."""
    home = installed()
    jdk = java_home()
    root = Path(tempfile.mkdtemp(prefix="icecompact-trino-"))
    os.chmod(root, 0o700)
    etc, catalog_dir, data = root / "etc", root / "etc" / "catalog", root / "data"
    catalog_dir.mkdir(parents=True)
    data.mkdir()
    port = _free_port()
    config = {
        "coordinator": "true",
        "node-scheduler.include-coordinator": "true",
        "http-server.http.port": str(port),
        "discovery.uri": f"http://127.0.0.1:{port}",
        "plugin.dir": str(home / "plugin"),
        "catalog.config-dir": str(catalog_dir),
        "catalog.management": "static",
        # One node, small heap: keep Trino from reserving what the shared machine needs for Spark.
        "query.max-memory": "1GB",
        "query.max-memory-per-node": "1GB",
        "task.concurrency": "2",
        "http-server.log.enabled": "false",
    }
    (etc / "config.properties").write_text(_properties_text(config))
    (etc / "log.properties").write_text("io.trino=WARN\nio.airlift=WARN\n")
    for name, props in catalogs.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ConfigError(f"Trino catalog names are lower-case identifiers, not {name!r}")
        _write_private(catalog_dir / f"{name}.properties", _properties_text(props))
    argv = [
        str(jdk / "bin" / "java"), "-server", f"-Xmx{heap}", "-Xms256M", "-XX:+UseG1GC",
        "-XX:+ExitOnOutOfMemoryError", "-XX:-OmitStackTraceInFastThrow", "-XX:ReservedCodeCacheSize=256M",
        "-XX:+EnableDynamicAgentLoading", "-Djdk.attach.allowAttachSelf=true", "-Djdk.nio.maxCachedBufferSize=2000000",
        "-Dfile.encoding=UTF-8", "--add-modules=jdk.incubator.vector",
        # Trino's native code wants these opened (its own jvm.config does the same).
        "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
        f"-Dconfig={etc / 'config.properties'}", f"-Dlog.levels-file={etc / 'log.properties'}",
        "-Dnode.environment=icecompact", f"-Dnode.id={uuid.uuid4()}", f"-Dnode.data-dir={data}",
        "-Dnode.bind-ip=127.0.0.1", "-Dnode.internal-address=127.0.0.1",
        "-cp", f"{home / 'main' / 'icecompact-trino-main.jar'}:{home / 'lib' / '*'}", _MAIN_CLASS, TRINO_VERSION,
    ]
    log = (root / "server.log").open("wb")
    server = TrinoServer(root, port, tuple(catalogs), java=jdk)
    server.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True,
                                      env={**os.environ, "JAVA_HOME": str(jdk)})
    if wait:
        server.wait_ready(timeout)
    return server


# --------------------------------------------------------------------------------------------------------------
# Reading a table
# --------------------------------------------------------------------------------------------------------------


def table_sql(catalog: str, identifier: Sequence[str], snapshot_id: int | None = None, *,
              select: str = "*") -> str:
    name = ".".join(_quote(p) for p in (catalog, *identifier))
    version = "" if snapshot_id is None else f" FOR VERSION AS OF {int(snapshot_id)}"
    return f"SELECT {select} FROM {name}{version}"


def read_rows(server: TrinoServer, catalog: str, identifier: Sequence[str], snapshot_id: int | None = None,
              *, strict: bool = True) -> EngineRead:
    """The rows of table ``identifier`` of Trino catalog ``catalog`` at ``snapshot_id`` (default: the current
    snapshot, as the catalog serves it now), as an :class:`icecompact_testing.engines.EngineRead` of engine
    ``trino``. A query error is raised, or with ``strict=False`` returned as the read's error."""
    t0 = time.perf_counter()
    try:
        result = server.query(table_sql(catalog, identifier, snapshot_id))
    except TrinoQueryError as exc:
        if strict:
            raise
        return EngineRead(TRINO, snapshot_id, None, str(exc), exc.error_name == "NOT_SUPPORTED",
                          time.perf_counter() - t0)
    return EngineRead(TRINO, snapshot_id, Counter(result.rows), None, False, time.perf_counter() - t0)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------------------------------------------
# Values: Trino's JSON encoding -> the oracle's canonical form
# --------------------------------------------------------------------------------------------------------------

_INTEGERS = {"bigint", "integer", "smallint", "tinyint"}
_FLOATS = {"double", "real"}
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _arguments(sig: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(sig.get("arguments") or [])


def _convert(v: Any, sig: Mapping[str, Any]) -> Any:
    if v is None:
        return None
    raw = str(sig.get("rawType", "")).lower()
    if raw in _INTEGERS or raw in ("varchar", "char", "boolean"):
        return v
    if raw in _FLOATS:
        f = _SPECIAL_FLOATS[v] if isinstance(v, str) else float(v)
        if raw == "real":
            # Trino prints a real in its shortest float32 form (0.1); Spark and Arrow give the float32's exact value
            # as a double (0.10000000149011612): round-trip through float32 to get that.
            f = struct.unpack("f", struct.pack("f", f))[0]
        return NAN if math.isnan(f) else f
    if raw == "decimal":
        return decimal.Decimal(v)
    if raw == "date":
        return _dt.date.fromisoformat(v)
    if raw == "timestamp":
        return _timestamp(v)
    if raw == "timestamp with time zone":
        stamp, _, zone = v.rpartition(" ")
        moment = _timestamp(stamp)
        if zone not in ("UTC", "Z", "+00:00"):
            from zoneinfo import ZoneInfo

            return normalize_value(moment.replace(tzinfo=ZoneInfo(zone)))
        return moment
    if raw == "time":
        return _dt.time.fromisoformat(v[:15])
    if raw == "varbinary":
        return base64.b64decode(v)
    if raw == "uuid":
        return str(uuid.UUID(v))
    if raw == "array":
        (element,) = _arguments(sig)
        return tuple(_convert(x, element["value"]) for x in v)
    if raw == "map":
        key_sig, value_sig = (a["value"] for a in _arguments(sig))
        # JSON object keys are strings: a non-string key is parsed back by its type.
        return frozenset((_convert(_map_key(k, key_sig), key_sig), _convert(x, value_sig)) for k, x in v.items())
    if raw == "row":
        fields = [a["value"]["typeSignature"] for a in _arguments(sig)]
        return tuple(_convert(x, t) for x, t in zip(v, fields))
    return normalize_value(v)


def _map_key(k: str, sig: Mapping[str, Any]) -> Any:
    raw = str(sig.get("rawType", "")).lower()
    if raw in _INTEGERS:
        return int(k)
    if raw in _FLOATS:
        return float(k)
    if raw == "boolean":
        return k == "true"
    return k


def _timestamp(text: str) -> _dt.datetime:
    """``YYYY-MM-DD HH:MM:SS[.fraction]`` (up to 12 fraction digits) -> naive datetime (microseconds; finer digits
    dropped, as Python has none)."""
    head, _, fraction = text.partition(".")
    moment = _dt.datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
    return moment.replace(microsecond=int((fraction + "000000")[:6])) if fraction else moment


# --------------------------------------------------------------------------------------------------------------
# CLI: python -m icecompact_testing.trino fetch
# --------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icecompact_testing.trino",
                                     description="Fetch (make install) or locate the pinned Trino server of the tests.")
    parser.add_argument("command", choices=("fetch", "print"))
    args = parser.parse_args(argv)
    try:
        path = fetch() if args.command == "fetch" else installed()
        jdk = java_home()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"Trino {TRINO_VERSION}: {path} (Java: {jdk})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
