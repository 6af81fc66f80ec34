"""Metadata reads that survive the object store's transient errors.

S3 answers a request now and then with ``500 InternalError`` ("We encountered an internal error, please try again")
or ``503 SlowDown`` and asks the client to retry; connections are reset when an endpoint restarts. pyarrow's S3
client retries a request a few times within milliseconds, which a restarting endpoint outlasts. Reads of table
metadata (metadata file, manifest lists, manifests: immutable files, so a read can always be repeated) are retried
here with backoff, and end in a clear, retryable :class:`~compaction.core.errors.StorageUnavailableError` when the
store stays unavailable. Errors that retrying cannot fix (a missing object, access denied) are raised at once.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from compaction.core.errors import CatalogError, CompactionError, StorageUnavailableError
from compaction.core.redaction import redact_text

T = TypeVar("T")

STORAGE_READ_ATTEMPTS_DEFAULT = 6
STORAGE_READ_FIRST_DELAY_S_DEFAULT = 0.5
STORAGE_READ_MAX_DELAY_S_DEFAULT = 8.0

# How transient failures read in the errors of pyarrow's S3 client (AWS SDK error names), botocore / fsspec and
# Python's own network errors; matched case-insensitively in the error's text and its causes.
_TRANSIENT_MARKERS = (
    "internal_failure", "internalerror", "we encountered an internal error", "please try again",
    "slow_down", "slowdown", "service_unavailable", "serviceunavailable", "request_timeout", "requesttimeout",
    "connection reset", "connection refused", "broken pipe", "timed out", "timeout", "network_connection",
    "curl error", "unable to connect", "connection aborted", "remote end closed",
)
#: How a SQL catalog's database that did not answer reads in SQLAlchemy's errors (PostgreSQL, MySQL, SQLite's
#: driver text), beside the network conditions above: a restart or failover, over once the database is back.
_DATABASE_UNAVAILABLE_MARKERS = (
    *_TRANSIENT_MARKERS, "server closed the connection", "could not connect", "terminating connection",
    "the database system is starting up", "the database system is shutting down", "in recovery mode",
    "lost connection", "can't connect", "has gone away", "database is locked",
)
_PERMANENT_MARKERS = ("no_such_key", "nosuchkey", "no_such_bucket", "nosuchbucket", "access_denied", "accessdenied",
                      "forbidden", "not found", "invalid_access_key", "signaturedoesnotmatch")


def _chain(error: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def is_transient_storage_error(error: BaseException) -> bool:
    """Whether ``error`` is a transient failure of the store, worth a retry: an ``OSError`` (pyarrow's, or one a
    library wrapped) whose text names a transient S3 / network condition, or a connection error / timeout. A
    :class:`CatalogError` is transient when what it wraps is (a REST catalog whose OAuth token or config request
    had its connection reset while the catalog was opened, :meth:`compaction.catalog.CatalogConfig.load`; a SQL
    catalog whose database refused the connection: a restart or failover)."""
    if isinstance(error, CompactionError):
        if isinstance(error, CatalogError) and error.__cause__ is not None:
            return is_transient_storage_error(error.__cause__)
        return False
    chain = _chain(error)
    texts = [f"{type(e).__name__}: {e}".lower() for e in chain]
    if _is_database_connection_error(chain):
        return any(marker in text for text in texts for marker in _DATABASE_UNAVAILABLE_MARKERS)
    if not any(isinstance(e, OSError) for e in chain):
        return False
    if any(marker in text for text in texts for marker in _PERMANENT_MARKERS):
        return False
    return any(isinstance(e, (ConnectionError, TimeoutError)) for e in chain) or any(
        marker in text for text in texts for marker in _TRANSIENT_MARKERS)


def _is_database_connection_error(chain: list[BaseException]) -> bool:
    """SQLAlchemy's errors of the connection to the database (the driver's error wrapped; not ``OSError``s)."""
    try:
        from sqlalchemy import exc
    except ImportError:  # no SQL catalog without SQLAlchemy
        return False
    return any(isinstance(e, (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError)) for e in chain)


def with_storage_retries(read: Callable[[], T], *, what: str, attempts: int = STORAGE_READ_ATTEMPTS_DEFAULT,
                         first_delay_s: float = STORAGE_READ_FIRST_DELAY_S_DEFAULT,
                         max_delay_s: float = STORAGE_READ_MAX_DELAY_S_DEFAULT,
                         sleep: Callable[[float], None] = time.sleep,
                         progress: Callable[[str], None] | None = None) -> T:
    """``read()``, repeated with exponential backoff while it fails with a transient storage error; after
    ``attempts`` failures, :class:`StorageUnavailableError` naming ``what`` (the last error chained)."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return read()
        except Exception as e:  # noqa: BLE001 - classified below; anything else propagates unchanged
            if not is_transient_storage_error(e):
                raise
            reason = redact_text(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            if attempt == attempts:
                raise StorageUnavailableError(
                    f"{what}: the object store or catalog failed {attempts} times in a row with a transient error ({reason}); "
                    "nothing was changed - run again") from e
            if progress is not None:
                progress(f"{what}: transient storage error ({reason}); retry {attempt}/{attempts - 1} in {delay:.1f} s")
            sleep(delay)
            delay = min(delay * 2, max_delay_s)
    raise AssertionError("unreachable: the last attempt returns or raises")
