"""Errors the tuner raises to users."""


class TuneError(RuntimeError):
    """A sweep could not do what was asked (trials failed, a sweep is missing, ...)."""
