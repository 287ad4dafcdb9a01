"""The store's exception (its own module so that the migrations can raise it too)."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(RuntimeError):
    """Any failure of the store: bad schema version, a failed background write, a closed store."""
