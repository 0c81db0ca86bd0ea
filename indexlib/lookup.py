"""The planner-facing lookup: which live data files might hold rows matching a SQL predicate.

Stages run in order over the live files of the source's current snapshot, each over the files the previous one
kept, one per source of evidence handed to the one evaluator (pruning/evaluator.py): "partition" (the source's own
partition values; covers every live file), "format statistics" (when some live file has no index entry: the
min/max rules over what the format records of those files, `Source.format_statistics`), "minmax" (bounds and counts
of the index entries), "key index" (the global key index, for `=` / IN on keyed columns), then one stage per index
kind ("bloom", "automaton"). Each stage evaluates the whole predicate with everything known so far (a leaf's verdict
combines the evidence up to that stage), so the stages report how many files each removed. A live file with no index
entry (committed after the last build) is unknown to the index stages: it is kept unless its partition values or
its format statistics rule it out, and counted in `files_unindexed` (a predicate FALSE on every row, as
`x NOT IN (1, NULL)` is, keeps no file).
Index entries of files that are no longer live are never returned. A file is in `all_match` when any stage proves
every row of it matches the whole predicate.

Then the parts of the kept files are judged the same way, for each container kind (store/containers.py: the row
groups of files with row-group entries, format 5, `[index] row_groups`; any registered kind), each part taking its
file's evidence (pruning/containers.py) narrowed by its own bounds and payloads: stages "row groups: minmax",
"row groups: bloom", ... A file none of whose parts might match is dropped; the others list the parts a reader needs
(`parts`, one `KeptParts` per kind), and which of them match on every row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from pyiceberg.expressions import BooleanExpression

from indexlib import explain
from indexlib.config import Config
from indexlib.index_kinds.registry import registry
from indexlib.pruning.answers import KeptParts, Stage
from indexlib.pruning.evaluator import Evidence, describe, evaluate
from indexlib.pruning.index_evidence import AlignedEntries, index_evidence
from indexlib.pruning.minmax import MinMaxEvidence
from indexlib.pruning.partitions import PartitionEvidence
from indexlib.pruning.parts import prune_parts
from indexlib.query.binding import bind
from indexlib.query.from_iceberg import from_iceberg
from indexlib.query.model import Expr
from indexlib.query.normalize import leaves, normalize, unusable_parts
from indexlib.query.sql import Clock, parse_where, predicate_from_tree
from indexlib.sources.base import DataFileRef, KeptFile, LiveFiles, Source, paths_of, pick
from indexlib.sources.registry import open_source
from indexlib.statistics.provider import Placed
from indexlib.statistics.verdict import Verdict
from indexlib.store.containers import part_kinds
from indexlib.store.key_rows import KeyReads
from indexlib.store.snapshot import IndexRows, IndexSnapshot
from indexlib.store.table import IndexTable

FORMAT_STAGE = "format statistics"  # the stage judging unindexed files by the format's own statistics


@dataclass(frozen=True)
class LookupResult:
    """`files` and `all_match` are sorted by path, whatever order the live files were read in.

    `source_version` is what the answer is for (Iceberg snapshot id, Delta version): the live files, their delete
    files and the schema all come from that one loaded state, which the result keeps (`source`), so a reader of
    `kept_files` reads that version even after later commits."""

    table: str
    where: str
    files: list[str]
    files_total: int
    files_unindexed: int
    all_match: list[str]
    stages: list[Stage]
    unused: list[str] = field(default_factory=list)
    partition_fields: list[str] = field(default_factory=list)
    has_index: bool = True  # False: the table was never indexed, so the index stages kept every file
    source_version: int | None = None
    bound: Expr | None = field(default=None, compare=False, repr=False)  # the predicate bound to the schema
    state: TableState | None = field(default=None, compare=False, repr=False)
    kept_positions: tuple[int, ...] = field(default=(), compare=False, repr=False)  # of the kept files in state.live
    # per container kind (by key) whose stages ran: the parts of the kept files that might match, and those proven to
    # match on every row
    parts: dict[str, KeptParts] = field(default_factory=dict)
    key_reads: KeyReads | None = None  # what this lookup read of the global key index (None: nothing)
    # explain's texts, made when first asked (an IN list of 100,000 keys takes ~0.1 s per text)
    explained: Callable[[], tuple[str, str, list[tuple[str, str]]]] | None = field(
        default=None, compare=False, repr=False
    )

    def kept_parts(self, key: str) -> KeptParts:
        """Container kind `key`'s answer (e.g. "row_groups"); empty when its stages did not run."""
        return self.parts.get(key) or KeptParts(key, {}, {}, 0, {})

    @cached_property
    def _explanation(self) -> tuple[str, str, list[tuple[str, str]]]:
        return self.explained() if self.explained is not None else ("", "", [])

    @property
    def parsed(self) -> str:
        """The predicate as parsed (explain's `parsed` line)."""
        return self._explanation[0]

    @property
    def predicate(self) -> str:
        """The predicate as rewritten and bound (explain's `rewritten` line)."""
        return self._explanation[1]

    @property
    def leaves(self) -> list[tuple[str, str]]:
        """(bound leaf, what the stages read for it), per leaf."""
        return self._explanation[2]

    def explain(self) -> str:
        """What `skipindex explain` prints (explain.py)."""
        return explain.report(self)

    @property
    def source(self) -> Source | None:
        """The source as loaded for this answer (Iceberg: its table metadata at `source_version`)."""
        return self.state.source if self.state is not None else None

    @cached_property
    def kept_files(self) -> list[KeptFile]:
        """Per kept file (sorted by path), what a reader needs: the data file, its delete files, all-match. Made
        on first use from what the lookup read (the kept files' refs only) and the source's delete manifests
        (none read when the snapshot summary says there are no delete files)."""
        if self.state is None:
            return []
        refs = pick(self.state.live, list(self.kept_positions))
        deletes = self.state.source.deletes_for(refs)
        all_match = set(self.all_match)
        kept = [
            KeptFile(ref, ref.path in all_match, d, self.needed_parts(ref.path))
            for ref, d in zip(refs, deletes, strict=True)
        ]
        return sorted(kept, key=lambda k: k.file.path)

    def needed_parts(self, path: str) -> dict[str, tuple[int, ...]]:
        """Per container kind, the parts of kept file `path` a reader must read (a kind not named: all of them)."""
        needed = {key: kept.needed(path) for key, kept in self.parts.items()}
        return {key: parts for key, parts in needed.items() if parts is not None}

    def needed_row_groups(self, path: str) -> tuple[int, ...] | None:
        """The row groups of kept file `path` a reader must read; None: all of them."""
        return self.kept_parts("row_groups").needed(path)

    @property
    def summary(self) -> dict[str, Any]:
        return explain.summary(self)

    @cached_property
    def min_max_only(self) -> list[str]:
        """For explain: per column the predicate asks `=`, IN or a pattern of that no kept indexed file holds a
        structure for, what buys one (explain.py)."""
        return explain.min_max_notes(self, self.state.rows if self.state is not None else None)

    def as_json(self) -> dict[str, Any]:
        """The `explain --json` object (its shape is documented in docs/reference/cli.md)."""
        return explain.as_json(self)


