"""Plug-ins: what other packages add through entry-point groups, loaded by one rule for every group.

    GROUPS                                  # the groups and the modules that read them
    load("skipindex.formats", BUILT_IN)     # {name: loaded object}, built-in ones first

The groups (each one's built-in entries are also registered in pyproject.toml):

- `skipindex.formats`: table formats, a `SourceFormat` each (sources/registry.py);
- `skipindex.scan_targets`: scan targets, a function `(scan, **options)` each (scans/scan.py);
- `skipindex.containers`: kinds of part inside data files a lookup judges, a `PartKind` each (store/containers.py);
- `skipindex.index_kinds`: index kinds, an `IndexKind` class each (index_kinds/loading.py).

The rule, the same in every group:

1. The built-in entries come first, in their order, loaded from this package by their `module:attribute` (so a
   checkout on sys.path, without package metadata, has them too).
2. Then every other entry point of the group, by name. An entry point of a built-in's name registered by this
   package (its distribution, `skipindex`) or with the built-in's value is the built-in itself, not a second entry.
3. A plug-in may not replace a built-in: an entry point of a built-in's name with another value is an error.
4. One name registered with two values (two distributions, or one distribution twice) is an error naming both.

An error is one line naming the group, the name and the distributions, raised when the group is first loaded
(`UserError`: uninstall one of them). A plug-in that cannot be imported fails the same way, naming its value. Each
reader caches what it loaded (`functools.cache`), so a group is loaded once per process.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from indexlib.errors import UserError

DISTRIBUTION = "skipindex"  # this package's distribution, whose entry points register the built-in entries
GROUPS = ("skipindex.formats", "skipindex.scan_targets", "skipindex.containers", "skipindex.index_kinds")


def load(group: str, built_in: Mapping[str, str]) -> dict[str, Any]:
    """Every entry of `group` by name, loaded (module docstring: the rule). `built_in`: name -> `module:attribute`
    of this package's own entries, in their order."""
    found = {name: _load(group, name, target, "this package") for name, target in built_in.items()}
    plugins: dict[str, EntryPoint] = {}
    for point in entry_points(group=group):
        if point.name in built_in and (point.value == built_in[point.name] or _dist_name(point) == DISTRIBUTION):
            continue  # this package's own registration of a built-in entry
        if point.name in built_in:
            raise UserError(
                f"plug-in {point.name!r} of {_distribution(point)} in {group}: a plug-in may not replace the "
                f"built-in {point.name!r} ({built_in[point.name]}); uninstall it or register it under another name"
            )
        seen = plugins.get(point.name)
        if seen is not None and seen.value != point.value:
            raise UserError(
                f"plug-in {point.name!r} in {group} is registered twice: {seen.value} by {_distribution(seen)} and "
                f"{point.value} by {_distribution(point)}; uninstall one of them"
            )
        plugins[point.name] = point
    for name in sorted(plugins):
        found[name] = _load(group, name, plugins[name].value, _distribution(plugins[name]))
    return found


def _dist_name(point: EntryPoint) -> str | None:
    dist = getattr(point, "dist", None)
    return dist.name if dist is not None else None


def _distribution(point: EntryPoint) -> str:
    name = _dist_name(point)
    return f"distribution {name!r}" if name is not None else "an unnamed distribution"


def _load(group: str, name: str, target: str, origin: str) -> Any:
    module, _, attribute = target.partition(":")
    try:
        loaded = import_module(module)
        for part in attribute.split(".") if attribute else ():
            loaded = getattr(loaded, part)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"{group} entry {name!r} of {origin}: cannot load {target} ({exc})") from exc
    return loaded
