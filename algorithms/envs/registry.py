"""The envs a trainer builds: names registered with :func:`register_env`, gymnasium ids, the Atari
and MiniGrid presets, each behind gymnasium's vector API in NEXT_STEP autoreset mode."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import gymnasium as gym

from algorithms.envs.presets import _fail, ensure_registered, env_creator, quiet_simulator
from algorithms.envs.vector_env import SerialVectorEnv

EnvCreator = Callable[[Mapping[str, Any]], gym.Env]

_ENV_CREATORS: dict[str, EnvCreator] = {}


class EnvContext(dict):
    """The ``env_config`` dict handed to an env creator, with the worker's and the env's index."""

    def __init__(self, env_config: Mapping[str, Any], worker_index: int = 0, vector_index: int = 0) -> None:
        super().__init__(env_config)
        self.worker_index = worker_index
        self.vector_index = vector_index


def register_env(name: str, creator: EnvCreator) -> None:
    """Make ``creator(env_config) -> gym.Env`` available as ``config["env"] = name``.

    The name is looked up where a trainer's config is resolved: in a sweep, the driver (register
    before ``tune.run``), which hands the creator to each trial with its config; outside one, the
    process that builds the trainer. Rollout actors get the creator from their trainer. A
    function trainable that builds a trainer itself registers its envs inside the function, or
    passes the creator as ``env``.

    Example:
        >>> import gymnasium as gym
        >>> register_env("my-cartpole", lambda cfg: gym.make("CartPole-v1", **cfg))
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_env: name must be a non-empty string, got {name!r}")
    if not callable(creator):
        raise ValueError(f"register_env: creator for {name!r} must be callable, got {type(creator).__name__}")
    _ENV_CREATORS[name] = creator


def lookup_env_creator(name: str) -> EnvCreator | None:
    """The creator registered as ``name`` in this process, else None."""
    return _ENV_CREATORS.get(name)


def resolve_env(env: str | EnvCreator) -> str | EnvCreator:
    """A registered creator, or the gymnasium id itself; raises ValueError for an unknown id."""
    if callable(env):
        return env
    creator = lookup_env_creator(env)
    if creator is not None:
        return creator
    try:
        gym.spec(env)
    except Exception as exc:  # noqa: BLE001 - gymnasium raises NameNotFound, VersionNotFound, ModuleNotFoundError...
        raise ValueError(
            f"env: {env!r} is neither a gymnasium id nor registered with algorithms.register_env ({exc})"
        ) from None
    return env


def make_vector_env(
    env: str | EnvCreator, env_config: Mapping[str, Any], num_envs: int, worker_index: int = 0, first_index: int = 0
) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env`` behind gymnasium's vector API, in NEXT_STEP autoreset mode; a
    creator gets ``vector_index`` ``first_index``, ``first_index + 1``, ... in its ``EnvContext``.

    A gymnasium id with a native vectorised implementation (CartPole) uses it; any other id, or
    a registered creator, is stepped env by env in a :class:`~algorithms.shared.vector_env.SerialVectorEnv`.
    """
    if callable(env):
        creator = env
        fns = [lambda i=i: creator(EnvContext(env_config, worker_index, first_index + i)) for i in range(num_envs)]
        envs: gym.vector.VectorEnv = SerialVectorEnv(fns)
    else:
        quiet_simulator(env)
        native: gym.vector.VectorEnv | None = None
        if gym.spec(env).vector_entry_point is not None:
            try:
                native = gym.make_vec(env, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_config)
            except (ImportError, gym.error.DependencyNotInstalled):
                native = None  # e.g. a jax implementation without jax: fall back to the plain one
        envs = native if native is not None else SerialVectorEnv(
            [lambda: gym.make(env, **env_config) for _ in range(num_envs)])
    mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:
        envs.close()
        raise ValueError(f"env {env!r}: vector env autoreset mode {mode} is not supported (NEXT_STEP is)")
    return envs


def env_spaces(env: str | EnvCreator, env_config: Mapping[str, Any]) -> tuple[gym.Space, gym.Space]:
    """The single-env observation and action spaces of ``env``."""
    envs = make_vector_env(env, env_config, 1)
    try:
        return envs.single_observation_space, envs.single_action_space
    finally:
        envs.close()

def trial_env(env: str | EnvCreator, env_config: Mapping[str, Any], preprocessing: Any) -> str | EnvCreator:
    """What a trainer builds for ``config["env"]``: a registered creator or a callable as given, an
    Atari or MiniGrid id as :func:`env_creator`'s creator, any other gymnasium id as itself;
    raises ValueError naming ``env`` for an unknown id, ``preprocessing`` for options that do not apply."""
    if isinstance(env, str) and lookup_env_creator(env) is None:
        ensure_registered(env)
        resolved = resolve_env(env)
        assert isinstance(resolved, str)
        creator = env_creator(resolved, env_config, preprocessing)
        return resolved if creator is None else creator
    if isinstance(preprocessing, Mapping):
        _fail("options apply to Atari and MiniGrid gymnasium ids, not to a creator", preprocessing)
    return resolve_env(env)
