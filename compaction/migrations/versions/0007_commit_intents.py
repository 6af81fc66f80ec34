"""Commit intents: a compaction commit about to happen, which writers taking a lease wait for
(compaction/ledger/writers.py).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

Self-contained (does not import the models); ``tests/test_ledger.py`` checks that head matches the models.
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: Union[str, Sequence[str], None] = "0006"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "commit_intents",
        sa.Column("intent_id", sa.String(length=36), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("intent_id", name="pk_commit_intents"),
    )
    op.create_index("ix_commit_intents_catalog_table_ref", "commit_intents", ["catalog", "table_ref"])


def downgrade() -> None:
    op.drop_index("ix_commit_intents_catalog_table_ref", table_name="commit_intents")
    op.drop_table("commit_intents")
