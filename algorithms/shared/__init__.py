"""What the trainers share: the base trainer and the off-policy one (``trainer.py``,
``off_policy.py``), sampling (``rollout.py``'s workers, ``worker_group.py``'s rollout actors,
``vector_env.py``, ``layout.py``, ``envs.py``), the environments people bring
(``env_presets.py``) and their observations (``observations.py``: kept in the env's dtype and
structure; ``encoders.py``: the built-in CNN and per-key encoders), GAE, the replay buffer, the
model contract (``models.py``, ``torch_policy.py``, ``distributions.py``, ``activations.py``,
``numpy_mlp.py``), and the learners' optimiser machinery (``learner_config.py``,
``flat_params.py``, ``flat_adam.py``, ``optimizer_step.py``). Nothing here imports a trainer."""
