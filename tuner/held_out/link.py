"""The link between a sweep and its validation, and the validation's report read from its store.

The validation sweep keeps its plan in its store (``experiment_state`` key ``validates``), and
the validated sweep the validation's name (key ``validated_by``), so either leads to the other
from any machine that reaches the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.callback import Callback
from tuner.held_out.plan import ValidationPlan
from tuner.held_out.report import ValidationReport, make_report

__all__ = ["LINK_KEY", "PLAN_KEY", "LinkValidation", "linked_validation", "load_plan", "load_report",
           "validation_path"]

PLAN_KEY = "validates"
LINK_KEY = "validated_by"


class LinkValidation(Callback):
    """Stores the plan in the validation sweep and its name in the validated one, once the
    validation sweep is in its store."""

    def __init__(self, plan: ValidationPlan, url: str, validated_url: str) -> None:
        self.plan, self.url, self.validated_url = plan, url, validated_url

    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        from tuner.store import Store

        experiment_id = info.get("experiment_id")
        if experiment_id is None:
            return
        with Store(self.url, create=False) as store:
            store.save_state(int(experiment_id), PLAN_KEY, json.dumps(self.plan.to_json()).encode("utf-8"))
        with Store(self.validated_url, create=False) as store:
            validated = store.get_experiment(self.plan.sweep)
            if validated is not None:
                name = str(info.get("experiment_name") or "")
                store.save_state(int(validated["id"]), LINK_KEY, name.encode("utf-8"))


def load_plan(store: Any, experiment_id: int) -> ValidationPlan | None:
    """The plan a validation sweep keeps, or None (not a validation)."""
    blob = store.load_state(experiment_id, PLAN_KEY)
    return None if blob is None else ValidationPlan.from_json(json.loads(blob.decode("utf-8")))


def load_report(validation: Any) -> ValidationReport:
    """The report of the validation sweep ``validation`` (an ``ExperimentAnalysis``) as it stands."""
    plan = load_plan(validation._store, validation._experiment_id)  # noqa: SLF001 - its own store
    if plan is None:
        raise ValueError(f"sweep {validation.name!r} is not a validation (it keeps no {PLAN_KEY!r} plan)")
    return make_report(validation.name, plan, validation.trials)


def linked_validation(analysis: Any) -> str | None:
    """The name of the validation of ``analysis``'s sweep, or None when it has none."""
    blob = analysis._store.load_state(analysis._experiment_id, LINK_KEY)  # noqa: SLF001 - its own store
    return None if blob is None else blob.decode("utf-8")


def validation_path(analysis: Any, name: str) -> Path:
    """The run directory of the validation ``name`` of ``analysis``'s sweep (its sibling)."""
    return Path(analysis.experiment_path).parent / name
