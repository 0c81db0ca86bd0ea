"""The table formats, and opening a source table by the name the user gives.

Each format is one `SourceFormat` in one module: whether a name is one of its tables, and how to open it as a
`Source` (base.py), which also says how engines read its files (`FileReads`). Formats are registered under the
entry-point group `skipindex.formats` (pyproject.toml), as the index kinds and the scan targets are; the built-in
ones are also found without package metadata (a checkout on sys.path, not installed). A name is opened by the first
format that recognises it: registered ones that are not built in, then Delta (a path or URI), then Iceberg
(`namespace.table` in the configured catalog), which takes any dotted name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

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
    """Every format by name, in the order names are tried: registered ones first, then the built-in ones (a
    registered format of a built-in's name replaces it in place). Loaded once."""
    registered = {point.name: point.load() for point in entry_points(group=ENTRY_POINT_GROUP)}
    found = {name: fmt for name, fmt in registered.items() if name not in BUILT_IN}
    for name, target in BUILT_IN.items():
        found[name] = registered[name] if name in registered else _load(target)
    return found


def _load(target: str) -> SourceFormat:
    module, name = target.split(":")
    loaded: SourceFormat = getattr(import_module(module), name)
    return loaded


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
