"""The registry of index kinds: every kind registered under the entry-point group `skipindex.index_kinds`
(pyproject.toml, loaded by `loading.py`), in lookup order; and what follows from the kinds' declarations (setting
names, parsing, build order). Nothing outside a kind's own module names a kind."""

from __future__ import annotations

from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType

from indexlib.index_kinds.base import IndexKind
from indexlib.index_kinds.loading import loaded_kinds
from indexlib.index_kinds.settings import IndexSettings, declared_settings


def registry() -> dict[str, IndexKind]:
    """Every kind by name, in lookup order (cheap and precise first). The kinds are loaded once (`loading.py`): the
    built-in ones through the entry-point group too, or directly when the package has no metadata."""
    return {kind.name: kind for kind in loaded_kinds()}


def build_order() -> list[IndexKind]:
    """Kinds whose payload may be exact first, so the others can skip a column already answered exactly."""
    return sorted(registry().values(), key=lambda kind: not kind.may_be_exact)


def setting_names() -> tuple[str, ...]:
    return ("kinds", "row_group_kinds", "key_index", *declared_settings())


def parse_settings(raw: dict[str, Any], base: IndexSettings, where: str) -> IndexSettings:
    """`base` updated with the settings in `raw`; ValueError naming `where` and the setting on bad input."""
    declared = declared_settings()
    kinds: dict[str, Any] = {}  # "kinds" and "row_group_kinds" -> tuple[str, ...]
    updates: dict[str, Any] = {}
    for name, value in raw.items():
        if name in ("kinds", "row_group_kinds"):
            names = tuple(registry())
            if not isinstance(value, list) or any(kind not in names for kind in value):
                raise ValueError(f"{where}.{name}: expected a list of {names}, got {value!r}")
            kinds[name] = tuple(dict.fromkeys(value))
        elif name == "key_index":
            if not isinstance(value, bool) and value != "auto":
                raise ValueError(f'{where}.key_index: expected true, false or "auto", got {value!r}')
            if value == "auto":  # back to the automatic choice, whatever `base` set
                base = IndexSettings(base.kinds, base.row_group_kinds, None, **base.values)
            else:
                updates["key_index"] = value
        elif name in declared:
            try:
                updates[name] = declared[name].check(value)
            except ValueError as error:
                raise ValueError(f"{where}.{name}: {error}") from None
        else:
            raise ValueError(f"{where}.{name}: unknown setting (expected one of {', '.join(setting_names())})")
    return base.updated(**kinds, **updates)


def can_index(kind: str, iceberg_type: IcebergType) -> bool:
    return registry()[kind].can_index(iceberg_type)


def sized_settings(settings: IndexSettings, table_files: int) -> IndexSettings:
    """`settings` as every kind sizes them for a table of `table_files` live files (`IndexKind.sized_for`)."""
    for kind in build_order():
        settings = kind.sized_for(settings, table_files)
    return settings


def row_groups_mode(value: Any) -> str:
    """`row_groups` as TOML writes it (true, false or "auto") as the mode the indexer reads: "true", "false" or
    "auto"; ValueError otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "auto":
        return "auto"
    raise ValueError(f'expected true, false or "auto", got {value!r}')


def resolve_table_settings(
    name: str, schema: Schema, defaults: IndexSettings, row_groups: str, table: dict[str, Any]
) -> tuple[dict[int, IndexSettings], str]:
    """One table's index settings, resolved: per field id of its top-level columns, `defaults` (`[index]`) updated
    by table `name`'s own settings (`table`, its `[index.tables."<name>"]` as validated) and then by each
    column's under `columns`; and its row-group mode (`table`'s `row_groups`, else `row_groups`). ValueError naming
    the setting when `table` names a column the schema does not have or a kind the column's type cannot hold."""
    where = f'index.tables."{name}"'
    table_wide = parse_settings({k: v for k, v in table.items() if k not in ("columns", "row_groups")}, defaults, where)
    by_name = {f.name: f for f in schema.fields}
    settings = {f.field_id: table_wide for f in schema.fields}
    for column_name, column_raw in table.get("columns", {}).items():
        column_where = f"{where}.columns.{column_name}"
        if column_name not in by_name:
            raise ValueError(f"{column_where}: table {name} has no column {column_name!r}")
        column = by_name[column_name]
        column_settings = parse_settings(column_raw, table_wide, column_where)
        for kind in dict.fromkeys((*(column_settings.kinds or ()), *(column_settings.row_group_kinds or ()))):
            if not can_index(kind, column.field_type):
                article = "an" if kind[:1] in "aeiou" else "a"
                raise ValueError(
                    f"{column_where}: {article} {kind} index cannot be built on {column_name} ({column.field_type})"
                )
        settings[column.field_id] = column_settings
    mode = row_groups_mode(table["row_groups"]) if "row_groups" in table else row_groups
    return settings, mode
