"""Health samples carry the table's metadata size: snapshots, metadata-file bytes, the current
snapshot's manifests and their bytes, so the UI can show them over time beside what maintenance removed.

Revision ID: 0004
Revises: 0003
Create Date: 2025-07-15

Self-contained (does not import the models); ``tests/test_ledger.py`` checks that head matches the models. The
columns are nullable: samples recorded before this revision did not measure them.
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: Union[str, Sequence[str], None] = "0003"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COLUMNS = ("snapshots", "metadata_file_bytes", "manifests", "manifest_bytes")


def upgrade() -> None:
    # Batch mode: SQLite alters a table by copying it; PostgreSQL adds the columns in place.
    with op.batch_alter_table("health_samples") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("health_samples") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
