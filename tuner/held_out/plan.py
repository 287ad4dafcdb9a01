"""What a validation sweep runs: the sweep's K best configs, each on N seeds the sweep never used.

RL's seed noise makes the best of many trials partly a lucky draw (Eimer et al., ICML 2023), so
the answer a sweep gives is checked by training its best configs again on held-out seeds. A
config is the trial's config without its seed: trials of one config under several seeds (a
``seed`` grid, ``repeat: N``) count as one candidate, ranked by their mean final score.

The validation sweep is an ordinary sweep (stored, listed, resumable, submittable): a spec
document with the candidates' configs as ``points_to_evaluate`` and ``num_samples: 0``, trial
``k * N + j`` being candidate ``k`` on held-out seed ``j``; no scheduler (every trial runs to the
sweep's own ``stop``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Mapping, Sequence

from schedulers.trial_status import TrialStatus
from schedulers.validation import is_int

__all__ = ["FIRST_HELD_OUT_SEED", "Candidate", "ValidationPlan", "held_out_seeds", "pick_candidates",
           "validation_document"]

#: Held-out seeds are the first N ints from here that no trial of the sweep used.
FIRST_HELD_OUT_SEED = 10_000
#: The config key a trainer's seed is (PPO, DQN, SAC and function trainables that read it).
SEED_KEY = "seed"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One of the sweep's best configs: its rank (1 is the best) and score in the sweep, its
    trials there and the config (without a seed)."""

    rank: int
    score: float
    trial_ids: tuple[str, ...]
    config: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ValidationPlan:
    """The candidates and the held-out seeds of a validation sweep, and what it ranks by."""

    sweep: str
    metric: str
    mode: str
    candidates: tuple[Candidate, ...]
    seeds: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"format": 1, "sweep": self.sweep, "metric": self.metric, "mode": self.mode,
                "seeds": list(self.seeds), "candidates": [dataclasses.asdict(c) for c in self.candidates]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ValidationPlan:
        candidates = tuple(Candidate(rank=int(c["rank"]), score=float(c["score"]), trial_ids=tuple(c["trial_ids"]),
                                     config=dict(c["config"])) for c in data["candidates"])
        return cls(sweep=str(data["sweep"]), metric=str(data["metric"]), mode=str(data["mode"]),
                   candidates=candidates, seeds=tuple(int(s) for s in data["seeds"]))

    def trial_configs(self) -> list[dict[str, Any]]:
        """Each validation trial's config, in trial order (candidate-major)."""
        return [{**copy.deepcopy(c.config), SEED_KEY: seed} for c in self.candidates for seed in self.seeds]


def check_request(top_k: Any, seeds: Any) -> None:
    """``top_k`` and ``seeds`` as ``validate`` takes them: a ValueError naming the bad one."""
    if not is_int(top_k) or top_k < 1:
        raise ValueError(f"top_k must be an int >= 1 (the sweep's best configs to validate), got {top_k!r}")
    if not is_int(seeds) or seeds < 1:
        raise ValueError(f"seeds must be an int >= 1 (held-out seeds per config), got {seeds!r}")


def held_out_seeds(used: set[int], count: int) -> list[int]:
    """The first ``count`` seeds from :data:`FIRST_HELD_OUT_SEED` that are not in ``used``."""
    seeds: list[int] = []
    seed = FIRST_HELD_OUT_SEED
    while len(seeds) < count:
        if seed not in used:
            seeds.append(seed)
        seed += 1
    return seeds


def _without_seed(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in config.items() if k != SEED_KEY}


def pick_candidates(trials: Sequence[Any], metric: str, mode: str, top_k: int) -> list[Candidate]:
    """The ``top_k`` best configs of the sweep's finished trials (``TrialRecord`` s) by the mean
    of their trials' final ``metric``; a ValueError when no trial finished with a finite score."""
    from tuner.best_rule import number_at

    groups: dict[str, tuple[dict[str, Any], list[str], list[float]]] = {}
    for trial in trials:
        score = number_at(trial.last_result, metric)
        if trial.status != TrialStatus.TERMINATED or score is None or not math.isfinite(score):
            continue
        config = _without_seed(trial.config)
        held = groups.setdefault(repr(sorted(config.items(), key=lambda kv: kv[0])), (config, [], []))
        held[1].append(trial.trial_id)
        held[2].append(float(score))
    if not groups:
        raise ValueError(f"validate: no trial of the sweep finished (TERMINATED) with a finite {metric!r}: nothing "
                         f"to validate")
    sign = -1.0 if mode == "max" else 1.0
    ranked = sorted(groups.values(), key=lambda g: sign * sum(g[2]) / len(g[2]))
    return [Candidate(rank=i + 1, score=sum(scores) / len(scores), trial_ids=tuple(ids), config=config)
            for i, (config, ids, scores) in enumerate(ranked[:top_k])]


def used_seeds(trials: Sequence[Any]) -> set[int]:
    """The seeds the sweep's trials were given."""
    return {int(t.config[SEED_KEY]) for t in trials if is_int(t.config.get(SEED_KEY))}


def validation_document(plan: ValidationPlan, base: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The validation sweep's spec: ``base`` (the sweep's own spec) for the trainable, its stop,
    resources and storage; the plan's trials as points; no scheduler, no searched value."""
    keep = ("trainable", "stop", "resources", "max_concurrent_trials", "cpu_share", "max_failures",
            "checkpoint_freq", "storage_path", "database_url", "tensorboard")
    document = {key: copy.deepcopy(base[key]) for key in keep if base.get(key) is not None}
    document.update(
        name=name,
        description=f"validation of sweep {plan.sweep}: its {len(plan.candidates)} best config(s) on "
                    f"{len(plan.seeds)} held-out seed(s)",
        metric=plan.metric, mode=plan.mode, num_samples=0, config={}, checkpoint_at_end=True,
        search={"type": "random", "points_to_evaluate": plan.trial_configs()},
    )
    return document

