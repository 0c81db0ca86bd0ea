"""Source tables behind one interface: what is live now, what changed since a watermark, what the files'
partition values say (facts only: the partition stage in pruning/partitions.py reasons about them), and how every
engine reads a kept file (`FileReads`).

Each table format is one module with one `SourceFormat` (registry.py finds it by the name the user gives): Iceberg
tables (through pyiceberg, iceberg.py) by their identifier in the configured catalog, Delta tables (through delta-rs,
delta.py) by their path or URI, and any format registered under the entry-point group `skipindex.formats`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, overload

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from indexlib.statistics.provider import StatisticsProvider

if TYPE_CHECKING:
    from pyiceberg.table import Table


@dataclass(frozen=True)
class DataFileRef:
    """A data file as the source table records it; `path` is never rewritten.

    `spec_id` and `partition` (the pyiceberg partition Record, positional per that spec's fields) feed the partition
    stage only; they stay in the planner process and are never shipped to Spark tasks. `partition` is None when
    the source does not say, which that stage reads as "unknown: keep".

    `stats`: the format's own record of the file's column statistics, as the source listed it (Iceberg: pyiceberg's
    `DataFile`, its manifest entry; Delta: its add action's row), read only by that source's `format_statistics`;
    None where the file was listed from the index's rows.
    """

    path: str
    record_count: int
    file_size_in_bytes: int
    file_format: str
    spec_id: int = 0
    partition: Any = field(default=None, compare=False)
    stats: Any = field(default=None, compare=False, repr=False)


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

    `parts`: per container kind (store/containers.py, by key) whose entries the file has and whose every part does
    not match, its parts (0-based, in the file's order) that may hold a matching row; a kind not named: every part.
    Never empty (a file with no such part is not kept). A reader may read only these and returns the same matching
    rows; one that does not know a kind reads the whole file."""

    file: DataFileRef
    all_match: bool
    deletes: tuple[DeleteFileRef, ...] = ()
    parts: Mapping[str, tuple[int, ...]] = field(default_factory=dict, hash=False)

    @property
    def row_groups(self) -> tuple[int, ...] | None:
        """The Parquet row groups (footer order) that may hold a matching row; None: every row group."""
        return self.parts.get("row_groups")


def paths_of(files: Sequence[DataFileRef]) -> list[str]:
    return files.paths if isinstance(files, LiveFiles) else [f.path for f in files]


def pick(files: Sequence[DataFileRef], positions: list[int]) -> list[DataFileRef]:
    """The files at `positions` (ascending), making only their refs when `files` makes them lazily."""
    return files.pick(positions) if isinstance(files, LiveFiles) else [files[i] for i in positions]


class FileReads(Enum):
    """How every engine reads a kept file of a source: a closed set, each engine having one reader per member, so a
    new format whose files one of them describes is one module and no engine change.

    - ICEBERG: the source is `IcebergFiles`: its pyiceberg `table` (at the version the lookup answered for) says
      how each file's columns map to the current schema (Parquet field ids, or the table's name mapping), and the
      kept files' `deletes` are Iceberg delete files (position deletes, deletion vectors) that pyiceberg's reader
      applies;
    - PARQUET_BY_NAME: the source is `ParquetByName`: Parquet files whose columns are found by their physical
      names, a column missing from a file being NULL in it; the columns a file does not store are its partition
      values (`DataFileRef.partition`, (column, value) pairs); its deleted rows, if any, are positions
      (`DeleteFileRef.positions`).
    """

    ICEBERG = "iceberg"
    PARQUET_BY_NAME = "parquet by name"


class Source(Protocol):
    name: str
    schema: Schema
    io_properties: dict[str, str]
    format: str  # the name of its `SourceFormat` (registry.py), e.g. "iceberg", "delta"
    reads: FileReads

    def refreshed(self) -> Source:
        """The source at its current version, read afresh (or `self`, when the source can tell nothing changed):
        what a long-lived handle asks before every lookup."""
        ...

    def keeps_layout(self, earlier: Source) -> bool:
        """Whether the live files listed under `earlier` (their partitions decoded with its schema) stay valid under
        this state of the same table, so a handle may add `appended_since` to them (False: list them afresh)."""
        ...

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

    def at_version(self, version: int) -> Source | None:
        """The source as it was at `version`, an earlier version of it (its files, deletes and schema then), for a
        scan of that version; None when the source no longer has it."""
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

    def commit_times(self, since: int | None, upto: int) -> list[float]:
        """The commit timestamps (epoch seconds, oldest first) of the versions after `since` up to `upto`: the
        versions one build reaching `upto` covers (a follower's lag). When `since` is not an ancestor of `upto` (a
        rollback, the first build) only `upto`'s own; [] when the source does not say."""
        ...

    def format_statistics(self, files: Sequence[DataFileRef]) -> StatisticsProvider:
        """What the format itself records of each of `files` (Iceberg: manifest bounds and null, NaN and value
        counts; Delta: the add actions' `stats`), as statistics in the index's semantics: true bounds, counts that
        hold for every live row, unknown wherever the format's record cannot promise that. The lookup judges the
        files the index has no entry for by them (a source that records nothing answers `NoStatistics`)."""
        ...


class IcebergFiles(Source, Protocol):
    """A source whose files engines read as Iceberg's (`FileReads.ICEBERG`): its loaded pyiceberg table."""

    table: Table


class ParquetByName(Source, Protocol):
    """A source whose files engines read by column name (`FileReads.PARQUET_BY_NAME`)."""

    arrow_schema: pa.Schema  # the columns as the table names and types them now, partition columns included
    # the same columns as the files store them: each under its physical name, struct fields too (a format that
    # renames columns without rewriting files, such as Delta's column mapping, keeps a stable name in the files)
    physical_schema: pa.Schema
    physical_names: dict[str, str]  # a top-level column's name in the files, by its name in the table
    partition_columns: list[str]  # columns the files do not store: each file's value is in `DataFileRef.partition`

    def check_read_by_name(self, paths: Sequence[str]) -> None:
        """Raise `UnsupportedFeature` (one line) for a file a reader by name would read wrong."""
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
