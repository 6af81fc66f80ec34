"""Catalog and storage faults on the two paths tests/objectstore/test_s3_faults.py does not cover: maintenance
(snapshot expiry, manifest rewrite, orphan removal) and a compaction run on the resident executor.

Both sides' traffic goes through two fault proxies (icecompact_testing.faults.S3FaultProxy): one in front of the
REST catalog, which re-vends the other one's address as the table's ``s3.endpoint``, so Spark's S3FileIO (the
actions' reads, writes, listings and deletes) and our pyiceberg reads both meet the S3 faults. After each faulted
run the table is checked through a direct catalog, as bench/faults.py checks a compaction:

* every row is still read (the reference reader and Spark, compared with the rows before);
* no file that a snapshot still in the table's metadata references (manifest list, manifest, data and delete file
  of every snapshot) is missing from the bucket;
* no commit twice (maintenance adds at most the manifest rewrite's one snapshot; a task attempt of a compaction
  plan is on one snapshot at most);
* the run ends terminal: a report (or our own error type), recorded as finished in the ledger, never a
  third-party exception; and the next run without faults succeeds.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError
from compaction.core.maintenance import MaintenanceAction as A
from compaction.ledger import Ledger
from icecompact_testing.faults import FaultSchedule, S3FaultProxy

S3_META = r"/metadata/[^/]*\.(avro|json)$"
#: Every action: expire all but the current snapshot, rewrite the manifests, delete orphans older than the plan.
ALL_ACTIONS = {"max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_small_count": 2,
               "orphans_enabled": True, "orphans_older_than_s": 0, "clock_skew_s": 0}
TERMINAL_MAINTENANCE = ("succeeded", "partial", "failed")
FULL = {"major_full_rewrite": True}  # MAJOR rewrites every file: the small table always has a plan


@pytest.fixture()
def proxies(object_store) -> Iterator[tuple[S3FaultProxy, S3FaultProxy]]:  # type: ignore[no-untyped-def]
    """(S3 proxy, REST proxy); the REST proxy re-vends the S3 proxy as the tables' ``s3.endpoint``."""
    with S3FaultProxy(object_store.s3_endpoint) as s3, \
            S3FaultProxy(object_store.catalog_uri, vend_s3_endpoint=s3.endpoint) as rest:
        yield s3, rest


