"""Alembic environment of the ledger schema.

Normally run through :meth:`compaction.ledger.Ledger.open` / :func:`compaction.ledger.alembic_config`, which
hand over an open connection in ``config.attributes["connection"]`` (already inside the migration transaction,
with the migration lock held). Without one, this connects to ``sqlalchemy.url`` (or the resolved ledger URL),
takes the same lock, and migrates in one transaction. Offline (``--sql``) mode renders the SQL for that URL.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy.engine import Connection

from compaction.ledger import Base, UTCDateTime, create_ledger_engine, resolve_url, take_migration_lock, writing

config = context.config
target_metadata = Base.metadata


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Render the ledger's custom column type as plain SQLAlchemy so revisions never import the models."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        autogen_context.imports.add("import sqlalchemy as sa")
        return "sa.DateTime(timezone=True)"
    return False


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things: future revisions use batch operations
        compare_type=True,
        render_item=render_item,
        **kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url") or resolve_url(None), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _run_on(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or resolve_url(None)
    engine = create_ledger_engine(url)  # same setup as the store: busy timeout, BEGIN IMMEDIATE for writes
    try:
        with writing(engine).begin() as conn:
            take_migration_lock(conn)
            _run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
