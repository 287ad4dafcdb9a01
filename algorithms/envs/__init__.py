"""Environments: the registry and vector envs a trainer builds (``registry.py``, ``vector_env.py``),
the Atari and MiniGrid presets (``presets.py``) and the envs this package registers (``builtin.py``)."""
