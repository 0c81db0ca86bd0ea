"""Delta Lake tables as sources, read through delta-rs (`deltalake`); no Delta jars are needed anywhere.

A Delta table is named by its path or URI; its versions are the watermark. delta-rs replays the log to open a
version, so the files live now are always at hand: a build indexes the live files the index has no row of and drops
the rows of files no longer live (delete, overwrite, OPTIMIZE, RESTORE). Spark tasks then read the data files as
plain Parquet.

Delta keeps partition columns out of the data files, so the file indexer finds no statistics for them (unknown:
kept). The partition stage reads the partition values of the add actions instead (`partitioning`), as min = max
statistics (statistics/partition_values.py).

Without column mapping Delta has no field ids; the index's ids are derived from the column names (`_ids_by_name`).
With column mapping (`delta.columnMapping.mode` `name` or `id`: every table that renamed or dropped a column, and
UniForm tables) each column has a stable id and a physical name, the one its data files use (`col-<uuid>` where the
table was created with mapping, the old name where mapping was enabled later; delta-spark also writes the id as the
Parquet field id). The index's ids are those ids (`_ids_by_mapping`), so statistics survive renames; the build reads
each file's columns by field id, or by physical name where a file has no ids (the name mapping holds the physical
names only: a later column may take a dropped column's logical name, never its physical one); and the scans read the
physical names and name them as the table does now (`physical_names`; `physical_schema` for struct fields, which
have physical names of their own). A column dropped and added again under its
old name has a new id and physical name: NULL in the files written before, as Delta reads it.

Deletion vectors (Spark's DELETE / UPDATE / MERGE on a table with `delta.enableDeletionVectors`) are read by delta-rs
(`DeltaTable.deletion_vectors()`: inline, relative 'u' and absolute 'p' storage) for a lookup's kept files only, and
handed to the scans as each kept file's deleted row positions (`deletes_for`); the index itself ignores them (a
file's statistics over all its rows hold for any subset, so pruning and all-match stay right).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table.name_mapping import MappedField, NameMapping, create_mapping_from_schema
from pyiceberg.types import NestedField

from indexlib.errors import UnsupportedFeature, UserError
from indexlib.sources.base import DataFileRef, DeleteFileRef, FileReads, IdentityPartitioning, Source
from indexlib.sources.delta_stats import ActionRow, DeltaStatistics
from indexlib.sources.registry import SourceFormat

if TYPE_CHECKING:
    from indexlib.config import Config

# pyiceberg FileIO reads the data files in Spark tasks; these [catalog] keys configure its storage access.
_FILE_IO_PREFIXES = ("s3.", "gcs.", "adls.", "hdfs.", "oss.", "py-io-impl")


# Top-level field ids derived from column names live above every id `assign_fresh_schema_ids` gives nested fields.
_NAME_ID_BASE = 1 << 20

# reading every deletion vector of a table: 0.05-0.5 s per 1,000 vectors measured
VECTORS_TIMEOUT_S = 120.0


def _ids_by_name(schema: Schema, table: str) -> Schema:
    """The schema with each top-level column's id derived from its name. Delta without column mapping has no field
    ids, and positions are not stable: delta-rs's schema merge moves the partition columns after columns added
    later (id, part, x -> id, x, part), so an id by position would read another column's statistics. A name
    is stable (no renames without column mapping); a column dropped and added again under the same name is read
    from each file by that name, and its stored type decides whether old statistics still apply."""
    fields = []
    seen: dict[int, str] = {}
    for field in schema.fields:
        digest = hashlib.sha256(field.name.encode()).digest()
        field_id = _NAME_ID_BASE + int.from_bytes(digest[:4], "big") % (1 << 30)
        if field_id in seen:
            raise UserError(
                f"Delta table {table}: columns {seen[field_id]!r} and {field.name!r} hash to the same index field id"
            )
        seen[field_id] = field.name
        fields.append(NestedField(field_id, field.name, field.field_type, field.required, field.doc))
    return Schema(*fields)


_MAPPING_ID = b"delta.columnMapping.id"
_PHYSICAL_NAME = b"delta.columnMapping.physicalName"
MAPPING_MODES = ("none", "name", "id")


def physical_name(field: pa.Field) -> str:
    """A field's name in the data files: its column-mapping physical name, or its own name (no mapping, and the
    fields mapping never names: list elements, map keys and values)."""
    physical = (field.metadata or {}).get(_PHYSICAL_NAME)
    return physical.decode() if physical is not None else field.name


def physical_type(kind: pa.DataType) -> pa.DataType:
    """`kind` with every struct field under its physical name (a mapped struct's fields have their own)."""
    if pa.types.is_struct(kind):
        return pa.struct([physical_field(child) for child in kind])
    if pa.types.is_list(kind):
        return pa.list_(physical_field(kind.value_field))
    if pa.types.is_large_list(kind):
        return pa.large_list(physical_field(kind.value_field))
    if pa.types.is_map(kind):
        return pa.map_(physical_field(kind.key_field), physical_field(kind.item_field))
    return kind


def physical_field(field: pa.Field) -> pa.Field:
    return pa.field(physical_name(field), physical_type(field.type), field.nullable, field.metadata)


def physical_names(arrow: pa.Schema, mode: str, table: str) -> dict[str, str]:
    """Each top-level column's name in the data files, by its name in the table now (itself without mapping).
    Refused with one line: a mapped column without its id or physical name (the log is not one Delta wrote)."""
    if mode == "none":
        return {field.name: field.name for field in arrow}
    for field in arrow:
        metadata = field.metadata or {}
        if _MAPPING_ID not in metadata or _PHYSICAL_NAME not in metadata:
            raise UserError(f"Delta table {table}: column {field.name!r} has no column-mapping id or physical name")
    return {field.name: physical_name(field) for field in arrow}


def _ids_by_mapping(schema: Schema, arrow: pa.Schema, table: str) -> Schema:
    """The schema with each top-level column's id its column-mapping id (stable across renames); nested fields keep
    the ids `assign_fresh_schema_ids` gave them, from `_NAME_ID_BASE` up (the caller's counter)."""
    ids = {field.name: int((field.metadata or {})[_MAPPING_ID]) for field in arrow}
    if any(not 0 < i < _NAME_ID_BASE for i in ids.values()):
        raise UserError(
            f"Delta table {table}: a column-mapping id outside 1..{_NAME_ID_BASE - 1}: {sorted(ids.values())}"
        )
    return Schema(*(NestedField(ids[f.name], f.name, f.field_type, f.required, f.doc) for f in schema.fields))


def _name_mapping(schema: Schema, physical: dict[str, str]) -> NameMapping:
    """pyiceberg's name mapping of `schema` with each top-level column under its physical name alone."""
    fields = create_mapping_from_schema(schema)
    return NameMapping(
        [
            # by field name: mypy knows pyiceberg's models by their aliases alone ("field-id", service/wire.py)
            MappedField(field_id=f.field_id, names=[physical[f.names[0]]], fields=f.fields)  # type: ignore[call-arg]
            for f in fields
        ]
    )


def _path_of_uri(uri: str) -> str:
    """A data file URI as delta-rs gives it (`file:///t/p=b%20c/f.parquet`) spelt as `DeltaSource.absolute`
    spells a live file (`/t/p=b c/f.parquet`)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"


def is_delta_name(name: str) -> bool:
    """A path or URI names a Delta table; `ns.name` names an Iceberg table in the catalog."""
    return "/" in name or "://" in name or os.path.isdir(os.path.join(name, "_delta_log"))


def normalize_delta_name(name: str) -> str:
    """One spelling per table: local paths absolute, no trailing slash (the index table is derived from it)."""
    if "://" in name and not name.startswith("file://"):
        return name.rstrip("/")
    path = urlparse(name).path if name.startswith("file://") else name
    return os.path.abspath(path)


class DeltaSource:
    """A Delta table; the watermark is a table version."""

    format = "delta"
    reads = FileReads.PARQUET_BY_NAME

    def __init__(
        self,
        name: str,
        storage_options: dict[str, str] | None = None,
        io_properties: dict[str, str] | None = None,
        table: Any = None,
    ) -> None:
        """`table`: an already loaded `deltalake.DeltaTable` of `name` (a planner's handle reuses its own)."""
        from deltalake import DeltaTable

        self.name = normalize_delta_name(name)
        self.storage_options = dict(storage_options or {})
        try:
            self.table = (
                table if table is not None else DeltaTable(self.name, storage_options=self.storage_options or None)
            )
        except Exception as exc:  # delta-rs raises TableNotFoundError, OSError or DeltaError here
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"no Delta table at {self.name!r} (cannot read its _delta_log: {reason})") from None
        self.column_mapping = self.table.metadata().configuration.get("delta.columnMapping.mode", "none")
        if self.column_mapping not in MAPPING_MODES:
            raise UserError(
                f"Delta table {self.name}: column mapping mode {self.column_mapping!r} is none of {MAPPING_MODES}"
            )
        self.arrow_schema = pa.schema(self.table.schema().to_arrow())  # the columns as the table names them now
        self.physical_names = physical_names(self.arrow_schema, self.column_mapping, self.name)
        # the columns as the files store them: physical names at every level (nested fields have theirs too)
        self.physical_schema = pa.schema([physical_field(field) for field in self.arrow_schema])
        plain = _pyarrow_to_schema_without_ids(self.arrow_schema)
        if self.column_mapping == "none":
            self.schema: Schema = _ids_by_name(assign_fresh_schema_ids(plain), self.name)
            self.name_mapping_json = self.schema.name_mapping.model_dump_json()
        else:
            fresh = itertools.count(_NAME_ID_BASE).__next__  # nested fields' ids: above every mapping id
            self.schema = _ids_by_mapping(assign_fresh_schema_ids(plain, fresh), self.arrow_schema, self.name)
            self.name_mapping_json = _name_mapping(self.schema, self.physical_names).model_dump_json()
        self.io_properties = {k: v for k, v in (io_properties or {}).items() if k.startswith(_FILE_IO_PREFIXES)}
        self.partition_columns = list(self.table.metadata().partition_columns)
        self._read_by_name: set[str] = set()  # files `check_read_by_name` passed

    def check_read_by_name(self, paths: Sequence[str]) -> None:
        """The jar-free scans read a file's columns by their physical names; Delta's `id` mode reads them by Parquet
        field id. The two agree on the files delta-spark writes (each column under its physical name, its id as
        field id); a file whose footer pairs a mapped id with another name, or a mapped name with another id (say a
        converter's file written before a rename), would be read wrong by name: refused with one line. Top-level
        columns only: a struct's fields are not checked (not yet). Each file's footer is read once per source (data
        files never change)."""
        if self.column_mapping != "id":
            return
        import pyarrow.parquet as pq
        from pyiceberg.io import load_file_io

        name_of = {f.field_id: self.physical_names[f.name] for f in self.schema.fields}
        id_of = {name: field_id for field_id, name in name_of.items()}
        for path in paths:
            if path in self._read_by_name:
                continue
            with load_file_io(self.io_properties, path).new_input(path).open() as stream:
                footer = pq.ParquetFile(stream).schema_arrow
            for column in footer:
                written = (column.metadata or {}).get(b"PARQUET:field_id")
                if written is None:
                    continue  # no field id: Delta's reader matches this column by name too
                field_id = int(written)
                if name_of.get(field_id, column.name) != column.name or id_of.get(column.name, field_id) != field_id:
                    raise UnsupportedFeature(
                        f"Delta table {self.name}: {path} stores column {column.name!r} under field id {field_id}, "
                        "which the column mapping ('id' mode) gives another name: the scans read by name and "
                        "cannot read it (the Spark scan's delta-spark reader can)"
                    )
            self._read_by_name.add(path)

    def refreshed(self) -> DeltaSource:
        """The table at its latest version: delta-rs reads only the log entries after the version it has (`self`
        when there are none; the loaded table object is shared with the new source)."""
        version = self.current_version()
        self.table.update_incremental()
        if self.current_version() == version:
            return self
        return DeltaSource(self.name, self.storage_options, self.io_properties, table=self.table)

    def keeps_layout(self, earlier: Source) -> bool:
        """False: delta-rs has the live files at hand, so a list is never carried over (`appended_since`)."""
        return False

    @cached_property
    def root(self) -> str:
        """The table's location as its files' paths start: delta-rs's `table_uri` percent-encodes it
        (`file:///data/my%20table`), the files are opened and named by their decoded paths."""
        return _path_of_uri(self.table.table_uri.rstrip("/"))

    def current_version(self) -> int | None:
        return int(self.table.version())

    def _files(self, table: Any) -> list[DataFileRef]:
        actions = pa.table(table.get_add_actions(flatten=True))
        columns = {
            c: actions.column(f"partition.{c}").to_pylist() if f"partition.{c}" in actions.column_names else None
            for c in self.partition_columns
        }
        counts = actions.column("num_records").to_pylist() if "num_records" in actions.column_names else None
        refs = []
        for i, (path, size) in enumerate(
            zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True)
        ):
            partition = tuple((c, v[i]) for c, v in columns.items() if v is not None)
            count = counts[i] if counts is not None and counts[i] is not None else -1
            refs.append(
                DataFileRef(self.absolute(path), count, int(size), "PARQUET", 0, partition, ActionRow(actions, i))
            )
        return refs

    def commit_times(self, since: int | None, upto: int) -> list[float]:
        first = since + 1 if since is not None and 0 <= since < upto else upto
        newest = self.current_version() or upto
        found = self.table.history(limit=newest - first + 1)  # newest first, back to `first`
        return sorted(
            c["timestamp"] / 1000 for c in found if first <= c.get("version", -1) <= upto and "timestamp" in c
        )

    def format_statistics(self, files: Sequence[DataFileRef]) -> DeltaStatistics:
        """The files' add actions' `stats` as statistics (sources/delta_stats.py), each top-level column found under
        its physical name."""
        columns = {f.field_id: self.physical_names[f.name] for f in self.schema.fields if f.name in self.physical_names}
        return DeltaStatistics([ref.stats for ref in files], columns, [ref.path for ref in files])

    def absolute(self, path: str) -> str:
        """The data file as delta-rs's `file_uris()` spells it: the log's path is a percent-encoded URI reference."""
        path = unquote(path)
        return path if "://" in path or path.startswith("/") else f"{self.root}/{path}"

    def live_files(self) -> list[DataFileRef]:
        return self._files(self.table)

    @property
    def state_key(self) -> object:
        return self.current_version()  # every change to a Delta table, its schema included, is a new version

    def appended_since(self, version: int) -> list[DataFileRef] | None:
        """None: delta-rs holds the live files of the loaded version already (it replayed the log to open it)."""
        return None

    def files_at(self, version: int) -> list[DataFileRef] | None:
        """The files live at that table version (None when the log no longer has it)."""
        try:
            from deltalake import DeltaTable

            return self._files(DeltaTable(self.name, version=version, storage_options=self.storage_options or None))
        except Exception:
            return None

    def at_version(self, version: int) -> DeltaSource | None:
        """The table as it was at that version (None when the log no longer has it)."""
        from deltalake import DeltaTable

        try:
            table = DeltaTable(self.name, version=version, storage_options=self.storage_options or None)
        except Exception:  # delta-rs raises DeltaError or OSError for a version it cannot load
            return None
        return DeltaSource(self.name, self.storage_options, self.io_properties, table)

    def live_after(self, version: int, known: pa.Table) -> list[DataFileRef] | None:
        """None: see `appended_since`."""
        return None

    def stored_partition(self, ref: DataFileRef) -> list[bytes | None] | None:
        """None: a Delta file's partition values come from the log, with its live files (`live_after`)."""
        return None

    def deletes_for(self, files: Sequence[DataFileRef]) -> list[tuple[DeleteFileRef, ...]]:
        """Per file, its deletion vector as the positions it deletes (`DeleteFileRef.positions`), or none. delta-rs
        lists no vector per add action, and `deletion_vectors()` materialises every vector of the table
        (docs/how-to/read-rows.md), so it is called only when the protocol enables them."""
        features = self.table.protocol().reader_features or []
        if not files or "deletionVectors" not in features:
            return [() for _ in files]
        vectors = self._deletion_vectors({f.path for f in files})
        return [vectors.get(f.path, ()) for f in files]

    def _deletion_vectors(self, paths: set[str]) -> dict[str, tuple[DeleteFileRef, ...]]:
        """The vectors of the files at `paths` (spelt as `absolute` spells them). A vector naming no live file
        means the spellings disagree: refused, as reading on would return the rows it deletes."""
        vectors = self._all_deletion_vectors()
        uris = vectors.column("filepath").to_pylist()
        keys = [_path_of_uri(uri) for uri in uris]
        rows = [i for i, key in enumerate(keys) if key in paths]
        if len(rows) < len(keys):
            live = {self.absolute(p) for p in pa.table(self.table.get_add_actions()).column("path").to_pylist()}
            lost = [uri for key, uri in zip(keys, uris, strict=True) if key not in paths and key not in live]
            if lost:
                raise UserError(
                    f"Delta table {self.name}: the deletion vector of {lost[0]} names no live file as delta-rs lists "
                    "them, so its deleted rows could not be dropped"
                )
        if not rows:
            return {}
        keep = vectors.column("selection_vector")  # True: the row is kept
        keep = (keep if len(rows) == len(keys) else keep.take(rows)).combine_chunks()
        offsets = keep.offsets.to_numpy()
        deleted = np.flatnonzero(~keep.flatten().to_numpy(zero_copy_only=False)) + offsets[0]
        bounds = np.searchsorted(deleted, offsets)  # the deleted positions of vector n: deleted[bounds[n]:bounds[n+1]]
        out: dict[str, tuple[DeleteFileRef, ...]] = {}
        for n, i in enumerate(rows):
            positions = (deleted[bounds[n] : bounds[n + 1]] - offsets[n]).astype(np.int64)
            out[keys[i]] = (DeleteFileRef(uris[i], "deletion_vector", "DELTA", len(positions), positions=positions),)
        return out

    def _all_deletion_vectors(self) -> pa.Table:
        """delta-rs's `deletion_vectors()`, given `VECTORS_TIMEOUT_S`: delta-rs 1.6.6 was seen never returning from a
        second call on a table with 600 vectors stored in files (docs/how-to/read-rows.md), and a planner's lookup must
        not hang. The call runs in a daemon thread; on timeout it is left behind and the lookup fails with one line."""
        done = threading.Event()
        answer: list[Any] = []

        def read() -> None:
            try:
                answer.append(pa.table(self.table.deletion_vectors()))
            except BaseException as exc:  # handed to the caller's thread
                answer.append(exc)
            finally:
                done.set()

        threading.Thread(target=read, name="skipindex-delta-vectors", daemon=True).start()
        if not done.wait(VECTORS_TIMEOUT_S):
            raise UserError(
                f"Delta table {self.name}: delta-rs did not return the table's deletion vectors within "
                f"{VECTORS_TIMEOUT_S:g} s (delta-rs 1.6.6 can hang with hundreds of vectors in files; docs/how-to/read-rows.md)"
            )
        from deltalake.exceptions import DeltaError

        if isinstance(answer[0], DeltaError):  # e.g. a reader feature delta-rs lacks (delta-rs 1.6.6: typeWidening)
            reason = str(answer[0]).strip().splitlines()[0] if str(answer[0]).strip() else type(answer[0]).__name__
            raise UnsupportedFeature(
                f"Delta table {self.name}: delta-rs cannot read the table's deletion vectors ({reason}), so no scan "
                "can drop the rows they delete"
            ) from None
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    def partition_label(self, ref: DataFileRef) -> str:
        return "/".join(f"{c}={v}" for c, v in ref.partition or ()) or "(unpartitioned)"

    @property
    def partitioning(self) -> IdentityPartitioning:
        by_name = {f.name: f for f in self.schema.fields}
        return IdentityPartitioning(tuple(by_name[c] for c in self.partition_columns if c in by_name))


def _open(config: Config, name: str, catalog: Any) -> DeltaSource:
    return DeltaSource(name, config.delta_storage_options, config.catalog_properties)


FORMAT = SourceFormat("delta", recognises=is_delta_name, open=_open)
