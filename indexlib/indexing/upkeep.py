"""Index-table upkeep: `compact` rewrites an index table into few files, keeping one entry per data file;
`verify` recomputes a sample of entries from the data files and reports stale, missing and orphaned ones; `expire`
drops old index snapshots and deletes the files no snapshot needs (store/expiry.py).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import NoSuchNamespaceError

from indexlib.index_kinds.registry import build_order
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.build import index_new_files
from indexlib.indexing.resizing import Resized, resized_entries
from indexlib.indexing.spec import build_spec
from indexlib.indexing.upgrade import upgrade_index
from indexlib.sources.registry import open_source
from indexlib.store.expiry import ExpiryResult
from indexlib.store.expiry import expire as expire_table
from indexlib.store.schema import one_entry_per_path
from indexlib.store.table import SOURCE_PROPERTY, IndexTable, build_hint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.config import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactResult:
    table: str
    index_table: str
    data_files_before: int
    data_files_after: int
    entries: int
    duplicates_dropped: int
    removed_dropped: int  # entries of files no longer live in the source
    has_index: bool = True  # False: never indexed, nothing was done
    payloads_resized: int = 0  # filters the table had outgrown, rebuilt for its size now (indexing/resizing.py)
    files_resized: int = 0

    def message(self) -> str:
        if not self.has_index:
            return f"{self.table}: no index (no table {self.index_table}), nothing to compact; {build_hint(self.table)}"
        resized = (
            f"; rebuilt {self.payloads_resized} filters of {self.files_resized} files, outgrown by the table"
            if self.payloads_resized
            else ""
        )
        if self.data_files_after == self.data_files_before and not (
            self.duplicates_dropped or self.removed_dropped or self.payloads_resized
        ):
            return f"{self.table}: index {self.index_table} is already compact ({self.data_files_before} files, {self.entries} entries)"
        return (
            f"{self.table}: compacted {self.index_table} from {self.data_files_before} to {self.data_files_after} files, "
            f"{self.entries} entries ({self.duplicates_dropped} duplicates and {self.removed_dropped} entries of removed files dropped){resized}"
        )


def indexed_sources(config: Config) -> list[str]:
    """Every source table with an index table in the configured namespace."""
    catalog = config.load_catalog(create=False)  # upkeep of existing index tables: never a new catalog
    try:
        identifiers = catalog.list_tables(config.index_namespace)
    except NoSuchNamespaceError:
        return []
    names = []
    for identifier in identifiers:
        owner = catalog.load_table(identifier).properties.get(SOURCE_PROPERTY)
        if owner:
            names.append(owner)
    return sorted(names)


def compact(config: Config, table_name: str, spark: SparkSession | None = None) -> CompactResult:
    """Rewrite the index into one data file per partition, one entry per data file, with the filters the table
    has outgrown rebuilt for its size now (indexing/resizing.py: those files are read again, on `spark` or as
    `[build] local_max_*` decide).

    While the file rows claim a live version (docs/index-table.md), every row is of a file live at that version and
    stays: a rollback to it makes those files live again, and lookups take the live files from these rows. The
    rows of files removed since are the next build's to drop, with the new live version. Only rows that claim
    nothing (an index written before the claim existed) are pruned here to the files live now."""
    catalog = config.load_catalog(create=False)  # upkeep of existing index tables: never a new catalog
    source = open_source(config, table_name, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name)
    upgrade_index(index, source)
    if index.load() is None:  # rewriting would create an empty index table, which then looks like an index
        return CompactResult(source.name, index.identifier, 0, 0, 0, 0, 0, has_index=False)
    spec = build_spec(config, source)
    counts: dict[str, int] = {}
    live: list[set[str]] = []  # planned once, only when the rows claim no live version
    resized: list[Resized] = []  # built once, kept if the rewrite is planned again after a lost race

    def plan(entries: pa.Table, live_version: int | None) -> pa.Table | None:
        kept = one_entry_per_path(entries)
        alive = kept
        if live_version is None:
            if not live:
                live.append({f.path for f in source.live_files()})
            alive = kept.filter(pc.is_in(kept.column("file_path"), value_set=pa.array(sorted(live[0]), pa.string())))
        if not resized:
            resized.append(resized_entries(alive, spec, source, alive.num_rows, spark))
        alive, swapped = _swapped(alive, resized[0].entries)
        counts.update(
            before=_data_files(index),
            entries=alive.num_rows,
            dup=entries.num_rows - kept.num_rows,
            dead=kept.num_rows - alive.num_rows,
            files_resized=swapped,
            payloads_resized=resized[0].payloads if swapped else 0,
        )
        # one data file per partition (per indexed column, and the file rows) is as compact as it gets
        if counts["before"] <= _partitions(index) and not (counts["dup"] or counts["dead"] or swapped):
            return None
        return alive

    kept = index.rewrite(plan)
    after = _data_files(index) if kept is not None else counts.get("before", 0)
    return CompactResult(
        source.name,
        index.identifier,
        counts.get("before", 0),
        after,
        counts.get("entries", 0),
        counts.get("dup", 0),
        counts.get("dead", 0),
        payloads_resized=counts.get("payloads_resized", 0) if kept is not None else 0,
        files_resized=counts.get("files_resized", 0) if kept is not None else 0,
    )


def _swapped(entries: pa.Table, rebuilt: pa.Table) -> tuple[pa.Table, int]:
    """`entries` (one per path, ordered by path) with the entries of `rebuilt` in place of their stored ones, where
    the stored one is still the entry they were rebuilt from (same configuration and source version); how many."""
    if rebuilt.num_rows == 0:
        return entries, 0
    stored = {
        (path, config, version)
        for path, config, version in zip(
            *(entries.column(name).to_pylist() for name in ("file_path", "config_version", "source_version")),
            strict=True,
        )
    }
    still = [
        key in stored
        for key in zip(
            *(rebuilt.column(name).to_pylist() for name in ("file_path", "config_version", "source_version")),
            strict=True,
        )
    ]
    rebuilt = rebuilt.filter(pa.array(still, pa.bool_()))
    others = entries.filter(pc.invert(pc.is_in(entries.column("file_path"), value_set=rebuilt.column("file_path"))))
    merged = pa.concat_tables([others, rebuilt.cast(others.schema)])
    return merged.take(pc.sort_indices(merged, sort_keys=[("file_path", "ascending")])), rebuilt.num_rows


@dataclass(frozen=True)
class ExpireResult:
    table: str
    index_table: str
    older_than: datetime
    expiry: ExpiryResult | None  # None: never indexed

    def message(self) -> str:
        if self.expiry is None:
            return f"{self.table}: no index table {self.index_table} yet; nothing to expire"
        e = self.expiry
        return (
            f"{self.table}: expired {e.snapshots_expired} snapshots of {self.index_table} older than "
            f"{self.older_than:%Y-%m-%d %H:%M:%S} UTC ({e.snapshots_kept} kept); deleted {e.files_deleted} files "
            f"no snapshot references ({e.bytes_deleted / 1e6:.1f} MB), {e.files_too_young} younger ones left"
        )


def expire(config: Config, table_name: str, older_than: timedelta, retain_last: int) -> ExpireResult:
    """Expire index snapshots older than `older_than` (keeping the newest `retain_last`) and delete unreferenced
    files older than that; `older_than` must exceed the longest build or lookup that may still be at work."""
    catalog = config.load_catalog(create=False)  # upkeep of existing index tables: never a new catalog
    source = open_source(config, table_name, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name)
    cutoff = datetime.now(UTC) - older_than
    table = index.load()
    return ExpireResult(
        source.name, index.identifier, cutoff, None if table is None else expire_table(table, cutoff, retain_last)
    )


def _data_files(index: IndexTable) -> int:
    table = index.catalog.load_table(index.identifier)
    return 0 if _empty(table) else len(table.inspect.files())


def _partitions(index: IndexTable) -> int:
    table = index.catalog.load_table(index.identifier)
    return 0 if _empty(table) else table.inspect.partitions().num_rows


def _empty(table: Any) -> bool:
    """No snapshot, or one without data files (every row dropped), where pyiceberg's `inspect.files()` raises."""
    snapshot = table.current_snapshot()
    return snapshot is None or (snapshot.summary is not None and snapshot.summary["total-data-files"] == "0")


