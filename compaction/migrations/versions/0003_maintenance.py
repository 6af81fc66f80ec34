"""Maintenance: maintenance_runs, maintenance_actions (files and bytes each action removed),
write_leases (writers announcing uncommitted files).

Revision ID: 0003
Revises: 0002
Create Date: 2025-07-01

Self-contained (does not import the models); ``tests/test_ledger.py`` checks that head matches the models.
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: Union[str, Sequence[str], None] = "0002"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "maintenance_runs",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("plan_id", sa.String(length=128), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("plan_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_maintenance_runs"),
    )
    op.create_index("ix_maintenance_runs_catalog_table_ref_started_at", "maintenance_runs",
                    ["catalog", "table_ref", "started_at"])
    op.create_table(
        "maintenance_actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("files_removed", sa.BigInteger(), nullable=False),
        sa.Column("bytes_removed", sa.BigInteger(), nullable=True),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("detail_json", sa.Text(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["maintenance_runs.run_id"],
                                name="fk_maintenance_actions_run_id_maintenance_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_maintenance_actions"),
    )
    op.create_index("ix_maintenance_actions_run_id", "maintenance_actions", ["run_id"])
    op.create_table(
        "write_leases",
        sa.Column("lease_id", sa.String(length=36), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("lease_id", name="pk_write_leases"),
    )
    op.create_index("ix_write_leases_catalog_table_ref", "write_leases", ["catalog", "table_ref"])


def downgrade() -> None:
    op.drop_index("ix_write_leases_catalog_table_ref", table_name="write_leases")
    op.drop_table("write_leases")
    op.drop_index("ix_maintenance_actions_run_id", table_name="maintenance_actions")
    op.drop_table("maintenance_actions")
    op.drop_index("ix_maintenance_runs_catalog_table_ref_started_at", table_name="maintenance_runs")
    op.drop_table("maintenance_runs")
