"""Errors the tuner raises to users."""


class TuneError(RuntimeError):
    """A sweep could not do what was asked (trials failed, a sweep is missing, ...)."""


class SweepBusyError(TuneError):
    """Another driver is running this sweep: one driver per sweep, wherever the sweep is stored."""
