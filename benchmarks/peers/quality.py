"""What every system of ``benchmarks/tuning_quality.py`` shares: the tasks, their envs, the
protocol's numbers and the outcome.

A task fixes the env, the PPO settings outside the search space, the space, the budget (trials,
env steps per trial, ASHA's rungs on env steps) and the evaluation (deterministic episodes every
``eval_every`` env steps on env seeds no training env gets; a trial's score is its latest
evaluation). Imports nothing heavy at module level: SB3's and RLlib's processes import it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

#: The seeds the systems' answers are trained on for the check: the first ones ``tuner validate``
#: holds out (none of a sweep's trials uses them).
FRESH_SEED_BASE = 10_000
#: Env seeds of the evaluation episodes, far from any training env's (seed x envs + index).
EVAL_SEED_BASE = 1_000_000


@dataclasses.dataclass(frozen=True)
class Space:
    """The searched keys, ours' names: lr log-uniform in ``lr``, the others one of their values."""

    lr: tuple[float, float]
    gamma: tuple[float, ...]
    entropy_coeff: tuple[float, ...]
    num_epochs: tuple[int, ...]
    clip_param: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    env: str  # the gymnasium id every system builds through ``make_env``
    envs: int  # envs per trial, stepped as one vector env in the learner's process
    rollout: int  # steps of each env per update: train batch = rollout x envs
    minibatch: int
    space: Space
    trials: int
    max_steps: int  # env steps per trial (ASHA's max_t)
    grace: int  # ASHA's first rung, in env steps
    reduction_factor: int
    eval_every: int  # env steps between evaluations (a multiple of the train batch)
    eval_episodes: int
    normalize_observations: bool  # running mean/std of observations (frozen while evaluating)
    hidden: tuple[int, ...] = (64, 64)
    gae_lambda: float = 0.95
    vf_coef: float = 0.5  # x the mean squared error (ours: vf_loss_coeff 2 x this)
    max_grad_norm: float = 0.5

    @property
    def batch(self) -> int:
        return self.envs * self.rollout

    @property
    def eval_interval(self) -> int:
        """Iterations between evaluations (an iteration: one train batch, then its update)."""
        return self.eval_every // self.batch


TASKS = {
    # rl-zoo's PPO for MiniGrid (FlatObsWrapper's cousin here: the image codes flattened, / 10).
    "doorkey": Task(
        name="doorkey", env="MiniGrid-DoorKey-5x5-v0", envs=8, rollout=128, minibatch=256,
        space=Space(lr=(1e-4, 3e-3), gamma=(0.95, 0.99), entropy_coeff=(0.0, 0.01, 0.03), num_epochs=(4, 10),
                    clip_param=(0.2,)),
        trials=8, max_steps=100_000, grace=25_000, reduction_factor=2, eval_every=6_144, eval_episodes=10,
        normalize_observations=False),
    # CleanRL's continuous PPO for MuJoCo (examples/mujoco_halfcheetah_ppo.yaml's settings, the
    # observations normalised; rewards as the env gives them: RLlib has no return-based scaling).
    "halfcheetah": Task(
        name="halfcheetah", env="HalfCheetah-v5", envs=4, rollout=512, minibatch=64,
        space=Space(lr=(1e-4, 1e-3), gamma=(0.99, 0.995), entropy_coeff=(0.0,), num_epochs=(5, 10),
                    clip_param=(0.1, 0.2)),
        trials=6, max_steps=150_000, grace=50_000, reduction_factor=3, eval_every=10_240, eval_episodes=5,
        normalize_observations=True),
}


def with_budget(task: Task, trials: int | None = None, max_steps: int | None = None, grace: int | None = None,
                eval_every: int | None = None, eval_episodes: int | None = None) -> Task:
    """``task`` with a smaller (or larger) budget, the rest as it is."""
    changes = {k: v for k, v in (("trials", trials), ("max_steps", max_steps), ("grace", grace),
                                 ("eval_every", eval_every), ("eval_episodes", eval_episodes)) if v is not None}
    return dataclasses.replace(task, **changes)


def check_task(task: Task) -> None:
    """One ValueError naming the flag for a budget the protocol cannot run."""
    if task.eval_every < task.batch or task.eval_every % task.batch:
        raise ValueError(f"--eval-every: must be a multiple of the train batch ({task.batch}), got {task.eval_every}")
    if not 0 < task.grace <= task.max_steps:
        raise ValueError(f"--grace: must be in (0, --max-steps={task.max_steps}], got {task.grace}")
    if task.trials < 1:
        raise ValueError(f"--trials: must be >= 1, got {task.trials}")


def make_env(task_name: str, **kwargs: Any) -> Any:
    """The task's single env as every system builds it (``kwargs``: gymnasium.make's)."""
    import gymnasium as gym

    task = TASKS[task_name]
    if task_name != "doorkey":
        return gym.make(task.env, **kwargs)
    import minigrid  # noqa: F401 - registers MiniGrid's ids
    import numpy as np
    from minigrid.wrappers import ImgObsWrapper

    class FlatCodes(gym.ObservationWrapper):
        """The agent's 7x7x3 view (object, colour, state codes: at most 10), flattened to floats in [0, 1]."""

        def __init__(self, env: Any) -> None:
            super().__init__(env)
            size = int(np.prod(env.observation_space.shape))
            self.observation_space = gym.spaces.Box(0.0, 1.0, (size,), np.float32)

        def observation(self, obs: Any) -> Any:
            return (obs.reshape(-1) / 10.0).astype(np.float32)

    return FlatCodes(ImgObsWrapper(gym.make(task.env, **kwargs)))


def env_creator(task_name: str) -> Callable[..., Any]:
    """``make_env`` for one task, as a creator of ``env_config`` (ours' and RLlib's way)."""
    return _Creator(task_name)


@dataclasses.dataclass(frozen=True)
class _Creator:
    task_name: str

    def __call__(self, env_config: Any = None) -> Any:
        return make_env(self.task_name)


@dataclasses.dataclass
class Outcome:
    """One system's answer on one task and tuning seed, and its check on fresh seeds."""

    system: str
    task: str
    tuning_seed: int
    sweep_s: float
    config: dict[str, Any]  # the answer: the searched keys of the best trial
    sweep_best: float  # that trial's latest evaluation in the sweep
    check_s: float = math.nan
    scores: list[float] = dataclasses.field(default_factory=list)  # the answer's final evaluation per fresh seed
    note: str = ""

    def summary(self) -> tuple[float, float, float, float]:
        """(IQM, CI low, CI high, mean) of the check's scores (tuner.held_out's statistics)."""
        from tuner.held_out.report import bootstrap_ci, iqm

        if not self.scores:
            return (math.nan,) * 4
        low, high = bootstrap_ci(self.scores)
        return iqm(self.scores), low, high, sum(self.scores) / len(self.scores)


def evaluate(act: Callable[[Any], Any], task_name: str, episodes: int) -> float:
    """The mean return of ``episodes`` episodes of ``act`` (an observation to a deterministic action,
    the observation normalised inside it where the task asks), on env seeds ``EVAL_SEED_BASE + k``:
    how the peers score a trial, as ours' evaluator plays its episodes."""
    env = make_env(task_name)
    total = 0.0
    try:
        for k in range(episodes):
            obs, _ = env.reset(seed=EVAL_SEED_BASE + k)
            done = False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(act(obs))
                total += float(reward)
                done = terminated or truncated
    finally:
        env.close()
    return total / episodes
