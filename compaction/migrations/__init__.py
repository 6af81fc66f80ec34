"""Alembic migrations of the ledger schema (driven programmatically by :mod:`compaction.ledger`)."""
