"""Resident executors from the outside: the supervisor that keeps one running for a catalog, starting
one when none is alive, and waiting for queued work. The loop inside Spark is compaction/spark/executor.py; the queue
is compaction/ledger/queue.py.

* :func:`supervise` (``icecompact executor run``) runs the executor with spark-submit (any master, like a job group)
  and starts a fresh one whenever it leaves for a restart (after N groups, heap limit) or crashes; a crash loop (3
  crashes within a minute of their start) stops it with the reason in the ledger. SIGTERM / SIGINT stop it at once:
  a group in flight is then left to its lease (re-queued or failed by whoever looks next), as after a kill.
* :func:`ensure_executor` starts a detached supervisor for a catalog that has no live executor (exactly one caller
  wins, :meth:`~compaction.ledger.Ledger.claim_executor_start`). The catalog's properties, secrets included, reach
  it through a ``0600`` file it reads and deletes at once: never argv.
* :func:`wait_for_work` polls the queue until the items are terminal, taking back expired leases and restarting a
  dead executor on the way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from compaction import settings
from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError, ConfigError, RewriteJobError
from compaction.core.queue import EXECUTOR_STALE_SECONDS_DEFAULT, WorkStatus
from compaction.ledger import LEDGER_URL_ENV, Ledger
from compaction.spark.contract import option_args, serve_command
from compaction.spark.executor import EXIT_RESTART, ServeOptions
from compaction.spark.session import SparkSettings

CRASH_LOOP_COUNT = 3
CRASH_LOOP_WINDOW_S = 60.0
CRASH_BACKOFF_S = 2.0


def executors_dir() -> Path:
    return settings.home() / "executors"


def new_executor_id() -> str:
    return f"x-{socket.gethostname()[:32]}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Generation:
    """How one executor process ended: exit code (:data:`EXIT_RESTART`: wants a fresh one), reason, lifetime."""

    returncode: int
    reason: str
    duration_s: float


def supervise(catalog: CatalogConfig, executor_id: str, *, spark_settings: SparkSettings | None = None,
              options: ServeOptions = ServeOptions(), ledger: Ledger | None = None,
              progress: Callable[[str], None] = print,
              run_generation: Callable[[int], Generation] | None = None) -> int:
    """Keep executor ``executor_id`` (registered by :meth:`~Ledger.claim_executor_start`) running until it stops,
    idles out or crash-loops. Returns 0, or the exit code of the crash loop."""
    from compaction.ops.submit import SubmitRequest, make_app_name, run_submit

    spark_settings = spark_settings or SparkSettings.from_environment()
    own = ledger is None
    ledger = ledger or Ledger.open()
    folder = executors_dir() / executor_id
    folder.mkdir(parents=True, exist_ok=True)
    ledger.executor_heartbeat(executor_id, status="starting", pid=os.getpid())  # the pid `executor stop` signals

    def one_generation(generation: int) -> Generation:
        result = folder / f"exit-{generation}.json"
        request = SubmitRequest(plan_path=folder, group_id=0, result_path=result, catalog=catalog,
                                settings=spark_settings, app_name=make_app_name(f"executor-{catalog.name}",
                                                                                executor_id[-12:], generation),
                                command=serve_command(executor_id, catalog.name, generation, result, options))
        started = time.monotonic()
        try:
            outcome = run_submit(request, on_output=progress)
        except CompactionError as e:
            return Generation(int(getattr(e, "returncode", None) or RewriteJobError.exit_code),
                              str(e).splitlines()[0], time.monotonic() - started)
        reason = (outcome.result or {}).get("reason") or f"exited {outcome.returncode}"
        return Generation(outcome.returncode, str(reason), outcome.duration_s)

    run_generation = run_generation or one_generation
    crashes: list[float] = []
    generation = 0
    reason = "stopped"
    code = 0
    try:
        while True:
            generation += 1
            progress(f"executor {executor_id}: starting generation {generation} ({spark_settings.master})")
            ended = run_generation(generation)
            progress(f"executor {executor_id}: generation {generation} ended ({ended.returncode}): {ended.reason}")
            if ended.returncode == 0:
                reason = ended.reason
                break
            if ended.returncode == EXIT_RESTART:
                continue
            crashes = [c for c in crashes if time.monotonic() - c < CRASH_LOOP_WINDOW_S]
            if ended.duration_s < CRASH_LOOP_WINDOW_S:
                crashes.append(time.monotonic())
            if len(crashes) >= CRASH_LOOP_COUNT:
                reason, code = f"crash loop: {ended.reason}", ended.returncode or RewriteJobError.exit_code
                break
            time.sleep(CRASH_BACKOFF_S)
    except KeyboardInterrupt:
        reason = "interrupted (SIGINT/SIGTERM)"
    finally:
        try:
            ledger.stop_executor(executor_id, reason)
        finally:
            if own:
                ledger.close()
    progress(f"executor {executor_id}: stopped: {reason}")
    return code


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def run_supervisor(catalog: CatalogConfig, executor_id: str | None, *, options: ServeOptions,
                   spark_settings: SparkSettings | None = None, another: bool = False,
                   progress: Callable[[str], None] = print) -> int:
    """``icecompact executor run``: register (unless started by :func:`ensure_executor`, which did) and supervise.
    ``another``: one more executor for a catalog that has one (several claim from the queue safely on a
    PostgreSQL ledger)."""
    spark_settings = spark_settings or SparkSettings.from_environment()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    with Ledger.open() as ledger:
        if executor_id is None:
            executor_id = new_executor_id()
            if not ledger.claim_executor_start(executor_id, catalog=catalog.name, host=socket.gethostname(),
                                               master=spark_settings.master, another=another):
                alive = [e.executor_id for e in ledger.executors(catalog=catalog.name)]
                raise ConfigError(f"an executor already serves catalog {catalog.name!r} ({', '.join(alive)}); "
                                  "stop it first (icecompact executor stop), or add one with --another")
        return supervise(catalog, executor_id, spark_settings=spark_settings, options=options, ledger=ledger,
                         progress=progress)


#: A supervisor records its executor before (detached start: in the parent) or just after its process starts.
_PID_RECORD_SLACK_S = 300.0


def recorded_process_alive(record: Any) -> bool:
    """Whether ``record.pid`` is still the executor's supervisor that recorded it: a pid is reused once its process
    has ended (on Linux within minutes: a JVM's threads use pids too), and signalling a reused one would stop an
    unrelated process. The process must be an ``executor`` command started no later than shortly after the record."""
    import psutil

    try:
        process = psutil.Process(record.pid)
        created, cmdline = process.create_time(), " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return "executor" in cmdline and created <= record.started_at.timestamp() + _PID_RECORD_SLACK_S


def stop_executors(ledger: Ledger, catalog: str | None = None, *,
                   progress: Callable[[str], None] = print) -> int:
    """SIGTERM the supervisors of this host's live executors (of ``catalog``). Returns how many were signalled."""
    host = socket.gethostname()
    count = 0
    for record in ledger.executors(catalog=catalog):
        if record.pid is None or record.host != host[:255]:
            progress(f"executor {record.executor_id}: on host {record.host}, pid {record.pid}: stop it there")
            continue
        try:
            if not recorded_process_alive(record):
                raise ProcessLookupError(record.pid)
            os.kill(record.pid, signal.SIGTERM)
        except ProcessLookupError:
            ledger.stop_executor(record.executor_id, "its supervisor was gone")
            progress(f"executor {record.executor_id}: already gone (marked stopped)")
            continue
        count += 1
        progress(f"executor {record.executor_id}: SIGTERM sent to pid {record.pid}")
    return count


def write_catalog_file(catalog: CatalogConfig, directory: Path) -> Path:
    """The catalog's name and properties (secrets included) in a ``0600`` file for a child process."""
    fd, name = tempfile.mkstemp(prefix="catalog-", suffix=".json", dir=directory)
    with os.fdopen(fd, "w") as out:
        json.dump({"name": catalog.name, "properties": dict(catalog.properties)}, out)
    return Path(name)


def read_catalog_file(path: Path) -> CatalogConfig:
    """Read and delete a file written by :func:`write_catalog_file`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the catalog file {path}: {e}") from e
    finally:
        path.unlink(missing_ok=True)
        if path.parent.name.startswith("icecompact-executor-"):  # the private folder ensure_executor made
            shutil.rmtree(path.parent, ignore_errors=True)
    return CatalogConfig(str(data["name"]), {str(k): str(v) for k, v in data["properties"].items()})


def ensure_executor(catalog: CatalogConfig, ledger: Ledger, *, spark_settings: SparkSettings | None = None,
                    options: ServeOptions = ServeOptions(), ledger_url: str | None = None,
                    stale_after_s: float = EXECUTOR_STALE_SECONDS_DEFAULT,
                    progress: Callable[[str], None] = lambda _m: None) -> str | None:
    """Start a detached supervisor for ``catalog`` when no live executor serves it. Returns the new executor's id,
    or None when one is alive. Its log: ``$ICECOMPACT_HOME/executors/<id>.log``."""
    spark_settings = spark_settings or SparkSettings.from_environment()
    executor_id = new_executor_id()
    if not ledger.claim_executor_start(executor_id, catalog=catalog.name, host=socket.gethostname(),
                                       master=spark_settings.master, stale_after_s=stale_after_s):
        return None
    folder = executors_dir()
    folder.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix="icecompact-executor-"))  # 0700
    catalog_file = write_catalog_file(catalog, private)
    argv = [sys.executable, "-m", "compaction.cli", "executor", "run", "--executor-id", executor_id,
            "--catalog-file", str(catalog_file), "--master", spark_settings.master, *option_args(options)]
    env = dict(os.environ)
    if ledger_url is not None:
        env[LEDGER_URL_ENV] = ledger_url
    log_path = folder / f"{executor_id}.log"
    with open(log_path, "ab") as log:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True, close_fds=True)
    progress(f"started executor {executor_id} for catalog {catalog.name} (log: {log_path})")
    return executor_id


def wait_for_work(ledger: Ledger, item_ids: Iterable[str], *, timeout_s: float | None = None, poll_s: float = 0.5,
                  keep_alive: Callable[[], None] | None = None, keep_alive_every_s: float = 5.0,
                  progress: Callable[[str], None] = lambda _m: None) -> list[Any]:
    """Poll until every item is terminal (or ``timeout_s``: the queued ones are cancelled, running ones keep their
    lease). Every ``keep_alive_every_s``: take back expired leases and call ``keep_alive`` (e.g. ensure_executor)."""
    ids = list(dict.fromkeys(item_ids))
    started = time.monotonic()
    last_keep = started
    seen: dict[str, WorkStatus] = {}
    while True:
        items = ledger.work_items(ids)
        for item in items:
            if seen.get(item.item_id) is not item.status:
                seen[item.item_id] = item.status
                progress(f"work item {item.item_id} ({item.table_ref} group(s) "
                         f"{', '.join(map(str, item.group_ids))}): {item.status.value}"
                         + (f" by {item.executor_id}" if item.status is WorkStatus.RUNNING else "")
                         + (f" ({item.error})" if item.error else ""))
        if len(items) == len(ids) and all(i.status.is_terminal for i in items):
            return items
        now = time.monotonic()
        if timeout_s is not None and now - started >= timeout_s:
            ledger.cancel_queued_work(ids, f"the waiter gave up after {timeout_s:g} s")
            return ledger.work_items(ids)
        if now - last_keep >= keep_alive_every_s:
            last_keep = now
            ledger.take_back_expired_work()
            if keep_alive is not None:
                keep_alive()
        time.sleep(poll_s)


def group_results(items: Iterable[Any], group_ids: Iterable[int]) -> list[tuple[int, dict[str, Any] | None, str | None]]:
    """(group, result or checkpoint, error) of every group in ``group_ids`` from terminal work items, as
    :func:`compaction.ops.runner.record_run` takes them; a group no item reports has no result and says so."""
    found: dict[int, tuple[dict[str, Any] | None, str | None]] = {}
    for item in items:
        for gid in item.group_ids:
            result = item.result_of(gid)
            # A done item's groups carry their own error in their result; an item that did not finish says why.
            error = None if item.status is WorkStatus.DONE else (item.error or f"work item {item.item_id} "
                                                                               f"{item.status.value}")
            found[gid] = (None if result is None else dict(result), error)
    return [(gid, *found.get(gid, (None, f"job group {gid} has no result in the work queue (see "
                                        "`icecompact executor status`)"))) for gid in group_ids]
