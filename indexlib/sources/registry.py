"""Open a source table by the name the user gives: a Delta table by its path or URI, else `ns.name` in the catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from indexlib.errors import UserError
from indexlib.sources.base import Source
from indexlib.sources.delta import DeltaSource, is_delta_name
from indexlib.sources.iceberg import IcebergSource

if TYPE_CHECKING:
    from indexlib.config import Config


def open_source(config: Config, name: str, catalog: Any = None) -> Source:
    """The source table `name`: a Delta table when named by a path or URI, else `ns.name` in the catalog."""
    if is_delta_name(name):
        return DeltaSource(name, config.delta_storage_options, config.catalog_properties)
    if "." not in name:
        raise UserError(
            f"table {name!r} must be named namespace.table in the configured catalog, or be a Delta table path"
        )
    return IcebergSource(catalog if catalog is not None else config.load_catalog(), name)
