"""Delta tables served as Iceberg tables: the `[serve] delta_tables` (a name each, by path or URI) are listed under
the namespace `[serve] delta_namespace`, loaded as Iceberg table metadata translated from the Delta log, and planned
from the index, so an engine that reads Iceberg through a REST catalog (Spark SQL with Iceberg's runtime alone)
reads a Delta table, pruned by the index, with none of Delta's jars.

What the translation promises, one rule each:

- **Columns.** The schema is the one the index reads the table by (sources/delta.py): with column mapping (`name`
  or `id` mode) each column's field id is its column-mapping id, which delta-spark also writes as the Parquet field
  id, so a rename reads the same column and a dropped-then-added name reads NULL from older files; without column
  mapping the ids are derived from the names and `schema.name-mapping.default` maps them to the files' columns by
  name (with mapping, to each column's physical name, for files written before mapping was enabled). Nested columns
  of a mapped table are refused: their field ids are not translated.
- **Partitions.** An identity partition spec on Delta's partition columns; each task's data file carries its
  partition values (NULL included), which Iceberg's readers use as the column's value for every row of the file
  (Delta's files do not store them). Partition columns of other types than boolean, integers, string and date are
  refused (their text forms are not checked here).
- **Versions.** One Iceberg snapshot per Delta version a client may read (delta_log.py `readable`), its id the
  Delta version, so `VERSION AS OF 3` reads Delta version 3; each snapshot names the schema its version was written
  with. A snapshot has no manifest list a client could read: it names the version's JSON commit, which is not
  one, so a client that tried to plan by itself would fail, never read something else (Spark's Iceberg runtime
  plans through the service when the service says `scan-planning-mode = server`).
- **Deletion vectors.** Delta's vector files hold each vector as Iceberg v3's `deletion-vector-v1` blob holds it:
  a 4-byte big-endian length, the magic number and the portable Roaring bitmap, a big-endian CRC-32. Delta's
  `offset` points at the length and its `sizeInBytes` counts the magic and bitmap only; Iceberg's reader reads
  `content-size-in-bytes` bytes from `content-offset` and expects the length first and the CRC last, so a vector is
  sent as a Puffin position-delete file at Delta's own path with `content-offset = offset` and
  `content-size-in-bytes = sizeInBytes + 8` (the reader checks the length, the magic, the CRC and the cardinality,
  so a wrong offset fails the read, never returns deleted rows). The table is format version 3 where Delta's
  protocol has deletion vectors. Inline vectors (in the log itself) have no file: refused.
- **Features.** A table whose protocol needs a reader feature outside `delta_log.READ_FEATURES` is refused with
  one line naming it: an Iceberg reader would not know to apply it. Every write is refused (app.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataV2, TableMetadataV3
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, SnapshotLogEntry, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import BooleanType, DateType, IntegerType, LongType, StringType

from indexlib.config import Config
from indexlib.errors import UnsupportedFeature, UserError
from indexlib.handle import IndexHandle
from indexlib.service.filters import RequestFilter
from indexlib.service.names import TableName, within
from indexlib.service.planner import Plan, ReaderResiduals, _check_select, _file_residuals, binding_schema
from indexlib.service.wire import Task, VectorRef
from indexlib.sources.base import DataFileRef, paths_of, pick
from indexlib.sources.delta import DeltaSource
from indexlib.sources.delta_log import READ_FEATURES, DeltaLog, VectorDescriptor, check_live

PARTITION_TYPES = (BooleanType, IntegerType, LongType, StringType, DateType)
FIRST_PARTITION_FIELD = 1000
VECTOR_FRAME = 8
_FIELD_ID = b"PARQUET:field_id"
UNUSED_VARIANT = {
    "variantType",
    "variantType-preview",
}  # harmless where no column is of type variant  # the 4-byte length before a vector's bytes and the 4-byte CRC-32 after them


@dataclass(frozen=True)
class Translated:
    """One Delta version's Iceberg metadata (every readable version a snapshot of it)."""

    version: int
    metadata: TableMetadataV2 | TableMetadataV3


