"""Which DQN defaults meet CartPole's rule: a sweep of candidate defaults with this tuner.

The rule (``benchmarks/off_policy.py``'s, the acceptance of our DQN): the mean return of the last
100 completed episodes reaches 400 within 100,000 env steps. Each stage is one ``tune.run("DQN")``
over a grid of candidate default changes times seeds, on top of ``DQN_DEFAULTS`` as they were
before this sweep (``START`` pins the old values of the keys it varies, so that a rerun asks the
same question; every other key stays at its default, the sampling layout included: one CartPole in
the learner's process). A trial stops when the rule holds or at the step cap; the rule is checked after
every 256 env steps (``min_sample_timesteps_per_iteration``, which changes when results are
reported, not what is learned: an iteration repeats the same rounds of ``train_freq`` env steps and
their updates).

Per candidate the script prints the seeds that met the rule, the env steps at which they did and
their median, the best mean of those that did not, and the wall time per trial (which depends on
the machine's load, the env steps do not: one env in the learner's process with a seed is
deterministic). It picks the candidate that meets the rule on the most seeds, then with the fewest
median env steps (over the seeds that met it).

Stage 1 asks whether n-step targets (Rainbow's and Dopamine's 3, RLlib's tuned CartPole example's
2-5) and a lower final epsilon (RLlib's tuned example's 0.02; Dopamine's 0.01) help our defaults;
stage 2 gives stage 1's pick more replayed transitions per update (rl-zoo's CartPole batch of 64,
CleanRL's 128) at the same updates per env step (a larger batch costs less CPU than more updates). Each
stage is stored under its own name and run with ``resume="AUTO"``: a rerun reads the finished
trials back from the store instead of running them again, so ``--stages 1,2`` after ``--stages 1``
runs only stage 2.

    python examples/dqn_defaults_sweep.py                   # both stages, seeds 0, 1, 2: 18 trials, 2 at a time on 2 cores
    python examples/dqn_defaults_sweep.py --stages 1        # stage 1 only
    python examples/dqn_defaults_sweep.py --seeds 3,4,5 --name dqn_defaults_s345
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET = 400.0
MAX_STEPS = 100_000

#: What every trial shares: the rule's window, a check every 256 env steps, one env in the learner's process.
BASE: dict[str, Any] = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "num_envs_per_worker": 1,
    "metrics_num_episodes_for_smoothing": 100,
    "min_sample_timesteps_per_iteration": 256,
}

#: DQN_DEFAULTS' values before this sweep, of the keys it varies (its pick became the defaults).
START: dict[str, Any] = {"n_step": 1, "train_batch_size": 32, "epsilon": [[0, 1.0], [10_000, 0.05]]}

#: Stage 1's grid: key -> candidate values (the first is the value ``START`` has).
STAGE_1: dict[str, list[Any]] = {
    "n_step": [1, 3],
    "epsilon": [[[0, 1.0], [10_000, 0.05]], [[0, 1.0], [10_000, 0.02]]],
}

#: Stage 2's grid, on top of stage 1's pick: more replayed transitions per update at the same
#: updates per env step (rl-zoo's CartPole batch 64, CleanRL's 128; today's 32 is stage 1's pick).
STAGE_2: dict[str, list[Any]] = {
    "train_batch_size": [64, 128],
}


@dataclass(frozen=True)
class Outcome:
    """One trial: its candidate (the grid's values), its seed, and when the rule held."""

    candidate: tuple[tuple[str, Any], ...]
    seed: int
    solved_at: int | None  # env steps at the first check where the rule held (within the cap)
    best_mean: float  # the best 100-episode mean at a check
    final_steps: int
    wall_s: float


def outcome_of(history: list[dict[str, Any]], keys: list[str], config: dict[str, Any],
               target: float = TARGET, max_steps: int = MAX_STEPS) -> Outcome:
    """A trial's :class:`Outcome` from its results (oldest first) and its config."""
    solved_at, best = None, -math.inf
    for result in history:
        mean, steps = result.get("episode_return_mean"), int(result["env_steps_total"])
        if mean is None or not math.isfinite(mean):
            continue
        best = max(best, float(mean))
        if solved_at is None and mean >= target and steps <= max_steps:
            solved_at = steps
    last = history[-1] if history else {}
    return Outcome(tuple((k, _hashable(config[k])) for k in keys), int(config["seed"]), solved_at, best,
                   int(last.get("env_steps_total", 0)), float(last.get("time_total_s", 0.0)))


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Summary:
    """A candidate over its seeds."""

    candidate: tuple[tuple[str, Any], ...]
    outcomes: list[Outcome]

    @property
    def solved(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.solved_at is not None]

    @property
    def median_steps(self) -> float:
        """Median env steps to the rule over the seeds that met it (inf: none did)."""
        return statistics.median(o.solved_at for o in self.solved) if self.solved else math.inf

    def rank_key(self) -> tuple[int, float]:
        """Most seeds first, then fewest median env steps."""
        return (-len(self.solved), self.median_steps)

    def overrides(self) -> dict[str, Any]:
        return {k: _plain(v) for k, v in self.candidate}


def summarize(outcomes: list[Outcome]) -> list[Summary]:
    """One :class:`Summary` per candidate, best first (most seeds, then fewest median env steps)."""
    by: dict[tuple[tuple[str, Any], ...], list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.candidate, []).append(o)
    summaries = [Summary(c, sorted(os_, key=lambda o: o.seed)) for c, os_ in by.items()]
    return sorted(summaries, key=Summary.rank_key)


def _short(key: str, value: Any) -> str:
    if key == "epsilon":
        (_, start), (steps, end) = value[0], value[-1]
        return f"epsilon {start:g}->{end:g} over {steps:,}"
    return f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}"


