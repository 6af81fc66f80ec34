"""The ledger on real SQLite files and a real PostgreSQL cluster (no Spark): API, upserts, ordering, migrations,
error wrapping and password redaction, concurrent first open."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import multiprocessing
import os
import queue
import socket
import sqlite3
import traceback
from pathlib import Path
from typing import Any, Iterator

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from compaction.core.errors import CompactionError
from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionState,
    TableIdentity,
)
from compaction.core.plan import (
    CompactionKind,
    CompactionMode,
    CompactionPlan,
    CompactionTask,
    JobGroup,
    PartitionDecision,
)
from compaction.core.policy import CompactionPolicy
from compaction.ledger import (
    LEDGER_FILENAME,
    LEDGER_URL_ENV,
    Base,
    ConflictRecord,
    Ledger,
    LedgerError,
    OutcomeRecord,
    OutcomeStatus,
    PartitionOutcome,
    RunRecord,
    RunStatus,
    RunTrigger,
    UnknownRunError,
    alembic_config,
    redact_text,
    redact_url,
)

UTC = dt.timezone.utc
K, S = CompactionKind, OutcomeStatus
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
TABLE = TableIdentity("cat", ("db",), "events")
TABLES = {"plans", "runs", "partition_outcomes", "conflicts", "health_samples", "maintenance_runs",
          "maintenance_actions", "write_leases", "snapshot_checks", "work_items", "executors", "commit_intents"}
HEAD = "0007"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def pkey(region: str | None, spec: int = 1) -> PartitionKey:
    return PartitionKey(
        spec,
        (PartitionFieldValue("ts_day", "day", "ts", 19800), PartitionFieldValue("region", "identity", "region", region)),
    )


def make_plan(created_at: dt.datetime = T0, reason: str = "delete ratio 0.4 >= 0.3 -> MAJOR") -> CompactionPlan:
    k1, k2 = pkey("EU"), pkey(None)
    return CompactionPlan(
        plan_id="",
        created_at=created_at,
        table=TABLE,
        base_snapshot_id=7_000_000_000_000_000_001,  # needs a 64-bit column
        base_sequence_number=17,
        format_version=2,
        mode=CompactionMode.AUTO,
        policy=CompactionPolicy(),
        decisions=(
            PartitionDecision(k1, CompactionKind.MAJOR, reason, {"delete_ratio": 0.4}),
            PartitionDecision(k2, CompactionKind.MINOR, "1 equality delete file -> MINOR", {}),
        ),
        groups=(
            JobGroup(0, (CompactionTask("t0", k1, CompactionKind.MAJOR, ("d0",), ("x0",), 1000),)),
            JobGroup(1, (CompactionTask("t1", k2, CompactionKind.MINOR, (), ("eq",), 24),)),
        ),
    ).with_content_id()


# --------------------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture()
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture()
def postgres_url(postgres_cluster: Any) -> str:
    return str(postgres_cluster.sqlalchemy_uri(postgres_cluster.create_database()))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture()
def ledger(url: str) -> Iterator[Ledger]:
    with Ledger.open(url) as opened:
        yield opened


def schema_diffs(engine: sa.Engine) -> list[Any]:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return list(compare_metadata(ctx, Base.metadata))


def table_names(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}


def chain_text(err: BaseException) -> str:
    """Every message of the exception chain, as a log of the traceback would show them."""
    parts: list[str] = []
    cur: BaseException | None = err
    while cur is not None:
        parts.extend(traceback.format_exception_only(cur))
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return "".join(parts)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------------------------------
# Location and schema


def test_default_location_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICECOMPACT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(LEDGER_URL_ENV, raising=False)
    with Ledger.open() as led:
        assert led.url == f"sqlite:///{tmp_path / 'home' / LEDGER_FILENAME}"
        assert led.schema_revision() == HEAD
    assert (tmp_path / "home" / LEDGER_FILENAME).is_file()

    other = tmp_path / "elsewhere" / "sub" / "l.db"  # parent folders are created
    monkeypatch.setenv(LEDGER_URL_ENV, f"sqlite:///{other}")
    with Ledger.open() as led:
        led.start_run("db.t", "cat", now=T0)
    assert other.is_file()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_alembic_head_matches_models_and_downgrade_round_trips(backend: str, request: pytest.FixtureRequest) -> None:
    url = str(request.getfixturevalue(f"{backend}_url"))
    # Plain `alembic upgrade head` on an empty database (env.py connects by itself).
    command.upgrade(alembic_config(url), "head")
    engine = sa.create_engine(url)
    try:
        assert table_names(engine) == TABLES
        assert schema_diffs(engine) == []
        indexes = {ix["name"] for t in TABLES for ix in sa.inspect(engine).get_indexes(t)}
        assert {
            "ix_runs_table_ref_started_at",
            "ix_runs_started_at",
            "ix_partition_outcomes_table_ref_partition_label",
            "ix_conflicts_run_id_occurred_at",
            "ix_plans_table_ref_created_at",
            "ix_health_samples_catalog_table_ref_recorded_at",
        } <= indexes

        with Ledger.open(url) as led:  # already at head: nothing to do
            assert led.schema_revision() == HEAD
            led.start_run("db.t", "cat", now=T0)
            led.downgrade("base")
            assert led.schema_revision() is None
            assert table_names(engine) == set()
        with Ledger.open(url) as led:  # upgrades again
            assert led.schema_revision() == HEAD
            assert led.runs() == []
        assert schema_diffs(engine) == []

        command.downgrade(alembic_config(url), "base")
        assert table_names(engine) == set()
        command.upgrade(alembic_config(url), "head")
        assert schema_diffs(engine) == []
    finally:
        engine.dispose()


def test_failed_upgrade_leaves_nothing_behind(url: str) -> None:
    """The whole upgrade is one transaction: a failure half-way rolls back the tables created before it."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE conflicts (blocker INTEGER)")  # the last table the revision creates
        with pytest.raises(LedgerError) as info:
            Ledger.open(url)
        assert info.value.exit_code == 10
        assert set(sa.inspect(engine).get_table_names()) == {"conflicts"}  # no plans/runs/..., no alembic_version
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE conflicts")
    finally:
        engine.dispose()
    with Ledger.open(url) as led:
        assert led.schema_revision() == HEAD


