"""The planner-facing lookup: which live data files might hold rows matching a SQL predicate.

Stages run in order over the live files of the source's current snapshot, each over the files the previous one
kept: "partition" (the source's own partition values, lifted through the partition transforms; covers every live
file), "minmax" (bounds and counts of the index entries), then one stage per index kind ("bloom", "automaton").
Each index stage evaluates the whole predicate with everything known so far (a leaf's verdict combines min/max and
every kind up to that stage), so the stages report how many files each kind removed. A live file with no index
entry (committed after the last build) passes the index stages: it is kept and counted in `files_unindexed`.
Index entries of files that are no longer live are never returned. A file is in `all_match` when any stage proves
every row of it matches the whole predicate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexlib.config import Config
from indexlib.index_kinds.base import IndexKind
from indexlib.index_kinds.registry import registry
from indexlib.pruning.minmax import Evaluation, statistics_used
from indexlib.pruning.partitions import prune_partitions
from indexlib.query.binding import bind
from indexlib.query.model import Expr, Pattern
from indexlib.query.normalize import leaves, normalize, unusable_parts
from indexlib.query.sql import Clock, parse_where
from indexlib.query.value_set import value_set
from indexlib.sources.registry import open_source
from indexlib.statistics.verdict import Verdict
from indexlib.store.entries import EntryStatistics, one_entry_per_path
from indexlib.store.table import IndexTable


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
        """The `explain --json` object (its shape is documented in the README)."""
        return {"table": self.table, "where": self.where, "files": self.files, "summary": self.summary}


@dataclass(frozen=True)
class IndexVerdicts:
    """Per live file: has an index entry, and per index stage (cumulative) kept / all-match masks."""

    indexed: np.ndarray
    stages: list[tuple[str, np.ndarray, np.ndarray]]

    @property
    def kept(self) -> np.ndarray:
        return self.stages[-1][1]

    @property
    def all_match(self) -> np.ndarray:
        return self.stages[-1][2]  # stages are cumulative: the last knows what every earlier one proved


def prune(
    predicate: Expr, live_paths: list[str], entries: pa.Table, kinds: list[IndexKind] | None = None
) -> IndexVerdicts:
    """Index-stage verdicts over `live_paths`, given index entries (any superset of the live ones): "minmax", then
    one stage per kind in `kinds` (default: every kind), each using min/max and every kind before it."""
    kinds = list(registry().values()) if kinds is None else kinds
    entries = entries.filter(pc.is_in(entries.column("file_path"), value_set=pa.array(live_paths, pa.string())))
    entries = one_entry_per_path(entries)
    position = {path: i for i, path in enumerate(entries.column("file_path").to_pylist())}
    index_of = np.array([position.get(path, -1) for path in live_paths], dtype=np.int64)
    indexed = index_of >= 0
    names = ["minmax", *(kind.name for kind in kinds)]
    if not indexed.any():
        unknown = Verdict.unknown(len(live_paths))
        return IndexVerdicts(indexed, [(name, unknown.might, unknown.all_match) for name in names])
    evaluation = Evaluation(EntryStatistics(entries))
    at = np.where(indexed, index_of, 0)
    stages = []
    for used, name in enumerate(names):
        verdict = evaluation.evaluate(predicate, kinds[:used])
        kept = ~indexed | verdict.might[at]
        stages.append((name, kept, indexed & verdict.all_match[at] & kept))
    return IndexVerdicts(indexed, stages)


def leaf_statistics(leaf: Expr, kinds: list[IndexKind]) -> str:
    """For explain: what min/max and each index kind read for one bound leaf."""
    used = [statistics_used(leaf)]
    target = value_set(leaf) or (leaf if isinstance(leaf, Pattern) else None)
    if target is not None:
        used += [reads for kind in kinds if (reads := kind.reads(target)) is not None]
    return "; ".join(used)


def lookup(config: Config, table: str, where: str, clock: Clock | None = None) -> LookupResult:
    """Files of `table` that might hold a row matching `where`, and the summary `skipindex explain` prints.

    `clock` fixes what CURRENT_DATE / CURRENT_TIMESTAMP / NOW() mean (default: now, in `[lookup] time_zone`).
    """
    catalog = config.load_catalog()
    source = open_source(config, table, catalog)
    clock = clock or Clock.system(config.time_zone)
    parsed = parse_where(where, clock, config.dialect)
    predicate = bind(normalize(parsed), source.schema, table)
    live = source.live_files()
    live_paths = [f.path for f in live]

    partitions = prune_partitions(source, live, predicate)
    after_partition = np.asarray(partitions.might, dtype=bool)
    entries = IndexTable(catalog, config.index_namespace, source.name).entries()
    kinds = list(registry().values())
    verdicts = prune(predicate, live_paths, entries, kinds)
    stages = [Stage("partition", len(live_paths), int(after_partition.sum()))]
    all_match = np.asarray(partitions.all_match, dtype=bool)
    kept = after_partition
    for name, stage_kept, stage_all_match in verdicts.stages:
        stage_kept = stage_kept & after_partition
        stages.append(Stage(name, int(kept.sum()), int(stage_kept.sum())))
        kept, all_match = stage_kept, all_match | stage_all_match
    indexed = verdicts.indexed
    all_match = kept & all_match
    return LookupResult(
        table=table,
        where=where,
        files=[path for path, keep in zip(live_paths, kept, strict=True) if keep],
        files_total=len(live_paths),
        files_unindexed=int((kept & ~indexed).sum()),
        all_match=[path for path, matched in zip(live_paths, all_match, strict=True) if matched],
        stages=stages,
        parsed=str(parsed),
        predicate=str(predicate),
        unused=[f"{part.sql}: {part.reason}" for part in unusable_parts(predicate)],
        leaves=[(str(leaf), leaf_statistics(leaf, kinds)) for leaf in leaves(predicate)],
        partition_fields=partitions.lifted,
    )
