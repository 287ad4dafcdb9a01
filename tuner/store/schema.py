"""Table definitions of the tuner store (SQLAlchemy Core, one MetaData): always the newest schema.

Schema versions and their migrations:

====  ========  =======================================================================
  v   revision  change
====  ========  =======================================================================
  1   0001      schema_version, experiments, trials, results, experiment_state
  2   0002      exploits (PBT lineage); trials.metric_value and its index (best trial)
  3   0003      checkpoints (every checkpoint of a trial, its metrics, whether retention
                deleted it); trials.trial_dir
  4   0004      trial_profiles (where each trial's time went: tuner show NAME --profile)
  5   0005      trial_profiles.rollout_start_s (rollout actors' start, apart from sampling)
  6   0006      experiments.owner, job_id, job_address, heartbeat_at (who started a sweep,
                as which Ray Job, and whether its driver is still alive)
====  ========  =======================================================================

Changing a table: edit it here, bump :data:`SCHEMA_VERSION`, add the Alembic revision that does
the same to a database of the previous version to ``migrations/versions/`` (``down_revision`` the
previous head; it also sets ``schema_version`` to the new number; ``op.batch_alter_table`` for any
ALTER so that SQLite works) and register it in :data:`REVISIONS`. The test
``test_migrations_match_the_tables`` fails until the migrations build exactly these tables.
"""

from __future__ import annotations

import sqlalchemy as sa

#: The version of the tables below; the ``schema_version`` table of a database holds its version.
SCHEMA_VERSION = 6

#: Alembic revision id that leaves a database at each schema version.
REVISIONS: dict[int, str] = {1: "0001", 2: "0002", 3: "0003", 4: "0004", 5: "0005", 6: "0006"}

#: The newest revision (what a database made by :meth:`Store` is stamped with).
HEAD_REVISION = REVISIONS[SCHEMA_VERSION]

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
    sa.Column("owner", sa.String(255), nullable=True),  # who started it: "user@host" (of tuner submit for a job)
    sa.Column("job_id", sa.String(255), nullable=True),  # its Ray Job (tuner submit), else NULL
    sa.Column("job_address", sa.Text, nullable=True),  # the Jobs API it was submitted to
    # Written by a running driver every few seconds: a RUNNING sweep whose heartbeat stopped
    # lost its driver (killed, its node gone) and is shown as INTERRUPTED.
    sa.Column("heartbeat_at", sa.Double, nullable=True),
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
    # The experiment's metric (experiments.metric, flattened key) in last_result when it is a finite
    # number, else NULL: written with last_result, so the best trial is an index lookup.
    sa.Column("metric_value", sa.Double, nullable=True),
    sa.Column("trial_dir", sa.Text, nullable=True),  # the trial's directory (checkpoints, files)
    sa.Index("ix_trials_experiment_metric", "experiment_id", "metric_value"),
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

checkpoints = sa.Table(
    "checkpoints",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "experiment_id",
        sa.Integer,
        sa.ForeignKey("experiments.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("trial_id", sa.String(64), nullable=False),
    sa.Column("path", sa.Text, nullable=False),  # the checkpoint directory
    sa.Column("iteration", sa.Integer, nullable=False),  # the trial's iteration it covers
    sa.Column("timestamp", sa.Double, nullable=False),  # when it was registered
    sa.Column("metrics", sa.Text, nullable=True),  # JSON of the result it was taken with
    sa.Column("deleted", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.Column("deleted_at", sa.Double, nullable=True),  # when retention (num_to_keep) deleted it
    sa.UniqueConstraint("trial_id", "path", name="uq_checkpoints_trial_path"),
)

trial_profiles = sa.Table(
    "trial_profiles",
    metadata,
    sa.Column(
        "experiment_id",
        sa.Integer,
        sa.ForeignKey("experiments.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("trial_id", sa.String(64), nullable=False),
    sa.Column("cpus", sa.Double, nullable=False),  # the CPUs its placement group holds
    sa.Column("hold_s", sa.Double, nullable=False),  # seconds holding them, the sum of the parts below
    sa.Column("start_s", sa.Double, nullable=False),  # actor boot, setup, restore
    sa.Column("rollout_start_s", sa.Double, nullable=False, server_default="0"),  # rollout actors' start
    sa.Column("sampling_s", sa.Double, nullable=False),  # the trainer's sample_time_s
    sa.Column("learning_s", sa.Double, nullable=False),  # the trainer's learn_time_s
    sa.Column("other_training_s", sa.Double, nullable=False),  # the rest of step()
    sa.Column("stop_s", sa.Double, nullable=False),  # cleanup
    sa.Column("waiting_s", sa.Double, nullable=False),  # held, waiting on the controller
    sa.PrimaryKeyConstraint("experiment_id", "trial_id", name="pk_trial_profiles"),
)

#: Tables that hold tuner data (everything but ``schema_version``).
DATA_TABLES = (experiments, trials, results, experiment_state, exploits, checkpoints, trial_profiles)

#: Alembic's own bookkeeping table (the revision a database is at), as Alembic creates it. Not part
#: of :data:`metadata`: the store writes it when it creates a database, Alembic keeps it afterwards.
alembic_metadata = sa.MetaData()
alembic_version = sa.Table(
    "alembic_version",
    alembic_metadata,
    sa.Column("version_num", sa.String(32), nullable=False),
    sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)
