"""The table formats, and opening a source table by the name the user gives.

Each format is one `SourceFormat` in one module: whether a name is one of its tables, and how to open it as a
`Source` (base.py), which also says how engines read its files (`FileReads`). Formats are registered under the
entry-point group `skipindex.formats` (pyproject.toml), loaded by the rule every plug-in group follows (plugins.py:
the built-in ones always, a plug-in may not take a built-in's name). A name is opened by the first format that
recognises it: the plug-ins, then Delta (a path or URI), then Iceberg (`namespace.table` in the configured
catalog), which takes any dotted name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from indexlib import plugins
from indexlib.errors import UserError
from indexlib.sources.base import Source

if TYPE_CHECKING:
    from indexlib.config import Config

ENTRY_POINT_GROUP = "skipindex.formats"
BUILT_IN = {
    "delta": "indexlib.sources.delta:FORMAT",
    "iceberg": "indexlib.sources.iceberg:FORMAT",  # last: it takes any dotted name
}


@dataclass(frozen=True)
class SourceFormat:
    """One table format: `recognises(name)` says whether `name` (what the user wrote) names one of its tables,
    `open(config, name, catalog)` opens it at its current version (`catalog`: the configured catalog when the
    caller has it loaded, else None; a format that needs one loads it with `config.load_catalog()`), raising
    `UserError` with one line for a table that is not there."""

    name: str
    recognises: Callable[[str], bool]
    open: Callable[[Config, str, Any], Source]


@cache
def formats() -> dict[str, SourceFormat]:
    """Every format by name, in the order names are tried: the plug-ins (by name), then the built-in ones, whose
    Iceberg takes any dotted name (`plugins.load`). Loaded once."""
    loaded = plugins.load(ENTRY_POINT_GROUP, BUILT_IN)
    return {name: loaded[name] for name in sorted(loaded, key=lambda name: name in BUILT_IN)}


def format_for(name: str) -> SourceFormat:
    """The format whose table `name` names (the first that recognises it)."""
    for fmt in formats().values():
        if fmt.recognises(name):
            return fmt
    raise UserError(
        f"table {name!r} must be named namespace.table in the configured catalog, or be a Delta table path"
        + (f" (or a table of: {', '.join(others)})" if (others := sorted(set(formats()) - set(BUILT_IN))) else "")
    )


def open_source(config: Config, name: str, catalog: Any = None) -> Source:
    """The source table `name` at its current version, opened by its format (`format_for`)."""
    return format_for(name).open(config, name, catalog)
