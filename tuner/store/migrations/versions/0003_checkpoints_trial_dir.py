"""Schema version 3: the checkpoints table (every checkpoint a trial registered, the metrics it was
taken with, and whether checkpoint retention (``num_to_keep``) deleted it since), and
``trials.trial_dir`` (the trial's directory, which ``trial_dirname_creator`` may choose). Existing
trials keep a NULL directory (readers fall back to the default ``<run_dir>/<trainable>_<trial_id>``)
and existing checkpoints have no record: only their trial's ``checkpoint_path``.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 3


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "experiment_id",
            sa.Integer,
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("trial_id", sa.String(64), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("iteration", sa.Integer, nullable=False),
        sa.Column("timestamp", sa.Double, nullable=False),
        sa.Column("metrics", sa.Text, nullable=True),
        sa.Column("deleted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("deleted_at", sa.Double, nullable=True),
        sa.UniqueConstraint("trial_id", "path", name="uq_checkpoints_trial_path"),
    )
    op.create_index("ix_checkpoints_experiment_id", "checkpoints", ["experiment_id"])
    # Batch mode: on SQLite, ALTERs it cannot do become a copy of the table (this one it can).
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("trial_dir", sa.Text, nullable=True))
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION}")


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("trial_dir")
    op.drop_index("ix_checkpoints_experiment_id", table_name="checkpoints")
    op.drop_table("checkpoints")
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION - 1}")
