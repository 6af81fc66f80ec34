"""Write leases for writers outside Airflow (docs/operations.md "Writers and compaction"): a context manager and the
``icecompact lease`` commands. A writer that holds a lease on a table is never failed by our compaction: every
compaction commit waits while the lease is live (compaction.core.yielding).

    from compaction.ops.leases import write_lease

    with write_lease("db.events", catalog="lake", holder="nightly-merge"):
        spark.sql("MERGE INTO lake.db.events t USING updates u ON t.id = u.id ...")
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Callable, Iterator

from compaction.catalog import validate_catalog_name
from compaction.core.errors import ConfigError
from compaction.core.identifiers import parse_table_identifier
from compaction.ledger import Ledger
from compaction.ledger.errors import LedgerError
from compaction.ledger.writers import WRITE_LEASE_TTL_S_DEFAULT

#: How long taking a lease waits for a compaction commit already under way (a MAJOR's intent covers its rewrite).
LEASE_WAIT_S_DEFAULT = 1800.0


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _table_ref(table: str, catalog: str) -> str:
    if not catalog:
        raise ConfigError("a write lease needs the catalog's name (--catalog, or $ICECOMPACT_CATALOG)")
    return parse_table_identifier(table, validate_catalog_name(catalog)).dotted


def acquire(ledger: Ledger, table: str, catalog: str, *, holder: str | None = None,
            ttl_s: float = WRITE_LEASE_TTL_S_DEFAULT, wait_s: float = LEASE_WAIT_S_DEFAULT,
            progress: Callable[[str], None] | None = None) -> str:
    """Record a lease on ``table``, then wait until no compaction commit is under way on it; returns the lease id.
    From then on until it is released or ``ttl_s`` passes, no compaction commits on the table. When a commit is
    still under way after ``wait_s``, the lease is released again and :class:`LedgerError` raised."""
    if ttl_s <= 0:
        raise ConfigError(f"a lease's TTL must be > 0 seconds, not {ttl_s}")
    table_ref = _table_ref(table, catalog)
    lease = ledger.acquire_write_lease(table_ref, catalog, holder or default_holder(), ttl_s=ttl_s)
    try:
        ledger.wait_for_commit_intents(table_ref, catalog=catalog, timeout_s=wait_s, progress=progress)
    except BaseException:
        with contextlib.suppress(LedgerError):
            ledger.release_write_lease(lease)
        raise
    return lease


def release_holder(ledger: Ledger, table: str, catalog: str, holder: str) -> int:
    """End every live lease ``holder`` has on ``table`` (a holder that did not keep its lease ids: an Airflow task
    ended by another process); returns how many."""
    return ledger.release_write_leases_of(_table_ref(table, catalog), catalog, holder)


@contextlib.contextmanager
def write_lease(table: str, *, catalog: str, holder: str | None = None, ttl_s: float = WRITE_LEASE_TTL_S_DEFAULT,
                wait_s: float = LEASE_WAIT_S_DEFAULT, ledger_url: str | None = None,
                progress: Callable[[str], None] | None = None) -> Iterator[str]:
    """Hold a write lease on ``table`` (``NAMESPACE.TABLE`` of the catalog named ``catalog``) for the block; the
    ledger is ``ledger_url``, else ``$ICECOMPACT_LEDGER_URL``, else the default one. Yields the lease id."""
    with Ledger.open(ledger_url) as ledger:
        lease = acquire(ledger, table, catalog, holder=holder, ttl_s=ttl_s, wait_s=wait_s, progress=progress)
        try:
            yield lease
        finally:
            ledger.release_write_lease(lease)
