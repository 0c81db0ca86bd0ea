"""Delta Lake tables as sources, read through delta-rs (`deltalake`); no Delta jars are needed anywhere.

A Delta table is named by its path or URI; its versions are the watermark. delta-rs replays the log to open a
version, so the files live now are always at hand: a build indexes the live files the index has no row of and drops
the rows of files no longer live (delete, overwrite, OPTIMIZE, RESTORE). Spark tasks then read the data files as
plain Parquet.

Delta keeps partition columns out of the data files, so the file indexer finds no statistics for them (unknown:
kept). The partition stage reads the partition values of the add actions instead (`partitioning`), as min = max
statistics (statistics/partition_values.py).

Without column mapping Delta has no field ids; the index's ids are derived from the column names (`_ids_by_name`).

Deletion vectors (Spark's DELETE / UPDATE / MERGE on a table with `delta.enableDeletionVectors`) are read by delta-rs
(`DeltaTable.deletion_vectors()`: inline, relative 'u' and absolute 'p' storage) for a lookup's kept files only, and
handed to the scans as each kept file's deleted row positions (`deletes_for`); the index itself ignores them (a
file's statistics over all its rows hold for any subset, so pruning and all-match stay right).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.types import NestedField

from indexlib.errors import UserError
from indexlib.sources.base import DataFileRef, DeleteFileRef, IdentityPartitioning

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
        mapping = self.table.metadata().configuration.get("delta.columnMapping.mode", "none")
        if mapping != "none":
            raise UserError(f"Delta table {self.name}: column mapping mode {mapping!r} is not supported yet")
        arrow_schema = pa.schema(self.table.schema().to_arrow())
        self.schema: Schema = _ids_by_name(
            assign_fresh_schema_ids(_pyarrow_to_schema_without_ids(arrow_schema)), self.name
        )
        self.name_mapping_json = self.schema.name_mapping.model_dump_json()
        self.io_properties = {k: v for k, v in (io_properties or {}).items() if k.startswith(_FILE_IO_PREFIXES)}
        self.partition_columns = list(self.table.metadata().partition_columns)

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
            refs.append(DataFileRef(self.absolute(path), count, int(size), "PARQUET", 0, partition))
        return refs

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
        out = {}
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
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    def partition_label(self, ref: DataFileRef) -> str:
        return "/".join(f"{c}={v}" for c, v in ref.partition or ()) or "(unpartitioned)"

    @property
    def partitioning(self) -> IdentityPartitioning:
        by_name = {f.name: f for f in self.schema.fields}
        return IdentityPartitioning(tuple(by_name[c] for c in self.partition_columns if c in by_name))
