"""The config keys every distributed trainer understands: their defaults and their checks.

An algorithm adds its own keys (``DistributedTrainer._defaults``) and checks them in
``validate_algorithm_config``; these are the sampling, resources, env, seed, metric-window,
model and optimiser keys all of them share. Each bad value is one ``ValueError`` naming the key.
"""

from __future__ import annotations

from typing import Any, Mapping

from algorithms.core.evaluation_config import EVALUATION_DEFAULTS, check_evaluation
from algorithms.data.normalization import FILTERS
from algorithms.envs import presets as env_presets
from algorithms.sampling import layout
from schedulers.validation import is_int, is_number, is_seed

__all__ = ["COMMON_DEFAULTS", "LAYOUT_REASON", "check", "check_common", "check_filter_space", "normalization",
           "sampling_layout"]

#: Keys every distributed trainer understands, with their defaults (why: algorithms/ppo/trainer.py).
COMMON_DEFAULTS: dict[str, Any] = {
    # a gymnasium id, a name given to algorithms.register_env, or a creator(env_config) -> gym.Env
    "env": None,
    "env_config": {},  # keyword arguments of gym.make, or the creator's argument
    # the env's usual wrappers: "auto" (Atari: Nature DQN frames; MiniGrid: mission dropped), None, or
    # a dict of options (algorithms/envs/presets.py)
    "preprocessing": "auto",
    # rollout actors; 0: sample in the learner's process; "auto": decided from a timing of the env
    # (algorithms/sampling/layout.py), which then also sets num_envs_per_worker, sample_async, num_cpus_per_worker
    "num_workers": 0,
    "num_envs_per_worker": 16,  # envs of each rollout worker, stepped as one vector env
    # env steps per iteration: every env steps ceil(train_batch_size / (workers * envs)) times;
    # a NEXT_STEP autoreset step takes a slot but is no transition, so slightly fewer are trained on
    "train_batch_size": 2048,
    # True: rollout actors sample without pause and the learner takes what they sampled
    # (WorkerGroup.stream); False: every actor samples its share of the batch with the current weights
    "sample_async": False,
    # async with sample requests instead of streams: the learner takes the first fragments to
    # arrive, each actor keeps this many requests queued (RLlib APPO's; WorkerGroup.sample)
    "max_requests_in_flight_per_worker": None,
    # True: each env of a rollout actor streams in a thread of its own (simulators that wait: several
    # envs per process without lock-step; algorithms/sampling/env_threads.py)
    "env_threads": False,
    "seed": None,  # None: drawn at setup (and saved in checkpoints)
    # episode_return_mean & co. are over the last this many completed episodes (RLlib's key)
    "metrics_num_episodes_for_smoothing": 100,
    "num_cpus_for_learner": 1.0,  # bundle 0 of the trial's placement group; torch threads: int() of it
    "num_cpus_per_worker": 0.5,  # one bundle per rollout actor (0: actors take no CPU, no bundle)
    # the learner: GPUs of bundle 0 (the learner runs on CUDA when it has one; rollout actors on CPU)
    "num_gpus_for_learner": 0,
    # the network: built-in options, or model(observation_space, action_space, model_config) -> nn.Module
    # (the contract: algorithms/models/contract.py)
    "model": {},
    "model_config": {},
    # torch.optim's: "adam" | "adamw" | "rmsprop" | "sgd", and its keyword arguments but lr
    "optimizer": "adam",
    "optimizer_config": {},
    # normalisation (algorithms/data/normalization.py): "MeanStdFilter" (RLlib's) normalises Box
    # observations by their running mean and std; normalize_reward divides rewards by the running std
    # of the discounted return (SB3's VecNormalize norm_reward); statistics merged across rollout actors
    "observation_filter": "NoFilter",
    "normalize_reward": False,
    # evaluation episodes (RLlib's keys; algorithms/core/evaluation_config.py)
    **EVALUATION_DEFAULTS,
}


#: The resolved config's note on how ``num_workers="auto"`` was decided (not a config key).
LAYOUT_REASON = "_layout_reason"


def sampling_layout(config: Mapping[str, Any]) -> str:
    """Where a trainer with this resolved config samples, in a few words."""
    envs = layout.plural(config["num_envs_per_worker"], "env")
    if config["num_workers"] == 0:
        return f"in the learner: {envs}"
    requests = config["max_requests_in_flight_per_worker"]
    mode = "sync" if not config["sample_async"] else "async" if requests is None else f"async, {requests} requests queued"
    threads = " in threads" if config.get("env_threads") else ""
    return f"{layout.plural(config['num_workers'], 'rollout actor')} x {envs}{threads}, {mode}"


