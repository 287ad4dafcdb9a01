"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}

#: The schema version this revision leaves the database at (also written to ``schema_version``).
SCHEMA_VERSION = None


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION}")


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
    op.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION - 1}")
