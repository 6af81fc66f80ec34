"""A catalog database that is briefly down (a restart, a failover) does not fail compaction (a 10 s PostgreSQL
restart must not fail every partition of the job that is running). Work that has committed nothing waits
for the catalog and starts over; a commit whose outcome is unknown is never retried blindly."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import CatalogUnavailableError, CommitConflictError, RewriteJobError
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.spark.job import COMMITTED, run_group
from compaction.spark.jvm import activate
from compaction.spark.validation import ValidationLevel, classify_java_error
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _java_error(java_exception):  # type: ignore[no-untyped-def]
    return SimpleNamespace(java_exception=java_exception)  # what py4j's Py4JJavaError carries


def test_a_lost_catalog_connection_is_unavailable_and_an_unknown_commit_is_not(spark) -> None:  # type: ignore[no-untyped-def]
    jvm = spark.sparkContext._jvm
    refused = jvm.java.net.ConnectException("Connection refused")
    wrapped = jvm.java.lang.RuntimeException("Failed to get table db.t from catalog c", refused)
    assert isinstance(classify_java_error(_java_error(wrapped), "MAJOR p"), CatalogUnavailableError)

    psql = jvm.org.postgresql.util.PSQLException(
        "Connection to 127.0.0.1:5432 refused. Check that the hostname and port are correct",
        jvm.org.postgresql.util.PSQLState.CONNECTION_UNABLE_TO_CONNECT)
    assert isinstance(classify_java_error(_java_error(jvm.java.lang.RuntimeException("x", psql)), "p"),
                      CatalogUnavailableError)
    terminated = jvm.org.postgresql.util.PSQLException(
        "FATAL: terminating connection due to administrator command",
        jvm.org.postgresql.util.PSQLState.CONNECTION_FAILURE)
    assert isinstance(classify_java_error(_java_error(terminated), "p"), CatalogUnavailableError)

    # The commit may have landed: never "unavailable" (that would retry it), whatever its cause.
    unknown = jvm.org.apache.iceberg.exceptions.CommitStateUnknownException(refused)
    assert isinstance(classify_java_error(_java_error(unknown), "p"), RewriteJobError)
    # A conflict stays a conflict; an unrelated SQL error is no outage.
    no_args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 0)  # the constructor's varargs
    conflict = jvm.org.apache.iceberg.exceptions.CommitFailedException("Cannot commit: stale metadata", no_args)
    assert isinstance(classify_java_error(_java_error(conflict), "p"), CommitConflictError)
    syntax = jvm.org.postgresql.util.PSQLException("ERROR: relation \"x\" does not exist",
                                                   jvm.org.postgresql.util.PSQLState.UNDEFINED_TABLE)
    assert isinstance(classify_java_error(_java_error(syntax), "p"), RewriteJobError)


def _own_postgres_catalog(spark, cluster, tmp_path: Path, prefix: str) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A catalog on the test's own cluster (the session's is shared by other tests), registered in Spark uncached."""
    from compaction.spark.session import register_catalog

    catalog: CatalogConfig = cluster.sql_catalog(prefix, tmp_path / "warehouse")
    register_catalog(spark, catalog)
    return catalog


