"""Finding the index kinds: one instance of every built-in kind and of every plug-in registered under the
entry-point group `skipindex.index_kinds` (pyproject.toml), by the rule every plug-in group follows (plugins.py: a
plug-in may not take a built-in's name), in lookup order.

Kinds are loaded by name, so this module imports no kind and nothing that imports one: the kinds import `settings`,
and `settings` asks here for the settings the kinds declare. `registry.py` is the typed view the rest of indexlib uses.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from indexlib import plugins

ENTRY_POINT_GROUP = "skipindex.index_kinds"
BUILT_IN = {
    "bloom": "indexlib.index_kinds.bloom:BloomIndex",
    "automaton": "indexlib.index_kinds.automaton:AutomatonIndex",
    "ngram": "indexlib.index_kinds.ngram:NgramIndex",
}


@cache
def loaded_kinds() -> tuple[Any, ...]:
    """Every registered kind (an `IndexKind`), sorted by `lookup_rank` then name. Kinds hold no state: one instance
    each, made on the first call (not at import: a kind's module imports `settings`, which calls this)."""
    classes = plugins.load(ENTRY_POINT_GROUP, BUILT_IN).values()
    return tuple(sorted((cls() for cls in classes), key=lambda kind: (kind.lookup_rank, kind.name)))
