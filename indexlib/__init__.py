"""skipindex: enriched per-file skip indexes for Iceberg and Delta tables (docs/architecture.md: the rooms).

Planner code:

    from indexlib import IndexHandle
    handle = IndexHandle.for_iceberg(catalog.load_table("tpch.lineitem"))  # keep it: it caches by snapshot
    result = handle.lookup("l_orderkey = 42")
    result.files, result.summary

or, one-off from the TOML configuration the CLI reads: `lookup(load_config("conf/local.toml"), table, where)`.

`build_index` and `IndexHandle` are imported on first use, so a lookup never imports Spark or the build.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.lookup import LookupResult, lookup  # the function shadows its module's name on the package
from indexlib.query.sql import Clock

if TYPE_CHECKING:
    from indexlib.handle import IndexHandle
    from indexlib.indexing.build import build_index

_LAZY = {"IndexHandle": "indexlib.handle", "build_index": "indexlib.indexing.build"}
__all__ = ["Clock", "IndexHandle", "LookupResult", "UserError", "build_index", "load_config", "lookup"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'indexlib' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
