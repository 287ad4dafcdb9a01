"""The store's exception (its own module so that the migrations can raise it too)."""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["NoSchemaError", "StoreError", "error_line"]


class StoreError(RuntimeError):
    """Any failure of the store: bad schema version, a failed background write, a closed store."""


class NoSchemaError(StoreError):
    """A database opened with ``create=False`` (to be read) is empty or holds no tuner table: not
    a tuner database, or not yet one (the sweep that creates it may be starting right now)."""


def error_line(exc: BaseException, url: sa.URL) -> str:
    """The first line of a database error (the driver's own message where there is one), with
    the password of ``url`` masked."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    text = lines[0].strip() if lines else type(orig).__name__
    return text.replace(str(url.password), "***") if url.password else text
