"""What the method groups of :class:`~compaction.ledger.Ledger` (runs, health, maintenance) need from the store."""

from __future__ import annotations

import contextlib

from sqlalchemy.orm import Session


class LedgerMixin:
    """The sessions and the redaction :class:`~compaction.ledger.store.Ledger` provides to its method groups."""

    def _write(self, action: str) -> contextlib.AbstractContextManager[Session]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _read(self, action: str) -> contextlib.AbstractContextManager[Session]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _clip(self, text: str | None) -> str | None:  # pragma: no cover - Ledger's
        raise NotImplementedError