def _checked(source: DeltaSource) -> None:
    """Refused with one line: what an Iceberg reader would misread (module docstring)."""
    protocol = source.table.protocol()
    declared = set(protocol.reader_features or ())
    if '"variant"' not in source.table.schema().to_json():  # declared (delta-rs declares it), used by no column
        declared -= UNUSED_VARIANT
    unknown = sorted(declared - READ_FEATURES)
    if unknown:
        raise UnsupportedFeature(
            f"Delta table {source.name}: reader feature {unknown[0]!r} is not translated to Iceberg: not served"
        )
    if source.column_mapping != "none":
        nested = [f.name for f in source.schema.fields if not f.field_type.is_primitive]
        if nested:
            raise UnsupportedFeature(
                f"Delta table {source.name}: nested column {nested[0]!r} under column mapping: its field ids are "
                "not translated: not served"
            )
    by_name = {f.name: f for f in source.schema.fields}
    for column in source.partition_columns:
        kind = by_name[column].field_type
        if not isinstance(kind, PARTITION_TYPES):
            raise UnsupportedFeature(
                f"Delta table {source.name}: partition column {column!r} of type {kind}: not served"
            )


def _spec(source: DeltaSource) -> PartitionSpec:
    by_name = {f.name: f for f in source.schema.fields}
    return PartitionSpec(
        *(
            PartitionField(by_name[c].field_id, FIRST_PARTITION_FIELD + i, IdentityTransform(), c)
            for i, c in enumerate(source.partition_columns)
        ),
        spec_id=0,
    )


