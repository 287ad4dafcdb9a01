"""TensorBoard HParams export of a sweep: written live by the controller, or rebuilt from the store.

* :class:`TensorBoardExporter` - the ``tune.Callback`` that ``tune.run`` adds (``tensorboard=True``,
  ``tensorboard_dir=<run_dir>/tensorboard`` by default);
* :func:`export_tensorboard` - the same logdir rebuilt from a sweep's SQL store alone;
* :func:`describe_search_space` - the hparams of a search space and their domains (JSON-able; what
  ``tune.run`` stores as ``spec["hparam_domains"]``);
* :class:`HParamsReader` - a logdir read back through TensorBoard's own HParams plugin.

Only the ``tensorboard`` package is used (never TensorFlow); it is imported when first needed.
"""

from __future__ import annotations

from typing import Any

from tuner.tensorboard.domains import describe_search_space

__all__ = ["TensorBoardExporter", "export_tensorboard", "describe_search_space", "HParamsReader"]

_LAZY = {
    "TensorBoardExporter": "tuner.tensorboard.exporter",
    "export_tensorboard": "tuner.tensorboard.rebuild",
    "HParamsReader": "tuner.tensorboard.reader",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tuner.tensorboard' has no attribute {name!r}")
