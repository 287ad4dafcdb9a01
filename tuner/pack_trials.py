"""The ``pack_trials`` option's values (``tune.run``, ``TuneConfig``, a spec's key), checked in one
place; what it does: ``tuner.execution.pack_plan``."""

from __future__ import annotations

from typing import Any

__all__ = ["check_pack_trials"]


def check_pack_trials(value: Any) -> None:
    """A ValueError naming ``pack_trials`` unless it is ``"auto"``, False or an int >= 1."""
    if (isinstance(value, str) and value == "auto") or value is False:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"pack_trials must be 'auto', False or an int >= 1 (the most trials per pack), got {value!r}")
