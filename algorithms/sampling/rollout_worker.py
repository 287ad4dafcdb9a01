"""Rollouts: vector environments, the rollout worker (a Ray actor or in-process), episode stats.

A ``RolloutWorker`` owns ``num_envs`` environments behind gymnasium's vector API and a copy of
the policy. ``sample(num_steps)`` steps all of them ``num_steps`` times, choosing the actions of
every environment in one policy call (numpy for the built-in network) and keeping everything
numpy; the fragment it returns holds the (time, env) arrays as sampled and the episodes that
completed in it. The learner turns fragments into a train batch (advantages, for PPO), so that a
fragment sampled with older weights is judged by the current value function.

Vector environments run in gymnasium 1.x's ``NEXT_STEP`` autoreset mode, the mode of gymnasium's
own vectorised CartPole and the default of ``SyncVectorEnv``: the step that ends an episode
returns the episode's *final* observation, and the next ``step()`` call resets that environment,
ignores its action and returns the first observation of the new episode with reward 0. So:

* the transition of that reset step is not a transition of the MDP: it is marked invalid, it is
  neither trained on nor counted as an environment step, and it adds nothing to episode stats;
* the value the policy computes on the final observation (it is the observation the worker acts
  on at the reset step) is exactly the bootstrap value a *truncated* episode needs:
  ``V(final_obs)``; a *terminated* episode bootstraps with 0.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Mapping, overload

import numpy as np

from algorithms.data.normalization import FILTER_KEY, Normalizer
from algorithms.data.observations import ObsSpace, stack, tree_map
from algorithms.envs.registry import EnvCreator, make_vector_env
from algorithms.sampling.env_threads import EnvThreads
from algorithms.sampling.fragment import Fragment, RolloutPolicy


def _node_address() -> str:
    """The address of the Ray node this process runs on ("local" outside Ray)."""
    import ray

    return ray.util.get_node_ip_address() if ray.is_initialized() else "local"


def _unbox(weights_box: list[Any]) -> Any:
    """The weights in ``[ObjectRef]`` (boxed so Ray does not fetch them when they are not needed)."""
    weights = weights_box[0]
    if type(weights).__name__ == "ObjectRef":
        import ray

        weights = ray.get(weights)
    return weights


class RolloutWorker:
    """Samples fragments from ``num_envs`` vector environments with its own copy of the policy.

    ``policy_factory(**policy_kwargs)`` builds the policy, a
    :class:`~algorithms.sampling.fragment.RolloutPolicy` on numpy arrays. A :class:`~algorithms.sampling.fragment.Fragment`
    goes back to the learner as it was sampled, (time, env) arrays and the episodes that ended in
    it; the learner computes the advantages, with its own current value function when the
    fragment's weights are behind.

    As a Ray actor it may outlive its trial: :meth:`configure` readies it for the next trial of
    the sweep (new seeds, weights, env config), which costs far less than a new process. A
    torch policy runs with one thread here; the built-in policy acts in numpy, and torch is never
    imported (it costs a new actor more than anything else it does). In the learner's process
    (``num_workers=0``) the worker leaves the process's settings alone and shares the learner's
    policy object.
    """

    def __init__(self, **settings: Any) -> None:
        self.envs: Any = None
        self._env_key: Any = None
        self._configure_error: BaseException | None = None
        self._abort_upto = -1  # requests numbered at or below this return at once, with nothing
        # Streaming (see :meth:`stream`): steps sampled and not yet taken, guarded by the lock,
        # and weights that arrived while the stream ran, loaded by the sampling thread.
        self._lock = threading.Lock()
        self._steps: list[tuple[Any, ...]] = []
        self._pending_weights: tuple[int, Any] | None = None
        self._new_fragment = False
        self._room = threading.Event()  # set by a take (or an abort): a full stream may step again
        self._max_ahead: int | None = None  # a running stream's bound on its untaken steps
        self._threads: EnvThreads | None = None  # env_threads: one lane (and thread) per env
        self.normalizer: Normalizer | None = None  # set per trial (algorithms/data/normalization.py)
        self._configure(**settings)

    def ready(self) -> bool:
        """True once the worker is built (called in the "control" concurrency group, so it
        answers while a stream runs)."""
        return True

    def abort(self, upto: int) -> None:
        """Cut short the requests numbered ``upto`` or below, running or queued: their trainer
        stopped, and the next trial wants this actor now. Called in a concurrency group of its own
        while ``sample`` runs (see ``algorithms/sampling/worker_group.py``)."""
        self._abort_upto = max(self._abort_upto, upto)
        self._room.set()
        if self._threads is not None:
            self._threads.abort(upto)

    def configure(self, **settings: Any) -> None:
        """Ready the worker for a (new) trial: see :meth:`_configure`. A failure is raised again by
        every ``sample`` until a configure succeeds (its caller does not wait for this call)."""
        try:
            self._configure(**settings)
            self._configure_error = None
        except BaseException as exc:
            self._configure_error = exc
            raise

    def _configure(
        self,
        *,
        env: str | EnvCreator,
        env_config: Mapping[str, Any],
        num_envs: int,
        policy_factory: Callable[..., Any],
        policy_kwargs: Mapping[str, Any],
        seed: int | None,
        worker_index: int = 0,
        single_thread: bool = True,
        policy: Any = None,
        env_threads: bool = False,
        vector_index: int = 0,
        normalize: Mapping[str, Any] | None = None,
    ) -> None:
        """Ready the worker for a (new) trial: its envs (kept when the env and its config are the
        same as the last trial's), a policy whose weights arrive with the first request, and seeds.
        ``env_threads``: each env streams in a thread of its own (``algorithms/sampling/env_threads.py``);
        ``vector_index``: the first env's index in its actor (one env thread's); ``normalize``:
        ``{"observations": bool, "gamma": float | None}`` (``algorithms/data/normalization.py``)."""
        self.worker_index = worker_index
        self.node = _node_address()
        if env_threads:
            if self.envs is not None:
                self.envs.close()
                self.envs, self._env_key = None, None
            self._threads = self._threads or EnvThreads(type(self))
            self.policy: RolloutPolicy = self._threads.configure(env=env, env_config=env_config, num_envs=num_envs,
                                                  policy_factory=policy_factory, policy_kwargs=policy_kwargs,
                                                  seed=seed, worker_index=worker_index)
            self.num_envs, self.weights_version, self._shares_policy = num_envs, -1, False
            self.obs_space: ObsSpace = self._threads.lanes[0].obs_space
            return
        if self._threads is not None:
            self._threads.close()
            self._threads = None
        self._keep_or_make_envs(env, env_config, num_envs, worker_index, vector_index)
        self.num_envs = num_envs
        self.obs_space = ObsSpace(self.envs.single_observation_space)
        self._shares_policy = policy is not None  # the learner's own: its fragments are always current
        self.policy = policy if policy is not None else policy_factory(**policy_kwargs)
        bind_worker = getattr(self.policy, "bind_worker", None)
        if bind_worker is not None:  # e.g. DQN's per-worker exploration
            bind_worker(worker_index)
        if single_thread and "torch" in sys.modules:  # a torch policy: one thread per rollout actor
            sys.modules["torch"].set_num_threads(1)
        self.weights_version = -1
        self._reset(seed, worker_index, normalize)

    def _keep_or_make_envs(self, env: str | EnvCreator, env_config: Mapping[str, Any], num_envs: int,
                           worker_index: int, vector_index: int) -> None:
        """The envs of the last trial when they are the same env, config and count; else new ones."""
        env_key = (env if isinstance(env, str) else id(env), repr(sorted(env_config.items())), num_envs, worker_index,
                   vector_index)
        if self.envs is None or env_key != self._env_key:
            if self.envs is not None:
                self.envs.close()
            self.envs = make_vector_env(env, env_config, num_envs, worker_index, vector_index)
            self._env_key = env_key

    def _reset(self, seed: int | None, worker_index: int, normalize: Mapping[str, Any] | None) -> None:
        """A trial's start: seeds, normalisation, the envs reset, the episode counters at zero."""
        num_envs = self.num_envs
        self.normalizer = None if not normalize else Normalizer(
            tuple(self.envs.single_observation_space.shape) if normalize.get("observations") else None, num_envs,
            normalize.get("gamma"))
        self.rng = np.random.default_rng(None if seed is None else [seed, worker_index])
        env_seed = None if seed is None else (seed * 1_000_003 + worker_index * 10_007) % 2**31
        obs, _ = self.envs.reset(seed=env_seed)  # a vector env seeds its env i with env_seed + i
        self.obs = self.obs_space.stored(obs)
        if self.normalizer is not None:
            self.obs = self.normalizer.observe(self.obs)
        self.prev_done = np.zeros(num_envs, dtype=bool)  # env i resets at its next step
        self._slots_sampled = 0  # env steps (reset steps included) sampled for this trial
        self.ep_return = np.zeros(num_envs, dtype=np.float64)
        self.ep_len = np.zeros(num_envs, dtype=np.int64)
        with self._lock:
            self._steps = []
            self._pending_weights = None
            self._taken_at = time.perf_counter()

    # -- the actor's interface -----------------------------------------------------------
    def set_weights(self, version: int, weights: Mapping[str, Any]) -> None:
        if FILTER_KEY in weights:  # the learner's normalisation statistics travel with its weights
            weights = dict(weights)
            stats = weights.pop(FILTER_KEY)
            if self.normalizer is not None:
                with self._lock:
                    self.normalizer.sync(stats)
        self.policy.load_weights(weights)
        self.weights_version = version

    @overload
    def sample(
        self, num_steps: int, weights_version: int | None = None, weights_box: list[Any] | None = None,
        request: None = None,
    ) -> Fragment: ...

    @overload
    def sample(
        self, num_steps: int, weights_version: int | None = None, weights_box: list[Any] | None = None,
        request: int | None = None,
    ) -> Fragment | None: ...

    def sample(
        self, num_steps: int, weights_version: int | None = None, weights_box: list[Any] | None = None,
        request: int | None = None,
    ) -> Fragment | None:
        """Step every env ``num_steps`` times; returns the fragment (see :meth:`_run`) and stats,
        or None when request number ``request`` was aborted (unnumbered requests never are).

        ``weights_box`` is ``[ObjectRef]`` of the learner's weights (boxed so Ray does not fetch
        it when this worker already holds ``weights_version``).
        """
        if request is not None and request <= self._abort_upto:
            return None
        self._raise_configure_error()
        if self._threads is not None:
            raise RuntimeError("env_threads=True: the envs stream (sample_async=True); sample() steps them in lock-step")
        if weights_version is not None and weights_version != self.weights_version and weights_box:
            self.set_weights(weights_version, _unbox(weights_box))
        start = time.perf_counter()
        fragment = self._run(num_steps, request)
        if fragment is None:
            return None
        return fragment.replace(sample_time_s=time.perf_counter() - start, worker_index=self.worker_index,
                                weights_version=None if self._shares_policy else self.weights_version, node=self.node)

    def _raise_configure_error(self) -> None:
        if self._configure_error is not None:
            raise RuntimeError(
                f"rollout worker {self.worker_index} could not be set up for this trial: {self._configure_error!r}"
            ) from self._configure_error

    # -- streaming: the envs never wait for the learner -------------------------------------
    def stream(self, weights_version: int, weights_box: list[Any], request: int, max_ahead: int | None = None) -> None:
        """Step the envs without pause, with the newest weights that arrived, until request
        number ``request`` is aborted (see :meth:`abort`); the learner collects the steps with
        :meth:`take` and sends weights with :meth:`push_weights`, both from a concurrency group
        of their own while this call runs (RLlib's ``sample_async``: a background sampler).

        New weights are loaded between two steps, so a slow env step delays only this worker's
        switch, and every step records the weights version it was sampled with.

        ``max_ahead``: at most that many steps (of all this worker's envs at once) wait untaken;
        then the stream waits for a take (the learner moves the bound with :meth:`set_max_ahead`).
        Where the learner takes longer to learn on a batch than the actors take to sample one,
        an unbounded stream would pile up steps ever older than the learner's weights (and ever
        more memory) for batches that never catch up."""
        self._raise_configure_error()
        if self._threads is not None:
            self._threads.stream(weights_version, _unbox(weights_box), request, max_ahead)
            return
        if weights_version != self.weights_version:
            self.set_weights(weights_version, _unbox(weights_box))
        envs, policy, rng, lock = self.envs, self.policy, self.rng, self._lock
        stored = self.obs_space.stored
        record = getattr(policy, "record_action_values", False)  # Ape-X's actors: Q(obs, action) too
        policy.begin_fragment()
        with lock:
            self._taken_at = time.perf_counter()
        room = self._room
        self._max_ahead = max_ahead
        while request > self._abort_upto:
            cap = self._max_ahead
            if cap is not None and len(self._steps) >= cap:
                room.clear()
                if len(self._steps) >= cap:  # looked at again: a take may have come between
                    room.wait(0.1)
                continue
            pending = self._pending_weights
            if pending is not None:
                self._pending_weights = None
                self.set_weights(*pending)
            if self._new_fragment:
                self._new_fragment = False
                policy.begin_fragment()
            obs = self.obs
            env_actions, actions, logp, values = policy.act(obs, rng)
            action_values = policy.action_values if record else None  # type: ignore[attr-defined]
            next_obs, rewards, terminated, truncated, _ = envs.step(env_actions)
            # Kept until taken: copies, as a vector env may hand out its own buffers every step.
            next_obs = stored(next_obs)
            rewards, terminated, truncated = np.array(rewards), np.array(terminated), np.array(truncated)
            with lock:  # a step and the observation after it are taken together or not at all
                if self.normalizer is not None:
                    next_obs = self.normalizer.observe(next_obs)
                self._steps.append((obs, actions, logp, values, rewards, terminated, truncated, self.weights_version,
                                    action_values))
                self.obs = next_obs
                self._slots_sampled += len(rewards)

    def set_max_ahead(self, steps: int | None) -> None:
        """A running :meth:`stream`'s new bound on its untaken steps (None: unbounded)."""
        self._max_ahead = steps
        self._room.set()
        if self._threads is not None:
            self._threads.set_max_ahead(steps)

    def slots_sampled(self) -> int:
        """Env steps (reset steps included) this worker sampled for its trial: a trainer letting it
        go checks every one of them reached a batch."""
        return self._threads.slots_sampled() if self._threads is not None else self._slots_sampled

    def push_weights(self, weights_version: int, weights_box: list[Any]) -> None:
        """New weights for a running :meth:`stream`: fetched here, loaded by the sampling thread
        before its next step."""
        if self._threads is not None:
            self._threads.push_weights(weights_version, _unbox(weights_box))
            return
        self._pending_weights = (weights_version, _unbox(weights_box))

    def take(self) -> Fragment | list[Fragment] | None:
        """The steps a :meth:`stream` sampled since the last take, as a fragment (see
        :meth:`_run`; ``last_values`` is None: the learner computes it with its own weights, and
        ``weights_versions`` holds each step's), or None when there are none yet; with
        ``env_threads``, a fragment per env that sampled."""
        if self._threads is not None:
            return self._threads.take()
        with self._lock:
            steps, self._steps = self._steps, []
            last_obs, taken_at = self.obs, self._taken_at
            self._taken_at = time.perf_counter()
            delta = self.normalizer.take_delta() if self.normalizer is not None and steps else None
        self._room.set()
        self._new_fragment = True
        if not steps:
            return None
        obs_rows, *columns = zip(*steps)
        obs = stack(list(obs_rows))
        *columns, recorded = columns
        actions, logp, values, rewards, terminated, truncated, versions = (np.stack(column) for column in columns)
        action_values = None if recorded[0] is None else np.stack(recorded).astype(np.float32, copy=False)
        done = terminated | truncated
        valid = np.empty(done.shape, dtype=bool)
        valid[0] = ~self.prev_done
        valid[1:] = ~done[:-1]
        self.prev_done = done[-1].copy()
        returns, lens = self._episode_stats(rewards, valid, done)
        if self.normalizer is not None:  # the episode stats above are of the env's own rewards
            with self._lock:
                rewards = self.normalizer.rewards(rewards, valid, done)
        return Fragment(
            obs=obs, actions=actions, logp=logp.astype(np.float32, copy=False),
            values=values.astype(np.float32, copy=False), rewards=rewards.astype(np.float32, copy=False),
            terminated=terminated, truncated=truncated, valid=valid, last_obs=last_obs, last_values=None,
            episode_returns=returns, episode_lens=lens, sample_time_s=self._taken_at - taken_at,
            weights_version=int(versions.min()), weights_versions=versions, worker_index=self.worker_index,
            node=self.node, filter_delta=delta, action_values=action_values,
        )

    def apply(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(self, *args)`` in this worker: an algorithm's own use of the worker's envs, policy
        and normalisation (ES and ARS play their perturbations' episodes: ``algorithms/es/``)."""
        self._raise_configure_error()
        return fn(self, *args)

    def close(self) -> None:
        if self._threads is not None:
            self._threads.close()
        if self.envs is not None:
            self.envs.close()

    # -- the sampling loop -------------------------------------------------------------------
    def _run(self, T: int, request: int | None = None) -> Fragment | None:
        """The fragment: (T, N) arrays of observations, actions, the behaviour policy's
        log-probabilities and values, rewards, terminated/truncated flags and ``valid`` (False
        at NEXT_STEP reset steps), the last observation and its value, and the returns and lengths
        of the episodes that ended in it. None if the request was aborted meanwhile: the worker's
        episode bookkeeping is then behind its envs, and it is configured anew before it samples
        again (an abort only ever comes when its trainer stops)."""
        N = self.num_envs
        envs, policy, rng = self.envs, self.policy, self.rng
        space = self.obs_space
        obs_buf: Any = space.empty((T, N))
        logp_buf = np.empty((T, N), dtype=np.float32)
        value_buf = np.empty((T, N), dtype=np.float32)
        reward_buf = np.empty((T, N), dtype=np.float32)
        term_buf = np.empty((T, N), dtype=bool)
        trunc_buf = np.empty((T, N), dtype=bool)
        actions_buf: np.ndarray | None = None
        q_buf = np.empty((T, N), dtype=np.float32) if getattr(policy, "record_action_values", False) else None
        obs = self.obs
        one_array = isinstance(obs_buf, np.ndarray)
        norm = self.normalizer
        policy.begin_fragment()
        # The hot loop: one policy call and one vector-env step per iteration, nothing else.
        for t in range(T):
            if request is not None and request <= self._abort_upto:
                return None
            if one_array:
                obs_buf[t] = obs
            else:
                tree_map(lambda buf, leaf: buf.__setitem__(t, leaf), obs_buf, obs)  # noqa: B023 - used at once
            env_actions, actions, logp_buf[t], value_buf[t] = policy.act(obs, rng)
            if actions_buf is None:
                actions_buf = np.empty((T,) + actions.shape, dtype=actions.dtype)
            actions_buf[t] = actions
            if q_buf is not None:
                q_buf[t] = policy.action_values  # type: ignore[attr-defined]  # RecordsActionValues
            obs, reward_buf[t], term_buf[t], trunc_buf[t], _ = envs.step(env_actions)
            if norm is not None:
                obs = norm.observe(obs)
        obs = space.stored(obs)  # the last one, kept: the env may reuse its buffer
        self._slots_sampled += T * N
        last_values = policy.value(obs)  # V(last obs): bootstrap at the fragment's end
        self.obs = obs
        done = term_buf | trunc_buf
        valid = np.empty((T, N), dtype=bool)  # False at NEXT_STEP reset steps
        valid[0] = ~self.prev_done
        valid[1:] = ~done[:-1]
        self.prev_done = done[-1].copy()
        returns, lens = self._episode_stats(reward_buf, valid, done)
        assert actions_buf is not None  # T >= 1
        delta = None
        if norm is not None:  # the episode stats above are of the env's own rewards
            reward_buf = norm.rewards(reward_buf, valid, done)
            delta = norm.take_delta()
        return Fragment(obs=obs_buf, actions=actions_buf, logp=logp_buf, values=value_buf, rewards=reward_buf,
                        terminated=term_buf, truncated=trunc_buf, valid=valid, last_obs=obs, last_values=last_values,
                        episode_returns=returns, episode_lens=lens, filter_delta=delta, action_values=q_buf)

    def _episode_stats(self, rewards: np.ndarray, valid: np.ndarray, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Returns and lengths of the episodes that ended in this fragment, in order of completion.

        Vectorised over episodes: an episode's return is the difference of its env's cumulative
        reward at its end and at the previous episode's end in the fragment (or at the
        fragment's start, plus what the episode had gathered in earlier fragments).
        """
        cum_return = np.cumsum(rewards * valid, axis=0, dtype=np.float64)
        cum_len = np.cumsum(valid, axis=0, dtype=np.int64)
        ts, env_ids = np.nonzero(done)  # row-major: in order of completion
        order = np.lexsort((ts, env_ids))  # grouped by env, in time within an env
        t_sorted, e_sorted = ts[order], env_ids[order]
        ret_end, len_end = cum_return[t_sorted, e_sorted], cum_len[t_sorted, e_sorted]
        first = np.ones(len(order), dtype=bool)  # an env's first episode end in this fragment
        first[1:] = e_sorted[1:] != e_sorted[:-1]
        ret_start = np.where(first, -self.ep_return[e_sorted], np.roll(ret_end, 1))
        len_start = np.where(first, -self.ep_len[e_sorted], np.roll(len_end, 1))
        returns = np.empty(len(order))
        lens = np.empty(len(order), dtype=np.int64)
        returns[order] = ret_end - ret_start
        lens[order] = len_end - len_start
        # What the episodes still running at the fragment's end have gathered so far.
        last = np.ones(len(order), dtype=bool)
        last[:-1] = first[1:]
        ended = np.zeros(self.num_envs, dtype=bool)
        ended[e_sorted[last]] = True
        base_return = np.zeros(self.num_envs)
        base_len = np.zeros(self.num_envs, dtype=np.int64)
        base_return[e_sorted[last]] = ret_end[last]
        base_len[e_sorted[last]] = len_end[last]
        self.ep_return = np.where(ended, 0.0, self.ep_return) + cum_return[-1] - base_return
        self.ep_len = np.where(ended, 0, self.ep_len) + cum_len[-1] - base_len
        return returns, lens
