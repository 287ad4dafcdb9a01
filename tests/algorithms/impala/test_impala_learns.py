"""IMPALA and APPO learn CartPole with two streaming rollout actors: the learner takes fragments
as they come, most of them sampled with weights an update or two behind its own."""

from __future__ import annotations

import pytest

from algorithms import APPO, IMPALA

#: A random policy's mean return is about 22; both pass 100 near 50k env steps on an idle machine (150 near 80k).
TARGET, BUDGET = 100.0, 150_000


@pytest.mark.parametrize("cls", [IMPALA, APPO])
def test_learns_cartpole_with_streaming_rollout_actors(cls, ray_session):
    trainer = cls(config={"env": "CartPole-v1", "seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.5,
                          "num_cpus_for_learner": 1})
    try:
        best, stale = 0.0, []
        while trainer.env_steps_total < BUDGET and best < TARGET:
            result = trainer.train()
            best = max(best, result["episode_return_mean"])
            stale.append(result["stale_fraction"])
        assert result["sampling_layout"] == "2 rollout actors x 8 envs, async"
        assert best >= TARGET, f"{cls.__name__}: best mean return {best:.1f} in {trainer.env_steps_total} env steps"
        assert max(stale) > 0  # the actors did not wait for the learner
    finally:
        trainer.stop()