def _through(spark, object_store, s3: S3FaultProxy, rest: S3FaultProxy, tag: str) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A catalog of its own name (Spark keeps a catalog's instance and its table cache per name) whose REST and S3
    traffic goes through the proxies, registered in Spark."""
    from compaction.spark.session import register_catalog

    base = object_store.catalog()
    through = CatalogConfig(f"{tag}_{uuid.uuid4().hex[:8]}", {**base.properties, "uri": rest.endpoint,
                                                              "s3.endpoint": s3.endpoint})
    register_catalog(spark, through)
    return through


def _maintenance_table(spark, catalog: CatalogConfig, prefix: str, seed: int) -> tuple[Any, str, str]:  # type: ignore[no-untyped-def]
    """A small MoR table with several snapshots (written without faults) and a planted orphan in its data folder:
    (workload, name, orphan path)."""
    from compaction.demo.workload import WorkloadSpec, generate

    name = f"{prefix}_{uuid.uuid4().hex[:8]}.t"
    workload = generate(spark, catalog, name, WorkloadSpec(seed=seed, partitioning="days_ts", days_span=2, commits=2,
                                                           rows_per_commit=10))
    table = catalog.load().load_table(workload.identifier)
    assert len(table.metadata.snapshots) > 2
    location = str(table.metadata.location).rstrip("/")
    data_path = str(table.metadata.properties.get("write.data.path") or f"{location}/data").rstrip("/")
    orphan = f"{data_path}/orphan-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(orphan).create() as out:
        out.write(b"not referenced by any metadata" * 10)
    return workload, name, orphan


def _rows(spark, catalog: CatalogConfig, workload) -> tuple[Any, Any]:  # type: ignore[no-untyped-def]
    """(reference reader's rows, Spark's rows) through the direct catalog."""
    from compaction.demo.workload import spark_rows
    from icecompact_testing.oracle import read_table

    oracle = read_table(catalog.load().load_table(workload.identifier)).rows
    spark.sql(f"REFRESH TABLE {catalog.name}.{workload.identifier[0]}.{workload.identifier[1]}")
    return oracle, spark_rows(spark, f"{catalog.name}.{workload.identifier[0]}.{workload.identifier[1]}")


def _missing_files(object_store, catalog: CatalogConfig, workload) -> list[str]:  # type: ignore[no-untyped-def]
    """Files some snapshot in the table's metadata references (its manifest list, manifests, live data and delete
    files) that are gone from the bucket (listed over S3, not through the proxy)."""
    import pyarrow.fs as pafs

    from icecompact_testing.oracle import live_entries

    table = catalog.load().load_table(workload.identifier)
    referenced: set[str] = set()
    for snapshot in table.snapshots():
        referenced.add(snapshot.manifest_list)
        referenced.update(m.manifest_path for m in snapshot.manifests(table.io))
        referenced.update(e.path for e in live_entries(table, snapshot.snapshot_id))
    fs = pafs.S3FileSystem(access_key=object_store.access_key, secret_key=object_store.secret_key,
                           endpoint_override=object_store.s3_endpoint, scheme="http", region="us-east-1")
    location = str(table.metadata.location).removeprefix("s3://")
    listed = {f"s3://{i.path}" for i in fs.get_file_info(pafs.FileSelector(location, recursive=True))
              if i.type == pafs.FileType.File}
    assert referenced and len(referenced & listed) > 0, "the listing found none of the table's files"
    return sorted(p for p in referenced if p not in listed)


def _snapshot_ids(catalog: CatalogConfig, workload) -> set[int]:  # type: ignore[no-untyped-def]
    return {int(s.snapshot_id) for s in catalog.load().load_table(workload.identifier).snapshots()}


def _exists(catalog: CatalogConfig, workload, path: str) -> bool:  # type: ignore[no-untyped-def]
    return bool(catalog.load().load_table(workload.identifier).io.new_input(path).exists())


def _maintain(catalog: CatalogConfig, name: str, spark, ledger: Ledger, overrides: dict[str, object]):  # type: ignore[no-untyped-def]
    """Run maintenance; the run must end in a report or in our own error type (never a third-party exception),
    and the ledger must hold it as finished. Returns (report or None, error or None, lines)."""
    from compaction.ops.maintenance import maintain_table

    lines: list[str] = []
    report, error = None, None
    try:
        report = maintain_table(catalog, name, spark=spark, ledger=ledger, overrides=overrides,
                                progress=lines.append)
    except CompactionError as e:  # ours: a clear message and exit code, recorded as failed below
        error = e
    (run, *_) = ledger.maintenance_runs(name, catalog=catalog.name)
    assert run.status in TERMINAL_MAINTENANCE and run.finished_at is not None, (run, lines)
    if report is not None:
        assert report.run_id == run.run_id and report.status == run.status, (run, lines)
        assert report.exit_code in (0, 11), report.to_dict()
        for result in report.results:
            assert result.status in ("succeeded", "deferred", "refused", "failed"), result.to_dict()
            assert result.ok or result.error, result.to_dict()  # a failed action says why
            # ... in one line per Java exception, not with py4j's wrapper and Iceberg's stack trace.
            assert "\tat " not in (result.error or "") and "Py4J" not in (result.error or ""), result.error
    else:
        assert error is not None and run.status == "failed" and run.error, run
    return report, error, lines


def _statuses(report) -> dict[A, str]:  # type: ignore[no-untyped-def]
    return {} if report is None else {r.action: r.status for r in report.results}


def _schedules(seed: int, table: str) -> tuple[FaultSchedule, FaultSchedule]:
    """(S3 schedule, REST schedule) of 503 SlowDown + Retry-After and connection resets (before forwarding), drawn
    from ``seed``: on S3 metadata reads, writes, HEADs and anything (listings, deletes); on the REST catalog's
    table loads, its commits and anything (the token, config)."""
    kinds = ["slow_down", "reset"]
    s3 = FaultSchedule.draw(seed * 100 + 1, kinds, faults=4, requests=(1, 30), max_count=2, retry_after_s=(1, 1),
                            targets=[("GET", S3_META), ("PUT", ".*"), ("HEAD", ".*"), (None, ".*")])
    rest = FaultSchedule.draw(seed * 100 + 2, kinds, faults=3, requests=(1, 6), max_count=1, retry_after_s=(1, 1),
                              targets=[("GET", rf"/tables/{table}$"), (None, ".*"), ("POST", rf"/tables/{table}$")])
    return s3, rest


def test_maintenance_under_seeded_slow_downs_and_resets_keeps_every_row_and_file(  # type: ignore[no-untyped-def]
        spark, rest_catalog: CatalogConfig, object_store, proxies, tmp_path: Path) -> None:
    """Expiry, manifest rewrite and orphan removal meet a seeded schedule of 503 SlowDown (with Retry-After) and
    connection resets on S3 (metadata reads, writes, deletes, listings) and on the REST catalog (loads, commits):
    the clients retry them, every row and every referenced file is kept, at most one snapshot is added (the
    manifest rewrite's), the run is terminal and recorded; a run without faults then has everything done."""
    s3, rest = proxies
    workload, name, orphan = _maintenance_table(spark, rest_catalog, "mfault", seed=41)
    before = _rows(spark, rest_catalog, workload)
    snapshots_before = _snapshot_ids(rest_catalog, workload)
    table = name.split(".")[1]
    s3_schedule, rest_schedule = _schedules(41, table)
    assert (s3_schedule, rest_schedule) == _schedules(41, table)  # reproducible from the seed
    through = _through(spark, object_store, s3, rest, "mfault")
    s3.install(s3_schedule)
    rest.install(rest_schedule)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        report, error, lines = _maintain(through, name, spark, ledger, ALL_ACTIONS)
        served = (list(s3.log), list(rest.log))
        s3.clear()
        rest.clear()
        assert rest.vended > 0, "the catalog vended no s3.endpoint: Spark's traffic did not go through the S3 proxy"
        assert s3.faults_served >= 1 and rest.faults_served >= 1, served
        assert _rows(spark, rest_catalog, workload) == before, (served, lines)
        assert _missing_files(object_store, rest_catalog, workload) == [], (served, lines)
        added = _snapshot_ids(rest_catalog, workload) - snapshots_before
        assert len(added) <= 1, (added, served, lines)  # the manifest rewrite's commit, once
        assert report is not None, (error, served, lines)  # retried faults end in a report, not an exception
        if report.status == "succeeded":
            assert _statuses(report) == {A.EXPIRE_SNAPSHOTS: "succeeded", A.REWRITE_MANIFESTS: "succeeded",
                                         A.DELETE_ORPHAN_FILES: "succeeded"}, report.to_dict()
            assert not _exists(rest_catalog, workload, orphan)
        # The next run, without faults: whatever is left is done, nothing referenced goes.
        again, error, lines = _maintain(through, name, spark, ledger, ALL_ACTIONS)
        assert again is not None and again.status == "succeeded", (error, again and again.to_dict(), lines)
    assert not _exists(rest_catalog, workload, orphan)
    assert _rows(spark, rest_catalog, workload) == before
    assert _missing_files(object_store, rest_catalog, workload) == []
    print(f"faults served: s3 {[f.fault for f in served[0]]}, rest {[f.fault for f in served[1]]}; "
          f"first run {report.status}: {_statuses(report)}")


@pytest.mark.parametrize("lost, how", [("expire", "503"), ("rewrite_manifests", "503"), ("rewrite_manifests", "reset")])
def test_a_maintenance_commit_whose_answer_is_lost_keeps_every_committed_file(  # type: ignore[no-untyped-def]
        spark, rest_catalog: CatalogConfig, object_store, proxies, tmp_path: Path, lost: str, how: str) -> None:
    """The catalog takes the expiry's (or the manifest rewrite's) commit, its answer is lost: a gateway's 503
    (Iceberg: CommitStateUnknownException) or a connection reset after the catalog answered (Iceberg: a plain
    RESTException, for which the REST table operations' strict clean-up deletes nothing either). Whatever the
    action reports, no row changes, no file a snapshot in the metadata references is deleted - not by Iceberg's
    clean-up of a commit it takes for failed, not by the orphan removal of this run or of the next - the commit is
    on the table once, and the next run without faults succeeds and deletes the planted orphan (only it)."""
    s3, rest = proxies
    workload, name, orphan = _maintenance_table(spark, rest_catalog, f"mlost_{lost[:3]}", seed=42)
    before = _rows(spark, rest_catalog, workload)
    table_before = rest_catalog.load().load_table(workload.identifier)
    snapshots_before = {int(s.snapshot_id) for s in table_before.snapshots()}
    current_before = int(table_before.current_snapshot().snapshot_id)
    # The first commit on the table is the action's: the expiry runs first; without it the manifest rewrite.
    overrides = dict(ALL_ACTIONS) if lost == "expire" else {**ALL_ACTIONS, "expire_enabled": False}
    through = _through(spark, object_store, s3, rest, f"mlost{lost[:3]}")
    commit = rf"/tables/{name.split('.')[1]}$"
    if how == "503":
        rest.lose_answer_of_next(1, method="POST", path=commit)
    else:  # the connection is reset once the catalog answered
        rest.reset_next(1, method="POST", path=commit, after_forward=True)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        report, error, lines = _maintain(through, name, spark, ledger, overrides)
        assert rest.faults_served == 1, (rest.log, lines)
        rows_first = _rows(spark, rest_catalog, workload)
        missing_first = _missing_files(object_store, rest_catalog, workload)
        after_first = _snapshot_ids(rest_catalog, workload)
        assert rows_first == before, lines
        assert missing_first == [], (missing_first, _statuses(report), lines)
        added = after_first - snapshots_before
        if lost == "expire":
            # The commit took effect: of the snapshots before only the current one is left. The manifest rewrite
            # that runs after it may add its one snapshot.
            assert after_first & snapshots_before == {current_before}, (after_first, lines)
            assert len(added) <= 1, (added, _statuses(report), lines)
        else:
            assert len(added) == 1, (added, _statuses(report), lines)  # it took effect, once
            assert after_first - added == snapshots_before
        if report is not None and _statuses(report).get(A.DELETE_ORPHAN_FILES) == "succeeded":
            assert not _exists(rest_catalog, workload, orphan)
        again, error, lines = _maintain(through, name, spark, ledger, overrides)
        assert again is not None and again.status == "succeeded", (error, again and again.to_dict(), lines)
    assert not _exists(rest_catalog, workload, orphan)
    assert _rows(spark, rest_catalog, workload) == before
    assert _missing_files(object_store, rest_catalog, workload) == []
    if lost == "rewrite_manifests":
        assert len(_snapshot_ids(rest_catalog, workload) - after_first) <= 1  # the next run's own rewrite, if any
    print(f"first run {report.status if report else type(error).__name__}: {_statuses(report)} "
          f"{[r.error for r in report.results if r.error] if report else error}")


def test_a_resident_run_whose_commit_answer_is_lost_is_recorded_terminal_and_the_next_run_repairs(  # type: ignore[no-untyped-def]
        spark, rest_catalog: CatalogConfig, object_store, proxies, tmp_path: Path) -> None:
    """A MAJOR on the resident executor (started as tests/test_executor.py starts it), its REST and S3 traffic
    through the proxies, meets a commit whose answer is lost (a gateway's 503 after the catalog took it). The run
    ends terminal and the ledger says the same as the report (run, work item, outcomes: succeeded, or failed /
    needs_attention with a reason); no row changes, no referenced file is missing, no task attempt is on two
    snapshots; the next resident run on the same executor succeeds and leaves no applicable delete."""
    from compaction.core.plan import CompactionMode
    from compaction.core.posthoc import PLAN_PROPERTY
    from compaction.core.queue import RestartLimits
    from compaction.demo.workload import WorkloadSpec, generate
    from compaction.ledger import OutcomeStatus, RunStatus
    from compaction.ops.executor import ensure_executor, executors_dir
    from compaction.ops.runner import run_table
    from compaction.spark.executor import ServeOptions
    from icecompact_testing.oracle import read_table
    from icecompact_testing.processes import stop_ledger_executors

    task_property = "icecompact.task-attempt"  # compaction.spark.major.TASK_PROPERTY (Spark-side module)
    s3, rest = proxies
    name = f"resfault_{uuid.uuid4().hex[:8]}.t"
    base = object_store.catalog()
    # Not registered in this Spark: only the executor's own Spark application uses it.
    through = CatalogConfig(f"resx_{uuid.uuid4().hex[:8]}", {**base.properties, "uri": rest.endpoint,
                                                             "s3.endpoint": s3.endpoint})
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    options = ServeOptions(poll_s=0.2, lease_s=6.0, heartbeat_s=1.0, limits=RestartLimits(max_groups=50))

    def log_tail() -> str:
        logs = sorted(executors_dir().glob(f"{started}*.log")) if started else []
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in logs)

    started = None
    with Ledger.open(url) as ledger:
        try:
            started = ensure_executor(through, ledger, options=options, ledger_url=url)
            assert started is not None
            # The table is written (without faults) while the executor's JVM starts.
            workload = generate(spark, rest_catalog, name, WorkloadSpec(seed=11, partitioning="days_ts", days_span=2,
                                                                        commits=2, rows_per_commit=10))
            before = _rows(spark, rest_catalog, workload)
            assert read_table(rest_catalog.load().load_table(workload.identifier)).applicable_deletes
            rest.lose_answer_of_next(1, method="POST", path=rf"/tables/{name.split('.')[1]}$")
            # Only the executor writes: a SlowDown on its first data file write proves its S3 traffic meets the proxy.
            s3.slow_down_next(1, method="PUT", path=r"\.parquet$", retry_after_s=1)
            lines: list[str] = []
            first = run_table(through, name, mode=CompactionMode.MAJOR, ledger=ledger, progress=lines.append,
                              executor="resident", timeout_s=300, overrides=FULL)
            assert first.plan.groups, lines
            assert rest.faults_served == 1, (rest.log, lines, log_tail())
            assert rest.vended > 0 and s3.pending() == 0, (s3.log, log_tail())
            # Terminal, and the ledger says what the report says.
            assert first.status.is_terminal, (first.status, lines)
            run = ledger.run(first.run_id)
            assert run is not None and run.status is first.status, (run, first.status)
            items = ledger.work_items(run_id=first.run_id)
            assert items and all(i.status.is_terminal and i.executor_id == started for i in items), items
            outcomes = ledger.outcomes(first.run_id)
            if first.status is RunStatus.SUCCEEDED:
                assert outcomes and all(o.status is OutcomeStatus.COMMITTED for o in outcomes), outcomes
            else:
                assert first.status in (RunStatus.FAILED, RunStatus.NEEDS_ATTENTION, RunStatus.PARTIAL), first.status
                assert first.errors and all(e for e in first.errors), (first.errors, lines)
            assert _rows(spark, rest_catalog, workload) == before, (lines, log_tail())
            assert _missing_files(object_store, rest_catalog, workload) == []
            table = rest_catalog.load().load_table(workload.identifier)
            tags = [s.summary.get(task_property) for s in table.snapshots()
                    if s.summary is not None and s.summary.get(PLAN_PROPERTY) == first.plan.plan_id]
            assert len(tags) == len(set(tags)), tags  # no task attempt committed twice
            if first.status is RunStatus.SUCCEEDED:
                assert tags, "the run succeeded without a commit of its plan"

            second = run_table(through, name, mode=CompactionMode.MAJOR, ledger=ledger, executor="resident",
                               timeout_s=300, overrides=FULL)
            assert second.status is RunStatus.SUCCEEDED, (second.errors, log_tail())
            assert ledger.run(second.run_id).status is RunStatus.SUCCEEDED  # type: ignore[union-attr]
        finally:
            stop_ledger_executors(ledger)
    final = read_table(rest_catalog.load().load_table(workload.identifier))
    assert final.rows == before[0] and not final.applicable_deletes
    assert _missing_files(object_store, rest_catalog, workload) == []
    print(f"first resident run {first.status.value}: {first.errors}; second {second.status.value}")