@dataclass
class TableState:
    """What lookups read of one source snapshot and one index snapshot: the live files, and the index's rows
    (read as asked, store/snapshot.py). Lookups only read it, so threads can share one."""

    source: Source
    live: list[DataFileRef] | LiveFiles
    rows: IndexRows | None
    source_version: int | None = None
    index_version: int | None = None
    source_key: object = None  # Source.state_key: a handle keys its cache by it and the index snapshot

    @cached_property
    def live_paths(self) -> list[str]:
        return paths_of(self.live)

    @cached_property
    def aligned(self) -> AlignedEntries:
        return AlignedEntries.of(self.live_paths, self.rows)

    @cached_property
    def format_evidence(self) -> list[Evidence]:
        """The "format statistics" stage, when some live file has no index entry: the min/max rules over what the
        format itself records of those files (`Source.format_statistics`), so a file committed after the last build
        is kept only where the format's own statistics cannot rule it out, as the format's planning would keep it
        (and also where that planning would drop it wrongly: NaN, -0.0, cut strings; pruning/minmax.py)."""
        unindexed = np.flatnonzero(~self.aligned.indexed)
        if not len(unindexed):
            return []
        recorded = self.source.format_statistics(pick(self.live, unindexed.tolist()))
        covers = ~self.aligned.indexed
        placed = Placed(recorded, unindexed, len(self.live_paths))
        return [MinMaxEvidence(placed, covers, FORMAT_STAGE, whose="of unindexed files: the format's")]


def live_files(source: Source, rows: IndexRows | None) -> list[DataFileRef] | LiveFiles:
    """The source's live files. The one place a lookup takes them from the index: when its file rows claim a live
    version L (they are exactly the files live at L) and the source's current version is L or was reached from L
    by appends alone (Iceberg), they are the file rows plus the files of those appends. Otherwise (a delete, an
    overwrite, a rollback, L expired or no claim) the source's own plan. docs/index-table.md has the argument."""
    if rows is not None and rows.live_version is not None:
        live = source.live_after(rows.live_version, rows.files())
        if live is not None:
            return live
    return source.live_files()


