"""A throwaway Spark standalone cluster (one master, one worker) on 127.0.0.1 from the installed pyspark.

``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` from the venv (next to the running
interpreter), free ports, a private work dir. Used by the standalone-cluster test and usable by hand::

    .venv/bin/python -m icecompact_testing.standalone      # prints the master URL, Ctrl-C stops the cluster
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from icecompact_testing.processes import stop_process_group

READY_ATTEMPTS = 600  # x 0.5 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_class() -> Path:
    path = Path(sys.executable).with_name("spark-class")
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: install pyspark into this environment")
    return path


@dataclass
class StandaloneCluster:
    master_url: str
    work_dir: Path
    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]

    def executor_files(self) -> list[Path]:
        """Files fetched into the executors' working dirs (``work/app-*/<executor>/``): shipped jars and py-files."""
        return sorted(p for p in (self.work_dir / "work").glob("app-*/*/*") if p.is_file())

    def stop(self) -> None:
        for proc in (self.worker, self.master):
            stop_process_group(proc)


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(READY_ATTEMPTS):
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name}: process exited {proc.returncode}\n{log.read_text(errors='replace')[-3000:]}")
        threading.Event().wait(0.5)
    raise RuntimeError(f"{log.name}: {text!r} never appeared\n{log.read_text(errors='replace')[-3000:]}")


def start_cluster(work_dir: Path | None = None, *, cores: int = 1, memory: str = "1200m") -> StandaloneCluster:
    """Start a master and one worker (``cores``, ``memory``) and wait until the worker has registered."""
    root = Path(work_dir or tempfile.mkdtemp(prefix="icecompact-spark-standalone-"))
    (root / "work").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(root), "SPARK_WORKER_DIR": str(root / "work"),
           "PYSPARK_PYTHON": sys.executable}
    port, ui_port = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master_log = root / "master.log"
    master = subprocess.Popen(
        [str(spark_class()), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui_port)],
        stdout=open(master_log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    worker: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(master_log, "I have been elected leader", master)
        worker_log = root / "worker.log"
        worker = subprocess.Popen(
            [str(spark_class()), "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
             "--port", str(_free_port()), "--webui-port", str(_free_port()), "--cores", str(cores), "--memory", memory,
             "--work-dir", str(root / "work")],
            stdout=open(worker_log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        _wait_for(worker_log, "Successfully registered with master", worker)
    except BaseException:
        for proc in (worker, master):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        raise
    return StandaloneCluster(master_url, root, master, worker)


if __name__ == "__main__":
    cluster = start_cluster()
    print(f"master: {cluster.master_url}  (logs and work dir: {cluster.work_dir}); Ctrl-C stops it", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
