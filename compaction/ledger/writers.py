"""Writers and compaction commits (docs/operations.md "Writers and compaction"; the protocol in
compaction/core/yielding.py).

* ``write_leases``: a writer (or any process about to write files it has not committed) announces itself for a
  bounded time. Compaction commits wait while one is live (:class:`LedgerCommitGate`), and orphan removal never
  deletes files newer than the oldest live lease (compaction/core/maintenance.py).
* ``commit_intents``: a compaction commit about to happen, recorded *before* it reads the leases; a writer taking a
  lease waits until none is live (:meth:`_Writers.wait_for_commit_intents`). Kept alive while the commit runs and
  with a short TTL, so an intent of a process that died stops counting on its own.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from sqlalchemy import Index, String, or_, select
from sqlalchemy.orm import Mapped, mapped_column

from compaction.core.errors import YieldedToWritersError
from compaction.core.policy import CompactionPolicy
from compaction.core.retry import CATALOG_OUTAGE_WAIT_S, CATALOG_RETRY_INTERVAL_S
from compaction.core.yielding import POLL_S_DEFAULT, GateAction, GateDecision, LeaseView, decide_commit
from compaction.ledger.base import LedgerMixin
from compaction.ledger.errors import LedgerError
from compaction.ledger.records import _utc
from compaction.ledger.schema import Base, UTCDateTime

_T = TypeVar("_T")

#: A commit intent's lifetime unless renewed; renewed every third of it while the commit runs.
COMMIT_INTENT_TTL_S_DEFAULT = 60.0
#: A lease's lifetime unless given (``icecompact lease acquire --ttl``).
WRITE_LEASE_TTL_S_DEFAULT = 3600.0


class _TableClaim:
    """The columns a lease and an intent share: who claims which table, from when until when."""

    catalog: Mapped[str] = mapped_column(String(255))
    table_ref: Mapped[str] = mapped_column(String(1024))
    holder: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    released_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())


class WriteLeaseRow(_TableClaim, Base):
    __tablename__ = "write_leases"
    __table_args__ = (Index("ix_write_leases_catalog_table_ref", "catalog", "table_ref"),)

    lease_id: Mapped[str] = mapped_column(String(36), primary_key=True)


class CommitIntentRow(_TableClaim, Base):
    __tablename__ = "commit_intents"
    __table_args__ = (Index("ix_commit_intents_catalog_table_ref", "catalog", "table_ref"),)

    intent_id: Mapped[str] = mapped_column(String(36), primary_key=True)


@dataclass(frozen=True)
class WriteLease:
    lease_id: str
    holder: str
    started_at: _dt.datetime
    expires_at: _dt.datetime


@dataclass(frozen=True)
class CommitIntent:
    intent_id: str
    holder: str
    started_at: _dt.datetime
    expires_at: _dt.datetime


def _live(row: type[WriteLeaseRow] | type[CommitIntentRow], table_ref: str, catalog: str, at: _dt.datetime) -> list:
    return [row.table_ref == table_ref, row.catalog == catalog, row.expires_at > at,
            or_(row.released_at.is_(None), row.released_at > at)]


class _Writers(LedgerMixin):
    """The write-lease and commit-intent methods of :class:`Ledger`."""

    def acquire_write_lease(self, table_ref: str, catalog: str, holder: str, *,
                            ttl_s: float = WRITE_LEASE_TTL_S_DEFAULT, now: _dt.datetime | None = None) -> str:
        """Announce that ``holder`` writes to the table (until released or ``ttl_s`` from now). Compaction commits
        wait while the lease is live; orphan removal keeps every file newer than the oldest live lease. A writer
        about to run a DML then waits for the commits already under way (:meth:`wait_for_commit_intents`)."""
        at = _utc(now, "now")
        lease_id = str(uuid.uuid4())
        with self._write("acquiring a write lease") as session:
            session.add(WriteLeaseRow(lease_id=lease_id, catalog=catalog, table_ref=table_ref, holder=holder[:255],
                                      started_at=at, expires_at=at + _dt.timedelta(seconds=ttl_s)))
        return lease_id

    def release_write_lease(self, lease_id: str, *, now: _dt.datetime | None = None) -> None:
        with self._write("releasing a write lease") as session:
            row = session.get(WriteLeaseRow, lease_id)
            if row is None:
                raise LedgerError(f"unknown write lease {lease_id!r}")
            row.released_at = _utc(now, "now")

    def release_write_leases_of(self, table_ref: str, catalog: str, holder: str, *,
                                now: _dt.datetime | None = None) -> int:
        """Release every live lease of ``holder`` on the table; returns how many."""
        at = _utc(now, "now")
        with self._write("releasing write leases") as session:
            rows = session.execute(select(WriteLeaseRow).where(*_live(WriteLeaseRow, table_ref, catalog, at),
                                                               WriteLeaseRow.holder == holder[:255])).scalars().all()
            for row in rows:
                row.released_at = at
            return len(rows)

    def active_write_leases(self, table_ref: str, *, catalog: str, now: _dt.datetime | None = None) -> list[WriteLease]:
        stmt = select(WriteLeaseRow).where(*_live(WriteLeaseRow, table_ref, catalog, _utc(now, "now")))
        with self._read("reading write leases") as session:
            return [WriteLease(r.lease_id, r.holder, r.started_at, r.expires_at)
                    for r in session.execute(stmt.order_by(WriteLeaseRow.started_at)).scalars()]

    def begin_commit_intent(self, table_ref: str, catalog: str, holder: str, *,
                            ttl_s: float = COMMIT_INTENT_TTL_S_DEFAULT, now: _dt.datetime | None = None) -> str:
        at = _utc(now, "now")
        intent_id = str(uuid.uuid4())
        with self._write("recording a commit intent") as session:
            session.add(CommitIntentRow(intent_id=intent_id, catalog=catalog, table_ref=table_ref,
                                        holder=holder[:255], started_at=at,
                                        expires_at=at + _dt.timedelta(seconds=ttl_s)))
        return intent_id

    def renew_commit_intent(self, intent_id: str, *, ttl_s: float = COMMIT_INTENT_TTL_S_DEFAULT,
                            now: _dt.datetime | None = None) -> None:
        with self._write("renewing a commit intent") as session:
            row = session.get(CommitIntentRow, intent_id)
            if row is not None and row.released_at is None:
                row.expires_at = _utc(now, "now") + _dt.timedelta(seconds=ttl_s)

    def end_commit_intent(self, intent_id: str, *, now: _dt.datetime | None = None) -> None:
        with self._write("ending a commit intent") as session:
            row = session.get(CommitIntentRow, intent_id)
            if row is not None and row.released_at is None:
                row.released_at = _utc(now, "now")

    def live_commit_intents(self, table_ref: str, *, catalog: str,
                            now: _dt.datetime | None = None) -> list[CommitIntent]:
        stmt = select(CommitIntentRow).where(*_live(CommitIntentRow, table_ref, catalog, _utc(now, "now")))
        with self._read("reading commit intents") as session:
            return [CommitIntent(r.intent_id, r.holder, r.started_at, r.expires_at)
                    for r in session.execute(stmt.order_by(CommitIntentRow.started_at)).scalars()]

    def wait_for_commit_intents(self, table_ref: str, *, catalog: str, timeout_s: float,
                                poll_s: float = 0.2, progress: Callable[[str], None] | None = None) -> float:
        """Wait until no compaction commit of the table is under way (after :meth:`acquire_write_lease`, every later
        one waits for the lease instead); returns the seconds waited. Raises :class:`LedgerError` after
        ``timeout_s``: the writer may then go ahead and risk a conflict, or release and try later."""
        started = time.monotonic()
        announced = False
        while True:
            intents = self.live_commit_intents(table_ref, catalog=catalog)
            waited = time.monotonic() - started
            if not intents:
                return waited
            if waited >= timeout_s:
                raise LedgerError(f"{table_ref}: a compaction commit ({intents[0].holder}) still under way after "
                                  f"{waited:.0f} s")
            if progress is not None and not announced:
                progress(f"icecompact: waiting for the compaction commit under way on {table_ref} "
                         f"({intents[0].holder})")
                announced = True
            time.sleep(poll_s)


class _IntentKeeper:
    """Renews a commit intent every third of its TTL while the commit runs (a long MAJOR rewrite)."""

    def __init__(self, ledger: _Writers, intent_id: str, ttl_s: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ledger, intent_id, ttl_s), daemon=True,
                                        name="icecompact-commit-intent")
        self._thread.start()

    def _run(self, ledger: _Writers, intent_id: str, ttl_s: float) -> None:
        while not self._stop.wait(ttl_s / 3):
            with contextlib.suppress(LedgerError):  # the next renewal tries again; the TTL covers two misses
                ledger.renew_commit_intent(intent_id, ttl_s=ttl_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class LedgerCommitGate:
    """:class:`compaction.core.yielding.CommitGate` on the ledger: records the commit intent, reads the leases, waits
    (intent withdrawn) while a writer holds one, and keeps the intent until the commit is done.

    ``ledger``: a ledger, or a function opening one - then it is opened at the first commit, not before (a job's
    reads and writes do not need it), and closed by :meth:`close`. A ledger that does not answer (a database restart,
    a failover: usually the catalog's database too) is waited for like the catalog, up to ``outage_s``
    (compaction.core.retry's ``CATALOG_OUTAGE_WAIT_S``); after that the commit fails with nothing committed."""

    def __init__(self, ledger: _Writers | Callable[[], _Writers], catalog: str, holder: str, *,
                 intent_ttl_s: float = COMMIT_INTENT_TTL_S_DEFAULT, poll_s: float = POLL_S_DEFAULT,
                 outage_s: float = CATALOG_OUTAGE_WAIT_S, progress: Callable[[str], None] | None = None) -> None:
        self._ledger: _Writers | None = ledger if isinstance(ledger, _Writers) else None
        self._open: Callable[[], _Writers] | None = None if isinstance(ledger, _Writers) else ledger
        self.catalog, self.holder = catalog, holder
        self.intent_ttl_s, self.poll_s, self.outage_s, self.progress = intent_ttl_s, poll_s, outage_s, progress
        #: Tables this gate gave up on: later commits of the same job give up at once instead of waiting again.
        self.gave_up: dict[str, str] = {}
        self.decisions: list[GateDecision] = []

    def close(self) -> None:
        """Close the ledger this gate opened itself."""
        if self._open is not None and self._ledger is not None:
            with contextlib.suppress(Exception):
                self._ledger.close()  # type: ignore[attr-defined]
            self._ledger = None

    def _call(self, what: str, action: Callable[[_Writers], _T]) -> _T:
        since: float | None = None
        while True:
            try:
                if self._ledger is None:
                    assert self._open is not None
                    self._ledger = self._open()
                return action(self._ledger)
            except LedgerError as e:
                since = since if since is not None else time.monotonic()
                if time.monotonic() - since >= self.outage_s:
                    raise LedgerError(f"{what}: the ledger did not answer for {self.outage_s:.0f} s, nothing "
                                      f"committed: {e}") from e
                self._say(f"{what}: {e}; waiting for the ledger")
                time.sleep(CATALOG_RETRY_INTERVAL_S)

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"icecompact: {text}")

    @contextlib.contextmanager
    def commit_window(self, table_ref: str, policy: CompactionPolicy, what: str) -> Iterator[GateDecision]:
        if table_ref in self.gave_up:
            raise YieldedToWritersError(f"{what}: {self.gave_up[table_ref]}")
        started = time.monotonic()
        announced = False
        while True:
            intent = self._call(what, lambda ledger: ledger.begin_commit_intent(
                table_ref, self.catalog, f"{self.holder} {what}"[:255], ttl_s=self.intent_ttl_s))
            try:
                leases = self._call(what, lambda ledger: ledger.active_write_leases(table_ref, catalog=self.catalog))
                decision = decide_commit([LeaseView(w.holder, w.expires_at) for w in leases],
                                         waited_s=time.monotonic() - started, policy=policy,
                                         now=_dt.datetime.now(_dt.timezone.utc), poll_s=self.poll_s)
            except BaseException:
                with contextlib.suppress(LedgerError):  # it expires on its own within the TTL
                    self._call(what, lambda ledger: ledger.end_commit_intent(intent))
                raise
            if decision.commits:
                break
            # A waiting commit must not hold the writer up.
            self._call(what, lambda ledger: ledger.end_commit_intent(intent))
            if decision.action is GateAction.GIVE_UP:
                self.gave_up[table_ref] = decision.reason
                self.decisions.append(decision)
                self._say(f"{what}: {decision.reason}")
                raise YieldedToWritersError(f"{what}: {decision.reason}")
            if not announced:
                self._say(f"{what}: {decision.reason} (at most {policy.yield_max_wait_seconds} s)")
                announced = True
            time.sleep(decision.retry_in_s)
        self.decisions.append(decision)
        if decision.action is GateAction.COMMIT_ANYWAY or announced:
            self._say(f"{what}: {decision.reason}")
        assert self._ledger is not None
        keeper = _IntentKeeper(self._ledger, intent, self.intent_ttl_s)
        try:
            yield decision
        finally:
            keeper.stop()
            with contextlib.suppress(LedgerError):  # it expires on its own within the TTL
                self._ledger.end_commit_intent(intent)
