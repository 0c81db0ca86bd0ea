"""Source tables behind one interface: what is live now, what changed since a watermark, and what the files'
partition values say (facts only: the partition stage in pruning/partitions.py reasons about them).

Iceberg tables (through pyiceberg, iceberg.py) are named by their identifier in the configured catalog; Delta tables
(through delta-rs, delta.py) by their path or URI; registry.py opens either by name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField


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


class LiveFiles(Sequence[DataFileRef]):
    """Live data files known by path at once, their `DataFileRef`s made on first use. Taken from the index's file
    rows, only the partition stage needs the refs (and only when the predicate names a partition source column);
    making 100,000 of them costs ~0.4 s, most of a lookup's time at that size."""

    def __init__(
        self,
        paths: list[str],
        make: Callable[[], list[DataFileRef]],
        pick: Callable[[list[int]], list[DataFileRef]] | None = None,
    ) -> None:
        """`pick(positions)`: the refs at those ascending positions alone (a lookup's kept files), without making
        every ref."""
        self.paths = paths
        self._make = make
        self._pick = pick
        self._refs: list[DataFileRef] | None = None
        self._lock = threading.Lock()

    @property
    def made(self) -> bool:
        return self._refs is not None

    def refs(self) -> list[DataFileRef]:
        with self._lock:
            if self._refs is None:
                self._refs = self._make()
            return self._refs

    def pick(self, positions: list[int]) -> list[DataFileRef]:
        """The refs at `positions` (ascending)."""
        if self._refs is not None or self._pick is None:
            refs = self.refs()
            return [refs[i] for i in positions]
        return self._pick(positions)

    def __len__(self) -> int:
        return len(self.paths)

    @overload
    def __getitem__(self, index: int) -> DataFileRef: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[DataFileRef]: ...

    def __getitem__(self, index: int | slice) -> DataFileRef | Sequence[DataFileRef]:
        return self.refs()[index]

    def __iter__(self) -> Iterator[DataFileRef]:
        return iter(self.refs())

    def __add__(self, more: Sequence[DataFileRef]) -> LiveFiles:
        added = list(more)
        count = len(self.paths)

        def pick(positions: list[int]) -> list[DataFileRef]:
            return self.pick([i for i in positions if i < count]) + [added[i - count] for i in positions if i >= count]

        return LiveFiles(self.paths + [f.path for f in added], lambda: self.refs() + added, pick)


@dataclass(frozen=True)
class DeleteFileRef:
    """A delete file a reader must apply to a data file (Iceberg): `kind` is "position", "equality" or
    "deletion_vector" (a Puffin blob naming its data file). `data_file` is pyiceberg's own record of it, what its
    reader (`ArrowScan`) takes; other engines read `path` by `kind`.

    Delta: a deletion vector (`file_format` "DELTA", `path` the data file's URI as delta-rs names it), already
    read by delta-rs: `positions` holds the deleted row positions (ascending int64 numpy array), `record_count`
    how many."""

    path: str
    kind: str
    file_format: str
    record_count: int
    data_file: Any = field(default=None, compare=False, repr=False)
    positions: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class KeptFile:
    """What a reader needs of one file a lookup kept, at the source version the lookup answered for: the data file
    (Iceberg: path, format, spec id, partition record, record count; Delta: `partition` holds the (column, value)
    pairs the data file does not store), the delete files that apply to it (Iceberg; Delta: its deletion vector's
    positions), and whether every row of it
    matches (then the filter need not be applied).

    `row_groups`: the Parquet row groups of the file (0-based, in footer order) that may hold a matching row, when
    the index has row-group entries for it; None: every row group. Never empty (a file with no such row group is not
    kept). A reader may read only these and returns the same matching rows."""

    file: DataFileRef
    all_match: bool
    deletes: tuple[DeleteFileRef, ...] = ()
    row_groups: tuple[int, ...] | None = None


def paths_of(files: Sequence[DataFileRef]) -> list[str]:
    return files.paths if isinstance(files, LiveFiles) else [f.path for f in files]


def pick(files: Sequence[DataFileRef], positions: list[int]) -> list[DataFileRef]:
    """The files at `positions` (ascending), making only their refs when `files` makes them lazily."""
    return files.pick(positions) if isinstance(files, LiveFiles) else [files[i] for i in positions]


class Source(Protocol):
    name: str
    schema: Schema
    io_properties: dict[str, str]

    @property
    def name_mapping_json(self) -> str | None: ...

    def current_version(self) -> int | None: ...

    @property
    def state_key(self) -> object:
        """Changes whenever anything a lookup reads of the source may have changed: its files, schema, partition
        specs or properties (Iceberg: the metadata location, since a rename commits no snapshot; Delta: the
        version). A handle caches by it."""
        ...

    def live_files(self) -> list[DataFileRef]: ...

    def appended_since(self, version: int) -> list[DataFileRef] | None:
        """The files the source's versions after `version` added, when `version` is the current one or an ancestor
        of it reached by appends alone (so the files live now are those live at `version` plus these); None when
        the source cannot tell that without planning every file."""
        ...

    def partition_label(self, ref: DataFileRef) -> str: ...

    def files_at(self, version: int) -> list[DataFileRef] | None:
        """The files live at `version` (None when the source no longer has that version)."""
        ...

    def live_after(self, version: int, known: pa.Table) -> list[DataFileRef] | LiveFiles | None:
        """The live files from `known`, the index's file rows, which are exactly the files live at `version`, and
        the files appended since (`appended_since`); None when the source cannot tell them so (the caller calls
        `live_files`)."""
        ...

    def stored_partition(self, ref: DataFileRef) -> list[bytes | None] | None:
        """The file's partition values as the index stores them in its file row (None: not stored)."""
        ...

    def deletes_for(self, files: Sequence[DataFileRef]) -> list[tuple[DeleteFileRef, ...]]:
        """Per file, the delete files a reader must apply to it at the loaded version (Iceberg: from the
        snapshot's delete manifests alone; Delta: its deletion vector, read by delta-rs)."""
        ...

    @property
    def partitioning(self) -> IcebergPartitioning | IdentityPartitioning:
        """What the files' `partition` says, for the partition stage (pruning/partitions.py)."""
        ...


@dataclass(frozen=True)
class IcebergPartitioning:
    """Each file carries the id of the spec it was written under and that spec's partition record (transformed
    values: `day(ts)`, `bucket[16](id)`, ...); `table` has the schema and every spec (`schema()`, `specs()`)."""

    table: Any


@dataclass(frozen=True)
class IdentityPartitioning:
    """Each file carries `(column name, value)` pairs of the columns it is partitioned by, every row holding that
    value (Delta); `columns` are those columns' fields in the table schema."""

    columns: tuple[NestedField, ...]
