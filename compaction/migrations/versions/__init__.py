"""Alembic revision scripts of the ledger schema (a package only so that setuptools ships them)."""
