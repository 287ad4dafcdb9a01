"""Sampling: the rollout worker (``rollout_worker.py``) and its envs in threads (``env_threads.py``),
the rollout actors of a trial (``worker_group.py``), ``num_workers="auto"`` (``layout.py``), what
crosses to the learner (``fragment.py``) and the window of finished episodes (``episodes.py``)."""
