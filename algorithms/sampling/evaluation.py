"""Evaluation episodes: whole episodes played with the trainer's current policy, none learned from.

An :class:`EpisodeRunner` owns a few envs of its own and plays episodes with a copy of the
policy (or, in the learner's process, the learner's own policy object), stepping its envs
together with one policy call per step. Each episode starts from a seed of its own
(:func:`evaluation_seeds`), outside the range any training env is seeded from, so evaluation
never replays a training episode and is the same set of episodes at every evaluation of a trial.

An :class:`Evaluator` plays one evaluation: ``duration`` episodes split over its runners (in the
learner's process, or ``num_workers`` Ray actors in the trial's placement group); with the unit
"timesteps", each runner starts episodes until its share of env steps is reached and plays
those it started to their end (so no episode is cut short, and short episodes are not favoured).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

import numpy as np

from algorithms.core.evaluation_config import EvaluationSettings
from algorithms.data.normalization import FILTER_KEY, NormalizerStats
from algorithms.data.observations import batch_of

__all__ = ["EVALUATION_RESULT_KEYS", "EVAL_SEED_LOW", "EpisodeRunner", "Evaluator", "evaluation_seeds"]

logger = logging.getLogger(__name__)

#: Evaluation seeds lie in [EVAL_SEED_LOW, 2**32): training envs are seeded below 2**31 (plus
#: their index in a vector env), so the two never meet.
EVAL_SEED_LOW = 2**31 + 2**20
_SPAN = 2**32 - EVAL_SEED_LOW
#: Seeds a runner may take in one evaluation with the unit "timesteps" (runner j starts at j * this).
_RUNNER_STRIDE = 2**16


def evaluation_seeds(seed: int, start: int, count: int) -> list[int]:
    """Env seeds ``start .. start + count - 1`` of the evaluation episodes of a trial seeded ``seed``."""
    base = (int(seed) * 65_537) % _SPAN
    return [EVAL_SEED_LOW + (base + start + i) % _SPAN for i in range(count)]


class EpisodeRunner:
    """Plays whole episodes of ``num_envs`` envs of its own with a policy (see the module)."""

    def __init__(self, *, env: Any, env_config: Mapping[str, Any], num_envs: int,
                 policy_factory: Callable[..., Any] | None = None, policy_kwargs: Mapping[str, Any] | None = None,
                 policy: Any = None, single_thread: bool = True) -> None:
        from algorithms.core.agent import make_single_env
        from algorithms.envs.registry import EnvContext

        if callable(env):
            self.envs = [env(EnvContext(env_config, 0, i)) for i in range(num_envs)]
        else:
            self.envs = [make_single_env(env, env_config) for _ in range(num_envs)]
        self.observation_space = self.envs[0].observation_space
        if policy is None:
            assert policy_factory is not None
            if single_thread:  # as a rollout actor: a torch policy with one thread
                import sys

                if "torch" in sys.modules:
                    sys.modules["torch"].set_num_threads(1)
            policy = policy_factory(**dict(policy_kwargs or {}))
        self.policy = policy
        self.normalizer: NormalizerStats | None = None  # the trial's statistics, frozen while evaluating

    def ready(self) -> bool:
        """True once built (an actor's start is awaited with it)."""
        return True

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        if FILTER_KEY in weights:
            weights = dict(weights)
            self.normalizer = NormalizerStats.from_state(weights.pop(FILTER_KEY))
        self.policy.load_weights(weights)

    def run(self, seeds: list[int], max_steps: int | None = None, explore: bool = False,
            weights_box: list[Any] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """(returns, lengths, env steps) of episodes started from ``seeds`` in order: all of them
        (``max_steps`` None), or as many as start before ``max_steps`` env steps were taken (each
        played to its end). ``weights_box``: ``[weights]`` or ``[ObjectRef]`` to load first."""
        if weights_box:
            weights = weights_box[0]
            if type(weights).__name__ == "ObjectRef":
                import ray

                weights = ray.get(weights)
            self.set_weights(weights)
        rng = np.random.default_rng(seeds[0] if seeds else 0)
        self.policy.begin_fragment()
        returns: list[float] = []
        lens: list[int] = []
        steps = 0
        pending = list(seeds)
        live: dict[int, list[Any]] = {}  # env index -> [obs, return so far, length so far]

        def start(i: int) -> None:
            if pending and (max_steps is None or steps < max_steps):
                obs, _ = self.envs[i].reset(seed=pending.pop(0))
                live[i] = [obs, 0.0, 0]

        for i in range(len(self.envs)):
            start(i)
        while live:
            order = sorted(live)
            batch = batch_of(self.observation_space, [live[i][0] for i in order])
            if self.normalizer is not None:
                batch = self.normalizer.normalize(batch)
            env_actions = self.policy.act(batch, rng, explore=explore)[0]
            for row, i in enumerate(order):
                obs, reward, terminated, truncated, _ = self.envs[i].step(env_actions[row])
                episode = live[i]
                episode[0], episode[1], episode[2] = obs, episode[1] + float(reward), episode[2] + 1
                steps += 1
                if terminated or truncated:
                    returns.append(episode[1])
                    lens.append(episode[2])
                    del live[i]
                    start(i)
        return np.asarray(returns, dtype=np.float64), np.asarray(lens, dtype=np.int64), steps

    def close(self) -> None:
        for env in self.envs:
            env.close()


class Evaluator:
    """One trainer's evaluation: its runners and the metrics of an evaluation (see the module).

    ``group`` and ``first_bundle``: the trial's placement group and the bundle of the first
    evaluation actor (one bundle each, ``num_cpus`` CPUs; 0: any bundle, no CPU). Actors start
    at the first evaluation and are replaced once when they die during one.
    """

    def __init__(self, settings: EvaluationSettings, *, env: Any, seed: int, policy_factory: Callable[..., Any],
                 policy_kwargs: Mapping[str, Any], local_policy: Any, num_cpus: float,
                 group: Any = None, first_bundle: int = 1) -> None:
        self.settings = settings
        self._env = env
        self._seed = seed
        self._factory, self._policy_kwargs = policy_factory, dict(policy_kwargs)
        self._local_policy = local_policy
        self._cpus = float(num_cpus)
        self._group, self._first_bundle = group, first_bundle
        self._local: EpisodeRunner | None = None
        self._actors: list[Any] = []

    def _runner_kwargs(self) -> dict[str, Any]:
        s = self.settings
        return dict(env=self._env, env_config=dict(s.env_config), num_envs=s.num_envs,
                    policy_factory=self._factory, policy_kwargs=self._policy_kwargs)

    def _start_actor(self, index: int) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options: dict[str, Any] = {"num_cpus": self._cpus}
        if self._group is not None:
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=self._group,
                placement_group_bundle_index=self._first_bundle + index if self._cpus > 0 else -1)
        return _remote_runner().options(**options).remote(**self._runner_kwargs())

    def _plan(self) -> list[tuple[list[int], int | None]]:
        """(seeds, step budget) of each runner."""
        s = self.settings
        runners = max(1, s.num_workers)
        if s.unit == "episodes":
            shares = [s.duration // runners + (1 if j < s.duration % runners else 0) for j in range(runners)]
            starts = np.cumsum([0] + shares[:-1])
            return [(evaluation_seeds(self._seed, int(starts[j]), shares[j]), None)
                    for j in range(runners) if shares[j]]
        steps = [s.duration // runners + (1 if j < s.duration % runners else 0) for j in range(runners)]
        return [(evaluation_seeds(self._seed, j * _RUNNER_STRIDE, _RUNNER_STRIDE), steps[j])
                for j in range(runners) if steps[j]]

    def evaluate(self, weights: Callable[[], Mapping[str, Any]],
                 normalizer: NormalizerStats | None = None) -> dict[str, float]:
        """Play one evaluation with the policy's current ``weights`` (and the trial's
        ``normalizer`` statistics, frozen) and return its metrics."""
        s = self.settings
        start = time.perf_counter()
        plan = self._plan()
        if s.num_workers == 0:
            if self._local is None:
                self._local = EpisodeRunner(**{**self._runner_kwargs(), "policy": self._local_policy})
            self._local.normalizer = normalizer
            parts = [self._local.run(seeds, budget, s.explore) for seeds, budget in plan]
        else:
            parts = self._run_on_actors(plan, weights)
        returns = np.concatenate([p[0] for p in parts])
        lens = np.concatenate([p[1] for p in parts])
        return summarize(returns, lens, sum(p[2] for p in parts), time.perf_counter() - start)

    def _run_on_actors(self, plan: list[tuple[list[int], int | None]],
                       weights: Callable[[], Mapping[str, Any]]) -> list[tuple[np.ndarray, np.ndarray, int]]:
        import ray
        from ray.exceptions import RayActorError

        while len(self._actors) < len(plan):
            self._actors.append(self._start_actor(len(self._actors)))
        box = [ray.put(dict(weights()))]
        refs = [self._actors[j].run.remote(seeds, budget, self.settings.explore, box)
                for j, (seeds, budget) in enumerate(plan)]
        parts = []
        for j, ref in enumerate(refs):
            try:
                parts.append(ray.get(ref))
            except RayActorError as error:  # died: one new actor plays its share again
                logger.warning("evaluation actor %d died; starting a replacement (%s)", j,
                               str(error).splitlines()[0][:200])
                self._actors[j] = self._start_actor(j)
                seeds, budget = plan[j]
                parts.append(ray.get(self._actors[j].run.remote(seeds, budget, self.settings.explore, box)))
        return parts

    def stop(self) -> None:
        """Close the envs and end the actors."""
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._actors:
            import ray

            for actor in self._actors:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            self._actors = []


#: The keys of an evaluation's result (under ``evaluation/``).
EVALUATION_RESULT_KEYS = ("episode_return_mean", "episode_return_std", "episode_return_min", "episode_return_max",
                          "episode_len_mean", "num_episodes", "env_steps", "time_s", "iteration")


def summarize(returns: np.ndarray, lens: np.ndarray, env_steps: int, seconds: float) -> dict[str, float]:
    """An evaluation's metrics (RLlib's names); NaN for the episode statistics when none ended."""
    nan = float("nan")
    some = len(returns) > 0
    return {
        "episode_return_mean": float(returns.mean()) if some else nan,
        "episode_return_std": float(returns.std()) if some else nan,
        "episode_return_min": float(returns.min()) if some else nan,
        "episode_return_max": float(returns.max()) if some else nan,
        "episode_len_mean": float(lens.mean()) if some else nan,
        "num_episodes": int(len(returns)),
        "env_steps": int(env_steps),
        "time_s": float(seconds),
    }


_REMOTE: Any = None


def _remote_runner() -> Any:
    """``EpisodeRunner`` as a Ray actor class (made once, when the first evaluation actor starts)."""
    global _REMOTE
    if _REMOTE is None:
        import ray

        _REMOTE = ray.remote(max_restarts=0, max_task_retries=0)(EpisodeRunner)
    return _REMOTE