class ServedDelta:
    """One configured Delta table: its index handle, its log, and its translated metadata per Delta version."""

    def __init__(self, name: TableName, path: str, config: Config, catalog: Any) -> None:
        self.name = name
        source = DeltaSource(path, config.delta_storage_options, config.catalog_properties)
        self.handle = IndexHandle.for_source(
            source,
            index_catalog=catalog,
            index_namespace=config.index_namespace,
            time_zone=config.time_zone,
            dialect=config.dialect,
        )
        self.log = DeltaLog(source.root, source.io_properties)
        self._schemas: dict[int, tuple[Schema, tuple[str, ...]]] = {}  # by the version whose metaData it is
        self._translated: Translated | None = None
        self._sizes: dict[str, int] = {}
        self._ids_checked: set[str] = set()  # data files whose field ids `_check_ids` found right
        self._lock = threading.Lock()

    def _schema_at(self, version: int, current: DeltaSource) -> tuple[Schema, tuple[str, ...]]:
        """The schema (and partition columns) the `metaData` of `version` gives."""
        with self._lock:
            found = self._schemas.get(version)
        if found is None:
            source = current if version == current.current_version() else current.at_version(version)
            if source is None:
                raise UserError(f"Delta table {self.name}: version {version} can no longer be read")
            _checked(source)
            found = source.schema, tuple(source.partition_columns)
            with self._lock:
                self._schemas[version] = found
        return found

    def metadata(self) -> Translated:
        """The Iceberg metadata of the table's current version (module docstring)."""
        state = self.handle.current()
        source = state.source
        assert isinstance(source, DeltaSource)
        version = int(state.source_version or 0)
        with self._lock:
            translated = self._translated
        if translated is not None and translated.version == version:
            return translated
        _checked(source)
        versions = self.log.readable(version)
        meta_of = self.log.metadata_versions(versions)
        meta_of[version] = meta_of.get(version, version)
        schemas: dict[int, Schema] = {}  # by metaData version, ids in order
        ids: dict[int, int] = {}
        for meta in sorted(set(meta_of.values())):
            schema, partitions = self._schema_at(meta, source)
            if partitions != tuple(source.partition_columns):
                raise UnsupportedFeature(
                    f"Delta table {self.name}: its partition columns changed at version {meta}: not served"
                )
            ids[meta] = len(schemas)
            schemas[meta] = Schema(*schema.fields, schema_id=ids[meta])
        times = self._times(versions)
        counts = [f.record_count for f in state.live]
        # Spark's estimate of an unfiltered scan of a partitioned table (the current snapshot's only: the others'
        # live files are not read here)
        totals = (
            {"total-records": str(sum(counts)), "total-data-files": str(len(counts))}
            if min(counts, default=0) >= 0
            else {}
        )
        snapshots = [
            Snapshot(  # type: ignore[call-arg]  # by field name: mypy knows pyiceberg's models by their aliases
                snapshot_id=v,
                parent_snapshot_id=v - 1 if v - 1 in times else None,
                sequence_number=v + 1,
                timestamp_ms=times[v],
                manifest_list=f"{self.log.root}/_delta_log/{v:020d}.json",
                summary=Summary(Operation.OVERWRITE, **{"delta-version": str(v), **(totals if v == version else {})}),
                schema_id=ids[meta_of[v]],
            )
            for v in versions
        ]
        features = source.table.protocol().reader_features or ()
        common: dict[str, Any] = {
            "location": source.root,
            "table_uuid": source.table.metadata().id,
            "last_updated_ms": times[version],
            "last_column_id": max(_max_id(s) for s in schemas.values()),
            "schemas": list(schemas.values()),
            "current_schema_id": ids[meta_of[version]],
            "partition_specs": [_spec(source)],
            "default_spec_id": 0,
            "last_partition_id": FIRST_PARTITION_FIELD + len(source.partition_columns) - 1,
            "properties": {"schema.name-mapping.default": source.name_mapping_json},
            "current_snapshot_id": version,
            "snapshots": snapshots,
            "snapshot_log": [SnapshotLogEntry(snapshot_id=v, timestamp_ms=times[v]) for v in versions],  # type: ignore[call-arg]
            "refs": {"main": SnapshotRef(snapshot_id=version, snapshot_ref_type=SnapshotRefType.BRANCH)},  # type: ignore[call-arg]
            "last_sequence_number": version + 1,
            "sort_orders": [UNSORTED_SORT_ORDER],  # Iceberg Java requires one (Delta keeps no sort order)
            "default_sort_order_id": UNSORTED_SORT_ORDER.order_id,
        }
        v3 = "deletionVectors" in features  # Iceberg reads deletion vectors in format version 3
        made: TableMetadataV2 | TableMetadataV3 = TableMetadataV2(**common)
        if v3:
            made = TableMetadataV3(**common, next_row_id=0)  # type: ignore[call-arg]  # by field name
        translated = Translated(version, made)
        with self._lock:
            self._translated = translated
        return translated

    def _times(self, versions: list[int]) -> dict[int, int]:
        """Each version's commit time (ms), never earlier than the version before's (Iceberg's snapshot log is in
        time order; Delta's file times may step back)."""
        history = {c["version"]: int(c["timestamp"]) for c in self.handle.current().source.table.history(len(versions))}  # type: ignore[attr-defined]
        times: dict[int, int] = {}
        last = 0
        for v in versions:
            last = max(last, history.get(v, last))
            times[v] = last
        return times

    def plan(self, request: PlanTableScanRequest, row_filter: RequestFilter) -> Any:
        """The plan of `request`: the index's kept files at the Delta version asked (`snapshot-id`, else the
        current one), each with its partition values, its deletion vector and its residual."""
        if request.start_snapshot_id is not None or request.end_snapshot_id is not None:
            raise UnsupportedFeature(f"Delta table {self.name}: incremental scans are not served")
        translated = self.metadata()
        metadata = translated.metadata
        version = translated.version if request.snapshot_id is None else request.snapshot_id
        if metadata.snapshot_by_id(version) is None:
            raise ValueError(f"table {self.name} has no snapshot {version} (a Delta version it can read)")
        state = self.handle.current() if version == translated.version else self.handle.state_at(version)
        if state.source_version != version:  # a commit since the metadata was read: plan what the client asked
            state = self.handle.state_at(version)
        binding = binding_schema(metadata, version, request.use_snapshot_schema)
        _check_select(binding, request)
        pruning = row_filter.pruning(binding, state.source.schema, request.case_sensitive)
        result = self.handle.lookup(pruning.bound if pruning.bound is not None else pruning.expression, state=state)
        residuals = _file_residuals(
            result, row_filter.residual, ReaderResiduals(metadata, binding, request.case_sensitive)
        )
        source = state.source
        assert isinstance(source, DeltaSource)
        live = self.log.live(version)
        check_live(live, paths_of(state.live), source.absolute, str(self.name), version)
        vectors = {source.absolute(path): vector for path, vector in live.items() if vector is not None}
        all_match = set(result.all_match)
        spec = metadata.specs()[0]
        tasks = []
        for ref in pick(state.live, list(result.kept_positions)):
            self._check_ids(ref.path, source)
            data = self._data_file(ref, source, spec)
            vector = vectors.get(ref.path)
            deletes = () if vector is None else (self._vector(ref, data, vector, source),)
            tasks.append(Task(data, deletes, _all_true() if ref.path in all_match else residuals[ref.path]))
        return Plan(tasks, "index", result.files_total, version, metadata, unknown=pruning.unknown)

    def _check_ids(self, path: str, source: DeltaSource) -> None:
        """Iceberg's reader finds a file's columns by their Parquet field ids where the file has any (else by the
        name mapping, by physical name, as Delta reads them): a file with field ids must give each column the id the
        translated schema gives it, under its physical name, and no other column one of those ids; else the two
        readers would read different columns (a file converted from another format, say): refused with one line.
        Each file's footer is read once (data files never change)."""
        if path in self._ids_checked:
            return
        with self.log.io.new_input(path).open(seekable=True) as stream:
            footer = pq.ParquetFile(stream).schema_arrow
        ids = {c.name: int(c.metadata[_FIELD_ID]) for c in footer if c.metadata and _FIELD_ID in c.metadata}
        if ids:
            wanted = {source.physical_names[f.name]: f.field_id for f in source.schema.fields}
            nested = [f.name for f in source.schema.fields if not f.field_type.is_primitive]
            odd = [n for n, i in ids.items() if wanted.get(n, i) != i or (n not in wanted and i in wanted.values())]
            odd += [n for n, i in wanted.items() if n in footer.names and ids.get(n) != i]
            if odd or nested:
                raise UnsupportedFeature(
                    f"Delta table {self.name}: {path} stores Parquet field ids that do not match the table's "
                    f"columns ({(odd or nested)[0]!r}): Iceberg's reader would read other columns than Delta's: "
                    "not served"
                )
        self._ids_checked.add(path)

    def _data_file(self, ref: DataFileRef, source: DeltaSource, spec: PartitionSpec) -> DataFile:
        if ref.record_count < 0:
            raise UnsupportedFeature(f"Delta table {self.name}: {ref.path} has no numRecords in its add action")
        values = dict(ref.partition or ())
        data = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=ref.path,
            file_format=FileFormat.PARQUET,
            partition=Record(*(values.get(c) for c in source.partition_columns)),
            record_count=ref.record_count,
            file_size_in_bytes=ref.file_size_in_bytes,
        )
        data.spec_id = spec.spec_id
        return data

    def _vector(self, ref: DataFileRef, data: DataFile, vector: VectorDescriptor, source: DeltaSource) -> VectorRef:
        """The file's deletion vector as Iceberg's reader finds it (module docstring)."""
        path = vector.file(source.root)
        if vector.offset is None:
            raise UnsupportedFeature(f"Delta table {self.name}: the deletion vector of {ref.path} has no offset")
        size = self._sizes.get(path)
        if size is None:
            size = self._sizes[path] = len(self.log.io.new_input(path))
        delete = DataFile.from_args(
            content=DataFileContent.POSITION_DELETES,
            file_path=path,
            file_format=FileFormat.PUFFIN,
            partition=data.partition,
            record_count=vector.cardinality,
            file_size_in_bytes=size,
        )
        delete.spec_id = data.spec_id
        return VectorRef(delete, ref.path, vector.offset, vector.size + VECTOR_FRAME, vector.cardinality)


