"""Schema version 5: ``trial_profiles.rollout_start_s``, the seconds a trial's rollout actors took
to give their first fragment (started, or taken over from the trial before), apart from sampling.
Existing rows get 0: their rollout actors' start was booked as sampling.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 5


def upgrade() -> None:
    with op.batch_alter_table("trial_profiles") as batch:
        batch.add_column(sa.Column("rollout_start_s", sa.Double, nullable=False, server_default="0"))
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION}")


def downgrade() -> None:
    with op.batch_alter_table("trial_profiles") as batch:
        batch.drop_column("rollout_start_s")
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION - 1}")
