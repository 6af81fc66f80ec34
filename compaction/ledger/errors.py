"""Errors of the ledger and the redaction of database passwords from every text it emits or stores."""

from __future__ import annotations

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url

from compaction.core.errors import CompactionError
from compaction.core.redaction import redact_text



class LedgerError(CompactionError):
    """The ledger database cannot be opened, migrated, read or written (the message never carries a password)."""

    exit_code = 10


class UnknownRunError(LedgerError):
    """A write referred to a ``run_id`` that the ledger does not know."""


# ==============================================================================================================
# Redaction (the rules: compaction.core.redaction)

def redact_url(url: str | URL) -> str:
    """The URL as a string with the password replaced by ``***`` (also for strings SQLAlchemy cannot parse)."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparseable: fall back to the textual redaction
        return redact_text(url)


def _describe(e: BaseException) -> str:
    """A short description: the DBAPI error (class and message) rather than SQLAlchemy's long rendering."""
    if isinstance(e, sa_exc.DBAPIError) and e.orig is not None:
        kind, orig = type(e).__name__, type(e.orig).__name__
        return f"{kind if kind == orig else f'{kind} ({orig})'}: {str(e.orig).strip()}"
    return f"{type(e).__name__}: {str(e).strip()}"


def _leaks(e: BaseException, *secrets: str) -> bool:
    """Whether chaining ``e`` would carry a secret (then we raise ``from None``)."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if any(s and s in str(cur) for s in secrets) or redact_text(str(cur)) != str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False
