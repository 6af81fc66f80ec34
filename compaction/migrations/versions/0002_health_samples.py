"""Health samples: one row per inspection of a table (health over time).

Revision ID: 0002
Revises: 0001
Create Date: 2025-06-01

Self-contained (does not import the models); ``tests/test_ledger.py`` checks that head matches the models.
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: Union[str, Sequence[str], None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "health_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("metadata_location", sa.Text(), nullable=True),
        sa.Column("partitions", sa.BigInteger(), nullable=False),
        sa.Column("data_files", sa.BigInteger(), nullable=False),
        sa.Column("data_bytes", sa.BigInteger(), nullable=False),
        sa.Column("data_records", sa.BigInteger(), nullable=False),
        sa.Column("position_delete_files", sa.BigInteger(), nullable=False),
        sa.Column("equality_delete_files", sa.BigInteger(), nullable=False),
        sa.Column("deletion_vectors", sa.BigInteger(), nullable=False),
        sa.Column("delete_records", sa.BigInteger(), nullable=False),
        sa.Column("delete_bytes", sa.BigInteger(), nullable=False),
        sa.Column("delete_ratio", sa.Float(), nullable=False),
        sa.Column("fragment_files", sa.BigInteger(), nullable=False),
        sa.Column("decision", sa.String(length=16), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=True),
        sa.Column("partitions_minor", sa.Integer(), nullable=False),
        sa.Column("partitions_major", sa.Integer(), nullable=False),
        sa.Column("partitions_truncated", sa.Boolean(), nullable=False),
        sa.Column("partitions_json", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_health_samples"),
    )
    op.create_index("ix_health_samples_catalog_table_ref_recorded_at", "health_samples",
                    ["catalog", "table_ref", "recorded_at"])


def downgrade() -> None:
    op.drop_index("ix_health_samples_catalog_table_ref_recorded_at", table_name="health_samples")
    op.drop_table("health_samples")