@dataclass(frozen=True)
class VerifyReport:
    table: str
    index_table: str
    live_files: int
    indexed_live: int
    missing: list[str]  # live files without an entry (committed after the last build, or skipped as unreadable)
    orphaned: int  # entries of files that are no longer live (never returned by a lookup; compact drops them)
    outdated_config: int  # live entries built with another index configuration (backfill rebuilds them)
    sampled: int
    stale: list[tuple[str, str]] = field(default_factory=list)  # (file, what differs from the data)

    @property
    def ok(self) -> bool:
        return not self.stale

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "index_table": self.index_table,
            "live_files": self.live_files,
            "indexed_live": self.indexed_live,
            "missing": self.missing,
            "orphaned": self.orphaned,
            "outdated_config": self.outdated_config,
            "sampled": self.sampled,
            "stale": [{"file": path, "reason": reason} for path, reason in self.stale],
        }

    def message(self) -> str:
        lines = [
            f"{self.table}: {self.indexed_live} of {self.live_files} live files indexed in {self.index_table}; "
            f"{len(self.missing)} missing, {self.orphaned} orphaned entries, {self.outdated_config} with an outdated configuration",
            f"{self.table}: recomputed {self.sampled} sampled entries from the data: {len(self.stale)} stale",
        ]
        lines += [f"  missing  {path}" for path in self.missing[:20]]
        if len(self.missing) > 20:
            lines.append(f"  ... and {len(self.missing) - 20} more missing")
        lines += [f"  stale    {path}: {reason}" for path, reason in self.stale]
        return "\n".join(lines)


# Fields of an entry that depend only on the data (any configuration) and those that depend on the settings too.
_DATA_FIELDS = ("value_count", "null_count", "nan_count", "lower", "upper", "distinct_count")


