"""skipindex: enriched per-file skip indexes for Iceberg and Delta tables (docs/architecture.md: the rooms).

Planner code:

    from indexlib import IndexHandle
    handle = IndexHandle.for_iceberg(catalog.load_table("tpch.lineitem"))  # keep it: it caches by snapshot
    result = handle.lookup("l_orderkey = 42")
    result.files, result.summary

or, one-off from the TOML configuration the CLI reads: `lookup(load_config("conf/local.toml"), table, where)`.

Every name here is imported on first use: a lookup never imports Spark or the build, and `skipindex --help` (which
imports this package first) none of pyarrow, pyiceberg or sqlglot.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from indexlib.config import load_config
    from indexlib.errors import UserError
    from indexlib.handle import IndexHandle
    from indexlib.indexing.build import build_index
    from indexlib.lookup import LookupResult, lookup
    from indexlib.query.sql import Clock

_LAZY = {
    "Clock": "indexlib.query.sql",
    "IndexHandle": "indexlib.handle",
    "LookupResult": "indexlib.lookup",
    "UserError": "indexlib.errors",
    "build_index": "indexlib.indexing.build",
    "load_config": "indexlib.config",
    "lookup": "indexlib.lookup",
}
__all__ = ["Clock", "IndexHandle", "LookupResult", "UserError", "build_index", "load_config", "lookup"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'indexlib' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)


class _Package(ModuleType):
    """The package keeps `lookup` the function: importing the submodule `indexlib.lookup` (it is in sys.modules as
    such) would otherwise bind the module over it, as an eager `from indexlib.lookup import lookup` used to undo."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name == "lookup" and isinstance(value, ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
