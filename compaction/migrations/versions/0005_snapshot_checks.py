"""Snapshot checks: what validated each commit a compaction made, by its job or by the post-hoc check of
a later plan (compaction/ledger/checks.py).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

Self-contained (does not import the models); ``tests/test_ledger.py`` checks that head matches the models.
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: Union[str, Sequence[str], None] = "0004"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "snapshot_checks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=False),
        sa.Column("plan_id", sa.String(length=128), nullable=True),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("level", sa.String(length=32), nullable=False),
        sa.Column("result", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_snapshot_checks"),
    )
    op.create_index("ix_snapshot_checks_catalog_table_ref_snapshot_id", "snapshot_checks",
                    ["catalog", "table_ref", "snapshot_id"])


def downgrade() -> None:
    op.drop_index("ix_snapshot_checks_catalog_table_ref_snapshot_id", table_name="snapshot_checks")
    op.drop_table("snapshot_checks")
