"""The resident executor end to end: `icecompact run --executor resident` queues the plan, a detached
supervisor runs a long-lived Spark application that takes the work, the run is recorded like a spark-submit run;
one executor serves consecutive runs warm; an executor killed mid-group is restarted and the group re-run, the table
validated and the ledger terminal; `icecompact executor stop` stops it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from compaction.catalog import CatalogConfig
from compaction.cli import main as cli_main
from compaction.core.plan import CompactionMode
from compaction.core.queue import RestartLimits, WorkStatus
from compaction.ops.executor import ensure_executor
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.runner import run_table
from compaction.spark.executor import ServeOptions
from icecompact_testing.oracle import read_table
from icecompact_testing.processes import stop_ledger_executors
from compaction.demo.workload import WorkloadSpec, generate

FAST = ServeOptions(poll_s=0.2, lease_s=6.0, heartbeat_s=1.0, limits=RestartLimits(max_groups=50))


@pytest.fixture()
def queue_ledger(tmp_path: Path) -> Iterator[tuple[Ledger, str]]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger.open(url) as led:
        yield led, url
        stop_ledger_executors(led)


def _wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_resident_runs_are_recorded_and_share_one_warm_executor(spark, sqlite_catalog: CatalogConfig,
                                                                queue_ledger: tuple[Ledger, str],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    ledger, url = queue_ledger
    tables = ["res.a", "res.b"]
    workloads = [generate(spark, sqlite_catalog, t, WorkloadSpec(seed=21 + i, partitioning="days_ts", commits=3))
                 for i, t in enumerate(tables)]
    started = ensure_executor(sqlite_catalog, ledger, options=FAST, ledger_url=url)
    assert started is not None
    assert ensure_executor(sqlite_catalog, ledger, options=FAST, ledger_url=url) is None  # one per catalog
    reports = []
    for table, workload in zip(tables, workloads):
        lines: list[str] = []
        report = run_table(sqlite_catalog, table, mode=CompactionMode.AUTO, ledger=ledger, progress=lines.append,
                           overrides={"major.delete-ratio": 0.01}, executor="resident", timeout_s=600)
        assert report.status is RunStatus.SUCCEEDED, (report.errors, lines)
        after = read_table(sqlite_catalog.load().load_table(workload.identifier))
        assert after.rows == workload.expected_rows and not after.applicable_deletes
        outcomes = ledger.outcomes(report.run_id)
        assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.validation_result == "passed"
                                for o in outcomes)
        items = ledger.work_items(run_id=report.run_id)
        assert len(items) == 1 and items[0].status is WorkStatus.DONE and items[0].executor_id == started
        assert any("queued as work item" in line for line in lines)
        reports.append(report)
    # Both runs on the same Spark application (generation 1), which counted both. The count reaches the ledger with
    # the executor's next heartbeat, after the work item is marked done (which is what ended run_table's wait).
    _wait(lambda: sum(r.groups_run for r in ledger.executors()) >= 2, 60, "the executor's heartbeat after the 2nd item")
    (record,) = ledger.executors()
    assert record.executor_id == started and record.generation == 1 and record.groups_run >= 2
    assert record.status in ("idle", "busy") and record.heap_used_mb
    # The job's checks are recorded as a spark-submit job's are: nothing is left for the post-hoc check.
    for report, table in zip(reports, tables):
        checks = ledger.snapshot_checks(table, sqlite_catalog.name)
        commits = {o.commit_snapshot_id for o in ledger.outcomes(report.run_id)}
        assert commits <= {c.snapshot_id for c in checks if c.result == "passed"}

    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", url)
    capsys.readouterr()
    assert cli_main(["executor", "status"]) == 0
    assert started in capsys.readouterr().out
    assert cli_main(["executor", "stop"]) == 0
    _wait(lambda: not ledger.executors(), 60, "the executor to stop")
    (stopped,) = ledger.executors(include_stopped=True)
    assert stopped.stop_reason and "interrupted" in stopped.stop_reason


def test_executor_killed_mid_group_is_restarted_and_the_group_run_again(spark, sqlite_catalog: CatalogConfig,
                                                                        queue_ledger: tuple[Ledger, str],
                                                                        tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ledger, url = queue_ledger
    workload = generate(spark, sqlite_catalog, "res.k", WorkloadSpec(seed=31, partitioning="days_ts", commits=3))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    token = tmp_path / "kill-token"
    token.write_text("")
    # The first rewrite of the first generation writes its pids once a Spark stage of the rewrite runs.
    monkeypatch.setenv("ICECOMPACT_FAULT_INJECT", f"signal:before-rewrite:{token}")
    started = ensure_executor(sqlite_catalog, ledger, options=FAST, ledger_url=url)
    assert started is not None
    killed: list[int] = []

    def killer() -> None:
        pids_file = Path(f"{token}.pids")
        deadline = time.monotonic() + 300
        while not pids_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if pids_file.exists():
            pids = json.loads(pids_file.read_text())
            for pid in (pids["python"], pids["parent"]):
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    killed.append(int(pid))
                except ProcessLookupError:
                    pass

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    lines: list[str] = []
    report = run_table(sqlite_catalog, "res.k", mode=CompactionMode.MAJOR, ledger=ledger, progress=lines.append,
                       executor="resident", timeout_s=600)
    thread.join(5)
    assert killed, "the executor was not killed mid-group"
    (item,) = ledger.work_items(run_id=report.run_id)
    assert item.attempts == 2 and item.status is WorkStatus.DONE, (item, lines)
    # Taken back when its lease ran out (by the waiter) or at once by the restarted executor, whichever came first.
    assert item.error and "queued again" in item.error and ("ran out" in item.error or "restarted" in item.error)
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines)
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows and not after.applicable_deletes
    run = ledger.run(report.run_id)
    assert run is not None and run.status.is_terminal
    (record,) = ledger.executors()
    assert record.executor_id == started and record.generation == 2  # the supervisor started a fresh one



@pytest.mark.parametrize("master", ["local", "standalone"])
def test_two_executors_share_the_queue_of_a_postgresql_ledger(spark, postgres_catalog: CatalogConfig,
                                                              postgres_cluster, tmp_path: Path, master: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Two resident executors of one catalog (the second started with --another) claim the work items of four
    tables, queued at once, from one PostgreSQL ledger: every item runs exactly once (one attempt, claimed by one of
    the two), none is lost, every group is counted once by the executors, every table compacted. On a standalone
    master each application gets one core of the worker's two (spark.cores.max)."""
    import subprocess
    import sys

    from compaction.ops.executor import write_catalog_file
    from compaction.spark.contract import option_args
    from icecompact_testing.standalone import start_cluster

    cluster = start_cluster(tmp_path / "spark-standalone", cores=2, memory="1500m") if master == "standalone" else None
    master_args = ["--master", "local[1]"] if cluster is None else [
        "--master", cluster.master_url, "--conf", "spark.cores.max=1", "--conf", "spark.executor.memory=600m"]

    url = str(postgres_cluster.sqlalchemy_uri(postgres_cluster.create_database()))
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", url)
    monkeypatch.setenv("ICECOMPACT_HOME", str(tmp_path / "home"))
    tables = [f"two.t{i}" for i in range(4)]
    workloads = [generate(spark, postgres_catalog, t, WorkloadSpec(seed=40 + i, partitioning="days_ts", commits=2))
                 for i, t in enumerate(tables)]
    supervisors: list[subprocess.Popen[bytes]] = []
    logs = [tmp_path / f"executor{n}.log" for n in range(2)]

    def log_tails() -> str:
        return "\n".join(f"--- {p.name}\n" + (p.read_text(errors="replace")[-3000:] if p.exists() else "(none)")
                         for p in logs)

    try:
        with Ledger.open(url) as ledger:
            for n in range(2):
                private = tmp_path / f"private{n}"
                private.mkdir(mode=0o700)
                argv = [sys.executable, "-m", "compaction.cli", "executor", "run", "--catalog-file",
                        str(write_catalog_file(postgres_catalog, private)), *master_args,
                        *(["--another"] if n else []), *option_args(FAST)]
                with open(logs[n], "wb") as log:
                    supervisors.append(subprocess.Popen(argv, start_new_session=True, stdout=log,
                                                        stderr=subprocess.STDOUT))
                _wait(lambda: len(ledger.executors(catalog=postgres_catalog.name)) == n + 1, 120,
                      f"executor {n + 1} registered\n{log_tails()}")
            reports = {}

            def run(table: str) -> None:
                reports[table] = run_table(postgres_catalog, table, mode=CompactionMode.MAJOR, executor="resident",
                                           timeout_s=600)

            threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in tables]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(660)
            assert len(reports) == len(tables), f"runs not finished: {sorted(set(tables) - set(reports))}\n" \
                                                f"{log_tails()}"
            items = [i for r in reports.values() for i in ledger.work_items(run_id=r.run_id)]
            # An executor counts an item's groups in its next heartbeat, after it recorded the item's result.
            groups = sum(len(i.group_ids) for i in items)
            _wait(lambda: sum(e.groups_run for e in ledger.executors(catalog=postgres_catalog.name)) >= groups, 60,
                  "the executors' heartbeats counting the groups")
            executors = ledger.executors(catalog=postgres_catalog.name)
        assert all(r.status is RunStatus.SUCCEEDED for r in reports.values()), \
            ({t: (r.status, r.errors) for t, r in reports.items()}, log_tails())
        ids = {e.executor_id for e in executors}
        assert {e.master for e in executors} == {"local[1]" if cluster is None else cluster.master_url}, executors
        assert len(ids) == 2, executors
        assert len(items) == len(tables) and all(i.status is WorkStatus.DONE and i.attempts == 1
                                                 and i.executor_id in ids for i in items), items
        assert sum(e.groups_run for e in executors) == groups, (executors, items)  # none run twice
        for workload in workloads:
            after = read_table(postgres_catalog.load().load_table(workload.identifier))
            assert after.rows == workload.expected_rows and not after.applicable_deletes
    finally:
        for proc in supervisors:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in supervisors:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:  # never leave one behind
                os.killpg(proc.pid, signal.SIGKILL)
        if cluster is not None:
            cluster.stop()
