"""The config keys of a trainer's model and learner, checked without torch (the driver checks
every trial's config before it starts; torch is imported where a learner is built).

* ``model``: a dict of built-in options (:data:`MODEL_DEFAULTS`) or a callable
  ``model(observation_space, action_space, model_config) -> torch.nn.Module`` (the contract:
  ``algorithms/models/contract.py``); ``model_config``: the callable's third argument.
* ``num_gpus_for_learner``: GPUs of bundle 0 of the trial's placement group; the learner runs on
  CUDA when it has one.
* ``optimizer`` (:data:`OPTIMIZERS`) and ``optimizer_config`` (its keyword arguments but ``lr``,
  which is the ``lr`` key and its schedule).
"""

from __future__ import annotations

from typing import Any, Mapping

from algorithms.models.numpy_mlp import ACTIVATIONS
from schedulers.validation import is_int, is_number

#: The built-in network's options and their defaults.
# cnn: the CNN of image observations (algorithms/models/encoders.py): "auto", "nature" or "small"
MODEL_DEFAULTS: dict[str, Any] = {"hidden_sizes": [64, 64], "activation": "tanh", "shared_layers": False, "cnn": "auto"}
CNN_NAMES = ("auto", "nature", "small")
ACTIVATION_NAMES = tuple(sorted(ACTIVATIONS))  # the numpy twins' names: torch-free, as this module
#: ``optimizer`` names (torch.optim classes) and the keyword arguments each gets by default.
OPTIMIZERS: dict[str, dict[str, Any]] = {
    "adam": {"eps": 1e-5},  # eps as SB3's and CleanRL's PPO
    "adamw": {"eps": 1e-5},
    "rmsprop": {},
    "sgd": {},
}
_TORCH_NAMES = {"adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop", "sgd": "SGD"}


def _fail(key: str, message: str, value: Any) -> None:
    raise ValueError(f"config key '{key}': {message}, got {value!r}")


def is_builtin(model: Any) -> bool:
    """Whether ``model`` names the built-in network (a dict of options), not a user's callable."""
    return not callable(model)


def resolve_model(c: dict[str, Any], given: Mapping[str, Any], shorthands: tuple[str, ...] = (),
                  defaults: Mapping[str, Any] = MODEL_DEFAULTS) -> None:
    """Check ``model``/``model_config`` and complete a dict ``model`` with the defaults, in place.

    ``shorthands`` are top-level keys of the trainer that stand for built-in options
    (PPO's ``hidden_sizes`` and ``activation``): a value given there fills the option, and
    giving both is an error; after this they mirror ``c["model"]``. ``defaults``: the trainer's
    defaults of the built-in options (the keys of :data:`MODEL_DEFAULTS`).
    """
    model = c["model"]
    if not isinstance(c["model_config"], Mapping):
        _fail("model_config", "must be a dict (the third argument of a model callable)", c["model_config"])
    if callable(model):
        for key in shorthands:
            if key in given:
                _fail(key, "is an option of the built-in model; a model callable builds its own network", given[key])
        return
    if model is None:
        model = {}
    if not isinstance(model, Mapping):
        _fail("model", "must be a dict of built-in options "
              f"({sorted(MODEL_DEFAULTS)}) or a callable model(observation_space, action_space, model_config) "
              "-> torch.nn.Module", model)
    unknown = sorted(set(model) - set(MODEL_DEFAULTS))
    if unknown:
        _fail("model", f"unknown built-in option(s) {unknown}; allowed: {sorted(MODEL_DEFAULTS)}", dict(model))
    options = {"cnn": MODEL_DEFAULTS["cnn"], **defaults}
    for key in shorthands:
        if key in given and key in model:
            _fail(key, f"given twice, as '{key}' and as 'model': {{'{key}': ...}}", given[key])
        options[key] = c[key]
    options.update(model)
    sizes = options["hidden_sizes"]
    if not (isinstance(sizes, (list, tuple)) and len(sizes) >= 1 and all(is_int(s) and s >= 1 for s in sizes)):
        _fail("hidden_sizes' / 'model.hidden_sizes", "must be a non-empty list of ints >= 1", sizes)
    if options["activation"] not in ACTIVATION_NAMES:
        _fail("activation' / 'model.activation", f"must be one of {list(ACTIVATION_NAMES)}", options["activation"])
    if not isinstance(options["shared_layers"], bool):
        _fail("model.shared_layers", "must be True or False", options["shared_layers"])
    if options["cnn"] not in CNN_NAMES:
        _fail("model.cnn", f"must be one of {list(CNN_NAMES)}", options["cnn"])
    options["hidden_sizes"] = [int(s) for s in sizes]
    c["model"] = options
    for key in shorthands:
        c[key] = options[key]


def check_learner_keys(c: Mapping[str, Any]) -> None:
    """``num_gpus_for_learner``, ``optimizer`` and ``optimizer_config``."""
    gpus = c["num_gpus_for_learner"]
    if not (is_number(gpus) and gpus >= 0):
        _fail("num_gpus_for_learner", "must be a number >= 0", gpus)
    if c["optimizer"] not in OPTIMIZERS:
        _fail("optimizer", f"must be one of {sorted(OPTIMIZERS)}", c["optimizer"])
    options = c["optimizer_config"]
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        _fail("optimizer_config", "must be a dict of keyword arguments of the optimizer", options)
    if "lr" in options:
        _fail("optimizer_config", "holds no 'lr': the learning rate is config key 'lr' (and 'lr_schedule')", dict(options))


def learner_device(gpus: float) -> str:
    """The device of a learner given ``gpus`` (config key ``num_gpus_for_learner``): "cuda" when
    it has one (Ray makes the bundle's GPU the only one its process sees), else "cpu"; a
    RuntimeError naming the key when it has one but torch sees no CUDA device."""
    if not gpus:
        return "cpu"
    import os

    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"config key 'num_gpus_for_learner': the learner was given {gpus} GPU(s) but torch {torch.__version__} "
            f"sees no CUDA device (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); install a CUDA "
            f"build of torch or set it to 0"
        )
    return "cuda"


def make_optimizer(params: list[Any], name: str, options: Mapping[str, Any], lr: float) -> Any:
    """``torch.optim.<name>`` over ``params`` with ``lr`` and the name's defaults updated by ``options``;
    a bad keyword is a ValueError naming ``optimizer_config``."""
    import torch

    from algorithms.optim.optimizer_step import build_without_dynamo

    build_without_dynamo()
    cls = getattr(torch.optim, _TORCH_NAMES[name])
    kwargs = {**OPTIMIZERS[name], **options}
    if name in ("adam", "adamw") and "foreach" not in kwargs and "fused" not in kwargs and all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params
    ):
        # one kernel for every parameter's update (torch's default loops over them on a CPU):
        # for a small network the per-parameter calls are most of an Adam step
        kwargs["fused"] = True
    try:
        return cls(params, lr=lr, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config key 'optimizer_config': {cls.__name__} does not take {dict(options)!r}: {exc}") from None


def to_cpu(state: Any) -> Any:
    """An optimiser's state (nested dicts and lists of tensors) with every tensor on the CPU:
    checkpoints load on any machine."""
    if isinstance(state, dict):
        return {k: to_cpu(v) for k, v in state.items()}
    if isinstance(state, list):
        return [to_cpu(v) for v in state]
    return state.cpu() if hasattr(state, "cpu") else state


def set_lr(optimizer: Any, lr: float) -> None:
    """Set the learning rate of a torch optimiser's every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr


