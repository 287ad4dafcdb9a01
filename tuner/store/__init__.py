"""SQL store of the tuner: experiments, trials, results and scheduler/searcher state."""

from .errors import NoSchemaError, StoreError
from .migrate import database_version, upgrade
from .schema import SCHEMA_VERSION
from .store import Store
from .urls import check_database_url, default_database_url, mask_url

__all__ = [
    "Store",
    "StoreError",
    "NoSchemaError",
    "check_database_url",
    "default_database_url",
    "mask_url",
    "upgrade",
    "database_version",
    "SCHEMA_VERSION",
]
