"""The planner-facing lookup: which live data files might hold rows matching a SQL predicate.

Stages run in order over the live files of the source's current snapshot, each over the files the previous one
kept: "partition" (the source's own partition values, lifted through the partition transforms; covers every live
file) then "minmax" (the index entries). A live file with no index entry (committed after the last build) passes
the index stages: it is kept and counted in `files_unindexed`. Index entries of files that are no longer live are
never returned. A file is in `all_match` when any stage proves every row of it matches the whole predicate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexlib.binding import bind
from indexlib.config import Config
from indexlib.index_table import IndexTable
from indexlib.predicate import Expr, leaves, normalize, unusable_parts
from indexlib.pruning import FileStatistics, evaluate, statistics_used
from indexlib.source import open_source
from indexlib.sql_frontend import Clock, parse_where


@dataclass(frozen=True)
class Stage:
    name: str
    files_in: int
    files_out: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "files_in": self.files_in, "files_out": self.files_out}


@dataclass(frozen=True)
class LookupResult:
    table: str
    where: str
    files: list[str]
    files_total: int
    files_unindexed: int
    all_match: list[str]
    stages: list[Stage]
    parsed: str = ""
    predicate: str = ""
    unused: list[str] = field(default_factory=list)
    leaves: list[tuple[str, str]] = field(default_factory=list)  # (bound leaf, statistics it reads)
    partition_fields: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return {
            "files_total": self.files_total,
            "files_kept": len(self.files),
            "files_unindexed": self.files_unindexed,
            "files_all_match": len(self.all_match),
            "stages": [stage.as_dict() for stage in self.stages],
        }

    def as_json(self) -> dict[str, Any]:
        """The `explain --json` object of DESIGN.md."""
        return {"table": self.table, "where": self.where, "files": self.files, "summary": self.summary}


def bound_predicate(where: str, schema: Any, table: str, clock: Clock | None = None) -> Expr:
    return bind(normalize(parse_where(where, clock)), schema, table)


def prune(predicate: Expr, live_paths: list[str], entries: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kept, all_match, indexed) masks over `live_paths`, given index entries (any superset of the live ones)."""
    entries = entries.filter(pc.is_in(entries.column("file_path"), value_set=pa.array(live_paths, pa.string())))
    # One entry per path: duplicates carry the same file's statistics, any one of them is valid.
    _, first = np.unique(entries.column("file_path").to_numpy(zero_copy_only=False), return_index=True)
    entries = entries.take(pa.array(np.sort(first), pa.int64()))
    position = {path: i for i, path in enumerate(entries.column("file_path").to_pylist())}
    index_of = np.array([position.get(path, -1) for path in live_paths], dtype=np.int64)
    indexed = index_of >= 0
    if not indexed.any():
        return np.ones(len(live_paths), dtype=bool), np.zeros(len(live_paths), dtype=bool), indexed
    verdict = evaluate(predicate, FileStatistics(entries))
    at = np.where(indexed, index_of, 0)
    kept = ~indexed | verdict.might[at]
    return kept, indexed & verdict.all[at] & kept, indexed


def lookup(config: Config, table: str, where: str, clock: Clock | None = None) -> LookupResult:
    """Files of `table` that might hold a row matching `where`, and the summary `skipindex explain` prints.

    `clock` fixes what CURRENT_DATE / CURRENT_TIMESTAMP / NOW() mean (default: now, in `[lookup] time_zone`).
    """
    catalog = config.load_catalog()
    source = open_source(catalog, table)
    clock = clock or Clock.system(config.time_zone)
    parsed = parse_where(where, clock, config.dialect)
    predicate = bind(normalize(parsed), source.schema, table)
    live = source.live_files()
    live_paths = [f.path for f in live]

    partitions = source.prune_partitions(live, predicate)
    after_partition = np.asarray(partitions.might, dtype=bool)
    entries = IndexTable(catalog, config.index_namespace, table).entries()
    kept, proven, indexed = prune(predicate, live_paths, entries)
    kept &= after_partition
    all_match = kept & (proven | np.asarray(partitions.all, dtype=bool))
    return LookupResult(
        table=table,
        where=where,
        files=[path for path, keep in zip(live_paths, kept, strict=True) if keep],
        files_total=len(live_paths),
        files_unindexed=int((kept & ~indexed).sum()),
        all_match=[path for path, every in zip(live_paths, all_match, strict=True) if every],
        stages=[
            Stage("partition", len(live_paths), int(after_partition.sum())),
            Stage("minmax", int(after_partition.sum()), int(kept.sum())),
        ],
        parsed=str(parsed),
        predicate=str(predicate),
        unused=[f"{part.sql}: {part.reason}" for part in unusable_parts(predicate)],
        leaves=[(str(leaf), statistics_used(leaf)) for leaf in leaves(predicate)],
        partition_fields=partitions.lifted,
    )
