"""Filters a growing table has outgrown, rebuilt when the index is compacted.

A file's Bloom filters are sized when the file is indexed, for the table's live files then (`IndexKind.sized_for`:
rate min(bloom_fpp, bloom_false_files / N)), so that the whole table keeps about `bloom_false_files` files per
absent key. A file indexed when the table was smaller keeps its looser filters as the table grows: a table indexed
one commit at a time from N0 to N files sums rates of bloom_false_files x (1 + ln(N / N0)), so a followed table's
precision decays with its growth (docs/benchmarks.md, "Following a table").

Compaction rebuilds every file-level payload that is more than `SLACK` times less precise than sizing for the table
now promises (`IndexKind.outgrown`), reading its data file again. A file is rebuilt at most once per doubling of the
table (amortised: at most one read of an old file per file added), and after a compaction every filter is sized for
at least half the live files, so the table keeps at most 2 x bloom_false_files files per absent key (about
1 + ln 2 times, grown one commit at a time).

A rebuilt payload describes the same immutable file's values, so only the outgrown payloads change: every other
field of the entry (bounds, counts, key hashes, row groups, source and configuration version) stays as stored. A
file whose new payload cannot be built (unreadable now, or no longer chosen: the key index took over the column)
keeps the payload it has, which is still right, only looser.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from indexlib.index_kinds.registry import build_order
from indexlib.indexing.build import index_new_files
from indexlib.indexing.local import session_for
from indexlib.indexing.spec import BuildSpec
from indexlib.sources.base import Source
from indexlib.store.schema import ENTRY_ARROW_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SLACK = 2.0  # rebuild a payload more than this many times less precise than sizing for the table now promises

Outgrown = dict[str, set[tuple[int, str]]]  # file path -> (field id, kind name) of its outgrown payloads


def outgrown(entries: pa.Table, spec: BuildSpec, table_files: int) -> Outgrown:
    """The file-level payloads of `entries` (the entry layout) that a table of `table_files` live files has
    outgrown, by file path: one check per payload of a column the spec indexes (`IndexKind.outgrown`)."""
    kinds = {kind.name: kind for kind in build_order()}
    columns = entries.column("columns").combine_chunks()
    flat = pc.list_flatten(columns)
    owner = pc.list_parent_indices(columns).to_numpy()
    indexes = flat.field("indexes")
    payload_owner = pc.list_parent_indices(indexes).to_numpy()
    payloads = pc.list_flatten(indexes)
    paths = entries.column("file_path").to_pylist()
    field_ids = flat.field("field_id").to_pylist()
    distinct = flat.field("distinct_count").to_pylist()
    found: Outgrown = defaultdict(set)
    for column, kind_name, payload in zip(
        payload_owner, payloads.field("kind").to_pylist(), payloads.field("payload").to_pylist(), strict=True
    ):
        kind, settings = kinds.get(kind_name), spec.columns.get(field_ids[column])
        if kind is None or settings is None or distinct[column] is None:
            continue
        if kind.outgrown(payload, distinct[column], settings, table_files, SLACK):
            found[paths[owner[column]]].add((field_ids[column], kind_name))
    return dict(found)


@dataclass(frozen=True)
class Resized:
    """Entries whose outgrown payloads were rebuilt, and how many payloads that was."""

    entries: pa.Table
    payloads: int = 0


def resized_entries(
    entries: pa.Table,
    spec: BuildSpec,
    source: Source,
    table_files: int,
    spark: SparkSession | None = None,
) -> Resized:
    """The entries of `entries` with outgrown payloads, those payloads rebuilt for a table of `table_files` live
    files (the module docstring); entries of files the source no longer lists are left alone (the next build drops
    them). The source is planned only when some payload is outgrown."""
    found = outgrown(entries, spec, table_files)
    if not found:
        return Resized(ENTRY_ARROW_SCHEMA.empty_table())
    live = {f.path: f for f in source.live_files() if f.path in found}
    found = {path: which for path, which in found.items() if path in live}
    files = [live[path] for path in sorted(found)]
    log.info(
        "%s: rebuilding %d outgrown payloads of %d files, sized for a table of %d live files",
        source.name,
        sum(len(which) for which in found.values()),
        len(files),
        table_files,
    )
    fresh = index_new_files(
        session_for(spec, files, spark),
        source,
        files,
        source.current_version() or 0,
        spec,
        skip_unreadable=True,
        table_files=table_files,
        verb="recomputed",
    )
    built = {
        (row["file_path"], column["field_id"], index["kind"]): index
        for row in fresh.entries.to_pylist()
        for column in row["columns"]
        for index in column["indexes"] or ()
        if (column["field_id"], index["kind"]) in found[row["file_path"]]
    }
    paths = sorted({path for path, _, _ in built})
    stored = entries.filter(pc.is_in(entries.column("file_path"), value_set=pa.array(paths, pa.string())))
    rows = stored.to_pylist()
    for row in rows:
        for column in row["columns"]:
            if column["indexes"] is not None:
                column["indexes"] = [
                    built.get((row["file_path"], column["field_id"], index["kind"]), index)
                    for index in column["indexes"]
                ]
    return Resized(pa.Table.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA), len(built))