@pytest.mark.parametrize("first_use", [False, True], ids=["catalog-loaded", "catalog-first-used-in-the-job"])
def test_compaction_waits_for_a_postgresql_catalog_that_restarts(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                 first_use: bool) -> None:
    """first_use: the job's process initialises the catalog while its database is down (a spark-submit job started
    during the outage). Spark's resolution swallows that failure and reports "spark_catalog requires a single-part
    namespace"; the job must see the outage and wait."""
    from compaction.spark.session import register_catalog
    from icecompact_testing.postgres import start_cluster

    cluster = start_cluster()
    try:
        catalog = _own_postgres_catalog(spark, cluster, tmp_path, "pgo")
        workload = generate(spark, catalog, "cdc.t", WorkloadSpec(seed=41, commits=3, rows_per_commit=40))
        before = read_table(catalog.load().load_table(workload.identifier))
        state = inspect_table(catalog, "cdc.t")
        the_plan = plan(state, CompactionPolicy.resolve(state.properties, {"major_full_rewrite": True}),
                        CompactionMode.MAJOR, NOW)
        assert the_plan.groups

        cluster.stop_server()  # down when the job starts; back once the job says it waits for it
        job_spark = spark
        if first_use:
            # A session of its own has its own catalog manager, which never initialised this catalog.
            job_spark = spark.newSession()
            register_catalog(job_spark, catalog)
        restarted = threading.Event()
        messages: list[str] = []
        restarting: list[threading.Thread] = []

        def restart() -> None:
            cluster.start_server()
            restarted.set()

        def progress(message: str) -> None:
            # Restarted only after the job reported the outage: the test never depends on how fast the job is.
            messages.append(message)
            if "waiting for the catalog" in message and not restarting:
                restarting.append(threading.Thread(target=restart, daemon=True))
                restarting[0].start()

        results = [run_group(job_spark, the_plan, g.group_id, level=ValidationLevel.COUNT, progress=progress)
                   for g in the_plan.groups]
        assert restarted.is_set()
        outcomes = [p for r in results for p in r.partitions]
        assert outcomes and all(p.status == COMMITTED for p in outcomes), [(p.label, p.status, p.error)
                                                                          for p in outcomes]
        assert any("waiting for the catalog" in m for m in messages), messages
        after = read_table(catalog.load().load_table(workload.identifier))
        assert after.rows == before.rows
        assert after.snapshot_id != before.snapshot_id
    finally:
        activate(spark)
        cluster.stop()


@pytest.mark.parametrize(("partitions", "mode"), [(1, CompactionMode.MAJOR), (3, CompactionMode.MAJOR),
                                                  (3, CompactionMode.MINOR)],
                         ids=["one-partition", "group-commit", "minor-group-commit"])
def test_an_outage_between_commit_and_validation_waits_and_validates(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                     monkeypatch, partitions: int,
                                                                     mode: CompactionMode) -> None:
    """Regression test: PostgreSQL restarting right after our commit failed the partition with its snapshot on
    main and no validated outcome (and a group commit's undo, unable to reach the catalog, crashed the job). Now the
    job waits for the catalog and validates what it committed: one partition (run_task) and a group commit."""
    import compaction.spark.job as job
    from compaction.spark import group_reads
    from compaction.spark import task as task_module
    from icecompact_testing.postgres import start_cluster

    cluster = start_cluster()
    try:
        catalog = _own_postgres_catalog(spark, cluster, tmp_path, "pgv")
        # MINOR: the group's conversion commit (no fragment merge before it, so that is the commit checked).
        workload = generate(spark, catalog, "cdc.v", WorkloadSpec(
            seed=43, commits=3, rows_per_commit=40,
            **({} if mode is CompactionMode.MAJOR else {"partitioning": "days_ts", "days_span": 3,
                                                       "use_equality_deletes": True, "eq_delete_fraction": 0.7})))
        before = read_table(catalog.load().load_table(workload.identifier))
        state = inspect_table(catalog, "cdc.v")
        overrides = ({"major_full_rewrite": True} if mode is CompactionMode.MAJOR else {"fragment_ratio": 1 << 40})
        the_plan = plan(state, CompactionPolicy.resolve(state.properties, {**overrides,
                                                                           "max_partitions_per_run": partitions}),
                        mode, NOW)
        assert sum(len(g.tasks) for g in the_plan.groups) == partitions

        real_validate = group_reads.validate
        restarts: list[threading.Timer] = []

        def validate_during_an_outage(*args, **kwargs):  # type: ignore[no-untyped-def]
            if not restarts and args[5]:  # the first check of a commit: it is on main, the catalog goes down now
                cluster.stop_server()
                restarts.append(threading.Timer(6, cluster.start_server))
                restarts[0].start()
                args[1].refresh()  # validation's first read of the catalog (the soak's failed on `refresh`)
            return real_validate(*args, **kwargs)

        for module in (job, task_module):  # where the job and the partition task call it
            monkeypatch.setattr(module, "validate", validate_during_an_outage)
        messages: list[str] = []
        results = [run_group(spark, the_plan, g.group_id, level=ValidationLevel.COUNT, progress=messages.append)
                   for g in the_plan.groups]
        restarts[0].join()
        outcomes = [p for r in results for p in r.partitions]
        assert outcomes
        assert all(p.status == COMMITTED for p in outcomes), [(p.label, p.status, p.error) for p in outcomes]
        assert all(p.validation.get("result") == "passed" for p in outcomes), [p.validation for p in outcomes]
        assert any("validated once it answered" in p.reason for p in outcomes)
        assert any("waiting for the catalog" in m for m in messages), messages
        after = read_table(catalog.load().load_table(workload.identifier))
        assert after.rows == before.rows
        assert after.snapshot_id != before.snapshot_id
    finally:
        cluster.stop()