def check(ok: bool, key: str, message: str, value: Any) -> None:
    """Raise ``ValueError`` naming ``key`` unless ``ok``."""
    if not ok:
        raise ValueError(f"config key '{key}': {message}, got {value!r}")


def check_common(c: dict[str, Any], bounded_streams: bool) -> None:
    """Check the common keys of the resolved config ``c`` (``bounded_streams``: the trainer is
    on-policy, so its streams may run envs in threads)."""
    env = c["env"]
    check(callable(env) or (isinstance(env, str) and bool(env)), "env", "must be a gymnasium id, a name given to "
          "algorithms.register_env, or a creator function", env)
    check(isinstance(c["env_config"], Mapping), "env_config", "must be a dict", c["env_config"])
    env_presets.check_preprocessing(c["preprocessing"])
    check(c["num_workers"] == "auto" or (is_int(c["num_workers"]) and c["num_workers"] >= 0), "num_workers",
          "must be an int >= 0 or 'auto'", c["num_workers"])
    check(is_int(c["num_envs_per_worker"]) and c["num_envs_per_worker"] >= 1, "num_envs_per_worker",
          "must be an int >= 1", c["num_envs_per_worker"])
    check(is_int(c["train_batch_size"]) and c["train_batch_size"] >= 1, "train_batch_size", "must be an int >= 1",
          c["train_batch_size"])
    check(isinstance(c["sample_async"], bool), "sample_async", "must be True or False", c["sample_async"])
    requests = c["max_requests_in_flight_per_worker"]
    check(requests is None or (is_int(requests) and requests >= 1), "max_requests_in_flight_per_worker",
          "must be None (asynchronous sampling streams) or an int >= 1", requests)
    check(isinstance(c["env_threads"], bool), "env_threads", "must be True or False", c["env_threads"])
    if c["env_threads"]:
        check(is_int(c["num_workers"]) and c["num_workers"] >= 1 and c["sample_async"]
              and requests is None and bounded_streams, "env_threads",
              "True needs streaming rollout actors of an on-policy trainer (num_workers >= 1, "
              "sample_async=True, max_requests_in_flight_per_worker=None)", c["env_threads"])
    check(c["seed"] is None or is_seed(c["seed"]), "seed", "must be None or an int >= 0", c["seed"])
    window = c["metrics_num_episodes_for_smoothing"]
    check(is_int(window) and window >= 1, "metrics_num_episodes_for_smoothing", "must be an int >= 1", window)
    for key in ("num_cpus_for_learner", "num_cpus_per_worker"):
        check(is_number(c[key]) and c[key] >= 0, key, "must be a number >= 0", c[key])
    check(c["observation_filter"] in FILTERS, "observation_filter", f"must be one of {list(FILTERS)}",
          c["observation_filter"])
    check(isinstance(c["normalize_reward"], bool), "normalize_reward", "must be True or False", c["normalize_reward"])
    if c["env_threads"]:
        check(c["observation_filter"] == "NoFilter" and not c["normalize_reward"], "env_threads",
              "True takes no normalisation (observation_filter 'NoFilter', normalize_reward False)", c["env_threads"])
    check_evaluation(c)


def normalization(c: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the rollout workers normalise (their ``normalize`` setting), or None: nothing."""
    if c["observation_filter"] == "NoFilter" and not c["normalize_reward"]:
        return None
    return {"observations": c["observation_filter"] == "MeanStdFilter",
            "gamma": float(c.get("gamma", 0.99)) if c["normalize_reward"] else None}


def check_filter_space(c: Mapping[str, Any], observation_space: Any) -> None:
    """``MeanStdFilter`` takes a Box of floats that is not an image."""
    if c["observation_filter"] != "MeanStdFilter":
        return
    import gymnasium as gym
    import numpy as np

    from algorithms.data.observations import is_image

    ok = (isinstance(observation_space, gym.spaces.Box) and np.issubdtype(observation_space.dtype, np.floating)
          and not is_image(observation_space))
    check(ok, "observation_filter", "'MeanStdFilter' normalises a Box of floats that is not an image; this env's "
          f"observation space is {observation_space}", c["observation_filter"])
