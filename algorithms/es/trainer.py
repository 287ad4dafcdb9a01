"""Evolution Strategies (Salimans et al. 2017, OpenAI-ES), as a trial that owns its rollout actors.

Read top to bottom: config and defaults, the base ES and ARS share (``PerturbationTrainer``),
then ES's update. An iteration draws directions (indices into a table of Gaussian noise that the
learner and every rollout actor share: ``algorithms/es/perturbations.py``), and the rollout
actors play one episode with ``theta + sigma eps`` and one with ``theta - sigma eps`` for each
(antithetic pairs), shared out over them, until ``episodes_per_batch`` episodes and
``train_batch_size`` env steps were played; what comes back is each episode's return and length.
ES ranks all returns (centred ranks), estimates the gradient ``sum_i (rank_i+ - rank_i-) eps_i /
(2 n)`` and takes an Adam step of ``stepsize`` along it with an L2 penalty of ``l2_coeff``. The
policy is a deterministic MLP whose parameters are one flat vector (``hidden_sizes``,
``activation``), acting in numpy; observations normalised by their running mean and std
(``observation_filter`` "MeanStdFilter", merged from every actor, as RLlib's).

    from algorithms import ES
    trainer = ES(config={"env": "CartPole-v1", "num_workers": 2})
    result = trainer.train()

Keys and defaults are RLlib's but for the population and the table, sized for a few cores.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import numpy as np

from algorithms.core.common_config import check
from algorithms.core.trainer import DistributedTrainer
from algorithms.es.perturbations import FlatPolicy, NoiseTable, centered_ranks, make_flat_policy, play_perturbations
from algorithms.models.numpy_mlp import ACTIVATIONS
from schedulers.validation import is_int, is_number

#: What ES and ARS share, with their defaults.
PERTURBATION_DEFAULTS: dict[str, Any] = {
    "num_workers": 2,
    "num_envs_per_worker": 1,  # an actor's envs play its episodes side by side
    "train_batch_size": 1000,  # an iteration plays at least this many env steps (and its population)
    "observation_filter": "MeanStdFilter",
    "noise_stdev": 0.02,  # sigma: the perturbations' scale
    "noise_size": 25_000_000,  # the shared noise table's float32 draws (RLlib's: 250M, 1 GB)
    "hidden_sizes": [64, 64],  # the policy's hidden layers ([]: a linear policy)
    "activation": "tanh",
    "action_noise_std": 0.0,  # Box actions: Gaussian noise on the perturbed policies' actions
}

ES_DEFAULTS: dict[str, Any] = {
    **PERTURBATION_DEFAULTS,
    "episodes_per_batch": 100,  # the population: antithetic pairs, so an even number (RLlib's 1000)
    "stepsize": 0.01,  # Adam's step
    "l2_coeff": 0.005,
    "action_noise_std": 0.01,
}


class PerturbationTrainer(DistributedTrainer):
    """What ES and ARS share: the flat policy, the noise table, the rollout actors playing the
    population's episodes, and the state. A subclass gives ``directions_per_batch`` and
    ``update(indices, returns)``."""

    _rebuild_keys = DistributedTrainer._rebuild_keys + ("hidden_sizes", "activation", "noise_size",
                                                        "action_noise_std")
    supports_elastic_resources: ClassVar[bool] = False
    policy: FlatPolicy

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        name = cls._name
        check("model" not in given and "model_config" not in given, "model",
              f"{name} perturbs its own MLP's flat parameters: give its shape as 'hidden_sizes' and 'activation'",
              given.get("model", given.get("model_config")))
        sizes = c["hidden_sizes"]
        check(isinstance(sizes, (list, tuple)) and all(is_int(s) and s >= 1 for s in sizes), "hidden_sizes",
              "must be a list of ints >= 1 ([]: a linear policy)", sizes)
        check(c["activation"] in ACTIVATIONS, "activation", f"must be one of {sorted(ACTIVATIONS)}", c["activation"])
        check(not c["sample_async"], "sample_async", f"must be False: {name}'s actors play whole episodes on request",
              c["sample_async"])
        check(c["num_gpus_for_learner"] == 0, "num_gpus_for_learner",
              f"must be 0: {name}'s update is a few vector operations in numpy", c["num_gpus_for_learner"])
        check(is_number(c["noise_stdev"]) and c["noise_stdev"] > 0, "noise_stdev", "must be a number > 0",
              c["noise_stdev"])
        check(is_int(c["noise_size"]) and c["noise_size"] >= 1, "noise_size", "must be an int >= 1", c["noise_size"])
        check(is_number(c["action_noise_std"]) and c["action_noise_std"] >= 0, "action_noise_std",
              "must be a number >= 0", c["action_noise_std"])

    # -- to implement --------------------------------------------------------------------------
    def directions_per_batch(self) -> int:
        """Directions (antithetic pairs) of one population."""
        raise NotImplementedError

    def update(self, indices: np.ndarray, returns: np.ndarray) -> dict[str, float]:
        """Move ``self.policy.theta`` given each direction's (+, -) returns, shape (directions, 2)."""
        raise NotImplementedError

    # -- building ------------------------------------------------------------------------------
    def build_policy(self, observation_space: Any, action_space: Any) -> tuple[Any, Callable[..., Any], dict[str, Any]]:
        c = self.cfg
        kwargs = {"observation_space": observation_space, "action_space": action_space,
                  "hidden_sizes": list(c["hidden_sizes"]), "activation": c["activation"],
                  "action_noise_std": float(c["action_noise_std"])}
        policy = make_flat_policy(**kwargs)
        policy.theta[:] = policy.initial_theta(np.random.default_rng([self.seed, 1]))
        return policy, make_flat_policy, kwargs

    def build_learner(self) -> None:
        c = self.cfg
        check(c["noise_size"] >= self.policy.dim, "noise_size", f"must hold one direction, the policy's "
              f"{self.policy.dim} parameters", c["noise_size"])
        self.noise = NoiseTable(self.seed, int(c["noise_size"]))
        self._noise_ref: Any = None  # put in Ray's object store at the first population
        self.direction_rng = np.random.default_rng([self.seed, 3])

    # -- an iteration --------------------------------------------------------------------------
    def training_step(self) -> dict[str, Any]:
        c = self.cfg
        indices: list[np.ndarray] = []
        returns: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        steps = episodes = 0
        while not indices or steps < c["train_batch_size"]:
            chunk = self.noise.sample_index(self.direction_rng, self.policy.dim, self.directions_per_batch())
            results = self._play(chunk)
            indices.append(chunk)
            returns += [r["returns"] for r in results]
            lengths += [r["lengths"] for r in results]
            steps += sum(int(r["steps"]) for r in results)
            episodes += 2 * len(chunk)
        all_returns, all_lengths = np.concatenate(returns), np.concatenate(lengths)
        self.count_batch(int(all_lengths.sum()), all_returns.ravel(), all_lengths.ravel())
        metrics = self.update(np.concatenate(indices), all_returns)
        self.publish_weights()
        return {**metrics, "episodes_this_population": episodes,
                "perturbed_return_max": float(all_returns.max()), "noise_stdev": float(c["noise_stdev"])}

    def _play(self, indices: np.ndarray) -> list[dict[str, Any]]:
        """The directions' episodes, shared out over the rollout actors (or in this process)."""
        import time

        start = time.perf_counter()
        if self.workers.local is not None:
            chunks = [indices]
            noise: Any = self.noise.noise
        else:
            if self._noise_ref is None:
                import ray

                self._noise_ref = ray.put(self.noise.noise)
            chunks = [chunk for chunk in np.array_split(indices, self.workers.num_workers) if len(chunk)]
            noise = self._noise_ref
        theta = self.policy.theta.copy()
        stats = None if self.normalizer_stats is None else self.normalizer_stats.state()
        results = self.workers.foreach(play_perturbations, [(theta, chunk, float(self.cfg["noise_stdev"]), noise, stats)
                                                            for chunk in chunks])
        self._this_iter["sample_time_s"] += time.perf_counter() - start
        if self.normalizer_stats is not None:
            for result in results:
                if result["filter_delta"] is not None:
                    self.normalizer_stats.merge(result["filter_delta"])
        return results

    def perturbation(self, indices: np.ndarray) -> np.ndarray:
        """The directions' noise, shape (directions, parameters)."""
        return np.stack([self.noise.get(int(i), self.policy.dim) for i in indices])

    # -- state ---------------------------------------------------------------------------------
    def learner_state(self) -> dict[str, Any]:
        return {"direction_rng": self.direction_rng.bit_generator.state}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        self.direction_rng.bit_generator.state = state["direction_rng"]


