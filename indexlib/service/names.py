"""Namespace and table names from a request path, read once, as the catalog will read them, before anything is
checked or cached.

A path segment arrives percent-decoded exactly once (app.py routes on the raw path, so `%2F` is part of a name and
never a separator). A namespace's levels are split at the REST specification's separator (`%1F`) and then read as
pyiceberg's catalogs read them: `Catalog.namespace_to_string` strips every level and joins them with '.', and the
catalog splits that string at '.' again (`Catalog.identifier_to_tuple`), so `skipindex%20`, ` skipindex` and a level
`skipindex.x` name what `skipindex` and `skipindex`/`x` name. A level that is empty or only whitespace is a 400, as
pyiceberg refuses it. A table's name is kept as sent: pyiceberg's catalogs do not strip it.

The index namespace is hidden from clients (app.py). Whether a name falls in it is decided on this reading, and
conservatively beyond it: levels compare after Unicode compatibility normalisation (NFKC) and case folding, because
some catalogs fold case (Hive, Glue) or compare under a case-insensitive collation; a user namespace that differs from
the index namespace only by case is hidden too, never the reverse. Answers the catalog gives (listed tables, a loaded
table's own identifier) are checked again by their exact names.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from pyiceberg.catalog import Catalog

NAMESPACE_SEPARATOR = "\x1f"  # the REST specification's default separator of namespace levels in a path (%1F)


class BadName(ValueError):
    """A namespace the catalog would refuse (an empty or blank level): a 400."""


@dataclass(frozen=True)
class TableName:
    """A table as the catalog reads it: the namespace's levels and the table's own name."""

    namespace: tuple[str, ...]
    name: str

    @property
    def identifier(self) -> tuple[str, ...]:
        return (*self.namespace, self.name)

    def __str__(self) -> str:
        return ".".join(self.identifier)


def namespace(text: str) -> tuple[str, ...]:
    """The namespace a decoded path segment names, levels as the catalog reads them (module docstring)."""
    levels = tuple(text.split(NAMESPACE_SEPARATOR))
    try:
        joined = Catalog.namespace_to_string(levels)  # pyiceberg's own reading: levels stripped, joined with '.'
    except ValueError as exc:
        raise BadName(f"invalid namespace: {exc}") from None
    read = Catalog.identifier_to_tuple(joined)
    if not all(level.strip() for level in read):
        raise BadName("invalid namespace: a level is empty or only whitespace")
    return tuple(level.strip() for level in read)


def table(namespace_text: str, name: str) -> TableName:
    if not name.strip():
        raise BadName("invalid table name: empty or only whitespace")
    return TableName(namespace(namespace_text), name)


def _folded(levels: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(unicodedata.normalize("NFKC", level).casefold().strip() for level in levels)


def within(levels: tuple[str, ...], parent: tuple[str, ...], exact: bool = False) -> bool:
    """True when `levels` is `parent` or a namespace under it; unless `exact`, compared conservatively (NFKC, case
    folded: module docstring)."""
    if len(levels) < len(parent):
        return False
    if exact:
        return levels[: len(parent)] == parent
    return _folded(levels[: len(parent)]) == _folded(parent)
