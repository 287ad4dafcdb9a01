"""The base of distributed trainers: a Trainable that owns a group of rollout actors.

``DistributedTrainer`` does what every trainer needs and leaves the algorithm to a subclass
(on-policy: ``algorithms/ppo/trainer.py``; off-policy, with a replay buffer: ``algorithms/dqn/trainer.py``,
``algorithms/sac/trainer.py``):

* config: defaults, aliases, unknown keys and bad values rejected with the key named; in a
  sweep the driver resolves a trial's config once (``prepare_trial``: defaults, checks, the
  ``num_workers="auto"`` layout, the env's creator) and the trial takes that, as it is;
* ``default_resource_request``: bundle 0 for the learner (the trial actor), one bundle per
  rollout actor, so a trial reserves its workers' CPUs atomically with its own and a sweep of
  trainers never deadlocks; the actors are placed into those bundles of the trial's group;
* a ``WorkerGroup`` of rollout actors (``algorithms/sampling/worker_group.py``: or, with
  ``num_workers=0``, one rollout worker in the learner's process), reused from trial to trial of
  a sweep, weights broadcast with one ``ray.put`` per iteration, synchronous or asynchronous
  fragment collection, and replacement of an actor that died;
* the metric window (the last 100 completed episodes), counters, timings and checkpoints;
* elastic resources (``update_resources``, driven by a ``ResourceChangingScheduler`` with
  ``DistributeResources(add_bundles=True)``): one rollout actor per bundle past the learner's, so
  the trial's rollout actors grow and shrink with its bundles while the learner, its optimiser
  and counters go on untouched, and no sampled step is lost.

An iteration is ``training_step``: by default (on-policy) it samples ``train_batch_size`` env
steps, and the subclass's ``postprocess_fragments`` makes them a train batch for its
``learn_on_batch``; an off-policy trainer overrides it (sample into a replay buffer, learn from
that). A subclass provides ``build_learner`` and the state of its learner; ``build_policy``
builds the model of the contract (``algorithms/models/contract.py``) unless the subclass has its own
(``examples/a2c.py`` is an algorithm in one page).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from algorithms.envs import presets as env_presets
from algorithms.sampling import layout
from algorithms.sampling.fragment import Fragment, TrainBatch
from algorithms.core.common_config import (
    COMMON_DEFAULTS, LAYOUT_REASON, check_common, check_filter_space, normalization, sampling_layout,
)
from algorithms.data.normalization import FILTER_KEY, NormalizerStats
from algorithms.core.evaluation_config import EvaluationSettings
from algorithms.core.resolved_trial import (
    ResolvedTrial, check_evaluation_env, differs, env_spaces_of, evaluation_bundles, same_config,
)
from algorithms.core.learner_config import MODEL_DEFAULTS, check_learner_keys, learner_device, resolve_model
from algorithms.core.agent import load_trainer, make_single_env, write_agent_file
from algorithms.envs.registry import trial_env
from algorithms.sampling.episodes import EpisodeWindow
from algorithms.sampling.evaluation import EVALUATION_RESULT_KEYS, Evaluator
from algorithms.sampling.rollout_actors import cores_here
from algorithms.sampling.worker_group import WorkerGroup
from tuner.trainable.checkpoint import atomic_file
from tuner.trainable.trainable import Trainable


STATE_FILE = "trainer_state.pt"
#: How long a streaming trainer's set-up waits for its rollout actors before it builds the learner.
ACTOR_START_WAIT_S = 60.0
class DistributedTrainer(Trainable):
    """A ``Trainable`` whose ``step()`` samples from its rollout workers, then learns.

    Subclasses set ``_name``, ``_defaults`` (their own keys and defaults) and ``_aliases``, and
    implement ``validate_algorithm_config``, ``postprocess_fragments``,
    ``build_learner``, ``learn_on_batch``, ``learner_state`` / ``load_learner_state`` and
    ``reset_algorithm_config``.
    """

    _name: ClassVar[str] = "Trainer"
    _defaults: ClassVar[dict[str, Any]] = {}
    _aliases: ClassVar[dict[str, str]] = {}
    #: Keys whose change needs a new trainer (new actors, new network): reset_config returns False.
    _rebuild_keys: ClassVar[tuple[str, ...]] = (
        "env", "env_config", "preprocessing", "num_workers", "num_envs_per_worker", "sample_async", "env_threads", "seed",
        "num_cpus_for_learner", "num_cpus_per_worker", "num_gpus_for_learner", "model", "model_config",
        "optimizer", "optimizer_config", "evaluation_num_workers",
    )
    #: Top-level keys that stand for options of the built-in model (see ``learner_config.resolve_model``).
    _model_shorthands: ClassVar[tuple[str, ...]] = ()
    #: The built-in model's default options for this trainer.
    _model_defaults: ClassVar[dict[str, Any]] = MODEL_DEFAULTS

    # -- config --------------------------------------------------------------------------------
    @classmethod
    def default_config(cls) -> dict[str, Any]:
        return {**COMMON_DEFAULTS, **cls._defaults}

    @classmethod
    def resolve_config(cls, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """The full config: defaults, then ``config`` (aliases mapped); raises ValueError naming a bad key."""
        defaults = cls.default_config()
        resolved = copy.deepcopy(defaults)
        given: dict[str, Any] = {}
        for key, value in dict(config or {}).items():
            name = cls._aliases.get(key, key)
            if name not in defaults:
                allowed = sorted(set(defaults) | set(cls._aliases))
                raise ValueError(f"{cls._name} config: unknown key {key!r}; allowed keys: {allowed}")
            if name in given:
                raise ValueError(f"{cls._name} config: key {key!r} given twice (as {name!r} and an alias)")
            given[name] = value
        resolved.update(given)
        check_common(resolved, cls.bounded_streams)
        resolve_model(resolved, given, cls._model_shorthands, cls._model_defaults)
        check_learner_keys(resolved)
        if resolved["num_workers"] == "auto":
            resolved[LAYOUT_REASON] = layout.resolve(resolved, given, threads_allowed=cls.bounded_streams)
        cls.validate_algorithm_config(resolved, given)
        return resolved

    @classmethod
    def validate_algorithm_config(cls, config: dict[str, Any], given: dict[str, Any]) -> None:
        """Check (and where a default depends on another key, adjust) the algorithm's own keys.

        ``given`` holds the keys the user set; raise ValueError naming the first bad key.
        """

    @classmethod
    def check_metric(cls, metric: str, config: Mapping[str, Any]) -> None:
        """An ``evaluation/...`` metric needs evaluation on, and names a key an evaluation reports."""
        if not metric.startswith("evaluation/"):
            return
        interval = dict(config).get("evaluation_interval")
        if not interval:
            raise ValueError(f"metric {metric!r}: {cls._name} reports evaluation/... keys only with evaluation on; "
                             f"set config key 'evaluation_interval' to an int >= 1 (it is {interval!r})")
        if metric.removeprefix("evaluation/") not in EVALUATION_RESULT_KEYS:
            raise ValueError(f"metric {metric!r}: an evaluation reports "
                             f"{['evaluation/' + key for key in EVALUATION_RESULT_KEYS]}")

    @classmethod
    def default_resource_request(cls, config: Mapping[str, Any]) -> list[dict[str, float]]:
        """Bundle 0: the learner; bundles 1..num_workers: one per rollout actor.

        Runs in the driver before the trial starts, so a bad config or an unknown env id fails
        the sweep at once instead of a few seconds into each trial."""
        c = cls.prepare_trial(config).config
        learner = {"CPU": float(c["num_cpus_for_learner"])}
        if c["num_gpus_for_learner"]:
            learner["GPU"] = float(c["num_gpus_for_learner"])
        if c["num_cpus_per_worker"] <= 0:
            return [learner]
        actors = c["num_workers"] + evaluation_bundles(c)
        return [learner] + [{"CPU": float(c["num_cpus_per_worker"])} for _ in range(actors)]

    supports_elastic_resources: ClassVar[bool] = True
    #: Streams hold at most a train batch untaken (see ``WorkerGroup``): an on-policy learner
    #: learns on each batch once, and steps sampled beyond its pace would only grow older.
    bounded_streams: ClassVar[bool] = True
    workers: WorkerGroup  # built in setup
    _resized: int

    @classmethod
    def accepts_resources(cls, config: Mapping[str, Any], bundles: Any, prepared: Any = None) -> bool:
        """Whether a running trial takes ``bundles`` in place: it has rollout actors with a bundle
        each, and every bundle past its own request holds a rollout actor (CPUs only, at least
        ``num_cpus_per_worker``): each is one more actor."""
        c = prepared.config if isinstance(prepared, ResolvedTrial) else cls.resolve_config(config)
        cpus = float(c["num_cpus_per_worker"])
        own = 1 + int(c["num_workers"]) + evaluation_bundles(c)
        if not c["num_workers"] or cpus <= 0 or len(bundles) < own:
            return False
        return all(set(b) <= {"CPU"} and b.get("CPU", 0.0) + 1e-9 >= cpus for b in bundles[own:])

    def update_resources(self, new_resources: list[dict[str, float]], placement_groups: Any = ()) -> bool:
        """Take the trial's new bundles in place: one rollout actor per bundle past the learner's,
        those past the trial's own group in ``placement_groups`` (one each). New actors join the
        sampling as they come up; actors let go finish and their steps go into the next batch (see
        ``WorkerGroup.resize``). The learner is untouched. False when this trainer samples in its
        learner's process or the bundles do not match its own group plus ``placement_groups``."""
        groups = list(placement_groups)
        own = 1 + self.cfg["num_workers"] + evaluation_bundles(self.cfg)
        if self.workers.local is not None or len(new_resources) != own + len(groups):
            return False
        started, retired = self.workers.resize(groups)
        self._resized += started + retired
        self._layout = sampling_layout({**self.cfg, "num_workers": self.workers.num_workers})
        return True

    @classmethod
    def prepare_trial(cls, config: Mapping[str, Any]) -> ResolvedTrial:
        """The trial's config resolved in the driver (see ``Trainable.prepare_trial``): its
        layout decided, its env's creator looked up there (where it was registered) and wrapped
        per ``preprocessing``, and its observation space checked before anything samples."""
        resolved = cls.resolve_config(config)
        env = trial_env(resolved["env"], resolved["env_config"], resolved["preprocessing"])
        observation_space, action_space = env_spaces_of(resolved, env)
        env_presets.check_observation_space(observation_space, resolved["env"])
        check_filter_space(resolved, observation_space)
        check_evaluation_env(resolved, (observation_space, action_space))
        return ResolvedTrial(given=dict(config), config=resolved, env=env,
                             observation_space=observation_space, action_space=action_space)

    def _resolved(self, config: Mapping[str, Any] | None) -> ResolvedTrial:
        """``config`` as the driver resolved it for this trial, or resolved here (outside a
        sweep, or for a config the driver did not prepare)."""
        info = self.get_trial_info()
        prepared = info.prepared if info is not None else None
        if isinstance(prepared, ResolvedTrial) and same_config(prepared.given, config or {}):
            return dataclasses.replace(prepared, config=copy.deepcopy(prepared.config))
        return self.prepare_trial(config or {})

    # -- to implement ------------------------------------------------------------------------
    def build_policy(self, observation_space: Any, action_space: Any) -> tuple[Any, Callable[..., Any], dict[str, Any]]:
        """Return (policy, factory, kwargs): the learner's policy and how workers build their copy.

        By default the module ``config["model"]`` describes (the contract: ``algorithms/models/contract.py``),
        initialised from the trial's seed, as a ``TorchPolicy`` on the learner's device; rollout
        actors build their own on CPU with ``make_torch_policy``."""
        import torch

        from algorithms.models.distributions import action_distribution
        from algorithms.models.contract import build_model
        from algorithms.models.torch_policy import TorchPolicy, make_torch_policy

        c = self.cfg
        with torch.random.fork_rng(devices=[]):  # the module's init, seeded, without touching the global RNG
            torch.manual_seed(self.seed)
            module = build_model(c["model"], c["model_config"], observation_space, action_space,
                                 action_distribution(action_space))
        policy = TorchPolicy(module, observation_space, action_space, self.device, model=c["model"])
        kwargs = {"model": c["model"], "model_config": dict(c["model_config"]),
                  "observation_space": observation_space, "action_space": action_space}
        return policy, make_torch_policy, kwargs

    def postprocess_fragments(self, fragments: list[Fragment]) -> TrainBatch:
        """The train batch made of the fragments the workers returned: the transitions to learn
        from, flat (see :class:`~algorithms.sampling.fragment.TrainBatch`). A fragment's ``weights_version``
        below ``self.workers.weights_version`` was sampled with older weights."""
        raise NotImplementedError

    def rollout_policy(
        self, observation_space: Any, action_space: Any
    ) -> tuple[Callable[..., Any], dict[str, Any], Mapping[str, np.ndarray]] | None:
        """(factory, kwargs, first weights) of the rollout actors' policy, known before
        ``build_policy`` runs (without torch), so the actors start, and streams sample, while the
        learner builds its network; ``build_policy`` must then start from these weights. None:
        the actors start after ``build_policy``, with its factory and weights."""
        return None

    #: Which learner ``build_learner`` chose ("torch", or a subclass's own fast path), for results.
    learner_name = "torch"

    def build_learner(self) -> None:
        """Create the optimiser and whatever else ``learn_on_batch`` needs."""

    def learn_on_batch(self, batch: TrainBatch) -> dict[str, float]:
        raise NotImplementedError

    def learner_state(self) -> dict[str, Any]:
        return {}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        pass

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Apply an in-place config change (``self.cfg`` already holds ``new``)."""

    # -- Trainable ------------------------------------------------------------------------------
    def setup(self, config: dict[str, Any]) -> None:
        resolved = self._resolved(config)
        self.cfg = resolved.config
        c = self.cfg
        if c["seed"] is None:
            entropy = np.random.SeedSequence().entropy
            assert isinstance(entropy, int)  # drawn from the OS when none is given
            c["seed"] = int(entropy % (2**31))
        self.seed = int(c["seed"])
        self.env = resolved.env
        self.observation_space, self.action_space = resolved.observation_space, resolved.action_space
        self.env_steps_total = 0
        self._this_iter = {"sample_time_s": 0.0, "env_steps": 0, "episodes": 0}
        self._layout = sampling_layout(c)
        self.window = EpisodeWindow(c["metrics_num_episodes_for_smoothing"])
        norm = normalization(c)
        #: The trial's normalisation statistics, merged from its rollout workers (None: none).
        self.normalizer_stats = None if norm is None else NormalizerStats.empty(
            tuple(self.observation_space.shape) if norm["observations"] else None, norm["gamma"] is not None)
        rollout = self.rollout_policy(self.observation_space, self.action_space) if c["num_workers"] else None
        if rollout is not None:
            # The rollout actors' processes start now: they are the longer part of a trial's start.
            factory, policy_kwargs, weights = rollout
            self.workers = self._worker_group(factory, policy_kwargs, local_policy=None)
            self.workers.set_weights(lambda: weights)
            if self._streams():
                self.workers.start_streams()
                # Streams sample while the learner imports torch and builds, so the actors' start
                # is on the trial's critical path and the learner's is not: on a few cores the two
                # compete for the CPU, and building after the actors are up starts sampling sooner.
                self.workers.wait_until_up(ACTOR_START_WAIT_S)
        try:
            self._set_learner_threads()
            self.device = learner_device(self.cfg["num_gpus_for_learner"])
            self.policy, factory, policy_kwargs = self.build_policy(self.observation_space, self.action_space)
            self.build_learner()
        except BaseException:
            if rollout is not None:  # parked for the next trial, not left running
                self.workers.stop()
            raise
        if rollout is None:
            self.workers = self._worker_group(factory, policy_kwargs, local_policy=self.policy)
            self.publish_weights()
        self._resized = 0  # actors started or let go by update_resources
        self._policy_source = (factory, policy_kwargs)  # how evaluation actors build their policy
        self.evaluator = self._build_evaluator()
        self.last_evaluation: dict[str, Any] | None = None  # attached to every result (see evaluation_config)
        self._setup_done_at = time.perf_counter()
        self._start_reported = False  # the rollout actors' start goes with the first result

    def _build_evaluator(self) -> Evaluator | None:
        settings = EvaluationSettings.of(self.cfg)
        if settings is None:
            return None
        c = self.cfg
        env = self.env if "env_config" not in c["evaluation_config"] else trial_env(
            c["env"], settings.env_config, c["preprocessing"])
        group = None
        if settings.num_workers:
            import ray

            group = ray.util.get_current_placement_group() if ray.is_initialized() else None
        factory, policy_kwargs = self._policy_source
        return Evaluator(settings, env=env, seed=self.seed, policy_factory=factory, policy_kwargs=policy_kwargs,
                         local_policy=self.policy, num_cpus=c["num_cpus_per_worker"], group=group,
                         first_bundle=1 + c["num_workers"])

    def _evaluate_if_due(self) -> dict[str, Any] | None:
        """The latest evaluation, played now when due (see ``algorithms/core/evaluation_config.py``)."""
        if self.evaluator is None:
            return None
        iteration = self.iteration + 1
        if self.evaluator.settings.due(iteration, self.last_evaluation is not None):
            metrics = self.evaluator.evaluate(self.weights_to_send, self.normalizer_stats)
            self.last_evaluation = {**metrics, "iteration": iteration}
        return self.last_evaluation

    def _streams(self) -> bool:
        """Whether rollout actors sample as streams (``WorkerGroup.stream``)."""
        c = self.cfg
        return bool(c["num_workers"]) and c["sample_async"] and c["max_requests_in_flight_per_worker"] is None

    def _worker_group(self, factory: Callable[..., Any], policy_kwargs: dict[str, Any], local_policy: Any) -> WorkerGroup:
        c = self.cfg
        return WorkerGroup(
            worker_kwargs=dict(
                env=self.env,
                env_config=dict(c["env_config"]),
                num_envs=c["num_envs_per_worker"],
                policy_factory=factory,
                policy_kwargs=policy_kwargs,
                seed=self.seed,
                **({"env_threads": True} if c["env_threads"] else {}),
                **({"normalize": norm} if (norm := normalization(c)) else {}),
            ),
            num_workers=c["num_workers"],
            num_cpus_per_worker=c["num_cpus_per_worker"],
            local_policy=local_policy,
            # Streams sample from the moment each actor is up: started as many at once as this
            # node has cores, the first are up (and sampling) long before the last.
            max_starting=cores_here() if self._streams() else None,
            stream_ahead=self.stream_bound(),
            whole_takes=not self.bounded_streams,
        )

    def stream_bound(self) -> int | None:
        """Env steps the streams may sample ahead of the learner (``WorkerGroup``'s
        ``stream_ahead``): an on-policy trainer's batch; None: unbounded."""
        return int(self.cfg["train_batch_size"]) if self.bounded_streams else None

    def _set_learner_threads(self) -> None:
        # Small networks: one thread per whole CPU of the learner's bundle, at least one
        # (see algorithms/ppo/trainer.py for the measurement), for torch and for numpy's BLAS alike: in a
        # Ray actor OMP_NUM_THREADS already says so, in a plain process BLAS would use every core.
        import torch
        from threadpoolctl import threadpool_limits

        threads = max(1, int(self.cfg["num_cpus_for_learner"]))
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        threadpool_limits(limits=threads, user_api="blas")

    def fragment_length(self, env_steps: int | None = None) -> tuple[int, int]:
        """(vector steps per fragment, fragments) for ``env_steps`` env steps (default
        ``train_batch_size``), spread over the workers and their envs."""
        c = self.cfg
        workers = max(1, self.workers.num_workers if hasattr(self, "workers") else c["num_workers"])
        env_steps = c["train_batch_size"] if env_steps is None else env_steps
        steps = math.ceil(env_steps / (workers * c["num_envs_per_worker"]))
        return steps, workers

    # -- one iteration ------------------------------------------------------------------------
    def sample(self, env_steps: int) -> list[Fragment]:
        """Fragments holding about ``env_steps`` env steps (reset steps included) from the rollout
        workers: streamed, or sampled on request (synchronously or not, per the config); timed
        into the iteration's ``sample_time_s``."""
        start = time.perf_counter()
        if self._streams():
            fragments = self.workers.stream(env_steps)
        else:
            num_steps, num_fragments = self.fragment_length(env_steps)
            requests = self.cfg["max_requests_in_flight_per_worker"] or 1
            fragments = self.workers.sample(num_steps, num_fragments, self.cfg["sample_async"], requests)
        self._this_iter["sample_time_s"] += time.perf_counter() - start
        if self.normalizer_stats is not None:
            for fragment in fragments:
                if fragment.filter_delta is not None:
                    self.normalizer_stats.merge(fragment.filter_delta)
        return fragments

    def weights_to_send(self) -> dict[str, Any]:
        """The policy's weights as rollout and evaluation actors take them: with the trial's
        normalisation statistics, when it normalises."""
        weights = self.policy.get_weights()
        if self.normalizer_stats is None:
            return weights
        return {**weights, FILTER_KEY: self.normalizer_stats.state()}

    def publish_weights(self) -> None:
        """Send the current weights (and normalisation statistics) to the rollout actors."""
        self.workers.set_weights(self.weights_to_send)

    def count_batch(self, env_steps: int, episode_returns: np.ndarray, episode_lens: np.ndarray) -> None:
        """Count a batch's env steps (transitions) and the episodes that ended in it."""
        self.env_steps_total += env_steps
        self._this_iter["env_steps"] += env_steps
        self._this_iter["episodes"] += len(episode_returns)
        self.window.add(episode_returns, episode_lens)

    def training_step(self) -> dict[str, Any]:
        """One iteration's work, returning the learner's metrics: on-policy, sample
        ``train_batch_size`` env steps, make them a batch, learn on it, publish the weights.
        An off-policy trainer samples into its replay buffer and learns from that instead."""
        fragments = self.sample(self.cfg["train_batch_size"])
        batch = self.postprocess_fragments(fragments)
        self.count_batch(batch.env_steps, batch.episode_returns, batch.episode_lens)
        metrics = self.learn_on_batch(batch)
        self.publish_weights()
        return metrics

    def step(self) -> dict[str, Any]:
        start = time.perf_counter()
        first, self._start_reported = not self._start_reported, True
        self._this_iter = {"sample_time_s": 0.0, "env_steps": 0, "episodes": 0}
        learn_metrics = self.training_step()
        end = time.perf_counter()
        env_steps, sample_s = self._this_iter["env_steps"], self._this_iter["sample_time_s"]
        result = {
            **self.window.metrics(),
            "episodes_this_iter": self._this_iter["episodes"],
            "episodes_total": self.window.episodes_total,
            "env_steps_this_iter": env_steps,
            "env_steps_total": self.env_steps_total,
            "env_steps_per_s": env_steps / max(end - start, 1e-9),
            "sample_time_s": sample_s,
            "learn_time_s": end - start - sample_s,
            "num_worker_restarts": self.workers.num_restarts,
            "num_workers": self.workers.num_workers,  # rollout actors now (elastic: see update_resources)
            "sampling_layout": self._layout,
            "learner": self.learner_name,
            "learner_device": str(self.device),
            "rollout_nodes": self.workers.placement(),
        }
        if LAYOUT_REASON in self.cfg:
            result["sampling_layout_reason"] = self.cfg[LAYOUT_REASON]
        if first:  # how the rollout actors started: reused from the last trial, or new processes
            start_s = self.workers.start_s or 0.0
            # the part of their start that ran while this trial was still setting up (it is inside
            # the trial's start, not its first sampling)
            in_setup = min(start_s, max(self._setup_done_at - self.workers.created_at, 0.0))
            result.update(worker_start_time_s=start_s, worker_start_in_setup_s=in_setup,
                          num_workers_reused=self.workers.reused, num_workers_started=self.workers.started)
        result.update(learn_metrics)
        evaluation = self._evaluate_if_due()
        if evaluation is not None:
            result["evaluation"] = dict(evaluation)
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        state = {
            "format": 1,
            "algorithm": self._name,
            "policy": {k: v.cpu() for k, v in self.policy.state_dict().items()},
            "counters": {"env_steps_total": self.env_steps_total, "seed": self.seed},
            "episode_window": self.window.state(),
            "learner": self.learner_state(),
            "evaluation": self.last_evaluation,
            "normalizer": None if self.normalizer_stats is None else self.normalizer_stats.state(),
        }
        import torch

        with atomic_file(os.path.join(checkpoint_dir, STATE_FILE)) as f:  # over a checkpoint on record, at once
            torch.save(state, f)
        write_agent_file(checkpoint_dir, self._name, self.config)  # what load_agent builds the agent from

    # -- the trained agent -------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, checkpoint: str, config: Mapping[str, Any] | None = None) -> DistributedTrainer:
        """The trainer a checkpoint (a folder, or a URI of object storage) was saved from, restored,
        sampling in this process, on CPU (as RLlib's ``Algorithm.from_checkpoint``); ``config``
        overrides what the checkpoint says (and gives what it could not keep)."""
        return load_trainer(checkpoint, config, expected=cls._name)

    def act(self, observation: Any, explore: bool = False) -> Any:
        """The action for one observation of the env (deterministic unless ``explore``)."""
        return self.compute_single_action(observation, explore=explore)

    def make_env(self, render_mode: str | None = None) -> Any:
        """One env as the trial's rollout workers make it (its creator, config and preprocessing)."""
        return make_single_env(self.env, self.cfg["env_config"], render_mode)

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        if not isinstance(checkpoint, str):
            raise ValueError(f"{self._name}: expected a checkpoint directory, got {type(checkpoint).__name__}")
        import torch

        state = torch.load(os.path.join(checkpoint, STATE_FILE), map_location="cpu", weights_only=True)
        self.policy.load_state_dict(state["policy"])
        self.env_steps_total = int(state["counters"]["env_steps_total"])
        self.window.load_state(state["episode_window"])
        self.load_learner_state(state["learner"])
        if self.normalizer_stats is not None and state.get("normalizer") is not None:
            self.normalizer_stats = NormalizerStats.from_state(state["normalizer"])
            local = self.workers.local
            if local is not None and local.normalizer is not None:
                local.normalizer.sync(self.normalizer_stats.state())
        self.publish_weights()
        if self.evaluator is not None:
            self.last_evaluation = state.get("evaluation")

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Apply ``new_config`` in place (learning hyperparameters); False when it needs a rebuild."""
        new = self._resolved(new_config).config
        old = self.cfg
        new["seed"] = old["seed"] if new["seed"] is None else new["seed"]
        if any(differs(old[k], new[k]) for k in self._rebuild_keys):
            return False
        self.cfg = new
        self.config = dict(new_config)
        self.reset_algorithm_config(old, new)
        if EvaluationSettings.of(old) != EvaluationSettings.of(new):
            if self.evaluator is not None:
                self.evaluator.stop()
            self.evaluator = self._build_evaluator()
            self.last_evaluation = None if self.evaluator is None else self.last_evaluation
        return True

    def cleanup(self) -> None:
        workers = getattr(self, "workers", None)
        if workers is not None:
            workers.stop()
        evaluator = getattr(self, "evaluator", None)
        if evaluator is not None:
            evaluator.stop()

    # -- inference ---------------------------------------------------------------------------
    def compute_actions(self, obs: Any, explore: bool = True, seed: int | None = None) -> np.ndarray:
        """Actions of the current policy for a batch of observations (for the env, clipped)."""
        from algorithms.data.observations import ObsSpace

        batch = ObsSpace(self.observation_space).stored(obs)
        if self.normalizer_stats is not None:  # frozen: a loaded agent acts as it was evaluated
            batch = self.normalizer_stats.normalize(batch)
        rng = np.random.default_rng(seed)
        env_actions, _, _, _ = self.policy.act(batch, rng, explore=explore, new_noise=True)
        return env_actions

    def compute_single_action(self, obs: Any, explore: bool = True, seed: int | None = None) -> Any:
        from algorithms.data.observations import batch_of

        return self.compute_actions(batch_of(self.observation_space, [obs]), explore=explore, seed=seed)[0]
