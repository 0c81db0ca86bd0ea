"""Iceberg tables as sources, read through pyiceberg: the watermark is a snapshot id."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.conversions import from_bytes, to_bytes
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.snapshots import Operation, ancestors_of
from pyiceberg.typedef import Record

from indexlib.errors import UserError
from indexlib.sources.base import DataFileRef, DeleteFileRef, FileReads, IcebergPartitioning, LiveFiles, Source
from indexlib.sources.iceberg_deletes import SnapshotDeletes, data_file_ref
from indexlib.sources.registry import SourceFormat
from indexlib.statistics.manifest_stats import ManifestStatistics

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from indexlib.config import Config


def metadata_location(catalog: Any, identifier: str) -> str | None:
    """The metadata file `catalog` points table `identifier` at now, asked without reading the metadata (a SQL
    catalog, SQLite or PostgreSQL: one query of its `iceberg_tables` row), or None where the catalog has no such row
    or offers no such question (REST, Hive, Glue: the caller loads the table). Metadata files are never rewritten,
    so a table whose location is the one already loaded is that table: nothing of it changed."""
    sql = sys.modules.get("pyiceberg.catalog.sql")  # imported by the catalog itself when it is one
    if sql is None or not isinstance(catalog, sql.SqlCatalog):
        return None
    with catalog.engine.connect() as connection:
        found: str | None = connection.execute(
            _location_query(sql.IcebergTables),
            {
                "catalog": catalog.name,
                "namespace": catalog.namespace_to_string(catalog.namespace_from(identifier)),
                "name": catalog.table_name_from(identifier),
            },
        ).scalar_one_or_none()
    return found


@cache
def _location_query(tables: Any) -> Any:
    """The statement `metadata_location` runs, built once (building one costs more than running it)."""
    from sqlalchemy import bindparam, select

    return select(tables.metadata_location).where(
        tables.catalog_name == bindparam("catalog"),
        tables.table_namespace == bindparam("namespace"),
        tables.table_name == bindparam("name"),
    )


def only_appends_since(table: Table, snapshot_id: int) -> bool:
    """Every snapshot of `table` after `snapshot_id` up to the current one is an append (and `snapshot_id` is an
    ancestor of the current one): then the rows since are exactly what an incremental append scan reads."""
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        if snapshot.snapshot_id == snapshot_id:
            return True
        if snapshot.summary is None or snapshot.summary.operation != Operation.APPEND:
            return False
    return False


SEEN_TABLES_SHOWN = 10  # an unknown-table error names at most this many of the tables the catalog holds


def seen_in(catalog: Any) -> str:
    """What an unknown-table error adds after the catalog's name: its resolved URI and, in parentheses, its
    namespaces and tables (the first `SEEN_TABLES_SHOWN` of each) and, for SQLite, the path rule."""
    from indexlib.config import PATH_RULE

    uri = catalog.properties.get("uri")
    notes = [PATH_RULE] if uri and uri.startswith("sqlite:") else []
    try:
        tables: list[str] = []
        namespaces = sorted(".".join(ns) for ns in catalog.list_namespaces())
        for namespace in namespaces:
            tables += sorted(".".join(t) for t in catalog.list_tables(namespace))
            if len(tables) > SEEN_TABLES_SHOWN:
                break
    except Exception:  # any catalog's listing failure: the error still names the table and the catalog
        notes.insert(0, "its tables could not be listed")
    else:
        notes[:0] = [f"namespaces: {_capped(namespaces)}", f"tables: {_capped(tables)}"]
    return f"{f'at {uri} ' if uri else ''}({'; '.join(notes)})"


def _capped(names: list[str]) -> str:
    shown = ", ".join(names[:SEEN_TABLES_SHOWN]) + (", ..." if len(names) > SEEN_TABLES_SHOWN else "")
    return shown or "none"


class IcebergSource:
    """An Iceberg table; the watermark is a snapshot id of it.

    `table` is the loaded pyiceberg table: the partition stage reads its current schema and every partition spec
    the table has had (`partition_specs`), since old files keep the spec they were written with.
    """

    table: Table
    format = "iceberg"
    reads = FileReads.ICEBERG

    def __init__(self, catalog: Any, name: str, table: Table | None = None) -> None:
        """The table `name` of `catalog`, or the already loaded `table` (a planner's handle reuses its own)."""
        if table is None:
            try:
                table = catalog.load_table(name)
            except (NoSuchTableError, NoSuchNamespaceError, ValueError):
                raise UserError(f"unknown table {name!r} in catalog {catalog.name!r} {seen_in(catalog)}") from None
        self.catalog = catalog
        self.table = table
        self.name = name
        self.schema = self.table.schema()
        self.io_properties = dict(self.table.io.properties)
        self.name_mapping_json = self.table.properties.get("schema.name-mapping.default")

    def refreshed(self) -> IcebergSource:
        """The table as the catalog has it now: `self` when the catalog still points at the metadata file loaded
        (`metadata_location`: one catalog read), else the table loaded afresh (one catalog and one metadata read)."""
        if metadata_location(self.catalog, self.name) == self.table.metadata_location:
            return self
        return IcebergSource(self.catalog, self.name, self.catalog.load_table(self.name))

    def keeps_layout(self, earlier: Source) -> bool:
        """The same schema and partition specs: files listed under `earlier` (their partitions decoded with its
        schema) stay valid."""
        if not isinstance(earlier, IcebergSource):
            return False
        old, new = earlier.table.metadata, self.table.metadata
        return (old.current_schema_id, old.default_spec_id, old.partition_specs) == (
            new.current_schema_id,
            new.default_spec_id,
            new.partition_specs,
        )

    @property
    def partition_specs(self) -> dict[int, PartitionSpec]:
        """Every partition spec of the table by spec id (a file's `DataFileRef.spec_id` names one)."""
        return self.table.specs()

    @property
    def partitioning(self) -> IcebergPartitioning:
        return IcebergPartitioning(self.table)

    def current_version(self) -> int | None:
        snapshot = self.table.current_snapshot()
        return snapshot.snapshot_id if snapshot else None

    @cached_property
    def deletes(self) -> SnapshotDeletes:
        """The delete files of the loaded snapshot, read once per loaded table (a handle keeps it per state)."""
        return SnapshotDeletes(self.table, self.name, self.current_version())

    def deletes_for(self, files: Sequence[DataFileRef]) -> list[tuple[DeleteFileRef, ...]]:
        return self.deletes.for_files(files)

    def live_files(self) -> list[DataFileRef]:
        if self.current_version() is None:
            return []
        listed = self.deletes.live_data_files()  # with equality deletes, which pyiceberg's planning refuses
        return listed if listed is not None else [data_file_ref(task.file) for task in self.table.scan().plan_files()]

    @property
    def state_key(self) -> object:
        return self.table.metadata_location

    def appended_since(self, version: int) -> list[DataFileRef] | None:
        """Appends only since `version`: pyiceberg's incremental append scan reads just the new manifests."""
        current = self.current_version()
        if current == version:
            return []
        if current is None or not only_appends_since(self.table, version):
            return None
        try:
            scan = self.table.incremental_append_scan(
                from_snapshot_id_exclusive=version, to_snapshot_id_inclusive=current
            )
            return [data_file_ref(task.file) for task in scan.plan_files()]
        except (ValueError, ValidationError):
            return None

    def live_after(self, version: int, known: pa.Table) -> LiveFiles | None:
        """The live files without planning the table: `known` (the index's file rows, exactly the files live at
        snapshot `version`) plus the files of the snapshots after it, when those are all appends; None otherwise
        (plan instead)."""
        added = self.appended_since(version)
        if added is None:
            return None
        paths = known.column("file_path").to_pylist()
        seen = set(paths)
        added = [ref for ref in added if ref.path not in seen]
        count = len(paths)

        def pick(positions: list[int]) -> list[DataFileRef]:
            taken = pa.array([i for i in positions if i < count], pa.int64())  # typed: an empty list is no index
            return self.refs_of(known.take(taken)) + [added[i - count] for i in positions if i >= count]

        return LiveFiles(paths + [ref.path for ref in added], lambda: self.refs_of(known) + added, pick)

    def commit_times(self, since: int | None, upto: int) -> list[float]:
        newest = self.table.snapshot_by_id(upto)
        if newest is None:
            return []
        times: list[float] = []
        for snapshot in ancestors_of(newest, self.table.metadata):
            if snapshot.snapshot_id == since:
                return times[::-1]
            times.append(snapshot.timestamp_ms / 1000)
        return [newest.timestamp_ms / 1000]

    def format_statistics(self, files: Sequence[DataFileRef]) -> ManifestStatistics:
        """The files' manifest entries as statistics (statistics/manifest_stats.py): those the files were listed
        with, else (files listed from the index's rows) those of the loaded snapshot's plan, read once."""
        entries = [ref.stats for ref in files]
        if any(entry is None for entry in entries):
            planned = self._planned_entries
            entries = [
                planned.get(ref.path) if entry is None else entry for ref, entry in zip(files, entries, strict=True)
            ]
        return ManifestStatistics(entries, [ref.path for ref in files])

    @cached_property
    def _planned_entries(self) -> dict[str, Any]:
        """The manifest entry of every live file of the loaded snapshot, by path."""
        return {ref.path: ref.stats for ref in self.live_files()}

    def stored_partition(self, ref: DataFileRef) -> list[bytes | None] | None:
        """The file's partition record in Iceberg's single-value serialisation, per field of its spec (None when
        the source does not say or the spec cannot be typed with the current schema)."""
        spec = self.partition_specs.get(ref.spec_id)
        if spec is None or ref.partition is None:
            return None
        try:
            fields = spec.partition_type(self.schema).fields
            return [
                None if v is None else to_bytes(f.field_type, v)  # type: ignore[arg-type]  # partition types: primitive
                for f, v in zip(fields, ref.partition, strict=True)
            ]
        except Exception:  # a source column of the spec dropped or retyped: the record stays unknown (kept)
            return None

    def refs_of(self, rows: pa.Table) -> list[DataFileRef]:
        """File rows of the index (store/schema.py) as data files; a partition that does not decode with the
        current schema is unknown, which the partition stage keeps."""
        types: dict[int, list[Any] | None] = {}
        decoded: dict[tuple[int, tuple[bytes | None, ...]], Any] = {}

        def partition(spec_id: int | None, stored: list[bytes | None] | None) -> Any:
            if spec_id is None or stored is None:
                return None
            if spec_id not in types:
                spec = self.partition_specs.get(spec_id)
                try:
                    types[spec_id] = [f.field_type for f in spec.partition_type(self.schema).fields] if spec else None
                except Exception:
                    types[spec_id] = None
            key = (spec_id, tuple(stored))
            if key not in decoded:
                field_types = types[spec_id]
                try:
                    decoded[key] = (
                        Record(
                            *(None if b is None else from_bytes(t, b) for t, b in zip(field_types, stored, strict=True))
                        )
                        if field_types is not None
                        else None
                    )
                except Exception:
                    decoded[key] = None
            return decoded[key]

        columns = [
            rows.column(name).to_pylist()
            for name in ("file_path", "record_count", "file_size_in_bytes", "file_format", "spec_id", "partition")
        ]
        refs = []
        for path, count, size, file_format, spec_id, stored in zip(*columns, strict=True):
            refs.append(
                DataFileRef(path, count, size, file_format or "PARQUET", spec_id or 0, partition(spec_id, stored))
            )
        return refs

    def files_at(self, snapshot_id: int) -> list[DataFileRef] | None:
        """The files live at that snapshot (None when it expired)."""
        if self.table.snapshot_by_id(snapshot_id) is None:
            return None
        listed = SnapshotDeletes(self.table, self.name, snapshot_id).live_data_files()
        return (
            listed
            if listed is not None
            else [data_file_ref(t.file) for t in self.table.scan(snapshot_id=snapshot_id).plan_files()]
        )

    def at_version(self, snapshot_id: int) -> IcebergSource | None:
        """The table as it was at that snapshot (None when it expired): the loaded metadata with that snapshot and
        the schema it was written with as current, as pyiceberg's `table.scan(snapshot_id=...)` reads it."""
        from pyiceberg.table import Table

        snapshot = self.table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return None
        pinned: dict[str, Any] = {"current_snapshot_id": snapshot_id}
        if snapshot.schema_id in self.table.schemas():
            pinned["current_schema_id"] = snapshot.schema_id
        metadata = self.table.metadata.model_copy(update=pinned)
        table = Table(self.table.name(), metadata, self.table.metadata_location, self.table.io, self.table.catalog)
        return IcebergSource(self.catalog, self.name, table)

    def partition_label(self, ref: DataFileRef) -> str:
        spec = self.partition_specs.get(ref.spec_id)
        if spec is None or spec.is_unpartitioned() or ref.partition is None:
            return "(unpartitioned)"
        return spec.partition_to_path(ref.partition, self.schema)


def _open(config: Config, name: str, catalog: Any) -> IcebergSource:
    return IcebergSource(catalog if catalog is not None else config.load_catalog(), name)


FORMAT = SourceFormat("iceberg", recognises=lambda name: "." in name, open=_open)