def read_state(config: Config, table: str) -> TableState:
    """The source's live files and its index, read now (a one-off lookup; a handle keeps one per snapshot)."""
    catalog = config.load_catalog(create=False)  # a lookup never creates a catalog
    source = open_source(config, table, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name).load()
    rows = IndexSnapshot.of(index) if index is not None else None
    return TableState(source, live_files(source, rows), rows, source.current_version())


def lookup(
    config: Config, table: str, where: str | Expr | BooleanExpression, clock: Clock | None = None
) -> LookupResult:
    """Files of `table` that might hold a row matching `where`, and the summary `skipindex explain` prints.

    `clock` fixes what CURRENT_DATE / CURRENT_TIMESTAMP / NOW() mean (default: now, in `[lookup] time_zone`).
    One-off: it reads the live files and what the predicate needs of the index. Planner code that asks many
    questions keeps an `IndexHandle` (handle.py), which caches both by snapshot.
    """
    state = read_state(config, table)
    return lookup_in(state, table, where, clock or Clock.system(config.time_zone), config.dialect)


def lookup_in(
    state: TableState,
    table: str,
    where: str | Expr | BooleanExpression,
    clock: Clock,
    dialect: str | None = None,
    case_sensitive: bool = True,
) -> LookupResult:
    """The lookup over one table state (see `lookup`). `where`: SQL text, a predicate tree of `query.model`
    nodes (`predicate_from_tree`), or a pyiceberg row filter (bound to the schema as pyiceberg would bind it,
    `case_sensitive` or not)."""
    if isinstance(where, BooleanExpression):
        # pruned by a predicate TRUE for at least the rows pyiceberg's filter keeps (query/from_iceberg.py): it
        # proves no file all-match for pyiceberg's filter
        pruned = lookup_in(state, table, from_iceberg(where, state.source.schema, case_sensitive), clock, dialect)
        return replace(pruned, all_match=[])
    parsed = predicate_from_tree(where) if isinstance(where, Expr) else parse_where(where, clock, dialect)
    where = where if isinstance(where, str) else str(parsed)
    predicate = bind(normalize(parsed), state.source.schema, table)
    live_paths = state.live_paths
    kinds = list(registry().values())
    partitions = PartitionEvidence(state.source, state.live)
    evidence = [partitions, *state.format_evidence, *index_evidence(state.aligned, kinds)]
    learnt: dict[int, Verdict] = {}
    keys_before = replace(state.rows.key_reads) if state.rows is not None and state.rows.key_reads else None
    results = evaluate(predicate, evidence, len(live_paths), learnt)
    key_reads = _read_since(keys_before, state.rows.key_reads if state.rows is not None else None)
    stages, files_in = [], len(live_paths)
    for result in results:
        stages.append(Stage(result.name, files_in, int(result.verdict.might.sum())))
        files_in = stages[-1].files_out
    kept = results[-1].verdict.might
    all_match = kept & results[-1].verdict.all_match  # stages only narrow: the last knows what every one proved
    parts: dict[str, KeptParts] = {}
    for part_kind in part_kinds().values():  # each kind's parts of the files the stages before it kept
        verdicts = prune_parts(
            part_kind, predicate, state.aligned, state.rows, live_paths, learnt, kept & ~all_match, kinds
        )
        if verdicts is not None:
            kept, all_match = verdicts.narrowed(kept, all_match)
            stages += verdicts.stages(files_in)
            files_in = stages[-1].files_out
            parts[part_kind.key] = verdicts.answer(live_paths)
    indexed = state.aligned.indexed
    return LookupResult(
        table=table,
        where=where,
        files=sorted(live_paths[i] for i in np.flatnonzero(kept)),
        files_total=len(live_paths),
        files_unindexed=int((kept & ~indexed).sum()),
        all_match=sorted(live_paths[i] for i in np.flatnonzero(all_match)),
        stages=stages,
        unused=[f"{part.sql}: {part.reason}" for part in unusable_parts(predicate)],
        explained=lambda: (
            str(parsed),
            str(predicate),
            [(str(leaf), describe(leaf, evidence)) for leaf in leaves(predicate)],
        ),
        partition_fields=partitions.lifted(predicate),
        has_index=state.rows is not None,
        source_version=state.source_version,
        bound=predicate,
        state=state,
        kept_positions=tuple(int(i) for i in np.flatnonzero(kept)),
        parts=parts,
        key_reads=key_reads,
    )


def _read_since(before: KeyReads | None, now: KeyReads | None) -> KeyReads | None:
    """What one lookup read of the key index: the snapshot's counts now, less those before it (None: nothing)."""
    if before is None or now is None or now == before:
        return None
    return KeyReads(*(getattr(now, f) - getattr(before, f) for f in ("data_files", "row_groups", "rows", "bytes")))
