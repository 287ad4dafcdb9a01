"""PB2's explore step: a time-varying GP bandit (Parker-Holder et al. 2020, after Bogunovic et al. 2016).

The data are the population's past intervals: one row per trial and interval, ``[time, score
before, hyperparameters...]`` with the score's change per unit of time over the interval as the
label. :func:`suggest` fits a GP on them and returns the hyperparameters that maximise the UCB
acquisition for a model that goes on from a given (time, score), the point being the donor's.
The functions follow Ray Tune's ``pb2_utils`` (``select_length``, ``normalize``, ``standardize``,
``UCB``, ``optimize_acq``); where they differ, the module :mod:`schedulers.pb2` says so.

Imports scikit-learn, which takes a second or two: :mod:`schedulers.pb2` imports this module at
its first explore step, not when the package is imported.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.optimize import minimize
from scipy.spatial.distance import cdist
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, WhiteKernel
from threadpoolctl import threadpool_limits

#: Only the latest rows are used (Ray Tune's PB2 keeps 1000), so a fit stays fast.
MAX_ROWS = 1000
#: Below this many rows all are used; above, :func:`select_length` picks a window (as Ray Tune's).
MIN_WINDOW = 200
WINDOW_STEP = 10
#: The acquisition is evaluated on this many uniform draws; the best few are refined by L-BFGS-B.
N_CANDIDATES = 256
N_REFINED = 3


class TimeVaryingSquaredExp(Kernel):
    """The time-varying squared-exponential kernel of TV-GP-UCB (Bogunovic et al. 2016), PB2's kernel.

    ``k((t, x), (t', x')) = variance * exp(-|x - x'|^2 / (2 length_scale^2)) * (1 - epsilon)^(|t - t'| / 2)``

    The first column of an input is the time; the rest are the space. ``epsilon`` is how fast
    old data stop telling about now (the objective drifts as the models train). The three
    hyperparameters are fitted by maximising the marginal likelihood, with gradients.
    """

    def __init__(
        self,
        variance: float = 1.0,
        length_scale: float = 0.5,
        epsilon: float = 0.1,
        variance_bounds: Any = (1e-3, 1e3),
        length_scale_bounds: Any = (1e-2, 1e2),
        epsilon_bounds: Any = (1e-5, 0.5),
    ) -> None:
        self.variance = variance
        self.length_scale = length_scale
        self.epsilon = epsilon
        self.variance_bounds = variance_bounds
        self.length_scale_bounds = length_scale_bounds
        self.epsilon_bounds = epsilon_bounds

    @property
    def hyperparameter_variance(self) -> Hyperparameter:
        return Hyperparameter("variance", "numeric", self.variance_bounds)

    @property
    def hyperparameter_length_scale(self) -> Hyperparameter:
        return Hyperparameter("length_scale", "numeric", self.length_scale_bounds)

    @property
    def hyperparameter_epsilon(self) -> Hyperparameter:
        return Hyperparameter("epsilon", "numeric", self.epsilon_bounds)

    def __call__(self, X: Any, Y: Any = None, eval_gradient: bool = False) -> Any:
        X = np.atleast_2d(X)
        if eval_gradient and Y is not None:
            raise ValueError("gradient can only be evaluated when Y is None")
        Y = X if Y is None else np.atleast_2d(Y)
        half_dt = 0.5 * np.abs(X[:, :1] - Y[:, :1].T)
        sq_dist = cdist(X[:, 1:], Y[:, 1:], "sqeuclidean")
        K = self.variance * np.exp(-0.5 * sq_dist / self.length_scale**2) * (1.0 - self.epsilon) ** half_dt
        if not eval_gradient:
            return K
        # Derivatives with respect to the log of each free hyperparameter (sklearn's theta), in
        # the order of self.hyperparameters: sorted by name.
        gradient = []
        if not self.hyperparameter_epsilon.fixed:
            gradient.append(-K * half_dt * self.epsilon / (1.0 - self.epsilon))
        if not self.hyperparameter_length_scale.fixed:
            gradient.append(K * sq_dist / self.length_scale**2)
        if not self.hyperparameter_variance.fixed:
            gradient.append(K)
        return K, np.dstack(gradient) if gradient else np.empty((X.shape[0], X.shape[0], 0))

    def diag(self, X: Any) -> Any:
        return np.full(np.atleast_2d(X).shape[0], self.variance, dtype=float)

    def is_stationary(self) -> bool:
        return False


def normalize(data: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``data`` mapped column by column from [low, high] to [0, 1] (Ray Tune's ``normalize``)."""
    return (data - low) / (high - low + 1e-8)


