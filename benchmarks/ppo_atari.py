"""PPO on ALE/Pong-v5 for a fixed number of env steps: env steps/s and learner updates/s, ours
(rollout actors, and in the learner's process) next to Stable-Baselines3 on ``SubprocVecEnv``,
with the same preprocessing, network and hyperparameters, in the same run.

The work, the same for every system: ``--steps`` env steps (default 20,000; every system stops
at its first iteration boundary at or past it) of PPO on Pong, 8 envs, each iteration 8 x 128 env
steps and then 4 epochs of minibatch SGD on them (4 x 1024 / 256 = 16 updates). Printed per
system: the wall time (from before the trainer / model and its envs are built: Ray's start, the
actors' and SubprocVecEnv's processes included), the env steps, env steps/s over the whole run and
over the iterations after the first (the processes are up by then), the time spent sampling and
learning, the SGD minibatch updates and updates per second of learning time, and the ratios
against SB3. Nothing is learnt to a return here: 20k steps of Pong stay at -21 to -20.

* the env: ``ALE/Pong-v5`` (sticky actions 0.25, ale-py's v5 default, in all) with the Nature DQN
  preprocessing: the env's own frameskip 1, 4 frames per step max-pooled over the last two, up to
  30 no-ops at reset, 84x84 grayscale uint8, no terminal on life loss, no reward clipping (Pong's
  rewards are -1, 0, 1 anyway), the last 4 frames stacked. Ours: ``preprocessing="auto"``
  (gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation(4)``, a (4, 84, 84) uint8 Box);
  SB3: ``make_atari_env("ALE/Pong-v5", n_envs=8, seed=s, vec_env_cls=SubprocVecEnv,
  env_kwargs={"frameskip": 1}, wrapper_kwargs={"terminal_on_life_loss": False, "clip_reward":
  False})`` (its ``AtariWrapper``: the same steps; no FireReset without terminal_on_life_loss)
  and ``VecFrameStack(4)``, which SB3's ``CnnPolicy`` gets transposed to (4, 84, 84);
* the network: the Nature CNN (32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1, ReLU, Linear
  3136 -> 512, ReLU; SB3's ``NatureCNN``, ours ``model={"cnn": "nature"}``), uint8 scaled /255,
  shared by policy and value in both; SB3's ``CnnPolicy`` puts the heads straight on the 512
  features (net_arch []), ours needs at least one hidden layer (``hidden_sizes`` non-empty), so
  both get separate policy and value layers of ``HIDDEN`` [64] tanh between the features and the
  heads (SB3: ``net_arch=dict(pi=[64], vf=[64])``). The script prints both parameter counts;
* the hyperparameters, rl-zoo's Atari PPO (``ZOO``) with constant learning rate and clip range
  (rl-zoo's are linear schedules; constant here, in both, to keep the mapping one to one):
  n_envs 8, n_steps 128 (ours: ``train_batch_size`` 1024), batch_size 256 (``minibatch_size``),
  n_epochs 4 (``num_epochs``), learning_rate 2.5e-4 (``lr``), clip_range 0.1 (``clip_param``),
  ent_coef 0.01 (``entropy_coeff``), vf_coef 0.5 (``vf_loss_coeff`` 1.0: ours is coeff x 0.5 x
  mse), gamma 0.99, gae_lambda 0.95 (``lambda_``), max_grad_norm 0.5, advantages normalized (SB3
  per minibatch, ours over the batch), Adam eps 1e-5;
* torch: 1 thread for every learner (``num_cpus_for_learner=1``; SB3 ``torch.set_num_threads(1)``),
  the learner on the CPU.

The systems (``--systems``, run in the order given, each after an untimed warm-up of ours in-process
and of SB3 for one iteration: imports, ROM loading, first kernels):

* ``actors``: ours with ``--actors`` rollout actors sharing the 8 envs (default one actor per
  core, at most 8: 2 actors of 4 envs on 2 cores, 8 of 1 on 16), each sampling its share of each
  batch with the current weights (``sample_async=False``: lock-step per iteration, as
  SubprocVecEnv); Ray started inside the measured time with ``num_cpus=--ray-cpus`` (default one
  per actor and the learner's);
* ``streams``: the same actors sampling on while the learner learns (``sample_async=True``): the
  next batch's steps are sampled with the weights one or two updates old (the streams and the
  leftover hold at most two batches), and decoupled PPO's importance weights correct them (the
  share of such steps is printed); a different algorithm from the lock-step ones by that much,
  which the steps/s alone do not show;
* ``inproc``: ours sampling 8 envs in the learner's process (``num_workers=0,
  num_envs_per_worker=8``);
* ``sb3``: SB3's PPO on the SubprocVecEnv above.

Each system's line gives the 1-minute load average at its start: the machine may be shared, and
on 2 cores 8 env processes and a learner take turns.

    python benchmarks/ppo_atari.py                        # all four, 20k env steps each: ~15-20 min on 2 cores
    python benchmarks/ppo_atari.py --systems actors,sb3 --actors 8   # 8 actors of 1 env each
    python benchmarks/ppo_atari.py --systems inproc,sb3 --steps 10000
    python benchmarks/ppo_atari.py --quick --no-sb3       # ours only, 2 iterations each (the smoke test)
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.peers.common import ppo_keys_from_sb3  # noqa: E402

ENV = "ALE/Pong-v5"
#: rl-zoo's Atari PPO hyperparameters (SB3's names; learning rate and clip range constant here).
ZOO: dict[str, Any] = {
    "n_envs": 8,
    "n_steps": 128,
    "batch_size": 256,
    "n_epochs": 4,
    "learning_rate": 2.5e-4,
    "clip_range": 0.1,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    # SB3 defaults
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "max_grad_norm": 0.5,
    "normalize_advantage": True,
}
#: the layers between the CNN's 512 features and each head (ours needs one; SB3's CnnPolicy has none)
HIDDEN = [64]
ACTIVATION = "tanh"
SYSTEMS = ("actors", "streams", "inproc", "sb3")
#: --quick: two iterations of each system
QUICK_STEPS = 2 * ZOO["n_envs"] * ZOO["n_steps"]


def ours_config(hp: dict[str, Any], seed: int, actors: int, streams: bool = False) -> dict[str, Any]:
    """Our PPO config doing what SB3's ``PPO("CnnPolicy", make_atari_env(...), **hp)`` does, with
    ``actors`` rollout actors sharing the ``n_envs`` envs (0: the envs in the learner's process);
    ``streams``: the actors sample on while the learner learns (``sample_async=True``)."""
    n_envs = hp["n_envs"]
    if actors < 0 or (actors and n_envs % actors):
        raise ValueError(f"actors: must be 0 or divide n_envs={n_envs}, got {actors}")
    return {
        "env": ENV,
        "preprocessing": "auto",  # Nature frames, 4 stacked, uint8 (4, 84, 84)
        "seed": seed,
        "num_workers": actors,
        "num_envs_per_worker": n_envs // actors if actors else n_envs,
        "sample_async": streams,
        "num_cpus_per_worker": 1.0,
        "num_cpus_for_learner": 1.0,  # torch threads: 1
        **ppo_keys_from_sb3(hp),
        "model": {"hidden_sizes": list(HIDDEN), "activation": ACTIVATION, "shared_layers": False, "cnn": "nature"},
        "learner": "torch",
        "optimizer": "adam",
    }


@dataclasses.dataclass
class Run:
    system: str
    wall: float  # from before the trainer / model is built to the last iteration's end
    steps: int
    sample_s: float
    learn_s: float
    updates: int
    first_s: float  # wall time to the first iteration's end
    first_steps: int
    load: float
    params: int
    note: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall

    @property
    def steady_steps_per_s(self) -> float:
        """Env steps/s over the iterations after the first (processes up, kernels warm)."""
        later = self.wall - self.first_s
        return (self.steps - self.first_steps) / later if later > 0 else math.nan

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.learn_s if self.learn_s > 0 else math.nan


def _params(module: Any) -> int:
    return sum(p.numel() for p in module.parameters())


def run_ours(steps: int, seed: int, actors: int, ray_cpus: int, streams: bool = False) -> Run:
    import torch

    from algorithms import PPO

    load = os.getloadavg()[0]
    start = time.perf_counter()
    note = ""
    if actors:
        import ray

        if not ray.is_initialized():
            from benchmarks.loopback import loopback_only

            loopback_only()
            ray.init(address="local", num_cpus=ray_cpus, include_dashboard=False, logging_level=logging.ERROR,
                     log_to_driver=False)
            note = f"Ray start {time.perf_counter() - start:.1f} s inside"
    trainer = PPO(config=ours_config(ZOO, seed, actors, streams))
    threads = torch.get_num_threads()
    total = sample_s = learn_s = 0.0
    done = updates = 0
    first_s, first_steps = math.nan, 0
    stale = 0.0
    try:
        while done < steps:
            result = trainer.train()
            stale += result["stale_fraction"] * result["env_steps_this_iter"]
            done = int(result["env_steps_total"])
            sample_s += result["sample_time_s"]
            learn_s += result["learn_time_s"]
            updates += int(result["num_sgd_updates"])
            if math.isnan(first_s):
                first_s, first_steps = time.perf_counter() - start, done
        total = time.perf_counter() - start
        params = _params(trainer.learner.policy)
    finally:
        trainer.stop()
    if threads != 1:
        note = "; ".join(n for n in (note, f"WARNING: torch threads {threads}") if n)
    if streams:
        note = "; ".join(n for n in (note, f"{stale / max(done, 1):.0%} of steps sampled with older weights") if n)
    name = (f"ours, {actors} actors x {ZOO['n_envs'] // actors} env" + (", streams" if streams else "")) if actors \
        else "ours, in-process"
    return Run(name, total, done, sample_s, learn_s, updates, first_s, first_steps, load, params, note)


def make_ale(**kwargs: Any) -> Any:
    """``gym.make(ENV)`` in SubprocVecEnv's processes, which have not imported ale_py (no ALE ids)."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return gym.make(ENV, **kwargs)


def run_sb3(steps: int, seed: int) -> Run:
    import torch
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

    class Clock(BaseCallback):
        """Sampling and learning time: a rollout runs from on_rollout_start to on_rollout_end,
        the update from there to the next on_rollout_start (or the training's end)."""

        def __init__(self) -> None:
            super().__init__()
            self.sample_s = self.learn_s = 0.0
            self.mark = 0.0
            self.first: tuple[float, int] | None = None

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            now = time.perf_counter()
            if self.mark:
                self.learn_s += now - self.mark
                if self.first is None:
                    self.first = (now - start, self.num_timesteps)
            self.mark = now

        def _on_rollout_end(self) -> None:
            now = time.perf_counter()
            self.sample_s += now - self.mark
            self.mark = now

        def _on_training_end(self) -> None:
            self._on_rollout_start()

    hp = dict(ZOO)
    n_envs = hp.pop("n_envs")
    load = os.getloadavg()[0]
    torch.set_num_threads(1)
    start = time.perf_counter()
    env = VecFrameStack(make_atari_env(make_ale, n_envs=n_envs, seed=seed, vec_env_cls=SubprocVecEnv,
                                       env_kwargs={"frameskip": 1},
                                       wrapper_kwargs={"terminal_on_life_loss": False, "clip_reward": False}),
                        n_stack=4)
    policy_kwargs = {"net_arch": {"pi": list(HIDDEN), "vf": list(HIDDEN)}, "activation_fn": torch.nn.Tanh}
    model = SB3PPO("CnnPolicy", env, policy_kwargs=policy_kwargs, seed=seed, device="cpu", verbose=0, **hp)
    clock = Clock()
    model.learn(total_timesteps=steps, callback=clock)
    wall = time.perf_counter() - start
    env.close()
    iterations = model.num_timesteps // (n_envs * hp["n_steps"])
    updates = iterations * hp["n_epochs"] * math.ceil(n_envs * hp["n_steps"] / hp["batch_size"])
    first_s, first_steps = clock.first or (wall, model.num_timesteps)
    note = "" if torch.get_num_threads() == 1 else f"WARNING: torch threads {torch.get_num_threads()}"
    return Run("SB3, SubprocVecEnv(8)", wall, model.num_timesteps, clock.sample_s, clock.learn_s, updates,
               first_s, first_steps, load, _params(model.policy), note)


def _ratio(num: float, den: float) -> str:
    return "-" if not (math.isfinite(num) and math.isfinite(den)) or den <= 0 else f"{num / den:.2f}"


def print_table(runs: list[Run]) -> None:
    peer = next((r for r in runs if r.system.startswith("SB3")), None)
    print(f"\n{'system':31} {'wall s':>7} {'env steps':>9} {'steps/s':>8} {'after 1st':>9} {'sample s':>8} "
          f"{'learn s':>7} {'updates':>7} {'upd/s':>6} {'load':>5} {'params':>9}  {'steps/s vs SB3':>14} "
          f"{'upd/s vs SB3':>12}")
    for r in runs:
        print(f"{r.system:31} {r.wall:7.1f} {r.steps:9,d} {r.steps_per_s:8.1f} {r.steady_steps_per_s:9.1f} "
              f"{r.sample_s:8.1f} {r.learn_s:7.1f} {r.updates:7d} {r.updates_per_s:6.2f} {r.load:5.1f} {r.params:9,d}  "
              f"{_ratio(r.steps_per_s, peer.steps_per_s) if peer else '-':>14} "
              f"{_ratio(r.updates_per_s, peer.updates_per_s) if peer else '-':>12}"
              + (f"  ({r.note})" if r.note else ""))
    if peer:
        print("(ratios: ours / SB3, above 1 is faster; 'after 1st': env steps/s over the iterations after the first)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from {', '.join(SYSTEMS)}")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per system (default 20000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actors", type=int, default=None,
                        help=f"rollout actors for 'actors' and 'streams', sharing the {ZOO['n_envs']} envs (a divisor "
                             f"of {ZOO['n_envs']}; default: one per core, at most {ZOO['n_envs']})")
    parser.add_argument("--ray-cpus", type=int, default=None,
                        help="CPUs told to Ray for the rollout actors' runs (default: one per actor + the learner's)")
    parser.add_argument("--no-sb3", action="store_true", help="only ours")
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="an untimed iteration of ours in-process and of SB3 first (default on; off with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {QUICK_STEPS:,} env steps per system, no warm-up")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        parser.error(f"--systems: unknown {unknown} (allowed: {', '.join(SYSTEMS)})")
    if args.steps < 1:
        parser.error(f"--steps: must be >= 1, got {args.steps}")
    n_envs = ZOO["n_envs"]
    divisors = [d for d in range(1, n_envs + 1) if n_envs % d == 0]
    if args.actors is None:
        args.actors = max(d for d in divisors if d <= (os.cpu_count() or 1))
    if args.actors not in divisors:
        parser.error(f"--actors: must divide the {n_envs} envs (allowed: {', '.join(map(str, divisors))}), got {args.actors}")
    if args.ray_cpus is None:
        args.ray_cpus = args.actors + 1
    if args.ray_cpus < args.actors + 1:
        parser.error(f"--ray-cpus: {args.actors} actors of 1 CPU and the learner's need {args.actors + 1}, got {args.ray_cpus}")
    if args.quick:
        args.steps, args.warmup = QUICK_STEPS, False
    warnings.filterwarnings("ignore")
    logging.getLogger("ray").setLevel(logging.ERROR)

    if "sb3" in systems and args.no_sb3:
        systems.remove("sb3")
    if "sb3" in systems:
        try:
            import stable_baselines3
        except ImportError:
            print("stable-baselines3 is not installed: skipping the SB3 baseline (pip install -e '.[bench]')")
            systems.remove("sb3")
    if not systems:
        print("no system to run")
        return 1

    import torch

    import algorithms  # noqa: F401 - imported before any timer starts, as SB3 is

    one = ZOO["n_envs"] * ZOO["n_steps"]
    print(f"PPO on {ENV}, {args.steps:,} env steps per system (iterations of {ZOO['n_envs']} envs x {ZOO['n_steps']} "
          f"steps, then {ZOO['n_epochs']} epochs of minibatch {ZOO['batch_size']}); seed {args.seed}; torch "
          f"{torch.__version__}, 1 torch thread per learner; {os.cpu_count()} cores"
          + (f"; stable-baselines3 {stable_baselines3.__version__}" if "sb3" in systems else "; ours only"))
    print(f"hyperparameters (SB3's names): {ZOO}; Nature CNN, then pi / vf {HIDDEN} {ACTIVATION}")
    if args.warmup:
        run_ours(one, 10_000, 0, args.ray_cpus)
        if "sb3" in systems:
            run_sb3(one, 10_000)
    runs: list[Run] = []
    for system in systems:
        print(f"running {system} (1-minute load average {os.getloadavg()[0]:.1f}) ...", file=sys.stderr, flush=True)
        if system == "sb3":
            runs.append(run_sb3(args.steps, args.seed))
        else:
            actors = args.actors if system in ("actors", "streams") else 0
            runs.append(run_ours(args.steps, args.seed, actors, args.ray_cpus, streams=system == "streams"))
        r = runs[-1]
        print(f"  {r.system}: {r.steps:,} env steps in {r.wall:.1f} s ({r.steps_per_s:.1f}/s; first iteration "
              f"{r.first_s:.1f} s), {r.updates} SGD updates in {r.learn_s:.1f} s of learning, load {r.load:.1f} at "
              f"start" + (f"; {r.note}" if r.note else ""), flush=True)
    print_table(runs)
    if len({r.params for r in runs}) > 1:
        print("WARNING: the systems' networks differ in size")
    if {"actors", "streams"} & set(systems):
        import ray

        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
