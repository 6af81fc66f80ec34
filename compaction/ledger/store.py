"""The store: :class:`Ledger` owns the engine, the schema (Alembic), sessions and error wrapping; its method groups
live in :mod:`compaction.ledger.runs` and :mod:`compaction.ledger.health`."""

from __future__ import annotations

import contextlib
from typing import Iterator

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.orm import Session

from compaction.ledger.engine import (
    DEFAULT_TIMEOUT_S,
    _script_revisions,
    alembic_config,
    create_ledger_engine,
    resolve_url,
    take_migration_lock,
    writing,
)
from compaction.ledger.checks import _SnapshotChecks
from compaction.ledger.errors import LedgerError, _describe, _leaks, redact_text, redact_url
from compaction.ledger.health import _HealthSamples
from compaction.ledger.maintenance import _Maintenance
from compaction.ledger.queue import _Queue
from compaction.ledger.records import _clip
from compaction.ledger.runs import _Runs
from compaction.ledger.writers import _Writers

# ==============================================================================================================


class Ledger(_Runs, _HealthSamples, _Maintenance, _SnapshotChecks, _Queue, _Writers):
    """Store of plans, runs, per-partition outcomes and commit conflicts. Open with :meth:`Ledger.open`.

    A ``Ledger`` owns a SQLAlchemy engine (connection pool): close it (or use it as a context manager). It is
    safe to use from several threads; after ``os.fork`` open a new one in the child."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._write_engine = writing(engine)
        password = engine.url.password
        self._secrets: tuple[str, ...] = (str(password),) if password else ()
        self._redacted_url = redact_url(engine.url)

    # Lifecycle ----------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | URL | None = None, *, upgrade: bool = True, timeout: float = DEFAULT_TIMEOUT_S) -> Ledger:
        """Connect to the ledger at ``url`` (else ``$ICECOMPACT_LEDGER_URL``, else ``<home>/ledger.db``).

        With ``upgrade`` (default) the schema is migrated to head first (concurrency-safe, no-op when already at
        head); without it, a schema that is not at head raises :class:`LedgerError`. ``timeout`` is the SQLite busy
        timeout and the PostgreSQL connect timeout, in seconds."""
        raw = resolve_url(url)
        try:
            parsed = make_url(raw)
        except Exception:  # noqa: BLE001 - ArgumentError, ValueError (their text may quote the URL: not chained)
            raise LedgerError(f"invalid ledger URL {redact_url(raw)}") from None
        try:
            engine = create_ledger_engine(parsed, timeout)
        except Exception as e:  # noqa: BLE001 - missing driver (NoSuchModuleError, ImportError), bad arguments
            raise LedgerError(f"cannot create ledger engine for {redact_url(parsed)}: {redact_text(str(e))}") from None
        ledger = cls(engine)
        try:
            ledger._ensure_schema(upgrade)
        except BaseException:
            engine.dispose()
            raise
        return ledger

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self._redacted_url})"

    @property
    def url(self) -> str:
        """The database URL with the password redacted."""
        return self._redacted_url

    def connection_url(self) -> str:
        """The database URL *with* its password, to hand to a child process through its environment
        (``$ICECOMPACT_LEDGER_URL``); never log it or put it in argv."""
        return self._engine.url.render_as_string(hide_password=False)

    @property
    def engine(self) -> Engine:
        return self._engine

    # Schema -------------------------------------------------------------------------------------------------
    def schema_revision(self) -> str | None:
        """The Alembic revision of the database (``None`` for an empty database)."""
        heads = self._current_heads()
        return ",".join(sorted(heads)) if heads else None

    def upgrade(self, revision: str = "head") -> None:
        self._migrate("upgrade", revision)

    def downgrade(self, revision: str) -> None:
        """Downgrade the schema (``"base"`` drops every ledger table: all history is lost)."""
        self._migrate("downgrade", revision)

    def _current_heads(self) -> set[str]:
        from alembic.migration import MigrationContext

        with self._wrap("reading the schema revision"), self._engine.connect() as conn:
            return set(MigrationContext.configure(conn).get_current_heads())

    def _migrate(self, direction: str, revision: str) -> None:
        from alembic import command

        with self._wrap(f"schema {direction} to {revision}"), self._write_engine.begin() as conn:
            take_migration_lock(conn)
            cfg = alembic_config(connection=conn)
            if direction == "upgrade":
                command.upgrade(cfg, revision)
            else:
                command.downgrade(cfg, revision)

    def _ensure_schema(self, upgrade: bool) -> None:
        heads, known = _script_revisions()
        current = self._current_heads()
        if current == heads:
            return
        unknown = current - known
        if unknown:
            raise LedgerError(
                f"ledger {self._redacted_url} is at schema revision {', '.join(sorted(unknown))}, which this version "
                "of icecompact does not know (written by a newer version?)"
            )
        if not upgrade:
            raise LedgerError(
                f"ledger {self._redacted_url} is at schema revision {','.join(sorted(current)) or '<empty>'}, "
                f"expected {','.join(sorted(heads))}; open it with upgrade=True"
            )
        try:
            self._migrate("upgrade", "head")
        except LedgerError:
            # Another process may have won a race we could not serialise (e.g. a backend without a migration
            # lock): being at head is all we need.
            if self._current_heads() == heads:
                return
            raise

    # Error wrapping -----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _wrap(self, action: str) -> Iterator[None]:
        from alembic.util import CommandError

        try:
            yield
        except LedgerError:
            raise
        except (sa_exc.SQLAlchemyError, CommandError) as e:
            error = LedgerError(f"ledger {action} failed ({self._redacted_url}): {redact_text(_describe(e), self._secrets)}")
            if _leaks(e, *self._secrets):
                raise error from None
            raise error from e

    @contextlib.contextmanager
    def _write(self, action: str) -> Iterator[Session]:
        with self._wrap(action), Session(self._write_engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextlib.contextmanager
    def _read(self, action: str) -> Iterator[Session]:
        with self._wrap(action), Session(self._engine) as session, session.begin():
            yield session

    def _clip(self, text: str | None) -> str | None:
        return _clip(text, self._secrets)
