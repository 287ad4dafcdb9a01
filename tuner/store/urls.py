"""Database URLs of the store: the default one, the form that is safe to show, and the check every
entry point makes before anything is opened or written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

__all__ = [
    "ALLOWED_FORMS", "check_database_url", "connect_args", "default_database_url", "mask_url", "sqlite_file",
]

#: What a database URL may look like, for error messages.
ALLOWED_FORMS = (
    "sqlite:///PATH (a SQLite file), postgresql+psycopg://USER[:PASSWORD]@HOST[:PORT]/DATABASE, "
    "or another SQLAlchemy URL whose driver is installed"
)

#: PostgreSQL through libpq: give up on a host that does not answer, rather than hang.
CONNECT_TIMEOUT_S = 10

_PASSWORD_RE = re.compile(r"(://[^:/?#@]*:)[^@/]*@")


def default_database_url(run_dir: str | Path) -> str:
    """The embedded default: ``sqlite:///<absolute run_dir>/tuner.db``."""
    path = Path(run_dir).expanduser().resolve() / "tuner.db"
    return f"sqlite:///{path.as_posix()}"


def mask_url(url: str | sa.URL) -> str:
    """``url`` with any password replaced by ``***`` (safe to log or display)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that cannot be parsed is still shown, redacted
        return _PASSWORD_RE.sub(r"\1***@", str(url))


def check_database_url(url: object, field: str = "database_url") -> sa.URL:
    """``url`` parsed, once its dialect and driver are known to be importable; else one
    ValueError naming ``field`` and the allowed forms (the password masked). Connects to nothing."""
    if isinstance(url, sa.URL):
        parsed = url
    elif not isinstance(url, str) or not url.strip():
        raise ValueError(f"{field} must be a database URL ({ALLOWED_FORMS}), got {url!r}")
    else:
        try:
            parsed = make_url(url)
        except Exception:  # noqa: BLE001 - SQLAlchemy's ArgumentError and ValueErrors of its parser
            raise ValueError(
                f"{field}: {mask_url(url)!r} is not a database URL; expected {ALLOWED_FORMS}"
            ) from None
    try:
        dialect = parsed.get_dialect()
    except Exception:  # noqa: BLE001 - NoSuchModuleError: no such dialect or driver
        raise ValueError(
            f"{field}: unknown database {parsed.drivername!r} in {mask_url(parsed)!r}; expected {ALLOWED_FORMS}"
        ) from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise ValueError(
            f"{field}: the driver of {parsed.drivername!r} is not installed ({exc}); "
            f"install it, or use {ALLOWED_FORMS}"
        ) from None
    return parsed


def sqlite_file(url: sa.URL) -> Path | None:
    """The file a SQLite URL opens, as an absolute path (None for an in-memory database, a
    ``file:`` URI or another database)."""
    if url.get_backend_name() != "sqlite":
        return None
    db = url.database or ""
    if db in ("", ":memory:") or "mode=memory" in db or db.startswith("file:"):
        return None
    return Path(db).absolute()


def connect_args(url: sa.URL) -> dict[str, Any]:
    """Driver arguments of a connection to ``url``: a connect timeout for libpq's drivers, unless
    the URL sets its own."""
    if url.get_backend_name() == "postgresql" and url.get_driver_name() in ("psycopg", "psycopg2") and (
        "connect_timeout" not in url.query
    ):
        return {"connect_timeout": CONNECT_TIMEOUT_S}
    return {}
