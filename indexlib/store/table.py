"""The side index table: one Iceberg table per source table; per data file, a file row and one row per indexed
column (store/schema.py).

Every change (new entries, entries replaced after a configuration change, entries of removed files dropped), the
watermark (the last source version a build reached) and the live version (the source version whose live files the
file rows are, exactly) land in one Iceberg commit, so a reader sees all of it or none. The live version is the one
claim readers derive live files from; the rule each writer keeps for it is in docs/index-table.md ("What the file
rows mean"). A commit is planned against the table state it read and fails if anyone committed since
(pyiceberg's own rebasing retry is switched off for index tables); `commit` then re-reads and plans again. That is
what keeps one entry per data file with concurrent writers and after a crash. See docs/index-table.md.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shlex
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import tenacity
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchTableError,
    TableAlreadyExistsError,
)

# mypy takes the pydantic fields of pyiceberg's predicates for their constructor, so it rejects the positional calls
# pyiceberg documents (apache/iceberg-python#3101): those calls carry a `type: ignore` naming the issue.
from pyiceberg.expressions import EqualTo, In

from indexlib.errors import CommitConflict, UserError
from indexlib.store.schema import (
    ENTRY_ARROW_SCHEMA,
    FILE_ROW,
    FORMAT_VERSION,
    INDEX_PARTITION_SPEC,
    INDEX_SCHEMA,
    INDEX_SORT_ORDER,
    INDEX_TABLE_PROPERTIES,
    ROWS_FORMAT,
    as_entries,
    entries_of,
    one_entry_per_path,
    rows_of,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

WATERMARK_PROPERTY = "skipindex.source-version"
LIVE_PROPERTY = "skipindex.live-version"
SOURCE_PROPERTY = "skipindex.source-table"
FORMAT_PROPERTY = "skipindex.format-version"
# Our commits are planned against the state they read; a rebase by pyiceberg could duplicate an entry.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}
COMMIT_ATTEMPTS = 20
_SQLITE_RACES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
UPGRADE_SUFFIX = "__format4"


def index_table_name(source_name: str) -> str:
    """`ns.name` -> `ns__name`; a source named by a path or URI (a Delta table) -> `delta__<last part>__<hash of the
    full name>`: readable and unique per table. A collision is detected through the source-table property."""
    if "/" not in source_name and "://" not in source_name:
        return source_name.replace(".", "__")
    last = re.sub(r"[^0-9A-Za-z_]", "_", source_name.rstrip("/").rsplit("/", 1)[-1]) or "table"
    return f"delta__{last}__{hashlib.sha256(source_name.encode()).hexdigest()[:12]}"


def index_asset_uri(catalog_name: str, namespace: str, source_name: str) -> str:
    """The Airflow Asset a build updates: `skipindex://<catalog>/<namespace>/<index table name>`, so DAGs downstream
    of a build can wait for a fresh index."""
    return f"skipindex://{catalog_name}/{namespace}/{index_table_name(source_name)}"


def build_hint(source_name: str) -> str:
    """The command that indexes a table, for the messages that say it has no index yet."""
    return f"build one with: skipindex build --table {shlex.quote(source_name)}"


class WatermarkMoved(Exception):
    """Another writer changed what this build planned from (the watermark, or the file rows it found): its list of
    new and removed files is out of date."""


@dataclass(frozen=True)
class LiveSet:
    """The paths of every data file live at source version `version`: what a build makes the file rows be."""

    version: int
    paths: frozenset[str]


@dataclass(frozen=True)
class CommitResult:
    added: int  # entries appended (new files, and rebuilt ones)
    replaced: int  # entries of indexed files removed because they were rebuilt
    dropped: int  # entries of removed files dropped
    skipped: int  # entries someone else committed first (same file, same configuration)
    committed: bool


_UNSET: Any = object()
T = TypeVar("T")


class IndexTable:
    """The index of one source table, in the configured catalog under the index namespace."""

    def __init__(self, catalog: Catalog, namespace: str, source_name: str) -> None:
        self.catalog = catalog
        self.source_name = source_name
        self.identifier = f"{namespace}.{index_table_name(source_name)}"
        self.namespace = namespace
        self._table: Table | None = None

    def load(self) -> Table | None:
        """The Iceberg table, or None when this source was never indexed."""
        if self._table is None:
            try:
                self._table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                return None
            self._check_owner(self._table)
        return self._table

    def require(self) -> Table:
        """The Iceberg table; a one-line error that says how to build it when this source was never indexed (for
        commands that only make sense on an index, unlike a lookup, which keeps every file)."""
        table = self.load()
        if table is None:
            raise UserError(
                f"{self.source_name} has no index (no table {self.identifier}); {build_hint(self.source_name)}"
            )
        return table

    def reload(self) -> Table | None:
        """The table as the catalog has it now (None when never indexed); later reads use this version."""
        self._table = None
        return self.load()

    def load_or_create(self) -> Table:
        table = self.load()
        if table is not None:
            return table
        self.catalog.create_namespace_if_not_exists(self.namespace)
        try:
            self._table = self._create(self.identifier)
        except TableAlreadyExistsError:  # another build created it first
            self._table = self.catalog.load_table(self.identifier)
            self._check_owner(self._table)
        return self._table

    def _create(self, identifier: str) -> Table:
        return self.catalog.create_table(
            identifier,
            schema=INDEX_SCHEMA,
            partition_spec=INDEX_PARTITION_SPEC,
            sort_order=INDEX_SORT_ORDER,
            properties={
                SOURCE_PROPERTY: self.source_name,
                FORMAT_PROPERTY: str(FORMAT_VERSION),
                **TABLE_PROPERTIES,
                **INDEX_TABLE_PROPERTIES,
            },
        )

    def _check_owner(self, table: Table) -> None:
        owner = table.properties.get(SOURCE_PROPERTY)
        if owner != self.source_name:
            raise UserError(
                f"index table {self.identifier} belongs to source table {owner!r}, not {self.source_name!r}"
            )
        version = int(table.properties.get(FORMAT_PROPERTY, FORMAT_VERSION))
        if version > FORMAT_VERSION:
            raise UserError(
                f"index table {self.identifier} has format version {version}; this skipindex reads up to {FORMAT_VERSION}"
            )

    def watermark(self) -> int | None:
        return watermark_of(self.load())

    def live_version(self) -> int | None:
        """The source version whose live files the file rows are, exactly (None: they claim nothing)."""
        return live_version_of(self.load())

    def file_rows(self) -> pa.Table:
        """`file_path`, `config_version` and `indexed` of every data file the index knows (only these are read)."""
        table = self.load()
        if table is None or table.current_snapshot() is None:
            return _FILE_STATE.empty_table()
        return _file_state(table)

    def indexed(self) -> pa.Table:
        """`file_path` and `config_version` of every file with statistics (not of files left unindexed)."""
        state = self.file_rows()
        return state.filter(state.column("indexed")).select(["file_path", "config_version"])

    def indexed_paths(self) -> set[str]:
        return set(self.indexed().column("file_path").to_pylist())

    def known_paths(self) -> set[str]:
        """Every file the index has a row of, indexed or not."""
        return set(self.file_rows().column("file_path").to_pylist())

    def config_versions(self) -> dict[str, str | None]:
        """Indexed path -> the configuration version its entry was built with (None before format 3)."""
        state = self.indexed()
        return dict(zip(state.column("file_path").to_pylist(), state.column("config_version").to_pylist(), strict=True))

    def entries(self, paths: Iterable[str] | None = None) -> pa.Table:
        """All entries (or those of `paths`), in the entry layout, including those of files left unindexed
        (`indexed` false, no columns)."""
        table = self.load()
        if table is None or table.current_snapshot() is None:
            return ENTRY_ARROW_SCHEMA.empty_table()
        wanted = None
        if paths is not None:
            wanted = sorted(set(paths))
            if not wanted:
                return ENTRY_ARROW_SCHEMA.empty_table()
        read = (
            table.scan(row_filter=In("file_path", wanted))  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
            if wanted is not None
            else table.scan()
        ).to_arrow()
        return as_entries(read) if format_of(table) < ROWS_FORMAT else entries_of(read)

    def _checked(self, table: Table) -> Table:
        """A table writers may commit to: switch on the table properties of our commit protocol (see the module
        docstring) if an older build did not set them. A format-3 table is upgraded first (`upgrade`)."""
        if format_of(table) < FORMAT_VERSION:
            raise UserError(
                f"index table {self.identifier} has format version {format_of(table)}; it must be upgraded first"
            )
        if all(table.properties.get(k) == v for k, v in TABLE_PROPERTIES.items()):
            return table
        with table.transaction() as transaction:
            transaction.set_properties(TABLE_PROPERTIES)
        self._table = self.catalog.load_table(self.identifier)
        return self._table

    def upgrade(self, live_at: Callable[[int, pa.Table], pa.Table | None]) -> bool:
        """Bring an older index table to the current format (True if it did). Format 4 gains fields in place
        (`_add_fields`). Format 3 -> current: the rows change shape, so the entries are
        written to a new table, `<name>__format4`: `live_at(watermark, old entries)` gives the entries whose file
        rows are exactly the files live at the watermark (the old entries of those files, and unindexed rows for
        the others), committed with the watermark as the live version; None when the source no longer has that
        version: then every old entry is written, with neither watermark nor live version, and the next build
        compares every live file. Then the old table is dropped and the new one renamed. Readers that find no table between the drop and the rename keep
        every file; a crash there leaves the new table, and the next call finishes the swap."""
        staged = f"{self.identifier}{UPGRADE_SUFFIX}"
        table = self.reload()
        if table is None:
            if not self.catalog.table_exists(staged):
                return False
            self.catalog.rename_table(staged, self.identifier)  # a crash came between the drop and the rename
            self.reload()
            return True
        if format_of(table) >= FORMAT_VERSION:
            return False
        if format_of(table) >= ROWS_FORMAT:
            return self._add_fields(table)
        if self.catalog.table_exists(staged):  # a crash came before the drop: the old table is complete, redo
            self.catalog.drop_table(staged)
        watermark = watermark_of(table)
        entries = one_entry_per_path(self.entries())
        at_watermark = live_at(watermark, entries) if watermark is not None else None
        if at_watermark is None:
            watermark = None
        else:
            entries = as_entries(at_watermark)
        try:
            new = self._create(staged)
        except TableAlreadyExistsError:  # another writer is upgrading right now
            raise CommitConflict(
                f"index table {self.identifier} is being upgraded by another process; run again"
            ) from None
        new.append(rows_of(entries), snapshot_properties=_summary(watermark, watermark))
        self.catalog.drop_table(self.identifier)
        self.catalog.rename_table(staged, self.identifier)
        log.info("%s: upgraded to format %d (%d entries)", self.identifier, FORMAT_VERSION, entries.num_rows)
        self.reload()
        return True

    def _add_fields(self, table: Table) -> bool:
        """Format 4 -> 5: the rows keep their shape and gain optional fields, so the upgrade is one metadata
        commit: the new fields and the format property together, or neither (a crash leaves format 4, and the next
        writer upgrades again). Rows written before read the new fields as null (no row-group entries)."""
        try:
            with table.transaction() as transaction:
                with transaction.update_schema() as update:
                    update.union_by_name(INDEX_SCHEMA)
                transaction.set_properties({FORMAT_PROPERTY: str(FORMAT_VERSION)})
        except CommitFailedException:  # another writer upgraded (or committed) first: its upgrade stands
            # reload() is None only if the table was dropped since the failed commit: format_of then raises
            if format_of(self.reload()) < FORMAT_VERSION:  # type: ignore[arg-type]
                raise UserError(
                    f"index table {self.identifier} is being upgraded by another process; run again"
                ) from None
            return False
        log.info("%s: upgraded to format %d (fields added in place)", self.identifier, FORMAT_VERSION)
        self.reload()
        return True

    def _reload(self) -> Table:
        self._table = None
        return self._checked(self.load_or_create())

    def commit(
        self,
        entries: pa.Table,
        *,
        live: LiveSet | None = None,
        watermark: int | None = None,
        expected_watermark: int | None = _UNSET,
    ) -> CommitResult:
        """Write `entries` (one per file: an entry of the same file with another configuration version is replaced,
        one with the same is kept, an unindexed row never replaces an indexed one) in one commit.

        With `live` (a build): the file rows become exactly `live.paths` (rows of other files are dropped, entries of
        other files are not written) and `live.version` the live version, with the watermark set to `watermark`;
        if a file of `live` would still have no row, the file rows changed since the caller planned, and
        WatermarkMoved is raised. Without `live` (a backfill): the set of file rows does not change while they
        claim a live version (only entries of files with a row are written); without a claim any entry is; the
        watermark and live version stay as they are.

        With `expected_watermark`, raise WatermarkMoved instead of committing when the current watermark differs.
        A commit that loses a race re-reads the table and plans again, so whatever the other writer committed is
        neither duplicated nor lost.
        """
        entries = as_entries(entries)

        def attempt(table: Table) -> CommitResult:
            current = watermark_of(table)
            current_live = live_version_of(table)
            if expected_watermark is not _UNSET and current != expected_watermark:
                raise WatermarkMoved(f"{self.identifier}: watermark moved from {expected_watermark} to {current}")
            state = _file_state(table) if table.current_snapshot() is not None else _FILE_STATE.empty_table()
            present = set(state.column("file_path").to_pylist())
            writable = live.paths if live is not None else present if current_live is not None else None
            candidates = (
                entries
                if writable is None
                else entries.filter(
                    pc.is_in(entries.column("file_path"), value_set=pa.array(sorted(writable), pa.string()))
                )
            )
            indexed_present = set(state.filter(state.column("indexed")).column("file_path").to_pylist())
            pairs = set(
                zip(state.column("file_path").to_pylist(), state.column("config_version").to_pylist(), strict=True)
            )
            fresh = [
                (path, version) not in pairs and (indexed or path not in present)  # never unindex a file
                for path, version, indexed in zip(
                    candidates.column("file_path").to_pylist(),
                    candidates.column("config_version").to_pylist(),
                    candidates.column("indexed").to_pylist(),
                    strict=True,
                )
            ]
            add = candidates.filter(pa.array(fresh, pa.bool_()))
            added_paths = set(add.column("file_path").to_pylist())
            rebuilt = present & added_paths
            dropped = present - live.paths if live is not None else set()
            if live is not None and (lacking := live.paths - present - added_paths):
                raise WatermarkMoved(
                    f"{self.identifier}: the file rows changed since the build planned ({len(lacking)} live files "
                    f"without a row, e.g. {min(lacking)})"
                )
            new_watermark = current if watermark is None else watermark
            new_live = live.version if live is not None else current_live
            if add.num_rows == 0 and not dropped and (new_watermark, new_live) == (current, current_live):
                return CommitResult(0, 0, 0, entries.num_rows, committed=False)
            properties = _summary(new_watermark, new_live)
            transaction = table.transaction()
            if rebuilt or dropped:
                transaction.delete(
                    # pyiceberg#3101 (see the imports)
                    In("file_path", sorted(rebuilt | dropped)),  # type: ignore[call-arg, arg-type]
                    snapshot_properties=properties,
                )
            if add.num_rows or not (rebuilt or dropped):  # an empty append still moves the watermark
                transaction.append(rows_of(add), snapshot_properties=properties)
            transaction.commit_transaction()
            replaced = len(rebuilt & indexed_present)  # an unindexed file's row is filled in, not replaced
            return CommitResult(add.num_rows, replaced, len(dropped), entries.num_rows - add.num_rows, True)

        return self._retrying(attempt)

    def rewrite(self, plan: Callable[[pa.Table, int | None], pa.Table | None]) -> pa.Table | None:
        """Replace every entry by `plan(all entries, live version)` in one commit (None: leave the table alone);
        the watermark and the live version are kept, so `plan` must keep a row for every file of the live
        version. Used by compaction; re-planned like `commit` when it loses a race."""

        def attempt(table: Table) -> pa.Table | None:
            if table.current_snapshot() is None:
                return None
            live_version = live_version_of(table)
            kept = plan(entries_of(table.scan().to_arrow()), live_version)
            if kept is None:
                return None
            with table.transaction() as transaction:
                transaction.overwrite(rows_of(kept), snapshot_properties=_summary(watermark_of(table), live_version))
            return kept

        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[Table], T]) -> T:
        """`attempt(the table, reloaded)`, again after a lost race (`_is_retryable`), with jittered exponential
        back-off; `CommitConflict` after COMMIT_ATTEMPTS lost races. Other failures are raised at once."""

        def attempt_on_reloaded() -> T:
            try:
                return attempt(self._reload())
            finally:
                self._table = None

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_is_retryable),
            stop=tenacity.stop_after_attempt(COMMIT_ATTEMPTS),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=5.0),
            before_sleep=lambda state: log.warning(
                "%s: commit conflict (attempt %d), re-planning", self.identifier, state.attempt_number
            ),
        )
        try:
            return retrying(attempt_on_reloaded)
        except tenacity.RetryError as gave_up:
            last = gave_up.last_attempt.exception()
            raise CommitConflict(
                f"{self.identifier}: gave up after {COMMIT_ATTEMPTS} conflicting commits: {last}"
            ) from last


def watermark_of(table: Table | None) -> int | None:
    snapshot = table.current_snapshot() if table is not None else None
    value = snapshot.summary[WATERMARK_PROPERTY] if snapshot is not None and snapshot.summary else None
    return int(value) if value is not None else None


def live_version_of(table: Table | None) -> int | None:
    """The source version whose live files the index's file rows are, exactly (docs/index-table.md); None when the
    current snapshot makes no such claim (an index written before the claim existed, or whose watermark expired)."""
    snapshot = table.current_snapshot() if table is not None else None
    value = snapshot.summary[LIVE_PROPERTY] if snapshot is not None and snapshot.summary else None
    return int(value) if value is not None else None


def _summary(watermark: int | None, live_version: int | None) -> dict[str, str]:
    """The snapshot-summary properties of an index commit."""
    properties = {WATERMARK_PROPERTY: str(watermark)} if watermark is not None else {}
    return properties | ({LIVE_PROPERTY: str(live_version)} if live_version is not None else {})


def format_of(table: Table) -> int:
    return int(table.properties.get(FORMAT_PROPERTY, FORMAT_VERSION))


_FILE_STATE = pa.schema([("file_path", pa.string()), ("config_version", pa.string()), ("indexed", pa.bool_())])


def _file_state(table: Table) -> pa.Table:
    """`file_path`, `config_version` and `indexed` of every file row (format 3: of every entry, all indexed)."""
    if format_of(table) >= ROWS_FORMAT:
        scan = table.scan(
            row_filter=EqualTo("field_id", FILE_ROW),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
            selected_fields=tuple(_FILE_STATE.names),
        )
        state = scan.to_arrow()
        return pa.table(
            {
                "file_path": state.column("file_path").cast(pa.string()),
                "config_version": state.column("config_version").cast(pa.string()),
                "indexed": pc.fill_null(state.column("indexed"), True),
            }
        )
    names = {f.name for f in table.schema().fields}
    selected = ("file_path", "config_version") if "config_version" in names else ("file_path",)
    state = table.scan(selected_fields=selected).to_arrow()
    versions = state.column("config_version") if "config_version" in names else pa.nulls(state.num_rows, pa.string())
    return pa.table(
        {
            "file_path": state.column("file_path").cast(pa.string()),
            "config_version": versions.cast(pa.string()),
            "indexed": pa.array([True] * state.num_rows, pa.bool_()),
        }
    )


def _is_retryable(exc: BaseException) -> bool:
    """A lost race: the catalog's conflict check, an unknown outcome, or SQLite busy or locked under two writers
    (the SQL catalog's driver error, wrapped by SQLAlchemy). Our re-planned commit is safe to retry after any of
    them; other catalog errors are not races and fail at once."""
    if isinstance(exc, CommitFailedException | CommitStateUnknownException):
        return True
    driver = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError keeps the driver's exception
    return isinstance(driver, sqlite3.OperationalError) and (driver.sqlite_errorcode & 0xFF) in _SQLITE_RACES
