"""Work queue of resident executors and the executors themselves (compaction/ledger/queue.py).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

Self-contained (does not import the models); ``tests/test_ledger.py`` checks that head matches the models.
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: Union[str, Sequence[str], None] = "0005"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "work_items",
        sa.Column("item_id", sa.String(length=36), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("plan_id", sa.String(length=128), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("group_ids", sa.Text(), nullable=False),
        sa.Column("plan_json", sa.Text(), nullable=False),
        sa.Column("validation", sa.String(length=16), nullable=False),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("executor_id", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("results_json", sa.Text(), nullable=True),
        sa.Column("progress_json", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("item_id", name="pk_work_items"),
    )
    op.create_index("ix_work_items_status_catalog_enqueued_at", "work_items", ["status", "catalog", "enqueued_at"])
    op.create_index("ix_work_items_run_id", "work_items", ["run_id"])
    op.create_table(
        "executors",
        sa.Column("executor_id", sa.String(length=64), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("master", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("groups_run", sa.Integer(), nullable=False),
        sa.Column("heap_used_mb", sa.Integer(), nullable=True),
        sa.Column("current_item", sa.String(length=36), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stop_reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("executor_id", name="pk_executors"),
    )
    op.create_index("ix_executors_catalog_heartbeat_at", "executors", ["catalog", "heartbeat_at"])


def downgrade() -> None:
    op.drop_index("ix_executors_catalog_heartbeat_at", table_name="executors")
    op.drop_table("executors")
    op.drop_index("ix_work_items_run_id", table_name="work_items")
    op.drop_index("ix_work_items_status_catalog_enqueued_at", table_name="work_items")
    op.drop_table("work_items")