def test_unknown_newer_revision_and_no_upgrade(url: str) -> None:
    with pytest.raises(LedgerError, match=f"expected {HEAD}"):
        Ledger.open(url, upgrade=False)
    Ledger.open(url).close()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    finally:
        engine.dispose()
    with pytest.raises(LedgerError, match="newer version"):
        Ledger.open(url)


def test_the_schema_is_checked_from_the_py_files_zip(tmp_path: Path) -> None:
    """A Spark application on a cluster master (the resident executor) imports this package from the --py-files
    zip, from which Alembic cannot read its scripts: the schema check still knows the head, refuses a schema that
    is behind, and accepts one at head (found on a standalone master: every executor generation crashed)."""
    import subprocess
    import sys

    from compaction.ledger.engine import _script_revisions
    from compaction.ops.submit import build_py_files

    archive = build_py_files(tmp_path / "cache")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    probe = (
        "import sys, compaction\n"
        "from compaction.ledger import Ledger\n"
        "from compaction.ledger.engine import _script_revisions\n"
        "assert '.zip' in compaction.__file__, compaction.__file__\n"
        "heads, known = _script_revisions()\n"
        "print(','.join(sorted(heads)), ','.join(sorted(known)))\n"
        "try:\n"
        "    Ledger.open(sys.argv[1], upgrade=False).close()\n"
        "    print('opened')\n"
        "except Exception as e:\n"
        "    print('refused', type(e).__name__)\n")

    def run() -> list[str]:
        done = subprocess.run([sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(archive)}, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    heads, known = _script_revisions()
    assert run() == [",".join(sorted(heads)), ",".join(sorted(known)), "refused", "LedgerError"]  # empty database
    Ledger.open(url).close()  # migrated by the installed package, as the executor's supervisor does
    assert run()[2:] == ["opened"]


# --------------------------------------------------------------------------------------------------------------
# Plans and runs


def test_record_plan_is_idempotent_and_round_trips(ledger: Ledger) -> None:
    plan = make_plan()
    assert ledger.record_plan(plan, now=at(1)) == plan.plan_id
    assert ledger.record_plan(plan, now=at(2)) == plan.plan_id  # same plan again: no-op
    stored = ledger.plan(plan.plan_id)
    assert stored is not None
    assert stored.plan() == plan
    assert (stored.table_ref, stored.catalog) == ("db.events", "cat")
    assert stored.base_snapshot_id == 7_000_000_000_000_000_001
    assert (stored.base_sequence_number, stored.format_version, stored.mode) == (17, 2, CompactionMode.AUTO)
    assert (stored.decision_count, stored.task_count, stored.estimated_cost_bytes) == (2, 2, 1024)
    assert stored.created_at == T0 and stored.recorded_at == at(1)
    doc = stored.to_dict()
    assert doc["plan"] == json.loads(plan.to_json()) and doc["created_at"] == T0.isoformat()
    assert "plan" not in stored.to_dict(include_plan=False)
    json.dumps(doc)

    forged = dataclasses.replace(make_plan(reason="something else"), plan_id=plan.plan_id)
    with pytest.raises(LedgerError, match="different plan"):
        ledger.record_plan(forged)
    assert ledger.plan("nope") is None

    later = make_plan(created_at=at(60))
    ledger.record_plan(later)
    assert [p.plan_id for p in ledger.plans("db.events")] == [later.plan_id, plan.plan_id]
    assert [p.plan_id for p in ledger.plans(limit=1)] == [later.plan_id]
    assert ledger.plans("db.other") == []


def test_run_lifecycle(ledger: Ledger) -> None:
    plan = make_plan()
    run_id = ledger.start_run(
        plan=plan,
        trigger="airflow",
        status=RunStatus.PLANNED,
        airflow_dag_id="iceberg_compaction",
        airflow_run_id="manual__2024-05-01",
        now=T0,
    )
    assert ledger.plan(plan.plan_id) is not None  # recorded with the run
    run = ledger.run(run_id)
    assert run == RunRecord(
        run_id=run_id,
        plan_id=plan.plan_id,
        table_ref="db.events",
        catalog="cat",
        trigger=RunTrigger.AIRFLOW,
        mode=CompactionMode.AUTO,
        dry_run=False,
        status=RunStatus.PLANNED,
        started_at=T0,
        finished_at=None,
        exit_code=None,
        error=None,
        attention_reason=None,
        airflow_dag_id="iceberg_compaction",
        airflow_run_id="manual__2024-05-01",
        spark_application_id=None,
    )
    updated = ledger.update_run(run_id, status="running", spark_application_id="local-1714564800000")
    assert updated.status is RunStatus.RUNNING and updated.spark_application_id == "local-1714564800000"

    k1, k2 = pkey("EU"), pkey(None)
    before = PartitionState(
        k1,
        data_files=(DataFileInfo("d0", 1000, 10, 1), DataFileInfo("d1", 500, 5, 2)),
        delete_files=(DeleteFileInfo("x0", DeleteContent.POSITION, 100, 3, 3),),
    )
    after = PartitionState(k1, data_files=(DataFileInfo("n0", 1400, 12, 1),))
    committed = (
        PartitionOutcome.for_partition(
            k1,
            CompactionKind.MAJOR,
            OutcomeStatus.COMMITTED,
            reason="delete ratio 0.4 >= 0.3 -> MAJOR",
            attempts=2,
            conflicts=1,
            base_snapshot_id=7_000_000_000_000_000_001,
            commit_snapshot_id=7_000_000_000_000_000_002,
            validation_level="full",
            validation_result="identical",
            started_at=at(10),
            finished_at=at(12.5),
        )
        .with_before(before)
        .with_after(after)
    )
    rec = ledger.record_partition_outcome(run_id, committed, now=at(13))
    assert isinstance(rec, OutcomeRecord)
    assert (rec.run_id, rec.table_ref, rec.catalog, rec.recorded_at) == (run_id, "db.events", "cat", at(13))
    assert rec.partition == k1 and rec.spec_id == 1 and rec.partition_label == k1.label()
    assert (rec.data_files_before, rec.data_files_after, rec.data_bytes_before, rec.data_bytes_after) == (2, 1, 1500, 1400)
    assert (rec.records_before, rec.records_after, rec.delete_files_before, rec.delete_files_after) == (15, 12, 1, 0)
    assert (rec.delete_records_before, rec.delete_records_after, rec.delete_bytes_before, rec.delete_bytes_after) == (3, 0, 100, 0)
    assert rec.duration_ms == 2500  # derived from the timestamps
    assert rec.commit_snapshot_id == 7_000_000_000_000_000_002
    # The stored record equals the input plus the row's identity.
    assert PartitionOutcome(**{f.name: getattr(rec, f.name) for f in dataclasses.fields(PartitionOutcome)}) == (
        dataclasses.replace(committed, duration_ms=2500)
    )

    failed = PartitionOutcome.for_partition(
        k2, "minor", "failed", attempts=3, conflicts=3, error="gave up after 3 conflicts", started_at=at(10), finished_at=at(20)
    )
    ledger.record_partition_outcome(run_id, failed, now=at(21))
    c1 = ledger.record_conflict(run_id, k2.label(), 1, "CommitConflictError", "found new position delete", now=at(14))
    c0 = ledger.record_conflict(run_id, k1.label(), 1, "ValidationException", "missing data files", now=at(11))
    c2 = ledger.record_conflict(run_id, None, 2, "CommitFailedException", "group commit", now=at(15))
    assert isinstance(c0, ConflictRecord)
    assert ledger.conflicts(run_id) == [c0, c1, c2]  # by occurrence time, not insertion
    assert [c.partition_label for c in ledger.conflicts(run_id)] == [k1.label(), k2.label(), None]

    done = ledger.finish_run(run_id, "partial", exit_code=7, error="1 partition failed", now=at(30))
    assert (done.status, done.exit_code, done.error, done.finished_at) == (RunStatus.PARTIAL, 7, "1 partition failed", at(30))
    assert done.duration_ms == 30_000
    assert ledger.run(run_id) == done
    assert ledger.run("no-such-run") is None

    outcomes = ledger.outcomes(run_id)
    assert [o.partition_label for o in outcomes] == sorted([k1.label(), k2.label()])
    doc = done.to_dict()
    assert doc["status"] == "partial" and doc["trigger"] == "airflow" and doc["started_at"] == "2024-05-01T12:00:00.123456+00:00"
    assert doc["duration_ms"] == 30_000
    out_doc = outcomes[0].to_dict()
    assert out_doc["kind"] in ("major", "minor") and isinstance(out_doc["partition"], dict)
    assert str(out_doc["recorded_at"]).endswith("+00:00")
    json.dumps([doc, *[o.to_dict() for o in outcomes], *[c.to_dict() for c in ledger.conflicts(run_id)]])


def test_outcome_upsert_replaces_fields_and_keeps_start(ledger: Ledger) -> None:
    run_id = ledger.start_run("db.t", "cat", trigger=RunTrigger.TEST, now=T0)
    label = "spec=0/<unpartitioned>"
    first = ledger.record_partition_outcome(
        run_id,
        PartitionOutcome(label, CompactionKind.MINOR, OutcomeStatus.PENDING, reason="r1", error="transient", attempts=1,
                         started_at=at(1)),
        now=at(1),
    )
    assert first.status is OutcomeStatus.PENDING and first.duration_ms is None
    second = ledger.record_partition_outcome(
        run_id,
        PartitionOutcome(label, K.MAJOR, S.COMMITTED, reason="r2", attempts=2, finished_at=at(4)),
        now=at(5),
    )
    assert second.id == first.id  # same row
    assert (second.kind, second.status, second.reason, second.attempts) == (
        CompactionKind.MAJOR, OutcomeStatus.COMMITTED, "r2", 2)
    assert second.error is None  # replaced, not merged
    assert second.started_at == at(1) and second.finished_at == at(4)  # start kept from the first write
    assert second.duration_ms == 3000 and second.recorded_at == at(5)
    third = ledger.record_partition_outcome(
        run_id, PartitionOutcome(label, K.MAJOR, S.COMMITTED, started_at=at(2), finished_at=at(4), duration_ms=42), now=at(6)
    )
    assert third.started_at == at(2) and third.duration_ms == 42  # explicit values win
    assert len(ledger.outcomes(run_id)) == 1
    # The same label in another run is another row.
    other = ledger.start_run("db.t", "cat", now=at(10))
    assert ledger.record_partition_outcome(other, PartitionOutcome(label, K.NONE, S.SKIPPED)).id != first.id


def test_runs_ordering_and_filters(ledger: Ledger) -> None:
    ids = {}
    for i, (table, catalog) in enumerate([("db.a", "c1"), ("db.b", "c1"), ("db.a", "c2"), ("db.a", "c1")]):
        ids[i] = ledger.start_run(table, catalog, mode="major" if i == 1 else None, now=at(100 - i * 10))
    ledger.finish_run(ids[1], RunStatus.FAILED, exit_code=8, error="boom", now=at(200))
    # Most recently *started* first (insertion order is the reverse here).
    assert [r.run_id for r in ledger.runs()] == [ids[0], ids[1], ids[2], ids[3]]
    assert [r.run_id for r in ledger.runs(limit=2)] == [ids[0], ids[1]]
    assert [r.run_id for r in ledger.runs("db.a")] == [ids[0], ids[2], ids[3]]
    assert [r.run_id for r in ledger.runs("db.a", catalog="c1")] == [ids[0], ids[3]]
    assert [r.run_id for r in ledger.runs(status="failed")] == [ids[1]]
    assert ledger.run(ids[1]) is not None and ledger.run(ids[1]).mode is CompactionMode.MAJOR  # type: ignore[union-attr]
    assert ledger.runs("db.none") == []
    with pytest.raises(ValueError):
        ledger.runs(limit=0)

    labels = ["spec=1/r=b", "spec=0/r=z", "spec=1/r=a"]
    for n, label in enumerate(labels):
        ledger.record_partition_outcome(ids[0], PartitionOutcome(label, K.MINOR, S.COMMITTED), now=at(n))
    assert [o.partition_label for o in ledger.outcomes(ids[0])] == sorted(labels)
    assert ledger.outcomes(ids[1]) == []


def test_latest_outcomes_per_partition(ledger: Ledger) -> None:
    old = ledger.start_run("db.t", "cat", now=at(0))
    new = ledger.start_run("db.t", "cat", now=at(100))
    dry = ledger.start_run("db.t", "cat", dry_run=True, now=at(200))
    other_table = ledger.start_run("db.u", "cat", now=at(300))
    other_catalog = ledger.start_run("db.t", "cat2", now=at(400))
    # Recorded out of order on purpose: "latest" is by the run's start, not by write time.
    ledger.record_partition_outcome(new, PartitionOutcome("p=1", K.MAJOR, S.COMMITTED), now=at(101))
    ledger.record_partition_outcome(old, PartitionOutcome("p=1", K.MINOR, S.FAILED), now=at(500))
    ledger.record_partition_outcome(old, PartitionOutcome("p=2", K.MINOR, S.COMMITTED), now=at(1))
    ledger.record_partition_outcome(dry, PartitionOutcome("p=1", K.NONE, S.SKIPPED), now=at(201))
    ledger.record_partition_outcome(other_table, PartitionOutcome("p=3", K.MAJOR, S.COMMITTED), now=at(301))
    ledger.record_partition_outcome(other_catalog, PartitionOutcome("p=1", K.MAJOR, S.CONFLICT), now=at(401))

    latest = ledger.latest_outcomes("db.t", catalog="cat")
    assert [(o.partition_label, o.run_id, o.status) for o in latest] == [
        ("p=1", new, OutcomeStatus.COMMITTED),
        ("p=2", old, OutcomeStatus.COMMITTED),
    ]
    with_dry = ledger.latest_outcomes("db.t", catalog="cat", include_dry_runs=True)
    assert [(o.partition_label, o.run_id) for o in with_dry] == [("p=1", dry), ("p=2", old)]
    # Without a catalog filter: one latest outcome per (catalog, partition).
    assert [(o.catalog, o.partition_label, o.run_id) for o in ledger.latest_outcomes("db.t")] == [
        ("cat", "p=1", new),
        ("cat", "p=2", old),
        ("cat2", "p=1", other_catalog),
    ]
    assert ledger.latest_outcomes("db.none") == []


def test_needs_attention_is_sticky(ledger: Ledger) -> None:
    run_id = ledger.start_run("db.t", "cat", now=T0)
    ledger.record_partition_outcome(run_id, PartitionOutcome("p=1", K.MAJOR, S.COMMITTED), now=at(1))
    ledger.record_partition_outcome(run_id, PartitionOutcome("p=2", K.MAJOR, S.COMMITTED), now=at(1))
    flagged = ledger.mark_needs_attention(run_id, "post-commit check: 3 rows differ", partition_label="p=1", now=at(2))
    assert flagged.status is RunStatus.NEEDS_ATTENTION and flagged.finished_at is None
    again = ledger.mark_needs_attention(run_id, "orphan files left", now=at(3))
    assert again.attention_reason == "post-commit check: 3 rows differ\norphan files left"
    ledger.update_run(run_id, status="running")  # cannot clear it either
    done = ledger.finish_run(run_id, RunStatus.SUCCEEDED, exit_code=0, now=at(4))
    assert done.status is RunStatus.NEEDS_ATTENTION  # a later "success" does not hide it
    assert (done.exit_code, done.finished_at) == (0, at(4))
    by_label = {o.partition_label: o for o in ledger.outcomes(run_id)}
    assert by_label["p=1"].status is OutcomeStatus.NEEDS_ATTENTION
    assert by_label["p=1"].error == "post-commit check: 3 rows differ"
    assert by_label["p=2"].status is OutcomeStatus.COMMITTED
    assert [r.run_id for r in ledger.runs(status=RunStatus.NEEDS_ATTENTION)] == [run_id]
    with pytest.raises(LedgerError, match="no outcome"):
        ledger.mark_needs_attention(run_id, "x", partition_label="p=9")


def test_unknown_references_and_invalid_arguments(ledger: Ledger) -> None:
    for call in (
        lambda: ledger.record_partition_outcome("nope", PartitionOutcome("p", K.NONE, S.SKIPPED)),
        lambda: ledger.record_conflict("nope", None, 1, "E", "m"),
        lambda: ledger.finish_run("nope", "failed"),
        lambda: ledger.mark_needs_attention("nope", "why"),
        lambda: ledger.update_run("nope", status="running"),
    ):
        with pytest.raises(UnknownRunError) as info:
            call()
        assert isinstance(info.value, LedgerError) and isinstance(info.value, CompactionError)
        assert info.value.exit_code == 10 and not info.value.retryable
    with pytest.raises(LedgerError, match="unknown plan"):
        ledger.start_run("db.t", "cat", plan_id="not-recorded")
    run_id = ledger.start_run("db.t", "cat", now=T0)
    with pytest.raises(LedgerError) as dup:  # SQL IntegrityError wrapped at the edge
        ledger.start_run("db.t", "cat", run_id=run_id)
    assert dup.value.exit_code == 10 and "IntegrityError" in str(dup.value)
    with pytest.raises(ValueError, match="timezone-aware"):
        ledger.start_run("db.t", "cat", now=dt.datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        PartitionOutcome("p", K.NONE, S.SKIPPED, started_at=dt.datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="invalid outcome status"):
        PartitionOutcome("p", "none", "exploded")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not match"):
        PartitionOutcome("spec=9/x=1", K.NONE, S.SKIPPED, partition=pkey("EU"))
    with pytest.raises(ValueError, match="terminal"):
        ledger.finish_run(run_id, "running")
    with pytest.raises(ValueError):
        ledger.start_run("db.t", "cat", status="succeeded")
    with pytest.raises(ValueError):
        ledger.start_run("db.t", "cat", trigger="cron")
    with pytest.raises(ValueError):
        ledger.start_run()


def test_timestamps_are_utc_aware_with_microseconds(ledger: Ledger) -> None:
    cest = dt.timezone(dt.timedelta(hours=2))
    local = dt.datetime(2024, 5, 1, 14, 0, 0, 123456, tzinfo=cest)
    run_id = ledger.start_run("db.t", "cat", now=local)
    run = ledger.run(run_id)
    assert run is not None
    assert run.started_at == T0 and run.started_at.tzinfo == UTC and run.started_at.microsecond == 123456
    assert run.to_dict()["started_at"] == "2024-05-01T12:00:00.123456+00:00"
    earliest = dt.datetime.now(UTC)
    default_now = ledger.start_run("db.t", "cat")
    latest = dt.datetime.now(UTC)
    stamped = ledger.run(default_now)
    assert stamped is not None and stamped.started_at.tzinfo == UTC
    assert earliest <= stamped.started_at <= latest  # stamped with the time of the call, however slow the machine


# --------------------------------------------------------------------------------------------------------------
# Errors and secrets


def test_unreachable_postgres_raises_ledger_error_without_password() -> None:
    secret = "s3cr3t-Pa55"
    url = f"postgresql+psycopg2://alice:{secret}@127.0.0.1:{free_port()}/ledger"
    with pytest.raises(LedgerError) as info:
        Ledger.open(url, timeout=3)
    err = info.value
    assert err.exit_code == 10
    assert secret not in str(err)
    assert "alice:***@127.0.0.1" in str(err)
    assert secret not in chain_text(err)
    assert "OperationalError" in str(err)


def test_bad_urls_are_redacted() -> None:
    with pytest.raises(LedgerError) as info:
        Ledger.open("nosuchdialect://bob:hunter2@host/db")
    assert "hunter2" not in chain_text(info.value)
    assert redact_url("postgresql://u:p%40ss@h/d") == "postgresql://u:***@h/d"
    assert redact_url("not a url u:pw@") == "not a url u:pw@"  # nothing URL-like to redact
    assert redact_text("jdbc:postgresql://h/d?user=u&password=pw x") == "jdbc:postgresql://h/d?user=u&password=*** x"
    assert redact_text("connect postgresql://u:pw@h/d failed", ("other",)) == "connect postgresql://u:***@h/d failed"


def test_passwords_never_stored_or_shown(postgres_cluster: Any, postgres_url: str) -> None:
    password = postgres_cluster.password
    with Ledger.open(postgres_url) as led:
        assert password not in repr(led) and password not in led.url and "***" in led.url
        run_id = led.start_run("db.t", "cat", now=T0)
        led.record_partition_outcome(
            run_id, PartitionOutcome("p", K.MAJOR, S.FAILED, error=f"cannot reach {postgres_url}"), now=at(1)
        )
        led.record_conflict(run_id, "p", 1, "E", f"jdbc password={password} rejected", now=at(2))
        done = led.finish_run(run_id, "failed", 3, f"catalog at {postgres_url} is down (password {password})", now=at(3))
        assert password not in (done.error or "")
        assert "***" in (done.error or "")
        dumped = json.dumps(
            [done.to_dict(), *[o.to_dict() for o in led.outcomes(run_id)], *[c.to_dict() for c in led.conflicts(run_id)]]
        )
        assert password not in dumped
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            for table, column in [("runs", "error"), ("partition_outcomes", "error"), ("conflicts", "message")]:
                for (value,) in conn.exec_driver_sql(f"SELECT {column} FROM {table}"):
                    assert password not in value
    finally:
        engine.dispose()


def test_wrong_password_is_wrapped(postgres_cluster: Any) -> None:
    db = postgres_cluster.create_database()
    url = postgres_cluster.sqlalchemy_uri(db).replace(postgres_cluster.password, "Wr0ng-Secret")
    with pytest.raises(LedgerError) as info:
        Ledger.open(url)
    assert "Wr0ng-Secret" not in chain_text(info.value)
    assert "password authentication failed" in str(info.value)


# --------------------------------------------------------------------------------------------------------------
# Concurrency


def test_open_at_head_needs_no_write_lock_and_writes_wait(sqlite_url: str, tmp_path: Path) -> None:
    Ledger.open(sqlite_url).close()
    blocker = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # another process is writing
        with Ledger.open(sqlite_url, timeout=0.3) as led:  # schema check only reads
            assert led.runs() == []
            with pytest.raises(LedgerError, match="locked"):
                led.start_run("db.t", "cat")
            blocker.execute("ROLLBACK")
            led.start_run("db.t", "cat")
            assert len(led.runs()) == 1
    finally:
        blocker.close()


def _open_many(urls: list[str], barrier: Any, results: Any, name: str) -> None:
    """Child process: for each fresh database, wait for the sibling, then open the ledger and write a run."""
    try:
        for url in urls:
            barrier.wait(timeout=60)
            with Ledger.open(url) as led:
                led.start_run("db.t", "cat", trigger="test", airflow_run_id=name)
                revision = led.schema_revision()
            results.put((name, url, revision, None))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        barrier.abort()  # let the sibling fail fast instead of waiting for us
        results.put((name, None, None, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def _race(urls: list[str], processes: int = 2) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    procs = [ctx.Process(target=_open_many, args=(urls, barrier, results, f"p{i}")) for i in range(processes)]
    for p in procs:
        p.start()
    try:
        got = []
        for _ in range(processes * len(urls)):
            try:
                got.append(results.get(timeout=120))
            except queue.Empty:
                pytest.fail(f"child processes stopped reporting (hung on a lock?); got {got}")
        for p in procs:
            p.join(timeout=60)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)
    errors = [e for *_, e in got if e]
    assert not errors, errors[0]
    assert all(p.exitcode == 0 for p in procs)
    for url in urls:
        assert sorted(name for name, u, _, _ in got if u == url) == [f"p{i}" for i in range(processes)]
        assert {rev for _, u, rev, _ in got if u == url} == {HEAD}
        with Ledger.open(url) as led:
            runs = led.runs()
            assert sorted(r.airflow_run_id or "" for r in runs) == [f"p{i}" for i in range(processes)]
        engine = sa.create_engine(url)
        try:
            assert schema_diffs(engine) == []
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar() == 1
        finally:
            engine.dispose()


def test_concurrent_first_open_sqlite(tmp_path: Path) -> None:
    _race([f"sqlite:///{tmp_path / f'race{i}.db'}" for i in range(4)])


def test_concurrent_first_open_postgres(postgres_cluster: Any) -> None:
    _race([postgres_cluster.sqlalchemy_uri(postgres_cluster.create_database()) for _ in range(3)])


def test_last_committed_per_partition_and_kind(ledger: Ledger) -> None:
    """What ``compaction.minor.interval`` measures from: per partition, the last committed MINOR of real runs."""
    eu, us = "spec=0/region=EU", "spec=0/region=US"
    first = ledger.start_run("db.t", "cat", now=at(1))
    ledger.record_partition_outcome(first, PartitionOutcome(eu, K.MINOR, S.COMMITTED), now=at(2))
    ledger.record_partition_outcome(first, PartitionOutcome(us, K.MINOR, S.FAILED), now=at(3))
    second = ledger.start_run("db.t", "cat", now=at(10))
    ledger.record_partition_outcome(second, PartitionOutcome(eu, K.MINOR, S.COMMITTED), now=at(12))
    ledger.record_partition_outcome(second, PartitionOutcome(us, K.MAJOR, S.COMMITTED), now=at(13))
    dry = ledger.start_run("db.t", "cat", dry_run=True, now=at(20))
    ledger.record_partition_outcome(dry, PartitionOutcome(us, K.MINOR, S.COMMITTED), now=at(21))
    other = ledger.start_run("db.other", "cat", now=at(30))
    ledger.record_partition_outcome(other, PartitionOutcome(us, K.MINOR, S.COMMITTED), now=at(31))
    assert ledger.last_committed("db.t", "minor", catalog="cat") == {eu: at(12)}
    assert ledger.last_committed("db.t", "major") == {us: at(13)}
    assert ledger.last_committed("db.t", "minor", catalog="elsewhere") == {}
