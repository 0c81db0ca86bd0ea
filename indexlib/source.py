"""Source tables behind one interface: what is live now, and what changed since a watermark.

Iceberg tables (through pyiceberg) are named by their identifier in the configured catalog; Delta tables (through
delta-rs, delta_source.py) by their path or URI.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation, ancestors_of

from indexlib.errors import UserError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from indexlib.config import Config


@dataclass(frozen=True)
class DataFileRef:
    """A data file as the source table records it; `path` is never rewritten.

    `spec_id` and `partition` (the pyiceberg partition Record, positional per that spec's fields) feed the partition
    stage only; they stay in the planner process and are never shipped to Spark tasks. `partition` is None when
    the source does not say, which that stage reads as "unknown: keep".
    """

    path: str
    record_count: int
    file_size_in_bytes: int
    file_format: str
    spec_id: int = 0
    partition: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class SourceChanges:
    """Since a watermark: the live files added after it, and the live paths now when files may have been removed
    (None when only appends happened, so nothing was removed)."""

    added: list[DataFileRef]
    live_paths: frozenset[str] | None


class Source(Protocol):
    name: str
    schema: Schema
    io_properties: dict[str, str]
    name_mapping_json: str | None

    def current_version(self) -> int | None: ...

    def live_files(self) -> list[DataFileRef]: ...

    def changes_since(self, watermark: int | None) -> SourceChanges: ...

    def partition_label(self, ref: DataFileRef) -> str: ...

    def prune_partitions(self, files: list[DataFileRef], predicate: Any) -> PartitionPruning: ...


@dataclass(frozen=True)
class PartitionPruning:
    """What the files' partition values prove about a bound predicate: per-file might / all, and for explain the
    partition fields the predicate was lifted to."""

    might: Any  # numpy bool array over the files
    all: Any
    lifted: list[str]


def _ref(data_file: Any) -> DataFileRef:
    spec_id = getattr(data_file, "spec_id", None)  # without it the partition record cannot be read: leave it unknown
    return DataFileRef(
        path=data_file.file_path,
        record_count=int(data_file.record_count),
        file_size_in_bytes=int(data_file.file_size_in_bytes),
        file_format=str(
            data_file.file_format.value if hasattr(data_file.file_format, "value") else data_file.file_format
        ),
        spec_id=int(spec_id) if spec_id is not None else 0,
        partition=data_file.partition if spec_id is not None else None,
    )


class IcebergSource:
    """An Iceberg table; the watermark is a snapshot id of it.

    `table` is the loaded pyiceberg table: the partition stage reads its current schema and every partition spec
    the table has had (`partition_specs`), since old files keep the spec they were written with.
    """

    table: Table

    def __init__(self, catalog: Any, name: str) -> None:
        try:
            self.table = catalog.load_table(name)
        except (NoSuchTableError, NoSuchNamespaceError, ValueError):
            raise UserError(f"unknown table {name!r} in catalog {catalog.name!r}") from None
        self.name = name
        self.schema = self.table.schema()
        self.io_properties = dict(self.table.io.properties)
        self.name_mapping_json = self.table.properties.get("schema.name-mapping.default")

    @property
    def partition_specs(self) -> dict[int, PartitionSpec]:
        """Every partition spec of the table by spec id (a file's `DataFileRef.spec_id` names one)."""
        return self.table.specs()

    def prune_partitions(self, files: list[DataFileRef], predicate: Any) -> PartitionPruning:
        """Lift the bound predicate through each file's partition spec (pyiceberg inclusive / strict projection)."""
        import numpy as np

        from indexlib.iceberg_filter import to_iceberg_filter, to_strict_iceberg_filter
        from indexlib.partition_pruning import calendar_field_verdict, lifted_fields, partition_verdict

        inclusive = to_iceberg_filter(predicate)
        try:
            might, every = partition_verdict(
                self.table, files, inclusive, case_sensitive=True, strict_filter=to_strict_iceberg_filter(predicate)
            )
            field_might, field_every = calendar_field_verdict(self.table, files, predicate)
            might, every = might & field_might, every | field_every
            lifted = lifted_fields(self.table, inclusive, case_sensitive=True)
        except Exception:  # never fail a lookup over the partition stage: it proves nothing, every file is kept
            log.warning("partition stage skipped for %s (filter %s)", self.name, inclusive, exc_info=True)
            return PartitionPruning(np.ones(len(files), dtype=bool), np.zeros(len(files), dtype=bool), [])
        return PartitionPruning(might, every, lifted)

    def current_version(self) -> int | None:
        snapshot = self.table.current_snapshot()
        return snapshot.snapshot_id if snapshot else None

    def live_files(self) -> list[DataFileRef]:
        if self.current_version() is None:
            return []
        return [_ref(task.file) for task in self.table.scan().plan_files()]

    def changes_since(self, watermark: int | None) -> SourceChanges:
        """Live files added after snapshot `watermark`, and the live paths when a snapshot since may have removed
        files (overwrite, delete, replace/compaction) or the watermark is no longer an ancestor (rollback).

        Appends only: pyiceberg's incremental append scan reads just the new manifests. Otherwise the files added
        are the ones live now that were not live at the watermark (all live files when that snapshot expired: the
        caller skips the ones it already indexed).
        """
        current = self.current_version()
        if current is None:
            return SourceChanges([], frozenset())
        if watermark is not None and self._only_appends_since(watermark):
            try:
                scan = self.table.incremental_append_scan(
                    from_snapshot_id_exclusive=watermark, to_snapshot_id_inclusive=current
                )
                return SourceChanges([_ref(task.file) for task in scan.plan_files()], None)
            except (ValueError, ValidationError):
                pass
        live = self.live_files()
        was_live = self._paths_at(watermark) if watermark is not None else set()
        return SourceChanges([f for f in live if f.path not in was_live], frozenset(f.path for f in live))

    def _only_appends_since(self, watermark: int) -> bool:
        """Every snapshot after `watermark` up to the current one is an append (and `watermark` is an ancestor)."""
        for snapshot in ancestors_of(self.table.current_snapshot(), self.table.metadata):
            if snapshot.snapshot_id == watermark:
                return True
            if snapshot.summary is None or snapshot.summary.operation != Operation.APPEND:
                return False
        return False

    def _paths_at(self, snapshot_id: int) -> set[str]:
        if self.table.snapshot_by_id(snapshot_id) is None:
            return set()
        return {task.file.file_path for task in self.table.scan(snapshot_id=snapshot_id).plan_files()}

    def partition_label(self, ref: DataFileRef) -> str:
        spec = self.partition_specs.get(ref.spec_id)
        if spec is None or spec.is_unpartitioned() or ref.partition is None:
            return "(unpartitioned)"
        return spec.partition_to_path(ref.partition, self.schema)


def open_source(config: Config, name: str, catalog: Any = None) -> Source:
    """The source table `name`: a Delta table when named by a path or URI, else `ns.name` in the catalog."""
    from indexlib.delta_source import DeltaSource, is_delta_name

    if is_delta_name(name):
        return DeltaSource(name, config.delta_storage_options, config.catalog_properties)
    if "." not in name:
        raise UserError(
            f"table {name!r} must be named namespace.table in the configured catalog, or be a Delta table path"
        )
    return IcebergSource(catalog if catalog is not None else config.load_catalog(), name)