def _all_true() -> Any:
    from pyiceberg.expressions import AlwaysTrue

    return AlwaysTrue()


def _max_id(schema: Schema) -> int:
    return max((f.field_id for f in schema._lazy_id_to_field.values()), default=0)  # every field, nested too


class DeltaTables:
    """The configured Delta tables of one process (module docstring), opened when first named."""

    def __init__(self, config: Config, catalog: Any) -> None:
        self.config, self.catalog = config, catalog
        serve = config.serve
        self.namespace: tuple[str, ...] = tuple(serve.delta_namespace.split(".")) if serve.delta_tables else ()
        self.paths = dict(serve.delta_tables)
        index = tuple(config.index_namespace.split("."))
        if self.namespace and (within(self.namespace, index) or within(index, self.namespace)):
            raise UserError(
                f"[serve] delta_namespace {serve.delta_namespace!r} overlaps the index namespace {config.index_namespace!r}"
            )
        self._opened: dict[str, ServedDelta] = {}
        self._lock = threading.Lock()

    def serves(self, namespace: tuple[str, ...]) -> bool:
        return bool(self.namespace) and namespace == self.namespace

    def names(self) -> list[str]:
        return sorted(self.paths)

    def table(self, name: TableName) -> ServedDelta:
        """The Delta table `name` names (NoSuchTableError when none is configured under it)."""
        path = self.paths.get(name.name) if self.serves(name.namespace) else None
        if path is None:
            raise NoSuchTableError(f"Table does not exist: {name}")
        with self._lock:
            found = self._opened.get(name.name)
        if found is None:
            found = ServedDelta(name, path, self.config, self.catalog)
            with self._lock:
                found = self._opened.setdefault(name.name, found)
        return found
