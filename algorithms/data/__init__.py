"""Data: observations in the env's dtype and structure (``observations.py``), GAE (``gae.py``) and the
replay buffer (``replay_buffer.py``)."""
