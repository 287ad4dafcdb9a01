"""Alembic environment of the tuner store.

Run through :func:`tuner.store.upgrade`, which passes an open connection in
``config.attributes["connection"]`` and runs every revision in the transaction it began. Without
one, the database at the ``sqlalchemy.url`` main option is opened here; offline mode
(``--sql``) writes the SQL for that URL's dialect instead.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context

from tuner.store.schema import metadata

config = context.config


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=metadata,
        # SQLite cannot ALTER most things: batch operations copy the table instead.
        render_as_batch=True,
        compare_type=True,
        **kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("the tuner store's migrations need a connection or the sqlalchemy.url option")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            _configure(connection=connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
