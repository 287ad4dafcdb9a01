"""PPO on MiniGrid-DoorKey-5x5-v0 (ARLBench's PPO task): env steps and wall time until the
100-episode mean return reaches a stated threshold, ours next to Stable-Baselines3 with the same
hyperparameters, network and seeds, in the same run.

The work, the same for both systems, on every seed (default 0, 1, 2):

* the env: ``MiniGrid-DoorKey-5x5-v0`` with its Dict observation less ``mission`` (a text space):
  ``direction`` (Discrete(4)) and ``image`` (7x7x3 uint8, the agent's partial view). Ours gets it
  from ``preprocessing="auto"`` (``algorithms/envs/presets.py``); SB3 from gymnasium's
  ``FilterObservation(env, ["direction", "image"])``, the same wrapper, inside SB3's ``Monitor``.
  MiniGrid's image is not pixels but codes (object 0-10, colour 0-5, state 0-2): both systems'
  CNNs scale uint8 by 1/255 (ours: ``ImageCNN``; SB3: ``normalize_images``), which leaves the
  codes under 0.04, and with them neither system learnt DoorKey-5x5 in 120k steps of seed 0. So
  both get the codes multiplied by ``--image-scale`` (default 25: 0-250; ours through its MiniGrid
  preset's ``image_scale`` option, 25 by default there too, SB3 through the same multiplication in
  a wrapper after FilterObservation);
* the rule: the mean return of the last 100 completed episodes reaches ``--target`` (default 0.9;
  a perfect episode returns about 0.96) within ``--max-steps`` env steps (default 100,000), checked
  after each iteration (n_envs x 128 steps and the updates on them: ours after ``trainer.train()``,
  SB3 at ``on_rollout_end``, timed at the next ``on_rollout_start``, after the update, as ours);
* the network, built-in in ours (``algorithms/models/contract.py`` ``EncoderModel``) and a custom
  ``BaseFeaturesExtractor`` under SB3's ``MultiInputPolicy``, one encoder shared by policy and value:
  the image, scaled /255, through three 2x2 convolutions (16, 32, 64 channels, stride 1, ReLU) and
  a linear layer to 512 (ReLU) (``ImageCNN`` "small"), concatenated with the one-hot direction
  (516 features); then separate policy and value MLPs of ``hidden_sizes`` [64, 64] tanh, a linear
  policy head (7 logits) and value head. Orthogonal init of the MLPs and heads (sqrt 2, 0.01, 1)
  in both; the encoder keeps torch's default init in ours, so SB3's custom policy resets its
  encoder's layers to torch's default after SB3's orthogonal init (``--sb3-init sb3`` keeps SB3's
  own: orthogonal sqrt 2 on the convolutions and the 512 layer too). The script prints both
  networks' parameter counts, which must be equal;
* the hyperparameters (``HPS``, SB3's names), one set for both, mapped onto ours by ``ours_config``:
  ``--hp starter`` (the default), rl-starter-files' PPO for MiniGrid (torch-ac's; its README
  trains DoorKey-5x5 in 80k frames) with SB3's loss, or ``--hp zoo``, rl-zoo's PPO for MiniGrid
  (made for flattened observations under VecNormalize; with the image codes unscaled neither
  system learnt DoorKey-5x5 with it in 56k-87k steps of seed 0; not run scaled):

  SB3                                   starter    zoo     ours
    n_envs                              16         8       num_envs_per_worker, num_workers 0
                                                             (in-process, as SB3's DummyVecEnv)
    n_steps                             128        128     train_batch_size n_envs x n_steps
    batch_size                          256        64      minibatch_size
    n_epochs                            4          10      num_epochs
    learning_rate (constant)            1e-3       2.5e-4  lr, lr_schedule "constant"
    gamma, gae_lambda                   0.99, 0.95         gamma, lambda_
    clip_range, clip_range_vf           0.2, None          clip_param, vf_clip_param
    ent_coef                            0.01       0.0     entropy_coeff
    vf_coef (x mean squared error)      0.5                vf_loss_coeff 2 x vf_coef (ours is
                                                             coeff x 0.5 x mse: the same loss)
    max_grad_norm                       0.5                max_grad_norm
    normalize_advantage                 True               normalize_advantages (SB3 normalizes
                                                             each minibatch, ours the whole train
                                                             batch, as RLlib: a difference left)
    Adam eps (policy_kwargs'            1e-8       1e-5    optimizer "adam", optimizer_config eps
      optimizer_kwargs)

  Torch runs 1 thread in both (ours: ``num_cpus_for_learner=1``; SB3: ``torch.set_num_threads``).

Both count env steps as transitions (SB3's ``num_timesteps``, our ``env_steps_total``); ours
resets an env in a step slot of its own (gymnasium's NEXT_STEP autoreset), so an iteration of ours
holds a few transitions fewer than n_envs x n_steps and learns on them; SB3 resets inside the step.

Wall time runs from before the trainer / model (and SB3's env) is built to the moment the rule
holds. Systems alternate per seed (ours seed 0, SB3 seed 0, ours seed 1, ...), after an untimed
warm-up of each (imports, first kernels); each run's line gives the 1-minute load average at its
start: the machine may be shared.

    python benchmarks/ppo_minigrid.py                        # 3 seeds each, ~10-20 min on 2 cores
    python benchmarks/ppo_minigrid.py --seeds 0 --target 0.8
    python benchmarks/ppo_minigrid.py --quick --no-sb3       # ours only, 2 iterations (the smoke test)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.peers.common import ppo_keys_from_sb3  # noqa: E402

ENV = "MiniGrid-DoorKey-5x5-v0"
#: The hyperparameters (SB3's names; SB3's defaults that matter written out), by ``--hp``:
#: "starter" (the default): rl-starter-files' PPO for MiniGrid (lcswillems/rl-starter-files, torch-ac:
#: its README trains DoorKey-5x5 in 80k frames), with SB3's loss (advantages normalized, no value
#: clipping); "zoo": rl-zoo's PPO for MiniGrid, made for flattened observations under VecNormalize
#: (tried with the image codes unscaled only: neither system got past a 100-episode mean of 0.06 in
#: 56k-87k steps of seed 0; benchmarks/RESULTS.md).
HPS: dict[str, dict[str, Any]] = {
    "starter": {
        "n_envs": 16,
        "n_steps": 128,
        "batch_size": 256,
        "n_epochs": 4,
        "learning_rate": 1e-3,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "ent_coef": 0.01,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "normalize_advantage": True,
        "clip_range_vf": None,
        "adam_eps": 1e-8,
    },
    "zoo": {
        "n_envs": 8,
        "n_steps": 128,
        "batch_size": 64,
        "n_epochs": 10,
        "learning_rate": 2.5e-4,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "ent_coef": 0.0,
        # SB3 defaults
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "normalize_advantage": True,
        "clip_range_vf": None,
        "adam_eps": 1e-5,
    },
}
#: the MLPs after the encoder (SB3's default net_arch and activation for PPO; ours' defaults too)
HIDDEN = [64, 64]
ACTIVATION = "tanh"
#: --quick: this many iterations of ours (no rule can hold)
QUICK_ITERATIONS = 2


def scaled_image(env: Any, factor: int) -> Any:
    """``env`` (MiniGrid's Dict without mission) with its image's codes multiplied by ``factor``
    (still uint8: the codes are at most 10), so that the CNN's /255 leaves them in [0, 1]."""
    import gymnasium as gym
    import numpy as np

    class ScaledImage(gym.ObservationWrapper):
        def __init__(self, inner: gym.Env) -> None:
            super().__init__(inner)
            assert isinstance(inner.observation_space, gym.spaces.Dict)
            self.observation_space = gym.spaces.Dict(dict(inner.observation_space.spaces))

        def observation(self, obs: dict[str, Any]) -> dict[str, Any]:
            return {**obs, "image": (obs["image"] * np.uint8(factor)).astype(np.uint8)}

    return env if factor == 1 else ScaledImage(env)


def ours_config(hp: dict[str, Any], seed: int, factor: int = 1) -> dict[str, Any]:
    """Our PPO config doing what SB3's ``PPO("MultiInputPolicy", env, **hp)`` does on ``ENV``."""
    return {
        # MiniGrid's preset: the Dict observation without mission, the image's codes x factor
        "env": ENV,
        "preprocessing": {"image_scale": factor},
        "seed": seed,
        "num_workers": 0,
        "num_envs_per_worker": hp["n_envs"],
        **ppo_keys_from_sb3(hp),
        "model": {"hidden_sizes": list(HIDDEN), "activation": ACTIVATION, "shared_layers": False, "cnn": "small"},
        "learner": "torch",
        "optimizer": "adam",
        "optimizer_config": {"eps": hp["adam_eps"]},
        "num_cpus_for_learner": 1.0,  # torch threads: 1
        "metrics_num_episodes_for_smoothing": 100,
    }


def _params(module: Any) -> int:
    return sum(p.numel() for p in module.parameters())


def run_ours(seed: int, max_steps: int, target: float, hp: dict[str, Any], factor: int) -> dict[str, Any]:
    import torch

    from algorithms import PPO

    load = os.getloadavg()[0]
    start = time.perf_counter()
    trainer = PPO(config=ours_config(hp, seed, factor))
    threads = torch.get_num_threads()
    params = _params(trainer.learner.policy)  # the ActorCritic module: the network and nothing else
    solved_at = solved_wall = None
    steps, best = 0, (-math.inf, 0)
    try:
        while steps < max_steps:
            result = trainer.train()
            steps = result["env_steps_total"]
            ret = result["episode_return_mean"]
            if ret == ret and ret > best[0]:  # NaN before the first episode ends
                best = (ret, steps)
            if ret == ret and ret >= target:
                solved_at, solved_wall = steps, time.perf_counter() - start
                break
    finally:
        trainer.stop()
    return {"steps": solved_at, "wall": solved_wall, "total": time.perf_counter() - start, "final_steps": steps,
            "threads": threads, "best": best, "load": load, "params": params}


def sb3_policy_kwargs(init: str, adam_eps: float) -> dict[str, Any]:
    """SB3's policy and extractor: the network ``EncoderModel`` builds for this Dict space."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.policies import MultiInputActorCriticPolicy
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    class MiniGridExtractor(BaseFeaturesExtractor):
        """One-hot direction (SB3 hands it as (batch, 1, 4)), then the image (SB3 hands it channels first, scaled /255) through
        three 2x2 convolutions 16/32/64 and a linear layer to 512, ReLU throughout."""

        def __init__(self, observation_space: gym.spaces.Dict) -> None:
            image, direction = observation_space["image"], observation_space["direction"]
            assert isinstance(image, gym.spaces.Box) and isinstance(direction, gym.spaces.Discrete)
            channels = image.shape[0]  # VecTransposeImage made it (3, 7, 7)
            n_dir = int(direction.n)
            super().__init__(observation_space, features_dim=n_dir + 512)
            self.convs = nn.Sequential(nn.Conv2d(channels, 16, 2), nn.ReLU(), nn.Conv2d(16, 32, 2), nn.ReLU(),
                                       nn.Conv2d(32, 64, 2), nn.ReLU(), nn.Flatten())
            with torch.no_grad():
                flat = int(self.convs(torch.zeros(1, *image.shape)).shape[1])
            self.head = nn.Sequential(nn.Linear(flat, 512), nn.ReLU())

        def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
            # ours concatenates in the Dict's key order: direction, image
            return torch.cat([obs["direction"].flatten(1), self.head(self.convs(obs["image"]))], dim=1)

    class Policy(MultiInputActorCriticPolicy):
        def _build(self, lr_schedule: Any) -> None:
            super()._build(lr_schedule)
            if init == "ours":  # ours leaves the encoder at torch's default init
                for module in self.features_extractor.modules():
                    if isinstance(module, (nn.Conv2d, nn.Linear)):
                        module.reset_parameters()

    kwargs = {"features_extractor_class": MiniGridExtractor, "net_arch": {"pi": list(HIDDEN), "vf": list(HIDDEN)},
              "activation_fn": nn.Tanh, "share_features_extractor": True,
              "optimizer_kwargs": {"eps": adam_eps}}
    return {"policy": Policy, "policy_kwargs": kwargs}


def run_sb3(seed: int, max_steps: int, target: float, init: str, hp: dict[str, Any], factor: int) -> dict[str, Any]:
    import minigrid  # noqa: F401 - registers the MiniGrid ids
    import numpy as np
    import torch
    from gymnasium.wrappers import FilterObservation
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    hp = dict(hp)

    class RuleCallback(BaseCallback):
        """The rule at each rollout's end (its env steps), timed after that rollout's update."""

        def __init__(self) -> None:
            super().__init__()
            self.returns: deque = deque(maxlen=100)
            self.solved_at: int | None = None
            self.solved_wall: float | None = None
            self.best = (-math.inf, 0)
            self.stop = False

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(info["episode"]["r"])
            return not self.stop

        def _on_rollout_end(self) -> None:
            if self.returns:
                mean = float(np.mean(self.returns))
                if mean > self.best[0]:
                    self.best = (mean, self.num_timesteps)
                if self.solved_at is None and self.num_timesteps <= max_steps and mean >= target:
                    self.solved_at = self.num_timesteps

        def _time_it(self) -> None:
            if self.solved_at is not None and self.solved_wall is None:
                self.solved_wall = time.perf_counter() - start
                self.stop = True

        def _on_rollout_start(self) -> None:
            self._time_it()

        def _on_training_end(self) -> None:
            self._time_it()

    load = os.getloadavg()[0]
    torch.set_num_threads(1)
    start = time.perf_counter()
    env = make_vec_env(ENV, n_envs=hp.pop("n_envs"), seed=seed,
                       wrapper_class=lambda e: scaled_image(FilterObservation(e, ["direction", "image"]), factor))
    policy = sb3_policy_kwargs(init, hp.pop("adam_eps"))
    model = SB3PPO(policy["policy"], env, policy_kwargs=policy["policy_kwargs"], seed=seed, device="cpu", verbose=0,
                   **hp)
    callback = RuleCallback()
    model.learn(total_timesteps=max_steps, callback=callback)
    env.close()
    return {"steps": callback.solved_at, "wall": callback.solved_wall, "total": time.perf_counter() - start,
            "final_steps": model.num_timesteps, "threads": torch.get_num_threads(), "best": callback.best,
            "load": load, "params": _params(model.policy)}


# -- the report ----------------------------------------------------------------------------------
def _steps(run: dict | None, cap: int) -> str:
    if run is None:
        return "-"
    return f"{run['steps']:,}" if run["steps"] is not None else f"not within {cap:,}"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(num: float | None, den: float | None, suffix: str = "") -> str:
    if num is None or den is None or not math.isfinite(num) or not math.isfinite(den) or den <= 0:
        return "-"
    return f"{num / den:.2f}{suffix}"


def _median(runs: list[dict], key: str) -> float:
    """Median of ``key``, a run that missed the rule counting as infinitely late."""
    return statistics.median(math.inf if r[key] is None else r[key] for r in runs)


def _progress(system: str, seed: int, run: dict, cap: int) -> None:
    best = "" if run["steps"] is not None or not math.isfinite(run["best"][0]) else (
        f"; best 100-episode mean {run['best'][0]:.3f} at {run['best'][1]:,} env steps")
    print(f"  {system} seed {seed}: {_steps(run, cap)} env steps, {_secs(run['wall'])} s to the rule, "
          f"{run['total']:.1f} s total ({run['final_steps']:,} env steps, torch threads {run['threads']}, "
          f"load {run['load']:.1f} at start{best})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--target", type=float, default=0.9, help="the 100-episode mean return to reach (default 0.9)")
    parser.add_argument("--max-steps", type=int, default=100_000, help="the step cap (default 100000)")
    parser.add_argument("--sb3-init", choices=("ours", "sb3"), default="ours",
                        help="SB3's encoder init: ours (torch's default, as our EncoderModel; the default) or sb3 "
                             "(SB3's orthogonal sqrt 2)")
    parser.add_argument("--hp", choices=sorted(HPS), default="starter",
                        help="the hyperparameters of both: starter (rl-starter-files', the default) or zoo (rl-zoo's)")
    parser.add_argument("--image-scale", type=int, choices=range(1, 26), default=25, metavar="1-25",
                        help="multiply MiniGrid's image codes (0-10) by this, for both (default 25: 0-250, so that "
                             "the CNN's /255 leaves them in [0, 1]; 1: the codes as MiniGrid gives them)")
    parser.add_argument("--no-sb3", action="store_true", help="only ours")
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="an untimed iteration of each system first (default on; off with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: seed 0, {QUICK_ITERATIONS} iterations, no warm-up (no rule can hold)")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: comma-separated ints, got {args.seeds!r}")
    if args.max_steps < 1:
        parser.error(f"--max-steps: must be >= 1, got {args.max_steps}")
    hp = HPS[args.hp]
    one = hp["n_envs"] * hp["n_steps"]  # env steps per iteration
    if args.quick:
        seeds, args.max_steps, args.warmup = seeds[:1], QUICK_ITERATIONS * one, False
    warnings.filterwarnings("ignore")

    sb3 = not args.no_sb3
    if sb3:
        try:
            import stable_baselines3
        except ImportError:
            print("stable-baselines3 is not installed: skipping the SB3 baseline (pip install -e '.[bench]')")
            sb3 = False

    import torch

    import algorithms  # noqa: F401 - imported before any timer starts, as SB3 is

    cap, target = args.max_steps, args.target
    print(f"PPO on {ENV}: solved = mean return of the last 100 episodes >= {target:g} within {cap:,} env steps, "
          f"checked after every iteration of {hp['n_envs']} envs x {hp['n_steps']} steps; seeds "
          f"{','.join(map(str, seeds))}; torch {torch.__version__}, 1 torch thread each; {os.cpu_count()} cores"
          + (f"; stable-baselines3 {stable_baselines3.__version__}" if sb3 else "; ours only"))
    print(f"hyperparameters ({args.hp}, SB3's names): {hp}, net_arch pi/vf {HIDDEN} {ACTIVATION}")
    shown = ours_config(hp, 0, args.image_scale) | {"seed": "s"}
    if args.image_scale > 1:
        shown["env"] = f"{ENV}, image codes x {args.image_scale} (preprocessing image_scale)"
    print(f"ours: PPO(config={shown})")
    if sb3:
        print(f"SB3:  PPO(MultiInputPolicy + the small-CNN extractor, encoder init {args.sb3_init}, "
              f"make_vec_env({ENV!r}, n_envs={hp['n_envs']}, seed=s, FilterObservation(['direction', 'image'])"
              f"{f' + image codes x {args.image_scale}' if args.image_scale > 1 else ''}), seed=s)")
    if args.warmup:  # untimed: imports, first kernels, minigrid's modules
        run_ours(10_000, one, math.inf, hp, args.image_scale)
        if sb3:
            run_sb3(10_000, one, math.inf, args.sb3_init, hp, args.image_scale)

    ours: list[dict] = []
    peers: list[dict] = []
    for seed in seeds:  # interleaved: ours seed s, SB3 seed s, ours seed s+1, ...
        ours.append(run_ours(seed, cap, target, hp, args.image_scale))
        _progress("ours", seed, ours[-1], cap)
        if sb3:
            peers.append(run_sb3(seed, cap, target, args.sb3_init, hp, args.image_scale))
            _progress("SB3 ", seed, peers[-1], cap)
    params = f"network parameters: ours {ours[0]['params']:,}" + (f", SB3 {peers[0]['params']:,}" if sb3 else "")
    print(params + ("" if not sb3 or ours[0]["params"] == peers[0]["params"] else "  WARNING: not the same network"))

    print(f"\n{ENV}, 100-episode mean >= {target:g} within {cap:,} env steps, torch threads 1 (both)")
    print(f"{'seed':>4}  {'ours steps':>18} {'ours wall s':>11} {'load':>5}  {'SB3 steps':>18} {'SB3 wall s':>10} "
          f"{'load':>5}  {'SB3/ours wall':>13} {'ours/SB3 steps':>14}")
    for i, seed in enumerate(seeds):
        o, p = ours[i], peers[i] if sb3 else None
        print(f"{seed:>4}  {_steps(o, cap):>18} {_secs(o['wall']):>11} {o['load']:>5.1f}  {_steps(p, cap):>18} "
              f"{_secs(p['wall'] if p else None):>10} {(format(p['load'], '5.1f') if p else '-'):>5}  "
              f"{_ratio(p['wall'] if p else None, o['wall'], 'x'):>13} {_ratio(o['steps'], p['steps'] if p else None):>14}")
    med = {k: _median(ours, k) for k in ("steps", "wall")}
    pmed = {k: _median(peers, k) for k in ("steps", "wall")} if sb3 else {"steps": None, "wall": None}

    def fmt(value: float | None, spec: str, steps: bool = False) -> str:
        if value is None:
            return "-"
        return (f"not within {cap:,}" if steps else "-") if math.isinf(value) else format(value, spec)

    print(f"{'med.':>4}  {fmt(med['steps'], ',.0f', True):>18} {fmt(med['wall'], '.1f'):>11} {'':>5}  "
          f"{fmt(pmed['steps'], ',.0f', True):>18} {fmt(pmed['wall'], '.1f'):>10} {'':>5}  "
          f"{_ratio(pmed['wall'], med['wall'], 'x'):>13} {_ratio(med['steps'], pmed['steps']):>14}")
    print(f"ours solved {sum(r['steps'] is not None for r in ours)}/{len(seeds)} seeds"
          + (f"; SB3 solved {sum(r['steps'] is not None for r in peers)}/{len(seeds)}" if sb3 else "")
          + " (a run that misses the rule counts as infinitely late in the medians)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
