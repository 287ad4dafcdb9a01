"""Your own algorithm on the trainer base: A2C (Mnih et al. 2016, synchronous) in one page.

``DistributedTrainer`` (algorithms/core/trainer.py) gives an algorithm its rollout actors (reused
from trial to trial, replaced when one dies), weights sent every iteration, config checking with
the key named, episode metrics, checkpoints, a GPU learner and the model contract; the algorithm
writes what is its own: its keys, how fragments become a train batch (``algorithms.sampling.fragment``), and
the update. The
policy is the base's: the module ``config["model"]`` describes (the built-in MLP or the user's),
as a ``TorchPolicy`` (acting, and the loss's log-probabilities on any action space); this one
reuses PPO's GAE, and ``make_optimizer`` for ``config["optimizer"]`` (RMSprop, as in the paper).

    python examples/a2c.py            # a small sweep of A2C on CartPole through tune.run
"""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.sampling.fragment import Fragment, TrainBatch, concat_batches
from algorithms.core.learner_config import make_optimizer, set_lr
from algorithms.data.gae import compute_gae
from algorithms.core.common_config import check
from algorithms.core.trainer import DistributedTrainer
from schedulers.validation import is_number


class A2C(DistributedTrainer):
    """Advantage actor-critic: one gradient step on each train batch of ``train_batch_size`` steps."""

    _name = "A2C"
    _defaults = {
        "lr": 7e-4, "gamma": 0.99, "lambda_": 1.0, "vf_loss_coeff": 0.5, "entropy_coeff": 0.01,
        "max_grad_norm": 0.5, "optimizer": "rmsprop", "optimizer_config": {"alpha": 0.99, "eps": 1e-5},
        "train_batch_size": 80, "num_envs_per_worker": 16,
    }
    _aliases = {"lambda": "lambda_"}

    @classmethod
    def validate_algorithm_config(cls, c: dict[str, Any], given: dict[str, Any]) -> None:
        for key in ("lr", "gamma", "lambda_", "vf_loss_coeff", "entropy_coeff", "max_grad_norm"):
            check(is_number(c[key]) and c[key] >= 0, key, "must be a number >= 0", c[key])
        check(0 < c["gamma"] <= 1, "gamma", "must be in (0, 1]", c["gamma"])

    def build_learner(self) -> None:
        c = self.cfg
        self.optimizer = make_optimizer(list(self.policy.parameters()), c["optimizer"], c["optimizer_config"], c["lr"])

    def postprocess_fragments(self, fragments: list[Fragment]) -> TrainBatch:
        batches = []
        for fragment in fragments:
            if fragment.last_values is None:  # a streamed fragment: bootstrapped here
                fragment = fragment.replace(last_values=self.policy.value(np.asarray(fragment.last_obs, np.float32)))
            batches.append(compute_gae(fragment, float(self.cfg["gamma"]), float(self.cfg["lambda_"])))
        return concat_batches(batches)

    def learn_on_batch(self, batch: TrainBatch) -> dict[str, float]:
        import torch

        c = self.cfg
        n = batch.env_steps
        tensor = lambda a: torch.from_numpy(np.array(a, dtype=np.float32)).to(self.device)  # noqa: E731
        obs = tensor(batch.obs.reshape(n, -1))
        actions = self.policy.actions_tensor(tensor(batch.actions.reshape(n, -1)))
        logp, entropy, values = self.policy.evaluate(obs, actions)
        policy_loss = -(logp * tensor(batch.advantages)).mean()
        vf_loss = 0.5 * (values - tensor(batch.returns)).pow(2).mean()
        loss = policy_loss + c["vf_loss_coeff"] * vf_loss - c["entropy_coeff"] * entropy.mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(self.policy.parameters()), c["max_grad_norm"])
        self.optimizer.step()
        return {"policy_loss": float(policy_loss.detach()), "vf_loss": float(vf_loss.detach()),
                "entropy": float(entropy.detach().mean())}

    def reset_algorithm_config(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        set_lr(self.optimizer, new["lr"])  # a PBT exploit's new lr, in place; the rest is read every batch

    def learner_state(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_learner_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


def main(storage_path: str = "results", max_env_steps: int = 100_000) -> Any:
    from tuner import tune

    return tune.run(
        A2C,
        config={"env": "CartPole-v1", "lr": tune.grid_search([7e-4, 2e-3]), "seed": 0,
                "num_workers": 2, "num_envs_per_worker": 8},
        stop={"env_steps_total": max_env_steps}, metric="episode_return_mean", mode="max",
        storage_path=storage_path, name="a2c_cartpole", verbose=1,
    )


if __name__ == "__main__":
    analysis = main()
    print("best config:", analysis.best_config, "return:", analysis.best_result["episode_return_mean"])
