"""A sweep's scheduler and searcher, set up for its metric, mode and search space.

Both are told the sweep's metric, mode and space (``set_search_properties``); one that refuses
them (a conflicting metric, or a space given twice) is a ValueError naming it. The grid and
random generator knows how many trials it will make; other searchers stop at ``num_samples``.
"""

from __future__ import annotations

from schedulers import FIFOScheduler
from schedulers.trial_scheduler import TrialScheduler
from tuner.run_options import RunOptions
from tuner.search.basic_variant import BasicVariantGenerator
from tuner.search.searcher import Searcher

__all__ = ["SearchSetup", "planned_trials", "prepare_search"]

#: (scheduler, searcher, the innermost searcher under limiters and repeaters, the trial cap).
SearchSetup = tuple[TrialScheduler, Searcher, Searcher, "int | None"]


def prepare_search(options: RunOptions) -> SearchSetup:
    """(scheduler, searcher, the innermost searcher (under limiters), the trial cap) for the sweep;
    a scheduler or searcher that refuses the sweep's metric, mode or space is a ValueError."""
    metric, mode, num_samples, config = options.metric, options.mode, options.num_samples, options.config or {}
    scheduler = options.scheduler or FIFOScheduler()
    if not scheduler.set_search_properties(metric, mode, config=dict(config)):
        raise ValueError(
            f"scheduler: its metric/mode ({scheduler.metric!r}, {scheduler.mode!r}) conflict with "
            f"tune.run's ({metric!r}, {mode!r})"
        )
    searcher = options.search_alg or BasicVariantGenerator()
    if not searcher.set_search_properties(metric, mode, dict(config), num_samples=num_samples, seed=options.seed):
        raise ValueError(
            f"search_alg: {type(searcher).__name__} refused tune.run's metric/mode ({metric!r}, {mode!r}) "
            f"or config: its own are ({searcher.metric!r}, {searcher.mode!r}); give the search space "
            f"either to the searcher or to tune.run, not both"
        )
    innermost = searcher
    while hasattr(innermost, "searcher") and isinstance(innermost.searcher, Searcher):
        innermost = innermost.searcher
    max_trials = None if isinstance(innermost, BasicVariantGenerator) else num_samples
    return scheduler, searcher, innermost, max_trials


def planned_trials(options: RunOptions) -> int | None:
    """How many trials a sweep of ``options`` will run (None: its searcher decides as it goes);
    its search space, scheduler and searcher are checked as tune.run checks them."""
    _, _, innermost, max_trials = prepare_search(options)
    return max_trials if max_trials is not None else grid_total(innermost)


def grid_total(searcher: Searcher) -> int | None:
    """How many trials a grid/random generator will make (points, grid points x num_samples)."""
    return int(searcher.total_trials) if isinstance(searcher, BasicVariantGenerator) else None
