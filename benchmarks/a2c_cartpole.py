"""A2C on CartPole-v1: env steps and wall time until the 100-episode mean return reaches 400, ours
next to Stable-Baselines3's A2C with rl-zoo's settings, in the same run (issue 47: each new trainer
as fast as the peer a user would pick).

rl-zoo's A2C CartPole-v1 (8 envs, ``ent_coef`` 0) on SB3's defaults; ours with the same values
under our keys (``ours_a2c_config``):

  n_envs 8, n_steps 5                           num_envs_per_worker 8, train_batch_size 40
  learning_rate 7e-4, gamma 0.99, gae_lambda 1  lr, gamma, lambda
  ent_coef 0, vf_coef 0.5, max_grad_norm 0.5    entropy_coeff, vf_loss_coeff, max_grad_norm
  RMSprop (alpha 0.99, eps 1e-5)                optimizer "rmsprop", optimizer_config
  normalize_advantage False                     normalize_advantages False
  MlpPolicy: separate 64x64 tanh pi and vf      hidden_sizes [64, 64], activation tanh

Both sample one batch of 8 x 5 env steps, then make one update, in one process (ours: the
learner's, ``num_workers=0``); the rule is checked after each batch (SB3: at each rollout's end,
timed at the next rollout's start; ours: each ``train()`` result). The comparison's machinery is
``benchmarks/peers/rule_race.py`` (seeds interleaved, an untimed warm-up of each, the same table).

    python benchmarks/a2c_cartpole.py                 # 3 seeds
    python benchmarks/a2c_cartpole.py --no-sb3 --quick   # ours only, a tiny budget (the smoke test)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers.rule_race import Spec, compare  # noqa: E402 - after the path is set

#: rl-zoo's A2C CartPole-v1 hyperparameters (SB3's names), SB3's defaults that matter made explicit.
A2C_ZOO: dict[str, Any] = {
    "n_steps": 5,
    "ent_coef": 0.0,
    # SB3 defaults
    "learning_rate": 7e-4,
    "gamma": 0.99,
    "gae_lambda": 1.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "rms_prop_eps": 1e-5,
    "use_rms_prop": True,
    "normalize_advantage": False,
}
N_ENVS = 8


def ours_a2c_config(hp: dict[str, Any], total_steps: int) -> dict[str, Any]:
    """Our A2C config doing what SB3's ``A2C(**hp)`` on ``N_ENVS`` envs does."""
    assert hp["use_rms_prop"], "mapped: RMSprop"
    return {
        "env": "CartPole-v1",
        "num_workers": 0,
        "num_envs_per_worker": N_ENVS,
        "train_batch_size": hp["n_steps"] * N_ENVS,
        "lr": hp["learning_rate"],
        "gamma": hp["gamma"],
        "lambda": hp["gae_lambda"],
        "entropy_coeff": hp["ent_coef"],
        "vf_loss_coeff": hp["vf_coef"],
        "max_grad_norm": hp["max_grad_norm"],
        "normalize_advantages": hp["normalize_advantage"],
        "optimizer": "rmsprop",
        "optimizer_config": {"alpha": 0.99, "eps": hp["rms_prop_eps"]},
        "hidden_sizes": [64, 64],
        "activation": "tanh",
        "metrics_num_episodes_for_smoothing": 100,
    }


SPEC = Spec("A2C", "CartPole-v1", 400.0, 100, 200_000, A2C_ZOO, ours_a2c_config, {}, 400, n_envs=N_ENVS,
            round=f"a batch of {N_ENVS} envs x {A2C_ZOO['n_steps']} steps and its update")
QUICK_STEPS = 800


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--max-steps", type=int, default=SPEC.max_steps, help="the step cap (default 200000)")
    parser.add_argument("--no-sb3", action="store_true", help="only ours")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both systems (default 1)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: seed 0, {QUICK_STEPS} env steps, no warm-up (the rule cannot hold)")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: comma-separated ints, got {args.seeds!r}")
    if args.threads < 1:
        parser.error(f"--threads: must be >= 1, got {args.threads}")
    if args.max_steps < 1:
        parser.error(f"--max-steps: must be >= 1, got {args.max_steps}")
    cap, warmup = args.max_steps, True
    if args.quick:
        seeds, cap, warmup = seeds[:1], QUICK_STEPS, False
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

    print(f"torch {torch.__version__}, torch threads {args.threads} for both"
          + (f", stable-baselines3 {stable_baselines3.__version__}" if sb3 else ", ours only"))
    compare("a2c", SPEC, seeds, cap, args.threads, sb3, stop_at_solve=True, warmup=warmup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
