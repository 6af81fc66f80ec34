"""Initial ledger schema: plans, runs, partition_outcomes, conflicts.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Self-contained on purpose (does not import the models): later model changes must not alter what this revision
creates. ``tests/test_ledger.py`` checks that head matches the models (autogenerate finds no difference).
"""

from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.String(length=128), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("base_snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("base_sequence_number", sa.BigInteger(), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decision_count", sa.Integer(), nullable=False),
        sa.Column("task_count", sa.Integer(), nullable=False),
        sa.Column("estimated_cost_bytes", sa.BigInteger(), nullable=False),
        sa.Column("plan_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("plan_id", name="pk_plans"),
    )
    op.create_index("ix_plans_table_ref_created_at", "plans", ["table_ref", "created_at"])

    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("plan_id", sa.String(length=128), nullable=True),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attention_reason", sa.Text(), nullable=True),
        sa.Column("airflow_dag_id", sa.String(length=250), nullable=True),
        sa.Column("airflow_run_id", sa.String(length=250), nullable=True),
        sa.Column("spark_application_id", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.plan_id"], name="fk_runs_plan_id_plans", ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
    )
    op.create_index("ix_runs_table_ref_started_at", "runs", ["table_ref", "started_at"])
    op.create_index("ix_runs_started_at", "runs", ["started_at"])
    op.create_index("ix_runs_plan_id", "runs", ["plan_id"])
    op.create_index("ix_runs_airflow_dag_id_airflow_run_id", "runs", ["airflow_dag_id", "airflow_run_id"])

    op.create_table(
        "partition_outcomes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("table_ref", sa.String(length=1024), nullable=False),
        sa.Column("catalog", sa.String(length=255), nullable=False),
        sa.Column("partition_label", sa.Text(), nullable=False),
        sa.Column("partition_json", sa.Text(), nullable=True),
        sa.Column("spec_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("conflicts", sa.Integer(), nullable=False),
        sa.Column("base_snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("commit_snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("data_files_before", sa.BigInteger(), nullable=True),
        sa.Column("data_files_after", sa.BigInteger(), nullable=True),
        sa.Column("data_bytes_before", sa.BigInteger(), nullable=True),
        sa.Column("data_bytes_after", sa.BigInteger(), nullable=True),
        sa.Column("records_before", sa.BigInteger(), nullable=True),
        sa.Column("records_after", sa.BigInteger(), nullable=True),
        sa.Column("delete_files_before", sa.BigInteger(), nullable=True),
        sa.Column("delete_files_after", sa.BigInteger(), nullable=True),
        sa.Column("delete_bytes_before", sa.BigInteger(), nullable=True),
        sa.Column("delete_bytes_after", sa.BigInteger(), nullable=True),
        sa.Column("delete_records_before", sa.BigInteger(), nullable=True),
        sa.Column("delete_records_after", sa.BigInteger(), nullable=True),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("validation_level", sa.String(length=32), nullable=True),
        sa.Column("validation_result", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name="fk_partition_outcomes_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_partition_outcomes"),
        sa.UniqueConstraint("run_id", "partition_label", name="uq_partition_outcomes_run_id_partition_label"),
    )
    op.create_index(
        "ix_partition_outcomes_table_ref_partition_label", "partition_outcomes", ["table_ref", "partition_label"]
    )

    op.create_table(
        "conflicts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("partition_label", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error_class", sa.String(length=255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_conflicts_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_conflicts"),
    )
    op.create_index("ix_conflicts_run_id_occurred_at", "conflicts", ["run_id", "occurred_at"])


def downgrade() -> None:
    op.drop_index("ix_conflicts_run_id_occurred_at", table_name="conflicts")
    op.drop_table("conflicts")
    op.drop_index("ix_partition_outcomes_table_ref_partition_label", table_name="partition_outcomes")
    op.drop_table("partition_outcomes")
    op.drop_index("ix_runs_airflow_dag_id_airflow_run_id", table_name="runs")
    op.drop_index("ix_runs_plan_id", table_name="runs")
    op.drop_index("ix_runs_started_at", table_name="runs")
    op.drop_index("ix_runs_table_ref_started_at", table_name="runs")
    op.drop_table("runs")
    op.drop_index("ix_plans_table_ref_created_at", table_name="plans")
    op.drop_table("plans")
