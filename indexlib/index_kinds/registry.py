"""The registry of index kinds, in lookup order (cheap and precise first)."""

from __future__ import annotations

from functools import cache

from indexlib.index_kinds.automaton import AutomatonIndex
from indexlib.index_kinds.base import IndexKind
from indexlib.index_kinds.bloom import BloomIndex


@cache
def registry() -> dict[str, IndexKind]:
    """Every kind, in lookup order (cheap and precise first). Kinds hold no state: one instance each."""
    return {kind.name: kind for kind in (BloomIndex(), AutomatonIndex())}
