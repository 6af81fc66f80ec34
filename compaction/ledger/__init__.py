"""The ledger: a durable record of compaction plans, runs and per-partition outcomes.

Storage is a SQL database reached through SQLAlchemy 2.x:

* default: the SQLite file ``ledger.db`` in :func:`compaction.settings.home` (the embedded, single-host setup);
* otherwise the URL in ``$ICECOMPACT_LEDGER_URL`` (or passed to :meth:`Ledger.open`), e.g.
  ``postgresql+psycopg2://user:password@host:5432/icecompact``.

The schema is versioned with Alembic. The migration scripts ship inside the package (``compaction/migrations``)
and are driven by a programmatic :class:`alembic.config.Config` (no ``alembic.ini``); :meth:`Ledger.open`
upgrades an empty or older database to head. That upgrade is safe when several processes open a fresh database
at once: it runs in one transaction that first takes a database-wide lock (SQLite: ``BEGIN IMMEDIATE`` with a
busy timeout; PostgreSQL: ``pg_advisory_xact_lock``), so a late process waits, then finds the schema at head and
does nothing. Opening a database that is already at head takes no write lock at all.

Authoring a new migration (from a source checkout)::

    .venv/bin/python -c "from alembic import command; from compaction.ledger import alembic_config; \\
        command.revision(alembic_config('sqlite:////tmp/ledger-dev.db'), message='add x', autogenerate=True)"

(upgrade that scratch database to head first; review the generated file; keep revisions self-contained, i.e.
never import the models from a revision).

Everything a query returns is a frozen dataclass (:class:`PlanRecord`, :class:`RunRecord`,
:class:`OutcomeRecord`, :class:`ConflictRecord`) with ``to_dict()`` (ISO-8601 UTC timestamps, enum values), so
the CLI, the Airflow plugin and JSON endpoints never see ORM objects or sessions. Timestamps are timezone-aware
UTC in Python; every write that stamps a time takes an optional ``now`` (default: the current UTC time).

Layout (one module per concern, all re-exported here so ``from compaction.ledger import X`` keeps working):
:mod:`~compaction.ledger.errors` (errors, redaction), :mod:`~compaction.ledger.records` (enums, frozen records),
:mod:`~compaction.ledger.schema` (tables of plans, runs, outcomes, conflicts), :mod:`~compaction.ledger.engine`
(URLs, engines, Alembic), :mod:`~compaction.ledger.runs` and :mod:`~compaction.ledger.health` (the method groups),
:mod:`~compaction.ledger.maintenance` (maintenance runs, their actions, write leases),
:mod:`~compaction.ledger.checks` (checks of our own snapshots, by their job or post hoc),
:mod:`~compaction.ledger.queue` (the work queue of resident executors, and the executors),
:mod:`~compaction.ledger.store` (:class:`Ledger`, which combines them).

Errors: every SQLAlchemy / Alembic failure is wrapped into :class:`LedgerError` (exit code 10) at the public
method boundary. Database passwords never appear in messages, in ``repr`` or in stored error texts (URLs are
rendered with ``***`` in place of the password).
"""

from __future__ import annotations

from compaction.ledger.engine import (
    DEFAULT_TIMEOUT_S,
    LEDGER_FILENAME,
    LEDGER_URL_ENV,
    MIGRATIONS_DIR,
    PG_MIGRATION_LOCK_KEY,
    alembic_config,
    create_ledger_engine,
    default_url,
    resolve_url,
    take_migration_lock,
    writing,
)
from compaction.ledger.errors import LedgerError, UnknownRunError, redact_text, redact_url
from compaction.ledger.health import (
    HEALTH_MAX_SAMPLES_DEFAULT,
    HEALTH_MAX_SAMPLES_ENV,
    HEALTH_MIN_INTERVAL_S,
    HEALTH_RETENTION_DAYS_DEFAULT,
    HEALTH_RETENTION_DAYS_ENV,
    HealthRetention,
    HealthSampleRecord,
    HealthSampleRow,
)
from compaction.ledger.checks import SnapshotCheck, SnapshotCheckRecord, SnapshotCheckRow
from compaction.ledger.maintenance import (
    InFlightRun,
    MaintenanceActionRecord,
    MaintenanceActionRow,
    MaintenanceRunRecord,
    MaintenanceRunRow,
)
from compaction.ledger.queue import ExecutorRecord, ExecutorRow, WorkItem, WorkItemRow
from compaction.ledger.records import (
    MAX_TEXT_CHARS,
    ConflictRecord,
    OutcomeRecord,
    OutcomeStatus,
    PartitionOutcome,
    PlanRecord,
    RunRecord,
    RunStatus,
    RunTrigger,
    partition_stats,
    utcnow,
)
from compaction.ledger.schema import Base, ConflictRow, PartitionOutcomeRow, PlanRow, RunRow, UTCDateTime
from compaction.ledger.store import Ledger
from compaction.ledger.writers import CommitIntent, CommitIntentRow, LedgerCommitGate, WriteLease, WriteLeaseRow

__all__ = [
    "ExecutorRecord",
    "ExecutorRow",
    "WorkItem",
    "WorkItemRow",
    "SnapshotCheck",
    "SnapshotCheckRecord",
    "SnapshotCheckRow",
    "LEDGER_URL_ENV",
    "LEDGER_FILENAME",
    "LedgerError",
    "UnknownRunError",
    "RunStatus",
    "RunTrigger",
    "OutcomeStatus",
    "PartitionOutcome",
    "PlanRecord",
    "RunRecord",
    "OutcomeRecord",
    "ConflictRecord",
    "Ledger",
    "Base",
    "PlanRow",
    "RunRow",
    "PartitionOutcomeRow",
    "ConflictRow",
    "UTCDateTime",
    "default_url",
    "resolve_url",
    "redact_url",
    "redact_text",
    "alembic_config",
    "create_ledger_engine",
    "writing",
    "take_migration_lock",
    "partition_stats",
    "HealthRetention",
    "HealthSampleRecord",
    "HealthSampleRow",
    "InFlightRun",
    "MaintenanceActionRecord",
    "MaintenanceActionRow",
    "MaintenanceRunRecord",
    "MaintenanceRunRow",
    "WriteLease",
    "CommitIntent",
    "CommitIntentRow",
    "LedgerCommitGate",
    "WriteLeaseRow",
]