def test_a_failed_action_reports_the_java_exception_chain_without_a_stack_trace() -> None:
    """What execute_plan records for an action that failed on a py4j error (here a stand-in with the same
    ``java_exception`` chain): one ``Class: first message line`` per cause, and what a lost commit answer means."""
    from compaction.spark.maintenance import action_error

    class _Java:
        def __init__(self, cls: str, message: str | None, cause: _Java | None = None) -> None:
            self._cls, self._message, self._cause = cls, message, cause

        def getClass(self) -> Any:  # noqa: N802 - Java's names
            return type("C", (), {"getName": lambda _self: self._cls})()

        def getMessage(self) -> str | None:  # noqa: N802
            return self._message

        def getCause(self) -> _Java | None:  # noqa: N802
            return self._cause

    class Py4JJavaError(Exception):
        def __init__(self, java: _Java) -> None:
            super().__init__("An error occurred while calling o470.execute.\n: ...\n\tat org.apache.iceberg.X(X.java:1)")
            self.java_exception = java

    reset = Py4JJavaError(_Java("org.apache.iceberg.exceptions.RESTException",
                                "Error occurred while processing POST request",
                                _Java("java.net.SocketException", "Connection reset")))
    assert action_error(reset) == ("the catalog's answer to the commit was lost, it may have taken effect: nothing "
                                   "was deleted, the next run reads the table again (RESTException: Error occurred "
                                   "while processing POST request; caused by SocketException: Connection reset)")
    refused = Py4JJavaError(_Java("org.apache.iceberg.exceptions.RESTException",
                                  "Error occurred while processing GET request",
                                  _Java("java.net.ConnectException", "Connection refused")))
    assert action_error(refused) == ("RESTException: Error occurred while processing GET request; "
                                     "caused by ConnectException: Connection refused")
    lost = Py4JJavaError(_Java("org.apache.iceberg.exceptions.CommitStateUnknownException",
                               "Service failed: 503\nCannot determine whether the commit was successful\n\tat x"))
    text = action_error(lost)
    assert text.startswith("the catalog's answer to the commit was lost, it may have taken effect")
    assert "CommitStateUnknownException: Service failed: 503)" in text and "\tat " not in text
    assert action_error(ValueError("bad")) == "ValueError: bad"
