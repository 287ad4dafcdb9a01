"""Fixtures of the store tests: every test runs on SQLite (embedded default) and PostgreSQL."""

from __future__ import annotations

import os
import uuid

import pytest
import sqlalchemy as sa

from tuner.store import mask_url
from tuner.store.schema import alembic_metadata, metadata

PG_URL = os.environ.get("TUNER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL URL whose search_path is a schema of this test session only, so that parallel
    test runs against the same database do not see each other's tables."""
    try:
        import psycopg  # noqa: F401
    except ImportError as e:  # pragma: no cover
        pytest.skip(f"psycopg is not installed ({e}); cannot test PostgreSQL")
    name = f"tuner_store_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    except sa.exc.OperationalError as e:
        admin.dispose()
        pytest.skip(f"PostgreSQL is unreachable at {mask_url(PG_URL)}: {e.orig}")
    url = sa.make_url(PG_URL).update_query_dict({"options": f"-csearch_path={name}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    admin.dispose()


def drop_everything(url: str) -> None:
    """Drop every table of the store (schema_version and alembic_version included)."""
    engine = sa.create_engine(url)
    try:
        metadata.drop_all(engine)
        alembic_metadata.drop_all(engine)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        # A directory that does not exist yet: the store creates it.
        from tuner.store import default_database_url

        return default_database_url(tmp_path / "run")
    u = request.getfixturevalue("pg_url")
    drop_everything(u)
    return u
