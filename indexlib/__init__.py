"""skipindex: enriched per-file skip indexes for Iceberg and Delta tables (docs/architecture.md: the rooms).

Planner code:

    from indexlib import load_config, lookup
    result = lookup(load_config("conf/local.toml"), "tpch.lineitem", "l_orderkey = 42")
    result.files, result.summary
"""

from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.indexing.build import build_index
from indexlib.lookup import LookupResult, lookup
from indexlib.query.sql import Clock

__all__ = ["Clock", "LookupResult", "UserError", "build_index", "load_config", "lookup"]
