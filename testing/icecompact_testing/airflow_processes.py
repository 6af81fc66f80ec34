"""Real Airflow processes for tests, soaks and benchmarks: one home, its CLI, and its long-running components.

One place for what the test suite (``tests/airflow/af_support.py``), the soak (:mod:`icecompact_testing.soak`) and
the benchmarks (``bench/overview.py``) need: an isolated ``AIRFLOW_HOME`` with simple-auth users
(:func:`isolated_home_env`), ``airflow ...`` commands, and ``api-server`` / ``scheduler`` / ``triggerer`` processes,
each in its own process group with its log in the home, stopped with everything they started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import IO, Mapping

from icecompact_testing.processes import stop_process_group
from icecompact_testing.processes import free_port

REPO = Path(__file__).resolve().parents[2]


def airflow_binary() -> str:
    return str(Path(sys.executable).with_name("airflow"))


def isolated_home_env(home: Path, passwords: Mapping[str, str], *, dags: Path = REPO / "dags",
                      plugins: Path = REPO / "plugins") -> dict[str, str]:
    """The environment of an Airflow whose home, SQLite metadata DB, DAG and plugin folders and simple-auth users
    (``passwords``: user -> password; ``admin`` is the admin) are this run's own, never the user's. Writes the
    passwords file."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "passwords.json").write_text(json.dumps(dict(passwords)))
    users = ",".join(f"{user}:{'admin' if user == 'admin' else 'viewer'}" for user in passwords)
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": users,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex,
        "AIRFLOW__API__SECRET_KEY": uuid.uuid4().hex,
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    }


class AirflowProcesses:
    """``airflow`` commands and components of one home (``env`` holds ``AIRFLOW_HOME`` and the rest)."""

    def __init__(self, home: Path, env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.env = {**os.environ, **(env or {}), "AIRFLOW_HOME": str(home)}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def cli(self, *args: str, check: bool = True, timeout: float = 600,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([airflow_binary(), *args], capture_output=True, text=True, timeout=timeout,
                              env={**self.env, **(env or {})})
        if check and done.returncode != 0:  # what Airflow said, not just its exit code
            raise RuntimeError(f"airflow {' '.join(args[:3])} exited {done.returncode}:\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        return done

    def start(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """``airflow <args>`` in its own process group, its output appended to ``<home>/<name>.log``."""
        log = open(self.log_path(name), "ab")
        self._logs.append(log)
        proc = subprocess.Popen([airflow_binary(), *args], env={**self.env, **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = proc
        return proc

    def log_path(self, name: str) -> Path:
        return self.home / f"{name}.log"

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.log_path(name)
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def start_api_server(self, port: int | None = None, env: Mapping[str, str] | None = None,
                         timeout_s: float = 300) -> str:
        """Start ``airflow api-server`` (one worker) on 127.0.0.1 and wait until its health endpoint answers;
        returns its URL."""
        port = port or free_port()
        name = f"api-server-{port}"
        proc = self.start(name, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1", env=env)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"api-server exited {proc.returncode}:\n{self.log_tail(name)}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as response:
                    if response.status == 200:
                        return url
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"api-server did not answer within {timeout_s:.0f} s:\n{self.log_tail(name)}")

    def stop(self, name: str | None = None, timeout: float = 60) -> None:
        """Stop one component (``name``) or all of them, and close their logs when all are stopped."""
        for key in [name] if name else list(self.processes):
            proc = self.processes.pop(key, None)
            if proc is not None:
                stop_process_group(proc, timeout=timeout)
        if not self.processes:
            for log in self._logs:
                log.close()
            self._logs.clear()


def api_token(url: str, username: str, password: str) -> str:
    """A JWT of the simple auth manager for ``username``."""
    body = json.dumps({"username": username, "password": password}).encode()
    request = urllib.request.Request(f"{url}/auth/token", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(json.loads(response.read())["access_token"])


class ApiServer:
    """A real ``airflow api-server`` of ``home`` on a free port (started by :meth:`wait_ready`), and tokens of its
    simple-auth users (``passwords``)."""

    def __init__(self, home: Path, passwords: Mapping[str, str], env: Mapping[str, str] | None = None) -> None:
        self._airflow = AirflowProcesses(home, {**os.environ, **(env or {})})
        self._passwords = dict(passwords)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        self._airflow.start_api_server(self.port)

    def token(self, username: str) -> str:
        return api_token(self.url, username, self._passwords[username])

    def stop(self) -> None:
        self._airflow.stop()
