"""Ledger URLs, SQLAlchemy engines set up for real transactions, the migration lock and the Alembic config."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url

from compaction import settings

if TYPE_CHECKING:
    from alembic.config import Config

LEDGER_URL_ENV = "ICECOMPACT_LEDGER_URL"
LEDGER_FILENAME = "ledger.db"
#: Seconds to wait for a SQLite lock (busy timeout) or for a PostgreSQL connection.
DEFAULT_TIMEOUT_S = 30.0
#: Key of the PostgreSQL advisory lock held while migrating (arbitrary constant, "icecompact ledger").
PG_MIGRATION_LOCK_KEY = 0x1CEC_0DA1_1ED6
#: The Alembic scripts: compaction/migrations, beside this package.
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

_WRITE_OPTION = "icecompact_ledger_write"

def default_url() -> str:
    """``sqlite:////<ICECOMPACT_HOME>/ledger.db``."""
    return URL.create("sqlite", database=str(settings.home() / LEDGER_FILENAME)).render_as_string(hide_password=False)


def resolve_url(url: str | URL | None = None) -> str:
    """Explicit URL, else ``$ICECOMPACT_LEDGER_URL``, else :func:`default_url`."""
    if url is not None:
        return url.render_as_string(hide_password=False) if isinstance(url, URL) else url
    return os.environ.get(LEDGER_URL_ENV) or default_url()


def create_ledger_engine(url: str | URL, timeout: float = DEFAULT_TIMEOUT_S) -> Engine:
    """A SQLAlchemy engine set up like the store's: SQLite busy timeout, real transactions and foreign keys;
    PostgreSQL connect timeout and pre-ping. Parameters never appear in error messages."""
    url = make_url(url)
    backend = url.get_backend_name()
    kwargs: dict[str, Any] = {"hide_parameters": True}  # keep plan JSON and error texts out of exception messages
    connect_args: dict[str, Any] = {}
    if backend == "sqlite":
        database = url.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        connect_args["timeout"] = timeout
    elif backend == "postgresql":
        kwargs["pool_pre_ping"] = True
        if url.get_driver_name() in ("psycopg2", "psycopg") and "connect_timeout" not in url.query:
            connect_args["connect_timeout"] = max(1, int(timeout))
    engine = create_engine(url, connect_args=connect_args, **kwargs)
    if backend == "sqlite":
        _install_sqlite_transactions(engine)
    return engine


def _install_sqlite_transactions(engine: Engine) -> None:
    """Real transactions on SQLite: pysqlite would otherwise not BEGIN before DDL and take the write lock lazily.

    Write transactions start with ``BEGIN IMMEDIATE`` (the write lock is taken up front, waiting up to the busy
    timeout, so two writers never deadlock on a lock upgrade); read transactions with a plain ``BEGIN``."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE_OPTION) else "BEGIN")


def writing(engine: Engine) -> Engine:
    """The engine for write transactions (SQLite: ``BEGIN IMMEDIATE``; other backends: unchanged)."""
    return engine.execution_options(**{_WRITE_OPTION: True})


def take_migration_lock(conn: Connection) -> None:
    """Serialise schema migrations across processes, for the rest of ``conn``'s transaction.

    PostgreSQL: a transaction-level advisory lock. SQLite: nothing to do here when the transaction was begun by a
    ledger write engine (``BEGIN IMMEDIATE`` already holds the database write lock)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK_KEY})")


def alembic_config(url: str | URL | None = None, connection: Connection | None = None) -> Config:
    """A programmatic Alembic config for the packaged migrations (no ``alembic.ini`` needed).

    With ``connection`` the migration runs on it (inside its transaction); otherwise ``env.py`` connects to
    ``url`` (resolved by :func:`resolve_url`)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    else:
        # ConfigParser interpolates '%': escape it (URL-encoded passwords contain '%').
        cfg.set_main_option("sqlalchemy.url", resolve_url(url).replace("%", "%%"))
    return cfg


@functools.lru_cache(maxsize=1)
def _script_revisions() -> tuple[frozenset[str], frozenset[str]]:
    """(head revisions, all known revisions) of the packaged migration scripts."""
    if not MIGRATIONS_DIR.is_dir():
        return _zipped_script_revisions()
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    script = ScriptDirectory.from_config(cfg)
    return frozenset(script.get_heads()), frozenset(rev.revision for rev in script.walk_revisions())


def _zipped_script_revisions() -> tuple[frozenset[str], frozenset[str]]:
    """The same, when this package was imported from the ``--py-files`` zip a Spark application on a cluster master
    runs from (the resident executor opens the ledger): Alembic reads scripts from a directory only, so the version
    modules are imported and their ``revision`` / ``down_revision`` read. Such a process can check the schema but
    not migrate it (its supervisor, running from the installed package, did)."""
    import importlib
    import pkgutil

    from compaction.migrations import versions

    revisions: set[str] = set()
    parents: set[str] = set()
    for module in pkgutil.iter_modules(versions.__path__):
        script = importlib.import_module(f"{versions.__name__}.{module.name}")
        revisions.add(str(script.revision))
        down = script.down_revision
        parents.update([] if down is None else [down] if isinstance(down, str) else [str(d) for d in down])
    return frozenset(revisions - parents), frozenset(revisions)
