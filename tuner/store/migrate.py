"""Schema versions of the tuner store and their upgrade (Alembic, run programmatically).

A database knows its version twice: the ``schema_version`` table (the store's own marker, read on
every open; tuner builds older than the migrations read it too, so they refuse a newer database
with a clear message) and Alembic's ``alembic_version`` (the revision, see
:data:`tuner.store.schema.REVISIONS`). Every revision updates both in the same transaction.
Databases made before the migrations existed have no ``alembic_version``: :func:`upgrade` stamps
the revision of their ``schema_version`` before migrating.

:class:`~tuner.store.Store` never migrates on its own: it opens a database of its own version,
creates a new one at that version, and refuses any other version with a :class:`StoreError`
that says how to upgrade (``Store(url, upgrade=True)`` upgrades in place).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from . import schema
from .errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["upgrade", "database_version", "MIGRATIONS_DIR"]

logger = logging.getLogger(__name__)

#: The Alembic script directory shipped in the package.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

# An arbitrary key: PostgreSQL sessions that upgrade the same database take turns on it.
_PG_LOCK_KEY = 0x7475_6E65_7200  # "tuner"


def _mask(url: Any) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that cannot be parsed is still shown, redacted
        return "<database url>"


def upgrade_hint(url: Any) -> str:
    """How to upgrade the database at ``url`` (part of the store's error messages)."""
    return (
        f"back it up, then run tuner.store.upgrade({_mask(url)!r}) "
        "(python -c \"import tuner.store; tuner.store.upgrade('URL')\"), "
        "or open it with Store(url, upgrade=True)"
    )


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic ``Config`` for the shipped migrations (no alembic.ini), migrating ``connection``
    (in its current transaction) or else the database at ``url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", str(url).replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _table_names(conn: Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def read_schema_version(conn: Connection, names: set[str] | None = None) -> int | None:
    """The version in ``schema_version``, or None if the table is missing or empty."""
    if names is None:
        names = _table_names(conn)
    if schema.schema_version.name not in names:
        return None
    found = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
    return None if found is None else int(found)


def holds_data(conn: Connection, names: set[str]) -> bool:
    """True if the database holds tuner experiments (whatever their version)."""
    return schema.experiments.name in names and bool(
        conn.execute(sa.select(sa.func.count()).select_from(schema.experiments)).scalar()
    )


def create_newest(conn: Connection) -> None:
    """Create every table at the newest version, mark it so in both version tables (fast path of
    a new database: no migration is replayed)."""
    schema.metadata.create_all(conn, checkfirst=True)
    conn.execute(schema.schema_version.delete())
    conn.execute(schema.schema_version.insert().values(version=schema.SCHEMA_VERSION))
    stamp(conn, schema.HEAD_REVISION)


def stamp(conn: Connection, revision: str) -> None:
    """Record in ``alembic_version`` that the database is at ``revision`` (no migration runs)."""
    schema.alembic_version.create(conn, checkfirst=True)
    conn.execute(schema.alembic_version.delete())
    conn.execute(schema.alembic_version.insert().values(version_num=revision))


def database_version(url: str | sa.URL) -> int | None:
    """The schema version of the database at ``url`` (None: no tuner schema there)."""
    if _missing_sqlite_file(make_url(url)):
        return None
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            return read_schema_version(conn)
    finally:
        engine.dispose()


def _engine(url: str | sa.URL) -> Engine:
    u = make_url(url)
    if u.get_backend_name() != "sqlite":
        return sa.create_engine(u, poolclass=sa.pool.NullPool)
    db = u.database or ""
    if db in ("", ":memory:") or "mode=memory" in db:
        raise StoreError("an in-memory SQLite database is always new: there is nothing to upgrade")
    # pysqlite would begin its transaction only at the first INSERT/UPDATE, leaving DDL outside:
    # begin explicitly so that a failed migration leaves nothing behind (SQLite has
    # transactional DDL). Foreign keys stay off (SQLite's default), as batch mode needs: with them
    # on, dropping the old copy of a table would cascade to the rows that point at it.
    engine = sa.create_engine(
        u,
        poolclass=sa.pool.NullPool,
        connect_args={"timeout": 30.0, "isolation_level": None},
    )

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _missing_sqlite_file(u: sa.URL) -> bool:
    db = u.database or ""
    if u.get_backend_name() != "sqlite" or db.startswith("file:") or db in ("", ":memory:"):
        return False
    return not Path(db).expanduser().is_file()


def upgrade(url: str | sa.URL) -> tuple[int | None, int]:
    """Upgrade the tuner database at ``url`` to this version's schema, in one transaction.

    Returns ``(found, now)``: the version found (None if there was no tuner schema, which creates
    one) and :data:`~tuner.store.schema.SCHEMA_VERSION`. A database already at this version is left
    as it is; one of a newer version raises :class:`StoreError`. Back the database up first.
    """
    u = make_url(url)
    if _missing_sqlite_file(u):
        raise StoreError(f"no SQLite database at {u.database}: nothing to upgrade")
    engine = _engine(u)
    try:
        with engine.connect() as conn:
            return upgrade_connection(conn, display=_mask(u))
    finally:
        engine.dispose()


def upgrade_connection(conn: Connection, *, display: str = "database") -> tuple[int | None, int]:
    """:func:`upgrade` on an open connection (committed here, in one transaction)."""
    target = schema.SCHEMA_VERSION
    with conn.begin():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
        names = _table_names(conn)
        found = read_schema_version(conn, names)
        if found is None:
            if holds_data(conn, names):
                raise StoreError(
                    f"{display} holds tuner tables but no schema version: cannot tell how to upgrade it"
                )
            create_newest(conn)
            logger.info("tuner store %s: created schema version %d", display, target)
            return None, target
        if found > target:
            raise StoreError(
                f"{display} has tuner schema version {found}, newer than this tuner's {target}: "
                "upgrade tuner to open it"
            )
        if found not in schema.REVISIONS:
            raise StoreError(f"{display} has tuner schema version {found}, which no migration knows")
        current = _alembic_revision(conn, names)
        if current != schema.REVISIONS[found]:
            # Made before the migrations (no alembic_version), or stamped inconsistently: the
            # store's own marker decides, it is what every store version checks.
            stamp(conn, schema.REVISIONS[found])
        if found < target:
            from alembic import command

            logger.info("tuner store %s: upgrading schema version %d -> %d", display, found, target)
            command.upgrade(alembic_config(conn), schema.HEAD_REVISION)
            now = read_schema_version(conn)
            if now != target:  # pragma: no cover - a revision forgot to bump schema_version
                raise StoreError(f"{display}: the migrations left schema version {now}, not {target}")
    return found, target


def _alembic_revision(conn: Connection, names: set[str]) -> str | None:
    if schema.alembic_version.name not in names:
        return None
    rows = conn.execute(sa.select(schema.alembic_version.c.version_num)).scalars().all()
    return rows[0] if len(rows) == 1 else None
