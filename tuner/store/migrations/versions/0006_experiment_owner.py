"""Schema version 6: ``experiments.owner``, ``job_id``, ``job_address`` and ``heartbeat_at``: who
started a sweep, as which Ray Job (``tuner submit``), and when its driver last said it is alive.
Existing rows get NULL: nothing is known of their drivers.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 6


def upgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("owner", sa.String(255), nullable=True))
        batch.add_column(sa.Column("job_id", sa.String(255), nullable=True))
        batch.add_column(sa.Column("job_address", sa.Text, nullable=True))
        batch.add_column(sa.Column("heartbeat_at", sa.Double, nullable=True))
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION}")


def downgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        for column in ("heartbeat_at", "job_address", "job_id", "owner"):
            batch.drop_column(column)
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION - 1}")
