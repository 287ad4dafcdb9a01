"""Search-space domains with Ray Tune's names and semantics.

A domain is a distribution a searcher samples a hyperparameter from::

    >>> import numpy as np
    >>> lr = loguniform(1e-4, 1e-1)
    >>> lr
    loguniform(0.0001, 0.1)
    >>> 1e-4 <= lr.sample(np.random.default_rng(0)) < 1e-1
    True
    >>> grid_search([16, 32])
    {'grid_search': [16, 32]}

Bounds follow Ray Tune: ``uniform``/``loguniform``/``randint``/``lograndint`` exclude ``upper``;
the quantized variants (``quniform``, ``qloguniform``, ``qrandint``, ``qlograndint``) include it.
Samples are plain Python ``float``/``int`` values (never numpy scalars), so configs serialise as-is.

Attributes read by exporters and translators (TensorBoard HParams, Optuna): every domain has
``lower``, ``upper``, ``log``, ``q`` and ``categories`` (``None`` where they do not apply);
:class:`Integer` also has ``low``/``high``, the smallest and largest value it can return.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from schedulers.validation import is_int, is_number
from tuner.search.domain_checks import (check_base, check_int, check_real, fmt, py, quantize_float,
                                        quantized_range)

if TYPE_CHECKING:  # numpy is imported where a value is drawn: a trial's actor imports this module and draws none
    import numpy as np

__all__ = [
    "Domain",
    "Float",
    "Integer",
    "Categorical",
    "Normal",
    "Function",
    "SampleSpec",
    "UnresolvedDependency",
    "uniform",
    "quniform",
    "loguniform",
    "qloguniform",
    "randint",
    "qrandint",
    "lograndint",
    "qlograndint",
    "randn",
    "qrandn",
    "choice",
    "sample_from",
    "grid_search",
    "is_grid_search",
]


# --------------------------------------------------------------------------- spec for sample_from


class UnresolvedDependency(Exception):
    """Raised inside a ``sample_from`` function that reads a key not resolved yet.

    The resolver catches it and retries the function once the key has a value.
    """


class _ConfigView(Mapping):
    """Read-only view of a partially resolved config: ``view.a.b`` or ``view["a"]["b"]``."""

    __slots__ = ("_data",)

    def __init__(self, data: Any) -> None:
        object.__setattr__(self, "_data", data)

    def __getitem__(self, key: Any) -> Any:
        value = self._data[key]
        return _wrap(value, key)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except (KeyError, IndexError, TypeError):
            raise AttributeError(f"config has no key {name!r}") from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def copy(self) -> dict:
        """A plain dict of the resolved values (raises if some are still unresolved)."""
        return {k: _unwrap(self[k]) for k in self}

    def __repr__(self) -> str:
        return f"config({self._data!r})"


class _ListView(Sequence):
    __slots__ = ("_data",)

    def __init__(self, data: Sequence) -> None:
        self._data = data

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [_wrap(v, index) for v in self._data[index]]
        return _wrap(self._data[index], index)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return list(self) == other

    def __repr__(self) -> str:
        return repr(self._data)


def _wrap(value: Any, key: Any) -> Any:
    if isinstance(value, Domain) or is_grid_search(value):
        raise UnresolvedDependency(f"config key {key!r} is not resolved yet")
    if isinstance(value, dict):
        return _ConfigView(value)
    if isinstance(value, (list, tuple)):
        return _ListView(value)
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, _ConfigView):
        return value.copy()
    if isinstance(value, _ListView):
        return [_unwrap(v) for v in value]
    return value


class SampleSpec(Mapping):
    """What a ``sample_from`` function receives: ``spec.config`` (also ``spec["config"]``).

    ``spec.config`` is a read-only view of the config resolved so far, with attribute and item
    access at any depth. ``spec.rng`` is the searcher's ``numpy.random.Generator``: draw from it
    to make a ``sample_from`` function reproducible under the sweep's seed.
    """

    def __init__(self, config: Mapping | None = None, rng: np.random.Generator | None = None):
        self.config = config if isinstance(config, _ConfigView) else _ConfigView(config or {})
        if rng is None:
            import numpy as np

            rng = np.random.default_rng()
        self.rng = rng

    def __getitem__(self, key: str) -> Any:
        if key == "config":
            return self.config
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("config",))

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"SampleSpec({self.config!r})"


# --------------------------------------------------------------------------- domains


class Domain:
    """A distribution to sample one hyperparameter from.

    ``sample(rng, spec)`` draws one value with ``rng`` (a ``numpy.random.Generator``); ``spec`` is
    only used by :class:`Function`. ``repr(domain)`` (also ``domain.domain_str``) is the call
    that builds it, e.g. ``qrandint(0, 10, 2)``.
    """

    lower: float | int | None = None
    upper: float | int | None = None
    log: bool = False
    q: float | int | None = None
    categories: list | None = None

    @property
    def function_name(self) -> str:
        """The public constructor function this domain corresponds to (``uniform``, ...)."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, spec: Any = None) -> Any:
        raise NotImplementedError

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` could have been drawn from this domain."""
        raise NotImplementedError

    @property
    def domain_str(self) -> str:
        return repr(self)


class Float(Domain):
    """Real value in ``[lower, upper)``, optionally log-uniform and/or a multiple of ``q``.

    Quantized values lie in ``[lower, upper]`` (upper inclusive) and stay ``float``.
    ``base`` is kept for display only: log-uniform does not depend on the logarithm's base.
    """

    lower: float
    upper: float
    q: float | None

    def __init__(
        self,
        lower: float,
        upper: float,
        *,
        log: bool = False,
        q: float | None = None,
        base: float = 10,
    ) -> None:
        self.log = bool(log)
        self.q = py(q)
        fn = self.function_name
        lo = check_real(fn, "lower", lower)
        hi = check_real(fn, "upper", upper)
        if lo >= hi:
            raise ValueError(f"{fn}: lower ({fmt(lower)}) must be < upper ({fmt(upper)})")
        if self.log and lo <= 0:
            raise ValueError(f"{fn}: lower must be > 0, got {fmt(lower)}")
        if self.log:
            check_base(fn, base)
        self.base = py(base)
        self.lower, self.upper = py(lower), py(upper)
        self._k_range: tuple[int, int] | None = None
        if q is not None:
            qf = check_real(fn, "q", q)
            if qf <= 0:
                raise ValueError(f"{fn}: q must be > 0, got {fmt(q)}")
            self._k_range = quantized_range(fn, lower, upper, q)

    @property
    def function_name(self) -> str:
        return ("q" if self.q is not None else "") + ("loguniform" if self.log else "uniform")

    def sample(self, rng: np.random.Generator, spec: Any = None) -> float:
        lo, hi = float(self.lower), float(self.upper)
        if self.log:
            x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        else:
            x = float(rng.uniform(lo, hi))
        if self._k_range is not None:
            assert self.q is not None  # _k_range is set with q
            return quantize_float(x, float(self.q), *self._k_range)
        # Float rounding (in exp, or in lo + (hi - lo) * u) must not leave [lower, upper).
        return float(min(max(x, lo), math.nextafter(hi, -math.inf)))

    def is_valid(self, value: Any) -> bool:
        if not is_number(value):
            return False
        v = float(value)
        if self.q is not None:
            return self.lower <= v <= self.upper and math.isclose(
                v / self.q, round(v / self.q), abs_tol=1e-9
            )
        return self.lower <= v < self.upper

    def __repr__(self) -> str:
        args = [fmt(self.lower), fmt(self.upper)]
        if self.q is not None:
            args.append(fmt(self.q))
        if self.log and self.base != 10:
            args.append(f"base={fmt(self.base)}")
        return f"{self.function_name}({', '.join(args)})"


class Integer(Domain):
    """Integer value, optionally log-uniform and/or a multiple of ``q``.

    Without ``q`` (``randint``, ``lograndint``) ``upper`` is EXCLUSIVE: values lie in
    ``[lower, upper - 1]``. With ``q`` (``qrandint``, ``qlograndint``) ``upper`` is INCLUSIVE and
    values are the multiples of ``q`` in ``[lower, upper]``. ``low`` and ``high`` give the
    smallest and largest value that can be drawn, whichever the case.
    """

    lower: int
    upper: int
    q: int | None

    def __init__(
        self,
        lower: int,
        upper: int,
        *,
        log: bool = False,
        q: int | None = None,
        base: float = 10,
    ) -> None:
        self.log = bool(log)
        self.q = py(q)
        fn = self.function_name
        lo = check_int(fn, "lower", lower)
        hi = check_int(fn, "upper", upper)
        if lo >= hi:
            raise ValueError(f"{fn}: lower ({fmt(lower)}) must be < upper ({fmt(upper)})")
        if self.log and lo <= 0:
            raise ValueError(f"{fn}: lower must be > 0, got {fmt(lower)}")
        if self.log:
            check_base(fn, base)
        self.base = py(base)
        self.lower, self.upper = lo, hi
        if q is None:
            self.low, self.high = lo, hi - 1
        else:
            qi = check_int(fn, "q", q)
            if qi <= 0:
                raise ValueError(f"{fn}: q must be a positive integer, got {fmt(q)}")
            self.q = qi
            lo_k, hi_k = quantized_range(fn, lo, hi, qi)
            self.low, self.high = lo_k * qi, hi_k * qi

    @property
    def upper_inclusive(self) -> bool:
        """True for the quantized variants, whose ``upper`` can be drawn."""
        return self.q is not None

    @property
    def function_name(self) -> str:
        return ("q" if self.q is not None else "") + ("lograndint" if self.log else "randint")

    def sample(self, rng: np.random.Generator, spec: Any = None) -> int:
        q = self.q
        if not self.log:
            if q is None:
                return int(rng.integers(self.low, self.high + 1))
            # Uniform over the multiples of q in [lower, upper].
            return int(rng.integers(self.low // q, self.high // q + 1)) * q
        x = math.exp(rng.uniform(math.log(self.lower), math.log(self.upper)))
        if q is None:
            return int(min(max(math.floor(x), self.low), self.high))  # Ray: floor, upper excluded
        return int(min(max(round(x / q) * q, self.low), self.high))

    def is_valid(self, value: Any) -> bool:
        if not is_int(value):
            return False
        v = int(value)
        return self.low <= v <= self.high and (self.q is None or v % self.q == 0)

    def __repr__(self) -> str:
        args = [fmt(self.lower), fmt(self.upper)]
        if self.q is not None:
            args.append(fmt(self.q))
        if self.log and self.base != 10:
            args.append(f"base={fmt(self.base)}")
        return f"{self.function_name}({', '.join(args)})"


class Normal(Domain):
    """Normally distributed float (``randn``), optionally rounded to multiples of ``q``."""

    def __init__(self, mean: float = 0.0, sd: float = 1.0, q: float | None = None) -> None:
        self.q = py(q)
        fn = self.function_name
        self.mean = check_real(fn, "mean", mean)
        s = check_real(fn, "sd", sd)
        if s <= 0:
            raise ValueError(f"{fn}: sd must be > 0, got {fmt(sd)}")
        self.sd = s
        if q is not None:
            qf = check_real(fn, "q", q)
            if qf <= 0:
                raise ValueError(f"{fn}: q must be > 0, got {fmt(q)}")

    @property
    def function_name(self) -> str:
        return "qrandn" if self.q is not None else "randn"

    def sample(self, rng: np.random.Generator, spec: Any = None) -> float:
        x = float(rng.normal(self.mean, self.sd))
        if self.q is not None:
            return quantize_float(x, float(self.q), -math.inf, math.inf)
        return x

    def is_valid(self, value: Any) -> bool:
        if not is_number(value, finite=True):
            return False
        if self.q is None:
            return True
        return math.isclose(value / self.q, round(value / self.q), abs_tol=1e-9)

    def __repr__(self) -> str:
        args = [fmt(self.mean), fmt(self.sd)] + ([fmt(self.q)] if self.q is not None else [])
        return f"{self.function_name}({', '.join(args)})"


class Categorical(Domain):
    """One of ``categories``, uniformly. Returns the category object itself."""

    categories: list

    def __init__(self, categories: Sequence[Any]) -> None:
        if (
            isinstance(categories, (str, bytes, Mapping))
            or not isinstance(categories, Sequence)
            or len(categories) == 0
        ):
            raise ValueError(
                f"choice: categories must be a non-empty list, got {categories!r}"
            )
        self.categories = list(categories)

    @property
    def function_name(self) -> str:
        return "choice"

    def sample(self, rng: np.random.Generator, spec: Any = None) -> Any:
        return self.categories[int(rng.integers(len(self.categories)))]

    def is_valid(self, value: Any) -> bool:
        return any(value is c or value == c for c in self.categories)

    def __len__(self) -> int:
        return len(self.categories)

    def __repr__(self) -> str:
        return f"choice({self.categories!r})"


class Function(Domain):
    """A value computed by ``func(spec)`` (``sample_from``); ``func()`` if it takes no argument.

    ``spec.config`` (or ``spec["config"]``) holds the config resolved so far, so a function can
    derive its value from other hyperparameters: ``sample_from(lambda spec: 2 * spec.config.a)``.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise ValueError(f"sample_from: func must be callable, got {func!r}")
        self.func = func
        self.pass_spec = _accepts_one_argument(func)

    @property
    def function_name(self) -> str:
        return "sample_from"

    def sample(self, rng: np.random.Generator, spec: Any = None) -> Any:
        if not self.pass_spec:
            return self.func()
        if not isinstance(spec, SampleSpec):
            spec = SampleSpec(spec, rng)
        return self.func(spec)

    def is_valid(self, value: Any) -> bool:
        return True

    def __repr__(self) -> str:
        name = getattr(self.func, "__qualname__", None) or repr(self.func)
        return f"sample_from({name})"


def _accepts_one_argument(func: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have no signature: assume Ray's default
        return True
    try:
        sig.bind(None)
        return True
    except TypeError:
        return False


# --------------------------------------------------------------------------- public functions


def uniform(lower: float, upper: float) -> Float:
    """Float uniformly in ``[lower, upper)``."""
    return Float(lower, upper)


def quniform(lower: float, upper: float, q: float) -> Float:
    """Float uniformly in ``[lower, upper]`` rounded to a multiple of ``q`` (stays float)."""
    return Float(lower, upper, q=q)


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    """Float log-uniformly in ``[lower, upper)``; ``lower`` must be > 0."""
    return Float(lower, upper, log=True, base=base)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    """Log-uniform float in ``[lower, upper]`` rounded to a multiple of ``q``."""
    return Float(lower, upper, log=True, q=q, base=base)


def randint(lower: int, upper: int) -> Integer:
    """Integer uniformly in ``[lower, upper)`` (upper EXCLUSIVE, like Python's ``range``)."""
    return Integer(lower, upper)


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """Multiple of ``q`` uniformly in ``[lower, upper]`` (upper INCLUSIVE, as in Ray Tune)."""
    return Integer(lower, upper, q=q)


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    """Integer log-uniformly in ``[lower, upper)`` (upper exclusive); ``lower`` must be > 0."""
    return Integer(lower, upper, log=True, base=base)


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Integer:
    """Log-uniform multiple of ``q`` in ``[lower, upper]`` (upper inclusive)."""
    return Integer(lower, upper, log=True, q=q, base=base)


def randn(mean: float = 0.0, sd: float = 1.0) -> Normal:
    """Float from a normal distribution N(mean, sd**2)."""
    return Normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Normal:
    """Normal float rounded to a multiple of ``q``."""
    return Normal(mean, sd, q)


def choice(categories: Sequence[Any]) -> Categorical:
    """One of ``categories``, uniformly."""
    return Categorical(categories)


def sample_from(func: Callable[..., Any]) -> Function:
    """Value computed by ``func(spec)``; ``spec.config`` is the config resolved so far."""
    return Function(func)


def grid_search(values: Sequence[Any]) -> dict[str, list]:
    """Every one of ``values`` (a grid axis); multiplies with the other axes and ``num_samples``.

    >>> grid_search(range(3))
    {'grid_search': [0, 1, 2]}
    """
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
        raise ValueError(f"grid_search: values must be a non-empty list, got {values!r}")
    values = list(values)
    if not values:
        raise ValueError("grid_search: values must be a non-empty list, got []")
    return {"grid_search": values}


def is_grid_search(value: Any) -> bool:
    """Whether ``value`` is a grid axis: a dict whose only key is ``"grid_search"``."""
    return isinstance(value, dict) and len(value) == 1 and "grid_search" in value
