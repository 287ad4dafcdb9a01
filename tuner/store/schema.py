"""Table definitions of the tuner store (SQLAlchemy Core, one MetaData).

Bump :data:`SCHEMA_VERSION` whenever a table changes, and register the upgrade from the previous
version in :data:`MIGRATIONS` so that an existing run directory keeps opening.
"""

from __future__ import annotations

from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

SCHEMA_VERSION = 1

metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, nullable=False),
)

experiments = sa.Table(
    "experiments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("spec", sa.Text, nullable=False),  # JSON
    sa.Column("metric", sa.String(255), nullable=True),
    sa.Column("mode", sa.String(16), nullable=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)

trials = sa.Table(
    "trials",
    metadata,
    sa.Column("trial_id", sa.String(64), primary_key=True),
    sa.Column(
        "experiment_id",
        sa.Integer,
        sa.ForeignKey("experiments.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("trial_index", sa.Integer, nullable=False),
    sa.Column("config", sa.Text, nullable=False),  # JSON, for humans and queries
    sa.Column("config_blob", sa.LargeBinary, nullable=True),  # pickle of the real config (own state)
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("num_failures", sa.Integer, nullable=False, default=0, server_default="0"),
    sa.Column("checkpoint_path", sa.Text, nullable=True),
    sa.Column("last_result", sa.Text, nullable=True),  # JSON
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)

results = sa.Table(
    "results",
    metadata,
    sa.Column("experiment_id", sa.Integer, nullable=False, index=True),
    sa.Column(
        "trial_id",
        sa.String(64),
        sa.ForeignKey("trials.trial_id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("iteration", sa.Integer, nullable=False),
    sa.Column("timestamp", sa.Double, nullable=False),
    sa.Column("data", sa.Text, nullable=False),  # JSON of the whole result dict
    sa.PrimaryKeyConstraint("trial_id", "iteration", name="pk_results"),
)

experiment_state = sa.Table(
    "experiment_state",
    metadata,
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

exploits = sa.Table(
    "exploits",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "experiment_id",
        sa.Integer,
        sa.ForeignKey("experiments.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("trial_id", sa.String(64), nullable=False),  # the trial that took the donor's state
    sa.Column("donor_trial_id", sa.String(64), nullable=False),
    sa.Column("iteration", sa.Integer, nullable=False),  # the trial's iteration when it exploited
    sa.Column("timestamp", sa.Double, nullable=False),
    sa.Column("old_config", sa.Text, nullable=False),  # JSON
    sa.Column("new_config", sa.Text, nullable=False),  # JSON
    sa.Column("checkpoint_path", sa.Text, nullable=True),  # the donor checkpoint restored
)

#: Tables that hold tuner data (everything but ``schema_version``).
DATA_TABLES = (experiments, trials, results, experiment_state, exploits)

#: ``MIGRATIONS[v]`` upgrades a database from version ``v`` to ``v + 1`` inside one transaction.
#: Empty while there is only version 1.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {}
