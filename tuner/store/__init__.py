"""SQL store of the tuner: experiments, trials, results and scheduler/searcher state."""

from .errors import StoreError
from .migrate import database_version, upgrade
from .schema import SCHEMA_VERSION
from .store import Store, default_database_url, mask_url

__all__ = [
    "Store",
    "StoreError",
    "default_database_url",
    "mask_url",
    "upgrade",
    "database_version",
    "SCHEMA_VERSION",
]