def standardize(y: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance, clipped to [-2, 2] so that one lucky interval does not rule the fit."""
    return np.clip((y - y.mean()) / (y.std() + 1e-8), -2.0, 2.0)


def fit_gp(X: np.ndarray, y: np.ndarray, seed: int) -> GaussianProcessRegressor:
    """A GP with the time-varying kernel plus a fitted white noise, fitted to (X, y)."""
    kernel = TimeVaryingSquaredExp() + WhiteKernel(noise_level=0.1, noise_level_bounds=(1e-4, 1.0))
    gp = GaussianProcessRegressor(kernel=kernel, alpha=1e-8, optimizer="fmin_l_bfgs_b", random_state=seed)
    with warnings.catch_warnings(), threadpool_limits(1):  # small matrices: one BLAS thread is faster
        warnings.simplefilter("ignore", ConvergenceWarning)  # a hyperparameter at its bound is fine
        gp.fit(X, y)
    return gp


class Posterior:
    """The latent function of a GP fitted by :func:`fit_gp`, conditioned on (X, y).

    Its mean is the fitted GP's; its std leaves the observation noise out (sklearn's
    ``predict`` would add the white kernel's). Computed here rather than with ``predict``, which
    validates its input on every call: the acquisition is called hundreds of times.
    """

    def __init__(self, fitted: GaussianProcessRegressor, X: np.ndarray, y: np.ndarray) -> None:
        self.kernel = fitted.kernel_.k1
        noise = float(fitted.kernel_.k2.noise_level) + fitted.alpha
        self.X = X
        self.L = cholesky(self.kernel(X) + noise * np.eye(len(X)), lower=True)
        self.alpha = cho_solve((self.L, True), y)

    def mean(self, Z: np.ndarray) -> np.ndarray:
        return self.kernel(Z, self.X) @ self.alpha

    def std(self, Z: np.ndarray) -> np.ndarray:
        v = solve_triangular(self.L, self.kernel(self.X, Z), lower=True)
        return np.sqrt(np.maximum(self.kernel.diag(Z) - np.einsum("ij,ij->j", v, v), 0.0))


def _scaled(X: np.ndarray, limits: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Time and score mapped by ``limits`` (2 x 2: low row, high row), hyperparameters by ``bounds``."""
    return np.hstack(
        [normalize(X[:, :2], limits[0], limits[1]), normalize(X[:, 2:], bounds[:, 0], bounds[:, 1])]
    )


def select_length(X: np.ndarray, y: np.ndarray, bounds: np.ndarray, seed: int) -> int:
    """How many of the latest rows to fit (Ray Tune's ``select_length``): all below
    ``MIN_WINDOW``; above, the window (``MIN_WINDOW``, then every ``WINDOW_STEP`` more) whose
    fitted GP has the highest log marginal likelihood."""
    n = X.shape[0]
    if n < MIN_WINDOW:
        return n
    best_length, best_lml = n, -math.inf
    for length in range(MIN_WINDOW, n + 1, WINDOW_STEP):
        Xw, yw = X[-length:], y[-length:]
        limits = np.vstack([Xw[:, :2].min(axis=0), Xw[:, :2].max(axis=0)])
        lml = fit_gp(_scaled(Xw, limits, bounds), standardize(yw), seed).log_marginal_likelihood_value_
        if lml > best_lml:
            best_length, best_lml = length, lml
    return best_length


def ucb_kappa(n_rows: int) -> float:
    """sqrt(beta_t) of the UCB (Ray Tune's constants: beta_t = 0.2 + max(0, log(0.4 n)))."""
    return math.sqrt(0.2 + max(0.0, math.log(0.4 * n_rows)))


def suggest(
    X: np.ndarray,
    y: np.ndarray,
    fixed: np.ndarray,
    pending: np.ndarray,
    bounds: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """The hyperparameters to try next, in their own units.

    Args:
        X: One row per past interval: ``[time at its end, score at its start, hyperparameters...]``.
        y: The score's change per unit of time over each interval.
        fixed: ``[time, score]`` of the model the new hyperparameters will train on.
        pending: Rows like X for intervals being run now, without a label yet: the acquisition's
            variance is taken with them in (GP-BUCB, Desautels et al. 2014), so that trials
            exploiting at once do not all get the same point.
        bounds: ``[[low, high], ...]``, one row per hyperparameter.
        rng: Every random draw (the acquisition's start points, the fits' seeds).
    """
    with threadpool_limits(1):  # small matrices: one BLAS thread is faster, and shares the CPU
        return _suggest(X, y, fixed, pending, bounds, rng)


def _suggest(
    X: np.ndarray,
    y: np.ndarray,
    fixed: np.ndarray,
    pending: np.ndarray,
    bounds: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    order = np.argsort(X[:, 0], kind="stable")
    X, y = X[order][-MAX_ROWS:], y[order][-MAX_ROWS:]
    seed = int(rng.integers(2**31 - 1))
    length = select_length(X, y, bounds, seed)
    X, y = X[-length:], y[-length:]

    context = np.vstack([X[:, :2], fixed[None, :], pending[:, :2]])
    limits = np.vstack([context.min(axis=0), context.max(axis=0)])
    Xn = _scaled(X, limits, bounds)
    yn = standardize(y)
    fixed_n = normalize(fixed, limits[0], limits[1])

    fitted = fit_gp(Xn, yn, seed)
    mean_of = Posterior(fitted, Xn, yn)
    if len(pending):  # their labels do not change the variance: zeros stand in
        std_of = Posterior(fitted, np.vstack([Xn, _scaled(pending, limits, bounds)]),
                           np.concatenate([yn, np.zeros(len(pending))]))
    else:
        std_of = mean_of
    kappa = ucb_kappa(len(yn))

    def acquisition(points: np.ndarray) -> np.ndarray:
        Z = np.hstack([np.repeat(fixed_n[None, :], len(points), axis=0), points])
        return mean_of.mean(Z) + kappa * std_of.std(Z)

    d = bounds.shape[0]
    candidates = rng.uniform(size=(N_CANDIDATES, d))
    values = acquisition(candidates)
    best_x, best_value = candidates[int(np.argmax(values))], float(values.max())
    for start in candidates[np.argsort(-values, kind="stable")[:N_REFINED]]:
        res = minimize(
            lambda x: -float(acquisition(x[None, :])[0]),
            start,
            bounds=[(0.0, 1.0)] * d,
            method="L-BFGS-B",
            options={"maxiter": 50},
        )
        if -res.fun > best_value:
            best_x, best_value = res.x, -float(res.fun)
    best_x = np.clip(best_x, 0.0, 1.0)
    return bounds[:, 0] + best_x * (bounds[:, 1] - bounds[:, 0])