def verify(
    config: Config, table_name: str, sample: int = 20, seed: int | None = None, spark: SparkSession | None = None
) -> VerifyReport:
    """Recompute `sample` live entries from their data files and compare them with the index. The sample is small
    work: it is recomputed in this process whatever `[build] local_max_*` say (indexing/local.py), so verify never
    starts a JVM; only an explicit `spark` session runs it on Spark."""
    catalog = config.load_catalog(create=False)  # upkeep of existing index tables: never a new catalog
    source = open_source(config, table_name, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name)
    index.require()
    spec = build_spec(config, source)
    current = spec.config_version
    live = source.live_files()
    live_paths = {f.path for f in live}
    versions = index.config_versions()
    indexed_live = sorted(p for p in versions if p in live_paths)
    chosen = sorted(random.Random(seed).sample(indexed_live, min(sample, len(indexed_live))))
    stale: list[tuple[str, str]] = []
    if chosen:
        by_path = {f.path: f for f in live}
        computed = index_new_files(
            spark,
            source,
            [by_path[p] for p in chosen],
            0,
            spec,
            skip_unreadable=True,
            table_files=len(live),
            verb="recomputed",
        )
        stale += [(path, f"cannot be read now: {reason}") for path, reason in computed.skipped]
        fresh = {row["file_path"]: row for row in computed.entries.to_pylist()}
        stored = {row["file_path"]: row for row in one_entry_per_path(index.entries(chosen)).to_pylist()}
        # payloads sized for the table as it was when their file was indexed are recomputed at that size
        sized = {path: _sized_for(row, spec.columns, len(live)) for path, row in stored.items() if path in fresh}
        for table_files in sorted({n for n in sized.values() if n is not None and n != len(live)}):
            again = [by_path[path] for path, n in sized.items() if n == table_files]
            resized = index_new_files(
                None, source, again, 0, spec, skip_unreadable=True, table_files=table_files, verb="recomputed"
            )
            fresh |= {row["file_path"]: row for row in resized.entries.to_pylist()}
        for path in chosen:
            if path in fresh and path in stored:
                reason = _difference(
                    stored[path], fresh[path], same_config=stored[path].get("config_version") == current
                )
                if reason:
                    stale.append((path, reason))
    return VerifyReport(
        source.name,
        index.identifier,
        len(live),
        len(indexed_live),
        sorted(live_paths - set(versions)),
        len(set(versions) - live_paths),
        sum(1 for p in indexed_live if versions[p] != current),
        len(chosen),
        sorted(stale),
    )


def _sized_for(entry: dict[str, Any], settings: dict[int, IndexSettings], table_files: int) -> int | None:
    """The table size (live files) nearest `table_files` for which every file-level payload of `entry` whose kind
    sizes itself by the table is built exactly as stored (`IndexKind.sized_tables`): each such payload allows a range
    of sizes holding the one the file was indexed for, so their intersection holds it too. None: no such payload,
    or ranges that do not meet (a payload built with other settings: the entry is compared as it is)."""
    kinds = {kind.name: kind for kind in build_order()}
    ranges = [
        kinds[index["kind"]].sized_tables(index["payload"], column["distinct_count"], settings[column["field_id"]])
        for column in entry["columns"]
        if column["distinct_count"] is not None and column["field_id"] in settings
        for index in column["indexes"] or ()
        if index["kind"] in kinds
    ]
    known = [r for r in ranges if r is not None]
    if not known:
        return None
    least, greatest = max(r[0] for r in known), min(r[1] for r in known)
    return None if least > greatest else min(max(table_files, least), greatest)


def _difference(stored: dict[str, Any], fresh: dict[str, Any], same_config: bool) -> str | None:
    """The first way a stored entry disagrees with one computed now from the data (None: they agree).

    Min/max and counts must always agree; index payloads and row-group entries only when the entry was built with
    the current configuration (otherwise it is outdated, not stale); key hashes when both have them (the automatic
    choice of the key index depends on the table's size when the file was indexed). NDV sketches are not compared
    byte for byte.
    """
    if stored["record_count"] != fresh["record_count"]:
        return f"record count {stored['record_count']} in the index, {fresh['record_count']} in the file"
    old = {c["field_id"]: c for c in stored["columns"]}
    new = {c["field_id"]: c for c in fresh["columns"]}
    for field_id, column in new.items():
        mine = old.get(field_id)
        if mine is None:
            continue  # no statistics stored for this column: it reads as unknown, which is safe
        for name in _DATA_FIELDS if not same_config else (*_DATA_FIELDS, "indexes", "row_groups"):
            if mine.get(name) is not None and mine.get(name) != column.get(name):
                return f"column {column['name']}: {name} differs"
        both_keyed = None not in (mine.get("key_hashes"), column.get("key_hashes"))
        if same_config and both_keyed and mine["key_hashes"] != column["key_hashes"]:
            return f"column {column['name']}: key_hashes differs"
    return None
