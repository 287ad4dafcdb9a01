"""SQL store of the tuner: experiments, trials, results and scheduler/searcher state."""

from .schema import SCHEMA_VERSION
from .store import Store, StoreError, default_database_url, mask_url

__all__ = ["Store", "StoreError", "default_database_url", "mask_url", "SCHEMA_VERSION"]
