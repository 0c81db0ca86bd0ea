"""The side index table: one Iceberg table per source table, one row per indexed data file.

Every change (new entries, entries replaced after a configuration change, entries of removed files dropped) and the
watermark (the last source version indexed, a snapshot-summary property) land in one Iceberg commit, so a reader
sees all of it or none. A commit is planned against the table state it read and fails if anyone committed since
(pyiceberg's own rebasing retry is switched off for index tables); `commit` then re-reads and plans again. That is
what keeps one entry per data file with concurrent writers and after a crash. See docs/index-table.md.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.expressions import In

from indexlib.errors import UserError
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, FORMAT_VERSION, INDEX_SCHEMA

log = logging.getLogger(__name__)

WATERMARK_PROPERTY = "skipindex.source-version"
SOURCE_PROPERTY = "skipindex.source-table"
FORMAT_PROPERTY = "skipindex.format-version"
# Our commits are planned against the state they read; a rebase by pyiceberg could duplicate an entry.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}
COMMIT_ATTEMPTS = 20


def index_table_name(source_name: str) -> str:
    """`ns.name` -> `ns__name`; a source named by a path or URI (a Delta table) -> `delta__<last part>__<hash of the
    full name>`: readable and unique per table. A collision is detected through the source-table property."""
    if "/" not in source_name and "://" not in source_name:
        return source_name.replace(".", "__")
    last = re.sub(r"[^0-9A-Za-z_]", "_", source_name.rstrip("/").rsplit("/", 1)[-1]) or "table"
    return f"delta__{last}__{hashlib.sha256(source_name.encode()).hexdigest()[:12]}"


class WatermarkMoved(Exception):
    """Another build moved the watermark since this one planned: its list of new files is out of date."""


@dataclass(frozen=True)
class CommitResult:
    added: int  # entries appended (new files, and rebuilt ones)
    replaced: int  # entries of the same files removed because they were rebuilt
    dropped: int  # entries of removed files dropped
    skipped: int  # entries someone else committed first (same file, same configuration)
    committed: bool


_UNSET: Any = object()
T = TypeVar("T")


class IndexTable:
    """The index of one source table, in the configured catalog under the index namespace."""

    def __init__(self, catalog: Any, namespace: str, source_name: str) -> None:
        self.catalog = catalog
        self.source_name = source_name
        self.identifier = f"{namespace}.{index_table_name(source_name)}"
        self.namespace = namespace
        self._table: Any = None

    def load(self) -> Any | None:
        """The Iceberg table, or None when this source was never indexed."""
        if self._table is None:
            try:
                self._table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                return None
            self._check_owner(self._table)
        return self._table

    def reload(self) -> Any | None:
        """The table as the catalog has it now (None when never indexed); later reads use this version."""
        self._table = None
        return self.load()

    def load_or_create(self) -> Any:
        table = self.load()
        if table is not None:
            return table
        self.catalog.create_namespace_if_not_exists(self.namespace)
        try:
            self._table = self.catalog.create_table(
                self.identifier,
                schema=INDEX_SCHEMA,
                properties={
                    SOURCE_PROPERTY: self.source_name,
                    FORMAT_PROPERTY: str(FORMAT_VERSION),
                    **TABLE_PROPERTIES,
                },
            )
        except TableAlreadyExistsError:  # another build created it first
            self._table = self.catalog.load_table(self.identifier)
            self._check_owner(self._table)
        return self._table

    def _check_owner(self, table: Any) -> None:
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
        return _watermark_of(self.load())

    def indexed(self) -> pa.Table:
        """`file_path` and `config_version` of every entry (only these two columns are read)."""
        table = self.load()
        if table is None or table.current_snapshot() is None:
            return pa.table({"file_path": pa.array([], pa.string()), "config_version": pa.array([], pa.string())})
        return _indexed_state(table)

    def indexed_paths(self) -> set[str]:
        return set(self.indexed().column("file_path").to_pylist())

    def config_versions(self) -> dict[str, str | None]:
        """Indexed path -> the configuration version its entry was built with (None before format 3)."""
        state = self.indexed()
        return dict(zip(state.column("file_path").to_pylist(), state.column("config_version").to_pylist(), strict=True))

    def entries(self, paths: Iterable[str] | None = None) -> pa.Table:
        """All entries (or those of `paths`); duplicates of a path (possible only in tables written before format 3)
        are harmless."""
        table = self.load()
        if table is None or table.current_snapshot() is None:
            return ENTRY_ARROW_SCHEMA.empty_table()
        if paths is not None:
            paths = list(paths)
            if not paths:
                return ENTRY_ARROW_SCHEMA.empty_table()
            return table.scan(row_filter=In("file_path", sorted(set(paths)))).to_arrow()
        return table.scan().to_arrow()

    def _upgrade(self, table: Any) -> Any:
        """Add the fields of newer formats to an older index table (all optional: old entries read as unknown),
        and switch off pyiceberg's rebasing commit retry (see the module docstring)."""
        if int(table.properties.get(FORMAT_PROPERTY, FORMAT_VERSION)) >= FORMAT_VERSION and all(
            table.properties.get(k) == v for k, v in TABLE_PROPERTIES.items()
        ):
            return table
        with table.transaction() as transaction:
            with transaction.update_schema() as update:
                update.union_by_name(INDEX_SCHEMA)
            transaction.set_properties({FORMAT_PROPERTY: str(FORMAT_VERSION), **TABLE_PROPERTIES})
        self._table = self.catalog.load_table(self.identifier)
        return self._table

    def _reload(self) -> Any:
        self._table = None
        return self._upgrade(self.load_or_create())

    def commit(
        self,
        entries: pa.Table,
        *,
        drop_paths: Iterable[str] = (),
        watermark: int | None = None,
        expected_watermark: Any = _UNSET,
    ) -> CommitResult:
        """Make the index hold `entries` (one per file: an entry of the same file with another configuration
        version is replaced, one with the same is kept), drop the entries of `drop_paths`, and set the watermark to
        `watermark` (None: keep the current one), in one commit.

        With `expected_watermark`, raise WatermarkMoved instead of committing when the current watermark differs.
        A commit that loses a race re-reads the table and plans again, so whatever the other writer committed is
        neither duplicated nor lost.
        """
        entries = entries.cast(ENTRY_ARROW_SCHEMA)
        drop = set(drop_paths)

        def attempt(table: Any) -> CommitResult:
            current = _watermark_of(table)
            if expected_watermark is not _UNSET and current != expected_watermark:
                raise WatermarkMoved(f"{self.identifier}: watermark moved from {expected_watermark} to {current}")
            state = _indexed_state(table) if table.current_snapshot() is not None else None
            present = set() if state is None else set(state.column("file_path").to_pylist())
            pairs = set() if state is None else set(zip(*state.to_pydict().values(), strict=True))
            fresh = [
                (path, version) not in pairs
                for path, version in zip(
                    entries.column("file_path").to_pylist(), entries.column("config_version").to_pylist(), strict=True
                )
            ]
            add = entries.filter(pa.array(fresh, pa.bool_()))
            rebuilt = present & set(add.column("file_path").to_pylist())
            dropped = (present & drop) - rebuilt
            new_watermark = current if watermark is None else watermark
            if add.num_rows == 0 and not rebuilt and not dropped and new_watermark == current:
                return CommitResult(0, 0, 0, entries.num_rows, committed=False)
            properties = {WATERMARK_PROPERTY: str(new_watermark)} if new_watermark is not None else {}
            transaction = table.transaction()
            if rebuilt or dropped:
                transaction.delete(In("file_path", sorted(rebuilt | dropped)), snapshot_properties=properties)
            if add.num_rows or not (rebuilt or dropped):  # an empty append still moves the watermark
                transaction.append(add, snapshot_properties=properties)
            transaction.commit_transaction()
            return CommitResult(add.num_rows, len(rebuilt), len(dropped), entries.num_rows - add.num_rows, True)

        return self._retrying(attempt)

    def rewrite(self, plan: Callable[[pa.Table], pa.Table | None]) -> pa.Table | None:
        """Replace every entry by `plan(all entries)` in one commit (None: leave the table alone); the watermark is
        kept. Used by compaction; re-planned like `commit` when it loses a race."""

        def attempt(table: Any) -> pa.Table | None:
            if table.current_snapshot() is None:
                return None
            kept = plan(table.scan().to_arrow())
            if kept is None:
                return None
            current = _watermark_of(table)
            properties = {WATERMARK_PROPERTY: str(current)} if current is not None else {}
            with table.transaction() as transaction:
                transaction.overwrite(kept.cast(ENTRY_ARROW_SCHEMA), snapshot_properties=properties)
            return kept

        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[Any], T]) -> T:
        for number in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return attempt(self._reload())
            except Exception as exc:
                if not _is_retryable(exc):
                    raise
                if number == COMMIT_ATTEMPTS:
                    raise UserError(f"{self.identifier}: gave up after {number} conflicting commits: {exc}") from exc
                wait = min(0.05 * 2**number, 5.0) * random.uniform(0.5, 1.5)
                log.warning("%s: commit conflict (attempt %d), re-planning in %.2fs", self.identifier, number, wait)
                time.sleep(wait)
            finally:
                self._table = None
        raise AssertionError("unreachable")


def _watermark_of(table: Any) -> int | None:
    snapshot = table.current_snapshot() if table is not None else None
    value = snapshot.summary[WATERMARK_PROPERTY] if snapshot is not None and snapshot.summary else None
    return int(value) if value is not None else None


def _indexed_state(table: Any) -> pa.Table:
    names = {f.name for f in table.schema().fields}
    selected = ("file_path", "config_version") if "config_version" in names else ("file_path",)
    state = table.scan(selected_fields=selected).to_arrow()
    if "config_version" not in state.column_names:
        state = state.append_column("config_version", pa.nulls(state.num_rows, pa.string()))
    return state.select(["file_path", "config_version"])


def _is_retryable(exc: Exception) -> bool:
    """A lost race: the catalog's conflict check, an unknown outcome, or SQLite's lock under two writers. Our
    re-planned commit is safe to retry after any of them; other catalog errors are not races and fail at once."""
    return isinstance(exc, CommitFailedException | CommitStateUnknownException) or (
        type(exc).__name__ == "OperationalError" and "database is locked" in str(exc)
    )