def describe(summary: Summary) -> str:
    return ", ".join(_short(k, v) for k, v in summary.candidate)


def print_table(title: str, summaries: list[Summary], max_steps: int = MAX_STEPS, target: float = TARGET) -> None:
    width = max(len("candidate"), *(len(describe(s)) for s in summaries))
    print(f"\n{title}")
    print(f"{'candidate':<{width}}  {'met':>5} {'median steps':>12}  per seed: env steps to {target:g} (or the best "
          f"mean); wall s per trial")
    for s in summaries:
        seeds = "; ".join(
            f"{o.seed}: {o.solved_at:,}" if o.solved_at is not None
            else f"{o.seed}: not within {max_steps:,} (best {o.best_mean:.0f})" for o in s.outcomes)
        walls = "/".join(f"{o.wall_s:.0f}" for o in s.outcomes)
        median = "-" if math.isinf(s.median_steps) else f"{s.median_steps:,.0f}"
        met = f"{len(s.solved)}/{len(s.outcomes)}"
        print(f"{describe(s):<{width}}  {met:>5} {median:>12}  {seeds}; {walls}")


def run_stage(name: str, fixed: dict[str, Any], grid: dict[str, list[Any]], seeds: list[int], storage_path: str,
              max_steps: int = MAX_STEPS, target: float = TARGET, verbose: int = 1) -> list[Outcome]:
    """One ``tune.run("DQN")``: ``grid`` x ``seeds`` on top of ``BASE``, ``START`` and ``fixed``; the outcomes."""
    from tuner import tune

    config = {**BASE, **START, **fixed, **{k: tune.grid_search(v) for k, v in grid.items()},
              "seed": tune.grid_search(seeds)}
    analysis = tune.run(
        "DQN", config=config, stop={"episode_return_mean": target, "env_steps_total": max_steps},
        metric="episode_return_mean", mode="max", storage_path=storage_path, name=name, resume="AUTO",
        verbose=verbose, tensorboard=False,
    )
    keys = list(fixed) + list(grid)  # a candidate is named by all its changes to the defaults
    return [outcome_of(analysis.trial_results(t.trial_id), keys, t.config, target, max_steps)
            for t in analysis.trials]


def main(stages: list[int], seeds: list[int], storage_path: str, name: str, max_steps: int = MAX_STEPS,
         target: float = TARGET, verbose: int = 1,
         report: Callable[[str, list[Summary]], None] | None = None) -> Summary:
    """Run the stages in order (stage 2 around stage 1's pick); the pick over every candidate run."""
    report = report or (lambda title, s: print_table(title, s, max_steps, target))
    everything: list[Summary] = []
    fixed: dict[str, Any] = {}
    if 2 in stages and 1 not in stages:  # stage 2 builds on stage 1's pick: read it back (or run it)
        fixed = summarize(run_stage(f"{name}_stage1", {}, STAGE_1, seeds, storage_path, max_steps, target,
                                    verbose))[0].overrides()
    for stage in sorted(stages):
        outcomes = run_stage(f"{name}_stage{stage}", fixed, {1: STAGE_1, 2: STAGE_2}[stage], seeds, storage_path,
                             max_steps, target, verbose)
        summaries = summarize(outcomes)
        report(f"Stage {stage}: DQN on CartPole-v1, seeds {','.join(map(str, seeds))}; the rule: 100-episode mean "
               f">= {target:g} within {max_steps:,} env steps; candidates' changes to {START}", summaries)
        fixed = summaries[0].overrides()
        everything += summaries
    pick = min(everything, key=Summary.rank_key)  # a tie goes to the earlier stage
    print(f"\npick: {START} with {pick.overrides()}: the rule met on {len(pick.solved)}/{len(pick.outcomes)} "
          f"seeds, median {pick.median_steps:,.0f} env steps")
    return pick


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", default="1,2", help="comma-separated: 1, 2 (default both)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--storage-path", default="results")
    parser.add_argument("--name", default="dqn_defaults", help="the sweeps are stored as NAME_stage1, NAME_stage2")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS)
    args = parser.parse_args()
    stages = [int(s) for s in args.stages.split(",")]
    if not stages or any(s not in (1, 2) for s in stages):
        parser.error(f"--stages: 1 and/or 2, got {args.stages!r}")
    import ray

    # a Ray of this process's own, even when a `ray start` cluster runs on this machine
    ray.init(address="local", include_dashboard=False, logging_level="WARNING")
    main(stages, [int(s) for s in args.seeds.split(",")], args.storage_path, args.name, args.max_steps)
