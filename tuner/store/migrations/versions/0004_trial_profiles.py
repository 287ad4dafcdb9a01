"""Schema version 4: ``trial_profiles``, where each trial's time went (one row per trial: seconds
holding its resources, split into start, sampling, learning, other training, stop and waiting on
the controller; see :mod:`tuner.execution.profiler`). Existing trials have no row.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 4


def upgrade() -> None:
    op.create_table(
        "trial_profiles",
        sa.Column(
            "experiment_id",
            sa.Integer,
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("trial_id", sa.String(64), nullable=False),
        sa.Column("cpus", sa.Double, nullable=False),
        sa.Column("hold_s", sa.Double, nullable=False),
        sa.Column("start_s", sa.Double, nullable=False),
        sa.Column("sampling_s", sa.Double, nullable=False),
        sa.Column("learning_s", sa.Double, nullable=False),
        sa.Column("other_training_s", sa.Double, nullable=False),
        sa.Column("stop_s", sa.Double, nullable=False),
        sa.Column("waiting_s", sa.Double, nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "trial_id", name="pk_trial_profiles"),
    )
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION}")


def downgrade() -> None:
    op.drop_table("trial_profiles")
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION - 1}")