def test_a_group_commit_failed_by_an_outage_is_looked_up_once_the_catalog_answers(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, monkeypatch) -> None:
    """The catalog's database goes down as a group commit is made, so the commit fails and the table cannot be read
    to see whether it landed. The job waits for the catalog, finds that it did not land, and commits; before, the
    outcome was called unknown at once and every partition of the group failed."""
    import compaction.spark.minor as minor
    from icecompact_testing.postgres import start_cluster

    cluster = start_cluster()
    try:
        catalog = _own_postgres_catalog(spark, cluster, tmp_path, "pgc")
        workload = generate(spark, catalog, "cdc.c", WorkloadSpec(
            seed=47, commits=3, rows_per_commit=40, partitioning="days_ts", days_span=3,
            use_equality_deletes=True, eq_delete_fraction=0.7))
        before = read_table(catalog.load().load_table(workload.identifier))
        state = inspect_table(catalog, "cdc.c")
        # The outage hits the first RowDelta the group commits (commit_changes).
        the_plan = plan(state, CompactionPolicy.resolve(state.properties, {"fragment_ratio": 1 << 40,
                                                                           "max_partitions_per_run": 3}),
                        CompactionMode.MINOR, NOW)
        assert sum(len(g.tasks) for g in the_plan.groups) == 3

        real_commit = minor.commit_changes
        stopped: list[bool] = []

        def commit_during_an_outage(*args, **kwargs):  # type: ignore[no-untyped-def]
            if not stopped:
                stopped.append(True)
                cluster.stop_server()
            return real_commit(*args, **kwargs)

        monkeypatch.setattr(minor, "commit_changes", commit_during_an_outage)  # the job imports it when it runs
        messages: list[str] = []
        restarting: list[threading.Thread] = []

        def progress(message: str) -> None:
            # Restarted only once the job says it waits: the test never depends on how fast the job is.
            messages.append(message)
            if "waiting for the catalog" in message and not restarting:
                restarting.append(threading.Thread(target=cluster.start_server, daemon=True))
                restarting[0].start()

        results = [run_group(spark, the_plan, g.group_id, level=ValidationLevel.COUNT, progress=progress)
                   for g in the_plan.groups]
        assert stopped and restarting, messages
        assert any("lookup of the group commit" in m and "waiting for the catalog" in m for m in messages), messages
        outcomes = [p for r in results for p in r.partitions]
        assert len(outcomes) == 3
        assert all(p.status == COMMITTED for p in outcomes), [(p.label, p.status, p.error) for p in outcomes]
        after = read_table(catalog.load().load_table(workload.identifier))
        assert after.rows == before.rows
        assert after.snapshot_id != before.snapshot_id
    finally:
        cluster.stop()


def test_loading_a_table_waits_for_a_postgresql_catalog_that_restarts(tmp_path: Path) -> None:
    """The planning of a run started while the catalog's database restarts (a health-triggered run during the
    outage): the table's load waits for the database instead of failing the run."""
    import pyarrow as pa

    from compaction.metadata.inspect import load_table
    from icecompact_testing.postgres import start_cluster

    cluster = start_cluster()
    try:
        catalog = cluster.sql_catalog("pgl", tmp_path / "warehouse")
        pyiceberg_catalog = catalog.load()
        pyiceberg_catalog.create_namespace("db")
        created = pyiceberg_catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
        created.append(pa.table({"id": [1, 2, 3]}))
        created.refresh()

        cluster.stop_server()
        restarting: list[threading.Thread] = []
        messages: list[str] = []

        def progress(message: str) -> None:
            # Restarted only after the load reported the outage: the test never depends on how fast it is.
            messages.append(message)
            if not restarting:
                restarting.append(threading.Thread(target=cluster.start_server, daemon=True))
                restarting[0].start()

        identity, table = load_table(catalog, "db.t", progress=progress)
        assert restarting and messages and "transient" in messages[0], messages
        assert identity.dotted == "db.t" and table.current_snapshot().snapshot_id == created.current_snapshot().snapshot_id
    finally:
        cluster.stop()
