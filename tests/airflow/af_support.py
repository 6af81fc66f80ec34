"""Shared set-up of the Airflow tests: its own AIRFLOW_HOME, SQLite metadata DB, the repo's dags/ and plugins/
folders, simple auth manager users. Configured at import (by conftest.py), before anything imports airflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

from icecompact_testing.airflow_processes import ApiServer as _ApiServer
from icecompact_testing.airflow_processes import AirflowProcesses, free_port, isolated_home_env  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="icecompact-airflow-"))
PASSWORDS = {"admin": "admin-" + uuid.uuid4().hex[:8], "viewer": "viewer-" + uuid.uuid4().hex[:8]}
AIRFLOW_ENV = {**isolated_home_env(AIRFLOW_HOME, PASSWORDS), "ICECOMPACT_DAG_SCHEDULE": "@daily"}
os.environ.update(AIRFLOW_ENV)
os.environ.pop("AIRFLOW_CONN_SPARK_DEFAULT", None)  # the DAG's embedded default Spark master is tested
from icecompact_airflow.connections import connection_env as catalog_connection_env  # noqa: E402

ARTIFACTS = Path(os.environ.get("ICECOMPACT_TEST_ARTIFACTS") or REPO / "tests" / "artifacts")


def airflow_cli(*args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None,
                ) -> subprocess.CompletedProcess[str]:
    return AirflowProcesses(AIRFLOW_HOME, os.environ).cli(*args, check=check, timeout=timeout, env=env)


def fresh_dag(dag_id: str = "iceberg_compaction") -> Any:
    """A freshly parsed DAG object (a DAG reused after an empty mapping would skip mapped tasks)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag.get_dag(dag_id)

def task_states(dag_run: Any) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(getattr(ti.state, "value", ti.state)) for ti in dag_run.get_task_instances()}


class ApiServer(_ApiServer):
    """A real ``airflow api-server`` (uvicorn, 1 worker) on 127.0.0.1 with this test session's AIRFLOW_HOME."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__(AIRFLOW_HOME, PASSWORDS, env)


class AuthProxy:
    """A local HTTP proxy that adds ``Authorization: Bearer <token>`` to every request it forwards: how the
    headless browser carries a real Airflow token (Chromium has no command-line option for request headers)."""

    def __init__(self, upstream: str, token: str) -> None:
        import http.server
        import threading
        import urllib.error
        import urllib.request

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                request = urllib.request.Request(upstream + self.path, headers={"Authorization": f"Bearer {token}"})
                try:
                    with urllib.request.urlopen(request, timeout=120) as response:
                        status, headers, body = response.status, response.headers, response.read()
                except urllib.error.HTTPError as e:
                    status, headers, body = e.code, e.headers, e.read()
                self.send_response(status)
                self.send_header("Content-Type", headers.get("Content-Type", "text/plain"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def png_pixels(data: bytes) -> tuple[int, int, set[tuple[int, int, int]]]:
    """(width, height, distinct RGB colours) of an 8-bit RGB/RGBA PNG: enough to tell a rendered page apart."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6), f"unsupported PNG (depth {depth}, colour type {colour})"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    previous, colours = bytearray(stride), set()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        colours.update(tuple(line[i:i + 3]) for i in range(0, stride, channels))  # type: ignore[misc]
        previous = line
    return width, height, colours


class Browser:
    """A headless Chromium driven over the DevTools protocol: Airflow's session cookie, navigation, clicks on real
    forms, the live DOM and screenshots (what a logged-in user's browser does, without a test framework)."""

    def __init__(self, width: int = 1400, height: int = 1200) -> None:
        import shutil
        import threading
        import urllib.request

        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        self.profile = Path(tempfile.mkdtemp(prefix="icecompact-chromium-"))
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             "--no-first-run", "--no-default-browser-check", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited {self.proc.returncode}")
            threading.Event().wait(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as response:
            pages = [t for t in json.loads(response.read()) if t.get("type") == "page"]
        from websockets.sync.client import connect

        self.ws = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self._next = 0
        self.events: list[dict[str, Any]] = []
        self.call("Page.enable")
        self.call("Network.enable")

    def call(self, method: str, timeout: float = 120, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=timeout))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})
            if "method" in message:
                self.events.append(message)

    def _after_navigation(self, timeout: float = 120) -> int:
        """Wait for the load event of the new document; its HTTP status (the last Document response)."""
        import time

        deadline = time.monotonic() + timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the page did not load within {timeout} s")
            self.events.append(json.loads(self.ws.recv(timeout=left)))
        statuses = [int(e["params"]["response"]["status"]) for e in self.events
                    if e["method"] == "Network.responseReceived" and e["params"].get("type") == "Document"]
        self.events.clear()
        return statuses[-1] if statuses else 0

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.call("Network.setCookie", url=url, name=name, value=value, path="/")

    def goto(self, url: str) -> int:
        """Navigate and wait for the load event; returns the HTTP status of the document."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        return self._after_navigation()

    def click(self, selector: str) -> int:
        """Click an element that navigates (a submit button), wait for the new page; returns its HTTP status."""
        self.events.clear()
        self.eval(f"document.querySelector({json.dumps(selector)}).click(); true")
        return self._after_navigation()

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def dom(self) -> str:
        return str(self.eval("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> bytes:
        import base64

        data = base64.b64decode(self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        import shutil
        import signal

        try:
            self.ws.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
