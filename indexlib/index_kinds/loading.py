"""Finding the index kinds: one instance of every class registered under the entry-point group
`skipindex.index_kinds` (pyproject.toml), in lookup order. Without package metadata (a checkout on sys.path, not
installed) the group is empty and the built-in kinds are loaded directly.

Kinds are loaded by name, so this module imports no kind and nothing that imports one: the kinds import `settings`,
and `settings` asks here for the settings the kinds declare. `registry.py` is the typed view the rest of indexlib uses.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "skipindex.index_kinds"
BUILT_IN = ("indexlib.index_kinds.bloom:BloomIndex", "indexlib.index_kinds.automaton:AutomatonIndex")


@cache
def loaded_kinds() -> tuple[Any, ...]:
    """Every registered kind (an `IndexKind`), sorted by `lookup_rank` then name. Kinds hold no state: one instance
    each, made on the first call (not at import: a kind's module imports `settings`, which calls this)."""
    classes = [point.load() for point in entry_points(group=ENTRY_POINT_GROUP)]
    if not classes:
        classes = [_load(target) for target in BUILT_IN]
    return tuple(sorted((cls() for cls in classes), key=lambda kind: (kind.lookup_rank, kind.name)))


def _load(target: str) -> Any:
    module, name = target.split(":")
    return getattr(import_module(module), name)