class ES(PerturbationTrainer):
    """OpenAI-ES: antithetic Gaussian perturbations, centred ranks, Adam (see the module docstring).

    A ``tune.Trainable``: ``tune.run("ES", config={"env": ...})``. See ``ES_DEFAULTS``.
    """

    _name = "ES"
    _defaults = ES_DEFAULTS

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        super().validate_algorithm_config(c, given)
        population = c["episodes_per_batch"]
        check(is_int(population) and population >= 2 and population % 2 == 0, "episodes_per_batch",
              "must be an even int >= 2 (each direction is played as an antithetic pair)", population)
        check(is_number(c["stepsize"]) and c["stepsize"] > 0, "stepsize", "must be a number > 0", c["stepsize"])
        check(is_number(c["l2_coeff"]) and c["l2_coeff"] >= 0, "l2_coeff", "must be a number >= 0", c["l2_coeff"])

    def build_learner(self) -> None:
        import torch

        from algorithms.optim.optimizer_step import build_without_dynamo, lean_step

        super().build_learner()
        # Adam over the flat parameters in place: the tensor shares the policy's memory
        self._theta = torch.from_numpy(self.policy.theta)
        build_without_dynamo()
        self.optimizer = torch.optim.Adam([self._theta], lr=float(self.cfg["stepsize"]))
        self._optimizer_step = lean_step(self.optimizer)

    def directions_per_batch(self) -> int:
        return int(self.cfg["episodes_per_batch"]) // 2

    def update(self, indices: np.ndarray, returns: np.ndarray) -> dict[str, float]:
        import torch

        c = self.cfg
        ranks = centered_ranks(returns)
        weights = ranks[:, 0] - ranks[:, 1]
        gradient = weights @ self.perturbation(indices) / returns.size  # of the ranked return, to ascend
        before = self.policy.theta.copy()
        self._theta.grad = torch.from_numpy(-gradient + float(c["l2_coeff"]) * before)
        for group in self.optimizer.param_groups:
            group["lr"] = float(c["stepsize"])  # a PBT exploit's, in place
        self._optimizer_step()
        step = np.linalg.norm(self.policy.theta - before)
        return {"grad_norm": float(np.linalg.norm(gradient)),
                "update_ratio": float(step) / max(float(np.linalg.norm(before)), 1e-12), "cur_lr": float(c["stepsize"])}

    def learner_state(self) -> dict[str, Any]:
        from algorithms.core.learner_config import to_cpu

        return {**super().learner_state(), "optimizer": to_cpu(self.optimizer.state_dict())}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        super().load_learner_state(state)
        self.optimizer.load_state_dict(state["optimizer"])
