"""Schema version 1: experiments, trials, results, experiment_state (as first shipped).

The tables are frozen copies of the version-1 definitions: never edit them to follow
:mod:`tuner.store.schema`; later revisions change them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA_VERSION = 1


def upgrade() -> None:
    op.create_table(
        "schema_version",
        sa.Column("version", sa.Integer, nullable=False),
    )
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("metric", sa.String(255), nullable=True),
        sa.Column("mode", sa.String(16), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "trials",
        sa.Column("trial_id", sa.String(64), primary_key=True),
        sa.Column(
            "experiment_id",
            sa.Integer,
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("trial_index", sa.Integer, nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("config_blob", sa.LargeBinary, nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("num_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("checkpoint_path", sa.Text, nullable=True),
        sa.Column("last_result", sa.Text, nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_index("ix_trials_experiment_id", "trials", ["experiment_id"])
    op.create_table(
        "results",
        sa.Column("experiment_id", sa.Integer, nullable=False),
        sa.Column(
            "trial_id",
            sa.String(64),
            sa.ForeignKey("trials.trial_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("iteration", sa.Integer, nullable=False),
        sa.Column("timestamp", sa.Double, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "iteration", name="pk_results"),
    )
    op.create_index("ix_results_experiment_id", "results", ["experiment_id"])
    op.create_table(
        "experiment_state",
        sa.Column(
            "experiment_id",
            sa.Integer,
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.LargeBinary, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "key", name="pk_experiment_state"),
    )
    op.execute(f"INSERT INTO schema_version (version) VALUES ({SCHEMA_VERSION})")


def downgrade() -> None:
    for table in ("experiment_state", "results", "trials", "experiments", "schema_version"):
        op.drop_table(table)
