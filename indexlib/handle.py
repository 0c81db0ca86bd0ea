"""A long-lived lookup for planner code: one handle per table, many questions, from any thread.

    handle = IndexHandle.for_iceberg(catalog.load_table("tpch.lineitem"))   # index in the same catalog
    handle = IndexHandle.for_delta("s3://lake/events", index_catalog=catalog)
    handle = IndexHandle.for_table(config, "db.events")                   # any format, named as the CLI names it
    handle.lookup("l_orderkey = 42").files
    handle.scan("l_orderkey = 42").to_arrow()                              # or .to_duckdb(), .to_spark(spark), ...

Each lookup first reads the current state of the source (`Source.refreshed`: for Iceberg the metadata location the
catalog holds, and the metadata only when that moved; for Delta the log entries since the version it knows) and of
its index table (the same way: a table whose catalog still points at the metadata file loaded is kept as loaded,
`sources/iceberg.py` `metadata_location`), never the table object the handle was made from. The cache is keyed by
everything an answer depends on: the source's state (Iceberg: its metadata location, which changes with a rename or
a new partition spec as well as with a snapshot; Delta: its version) and the index's snapshot. While neither moved,
it answers from what it has: the live files, the index rows earlier lookups read (file rows, the bounds of the
columns asked about, the payloads of the files that reached the payload stages) and the statistics decoded from
them. When one moved it reads only what changed where the history allows: an Iceberg source whose new snapshots are
all appends, under the same schema and partition specs, adds the files of those snapshots' manifests to its list
(`Source.keeps_layout`; anything else, such as a delete, a compaction, a rollback or a schema change, takes the
live files as a one-off lookup does); an index table that only had appends reads just the appended rows of what it had read (any other
commit starts a fresh read). A live list is a fact about one source snapshot (however it was read: from the index's
file rows under their live-version claim, or from the source's plan, docs/index-table.md), so a new index snapshot
alone does not replace it.

Answers are those of `lookup.lookup` over the same states: files committed after the last build are judged by their
partition values and format statistics ("unindexed"), removed files are never returned. Thread safety: the snapshot check and the cache update run under one lock;
a lookup then works on the state it got, which no one modifies, so concurrent lookups never see a half-updated cache.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pyiceberg.expressions import BooleanExpression

from indexlib.config import DEFAULT_INDEX_NAMESPACE
from indexlib.errors import UserError
from indexlib.lookup import LookupResult, TableState, live_files, lookup_in
from indexlib.query.model import Expr
from indexlib.query.sql import Clock, check_dialect
from indexlib.sources.base import DataFileRef, LiveFiles, Source
from indexlib.sources.delta import DeltaSource
from indexlib.sources.iceberg import IcebergSource, metadata_location, only_appends_since
from indexlib.sources.registry import open_source
from indexlib.store.snapshot import IndexRows, IndexSnapshot
from indexlib.store.table import IndexTable

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from indexlib.config import Config
    from indexlib.scans.scan import Scan


class IndexHandle:
    """Lookups on one source table and its index, cached by snapshot (see the module docstring)."""

    def __init__(
        self,
        source: Source,
        index: IndexTable,
        *,
        time_zone: str | None = None,
        dialect: str | None = None,
    ) -> None:
        """Prefer `for_iceberg` / `for_delta` / `for_table`. `source`: the table as opened now; before every lookup
        the handle asks it for its current state (`Source.refreshed`)."""
        check_dialect(dialect)
        self.name = source.name
        self._source = source
        self._index = index
        self._time_zone = time_zone
        self._dialect = dialect
        self._lock = threading.Lock()
        self._state: TableState | None = None
        # what the handle read since it was made: live sets read afresh (a plan, or the index's file rows and the
        # source's appends since its watermark), incremental reads of the source's appends, fresh reads of the index,
        # reads of appended index rows (for monitoring, and the tests)
        self.reads = {"source_plans": 0, "source_appends": 0, "index_full": 0, "index_appends": 0}

    @classmethod
    def for_source(
        cls,
        source: Source,
        *,
        index_catalog: Catalog,
        index_namespace: str = DEFAULT_INDEX_NAMESPACE,
        time_zone: str | None = None,
        dialect: str | None = None,
    ) -> IndexHandle:
        """A source table of any format (`sources/registry.py` opens one by name); its index lives in
        `index_catalog` (a pyiceberg Catalog)."""
        index = IndexTable(index_catalog, index_namespace, source.name)
        return cls(source, index, time_zone=time_zone, dialect=dialect)

    @classmethod
    def for_table(cls, config: Config, table: str) -> IndexHandle:
        """The table `table` named as the CLI names it (any registered format), with the index, catalog, time
        zone and dialect of a loaded TOML configuration."""
        catalog = config.load_catalog(create=False)  # a handle only reads: a missing SQLite catalog is an error
        return cls.for_source(
            open_source(config, table, catalog),
            index_catalog=catalog,
            index_namespace=config.index_namespace,
            time_zone=config.time_zone,
            dialect=config.dialect,
        )

    @classmethod
    def for_iceberg(
        cls,
        table: Table,
        *,
        index_catalog: Catalog | None = None,
        index_namespace: str = DEFAULT_INDEX_NAMESPACE,
        time_zone: str | None = None,
        dialect: str | None = None,
    ) -> IndexHandle:
        """A pyiceberg `Table` (its catalog and name: every lookup loads the table as the catalog has it then);
        its index lives in `index_catalog` (default: the table's own catalog)."""
        source = IcebergSource(table.catalog, ".".join(table.name()), table)
        return cls.for_source(
            source,
            index_catalog=index_catalog if index_catalog is not None else table.catalog,
            index_namespace=index_namespace,
            time_zone=time_zone,
            dialect=dialect,
        )

    @classmethod
    def for_delta(
        cls,
        path: str,
        *,
        index_catalog: Catalog,
        index_namespace: str = DEFAULT_INDEX_NAMESPACE,
        storage_options: dict[str, str] | None = None,
        time_zone: str | None = None,
        dialect: str | None = None,
    ) -> IndexHandle:
        """A Delta table by path or URI; its index lives in `index_catalog` (a pyiceberg Catalog)."""
        return cls.for_source(
            DeltaSource(path, storage_options),
            index_catalog=index_catalog,
            index_namespace=index_namespace,
            time_zone=time_zone,
            dialect=dialect,
        )

    @property
    def time_zone(self) -> str | None:
        """The session time zone lookups read CURRENT_DATE in (a reader filtering rows must use the same)."""
        return self._time_zone

    @property
    def dialect(self) -> str | None:
        """The sqlglot dialect lookups parse WHERE text in."""
        return self._dialect

    def lookup(
        self,
        where: str | Expr | BooleanExpression,
        clock: Clock | None = None,
        case_sensitive: bool = True,
        state: TableState | None = None,
    ) -> LookupResult:
        """Files that might hold a row matching `where` (SQL text, a `query.model` tree such as `In("k", keys)`: no
        parsing, or a pyiceberg row filter such as `EqualTo("k", 42)`, bound `case_sensitive` or not), as
        `lookup.lookup` answers, from the current snapshots (or from `state`, one this handle's `current()` gave,
        for a caller that read the table's schema from it before building `where`)."""
        state = state if state is not None else self.current()
        clock = clock or Clock.system(self._time_zone)
        return lookup_in(state, self.name, where, clock, self._dialect, case_sensitive)

    def scan(
        self,
        where: str | Expr | BooleanExpression,
        clock: Clock | None = None,
        case_sensitive: bool = True,
        *,
        selected_fields: tuple[str, ...] = ("*",),
        limit: int | None = None,
        snapshot_id: int | None = None,
    ) -> Scan:
        """`where` looked up now (as `lookup` reads it), as one scan object: its kept files' rows in any engine,
        `.to_arrow()`, `.to_duckdb()`, `.to_polars()`, `.to_spark(spark)`, `.count()`, ... (`scans/scan.py`), all
        at the version this lookup answered for, with the top-level columns `selected_fields` names (default:
        all), at most `limit` rows (default: every matching row). A pyiceberg row filter is applied with
        pyiceberg's semantics by the Arrow outputs, as `table.scan(row_filter=...)` applies it; SQL text keeps its
        SQL meaning everywhere.

        `snapshot_id`: an earlier version of the source to read (an Iceberg snapshot id, a Delta table version), as
        pyiceberg's `table.scan(snapshot_id=...)`; default the current one (`state_at` says how it is answered)."""
        from indexlib.scans.scan import Scan

        clock = clock or Clock.system(self._time_zone)
        state = self.current() if snapshot_id is None else self.state_at(snapshot_id)
        result = self.lookup(where, clock, case_sensitive, state=state)
        row_filter = where if isinstance(where, BooleanExpression) else None
        return Scan(result, self._dialect, clock, row_filter, tuple(selected_fields), limit)

    def state_at(self, version: int) -> TableState:
        """The state of the source at `version` (`Source.at_version`: its files, deletes and schema then) with the
        index's current snapshot, for a lookup of that version (`lookup(..., state=)`). Its live files come from
        the index's file rows where they are a fact about `version` (those rows' live version is `version` or an
        ancestor of it reached by appends alone, `live_files`), else from the source's plan of `version`; the
        index's entries are facts about data files, whatever version holds them. Read afresh on every call (the
        handle caches the current version only). UserError when the source no longer has `version`."""
        current = self.current()
        # the current version too: its schema may have changed since (a schema-only commit adds no snapshot), and
        # pyiceberg reads a snapshot asked for by id with the schema it was written with
        source = current.source.at_version(version)
        if source is None:
            raise UserError(f"table {self.name} has no version {version} (an Iceberg snapshot id, a Delta version)")
        live = live_files(source, current.rows)
        return TableState(source, live, current.rows, source.current_version(), current.index_version, None)

    def current(self) -> TableState:
        """The state at the current state of the source and snapshot of the index, updated from the cached one."""
        with self._lock:
            source = self._source = self._source.refreshed()
            index_table = self._index.load()
            if index_table is None or metadata_location(self._index.catalog, self._index.identifier) != (
                index_table.metadata_location
            ):
                index_table = self._index.reload()
            source_key = source.state_key
            index_snapshot = index_table.current_snapshot() if index_table is not None else None
            index_version = index_snapshot.snapshot_id if index_snapshot is not None else None
            cached = self._state
            if cached is not None and (cached.source_key, cached.index_version) == (source_key, index_version):
                return cached
            rows = self._rows(index_table, index_version, cached)
            live = self._live(source, rows, cached)
            self._state = TableState(source, live, rows, source.current_version(), index_version, source_key)
            return self._state

    def _live(self, source: Source, rows: IndexRows | None, cached: TableState | None) -> list[DataFileRef] | LiveFiles:
        if cached is not None and cached.source_key == source.state_key:
            return cached.live
        if (
            cached is not None
            and cached.source_version is not None
            and source.keeps_layout(cached.source)
            and (added := source.appended_since(cached.source_version)) is not None
        ):
            self.reads["source_appends"] += 1
            return cached.live + added
        self.reads["source_plans"] += 1
        return live_files(source, rows)

    def _rows(self, table: Any, version: int | None, cached: TableState | None) -> IndexRows | None:
        if version is None:
            return None
        if cached is not None and cached.index_version == version:
            return cached.rows
        if (
            cached is not None
            and isinstance(cached.rows, IndexSnapshot)
            and cached.index_version is not None  # (it is: rows were read at that version)
            and only_appends_since(table, cached.index_version)
        ):
            self.reads["index_appends"] += 1
            return cached.rows.after_appends(table)
        self.reads["index_full"] += 1
        return IndexSnapshot.of(table)


def scan(
    table_or_handle: IndexHandle | Table,
    where: str | Expr | BooleanExpression,
    *,
    selected_fields: tuple[str, ...] = ("*",),
    limit: int | None = None,
    snapshot_id: int | None = None,
) -> Scan:
    """`handle.scan(where, ...)`; a pyiceberg Table is read through its index in the same catalog (a handle made
    for this one scan: planner code that scans a table often keeps its `IndexHandle`, and its cache)."""
    handle = table_or_handle if isinstance(table_or_handle, IndexHandle) else IndexHandle.for_iceberg(table_or_handle)
    return handle.scan(where, selected_fields=selected_fields, limit=limit, snapshot_id=snapshot_id)


def open_handle(config: Config, table: str) -> IndexHandle:
    """A handle from a loaded TOML configuration (what the CLI would read): `IndexHandle.for_table`."""
    return IndexHandle.for_table(config, table)
