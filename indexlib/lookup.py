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
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import BooleanExpression

from indexlib.config import Config
from indexlib.index_kinds.base import IndexKind
from indexlib.index_kinds.registry import registry
from indexlib.pruning.containers import PerPart
from indexlib.pruning.evaluator import Evidence, StageVerdict, describe, evaluate, judged_leaves
from indexlib.pruning.key_index import KeyIndexEvidence
from indexlib.pruning.kinds import KindEvidence
from indexlib.pruning.minmax import MinMaxEvidence
from indexlib.pruning.partitions import PartitionEvidence
from indexlib.query.binding import bind
from indexlib.query.from_iceberg import from_iceberg
from indexlib.query.model import Expr
from indexlib.query.normalize import leaves, normalize, unusable_parts
from indexlib.query.sql import Clock, parse_where, predicate_from_tree
from indexlib.sources.base import DataFileRef, KeptFile, LiveFiles, Source, paths_of, pick
from indexlib.sources.registry import open_source
from indexlib.statistics.provider import Placed
from indexlib.statistics.verdict import Verdict
from indexlib.store.containers import PartKind, part_kinds
from indexlib.store.entries import EntryStatistics
from indexlib.store.key_rows import KeyReads
from indexlib.store.snapshot import IndexRows, IndexSnapshot
from indexlib.store.table import IndexTable, build_hint

FORMAT_STAGE = "format statistics"  # the stage judging unindexed files by the format's own statistics


@dataclass(frozen=True)
class Stage:
    """One stage's files in and out; a stage of a container kind (`container`: its key, e.g. "row_groups") also
    counts its parts (of the files it judged) in and out."""

    name: str
    files_in: int
    files_out: int
    parts_in: int | None = None
    parts_out: int | None = None
    container: str | None = None

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"name": self.name, "files_in": self.files_in, "files_out": self.files_out}
        if self.container is not None:
            shown |= {f"{self.container}_in": self.parts_in, f"{self.container}_out": self.parts_out}
        return shown

    @property
    def row_groups_in(self) -> int | None:  # the name before container kinds, kept for one release
        return self.parts_in if self.container == "row_groups" else None

    @property
    def row_groups_out(self) -> int | None:
        return self.parts_out if self.container == "row_groups" else None


@dataclass(frozen=True)
class KeptParts:
    """One container kind's answer (store/containers.py) over the kept files that have its parts and reached its
    stages: per such file, the parts that might match (in the file's order; a dropped file is not here) and, where
    any, those proven to match on every row; `counts`: how many parts each judged file has; `total`: parts judged."""

    name: str
    kept: dict[str, tuple[int, ...]]
    all_match: dict[str, tuple[int, ...]]
    total: int
    counts: dict[str, int] = field(compare=False, repr=False)

    def needed(self, path: str) -> tuple[int, ...] | None:
        """The parts of kept file `path` a reader must read; None: all of them (not judged, or every part kept)."""
        parts = self.kept.get(path)
        return None if parts is None or len(parts) == self.counts[path] else parts


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

    def _parts(self, key: str) -> KeptParts:
        return self.parts.get(key) or KeptParts(key, {}, {}, 0, {})

    # the row groups' answer under its names before container kinds, kept for one release
    @property
    def row_groups(self) -> dict[str, tuple[int, ...]]:
        return self._parts("row_groups").kept

    @property
    def all_match_row_groups(self) -> dict[str, tuple[int, ...]]:
        return self._parts("row_groups").all_match

    @property
    def row_groups_total(self) -> int:
        return self._parts("row_groups").total

    @property
    def row_group_counts(self) -> dict[str, int]:
        return self._parts("row_groups").counts

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
        """What `skipindex explain` prints: the predicate as parsed and rewritten, what each leaf reads, each stage's
        files (and parts: row groups, ...) in and out, and the kept files."""
        out: list[str] = []
        summary = self.summary
        out.append(f"table      {self.table}")
        if not self.has_index:
            hint = build_hint(self.table)
            out.append(f"index      none: {self.table} was never indexed, so the index stages keep every file; {hint}")
        out.append(f"where      {self.where}")
        out.append(f"parsed     {self.parsed}")
        out.append(f"rewritten  {self.predicate}")
        for note in self.unused or ["(every part of the predicate was used)"]:
            out.append(f"unused     {note}")
        out.append("")
        out.append("leaves (what the min/max and index stages read)")
        for leaf, statistics in self.leaves:
            out.append(f"  {leaf}\n      uses {statistics}")
        for note in self.min_max_only:
            out.append(f"  note: {note}")
        out.append("partition fields (partition stage)")
        for line in self.partition_fields or ["(none: no partition field can prune this predicate)"]:
            out.append(f"  {line}")
        out.append("")
        judged = [kept for kept in self.parts.values() if kept.total]
        unit = judged[0].name if len(judged) == 1 else "parts"  # one kind: its name heads its columns
        width = max(12, *(len(stage.name) + 2 for stage in self.stages))
        header = f"{'stage':<{width}}{'files in':>10}{'files out':>11}"
        out.append(header + (f"{unit + ' in':>{len(unit) + 5}}{unit + ' out':>{len(unit) + 6}}" if judged else ""))
        for stage in self.stages:
            line = f"{stage.name:<{width}}{stage.files_in:>10}{stage.files_out:>11}"
            if stage.parts_in is not None:
                line += f"{stage.parts_in:>{len(unit) + 5}}{stage.parts_out:>{len(unit) + 6}}"
            out.append(line)
        out.append("")
        if self.key_reads is not None:
            read = self.key_reads
            out.append(
                f"key index  read {read.row_groups} row groups ({read.rows} key rows, {read.bytes / 1024:.1f} KiB) "
                f"of {read.data_files} index data files"
            )
        out.append(
            f"files kept {summary['files_kept']} of {summary['files_total']} "
            f"({summary['files_unindexed']} unindexed, {summary['files_all_match']} proven to match on every row)"
        )
        for kept in judged:
            out.append(
                f"{kept.name} kept {sum(map(len, kept.kept.values()))} of {kept.total} in the files judged by them "
                f"({sum(map(len, kept.all_match.values()))} proven to match on every row)"
            )
        for path in self.files:
            listed = [(kept.name, kept.kept[path]) for kept in judged if path in kept.kept]
            out.append(f"  {path}" + "".join(f"  {name} {', '.join(map(str, parts))}" for name, parts in listed))
        return "\n".join(out)

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
        return self._parts("row_groups").needed(path)

    @property
    def summary(self) -> dict[str, Any]:
        return {
            "has_index": self.has_index,
            "files_total": self.files_total,
            "files_kept": len(self.files),
            "files_unindexed": self.files_unindexed,
            "files_all_match": len(self.all_match),
            **{
                name: count
                for key, kept in self.parts.items()
                if kept.total
                for name, count in (
                    (f"{key}_total", kept.total),
                    (f"{key}_kept", sum(map(len, kept.kept.values()))),
                    (f"{key}_all_match", sum(map(len, kept.all_match.values()))),
                )
            },
            "stages": [stage.as_dict() for stage in self.stages],
            **({"key_index_read": asdict(self.key_reads)} if self.key_reads is not None else {}),
        }

    @cached_property
    def min_max_only(self) -> list[str]:
        """For explain: per column an `=`, `IN` or pattern leaf of the predicate names, where no kept indexed file
        holds any structure that answers it (no payload of any kind, not keyed), one line saying so and what buys it
        (docs/index-kinds.md, "What each rule gives up"). Reads only what the lookup read: the bounds of the named
        columns and the payloads of the kept files (the payload stages read them for files that reached them)."""
        rows = self.state.rows if self.state is not None else None
        if rows is None or self.bound is None or not self.files:
            return []
        from indexlib.query.model import BoundCompare, BoundIn, Pattern

        named: dict[int, tuple[Any, set[str]]] = {}  # field id -> (column, "=" and / or "LIKE")
        for leaf in leaves(self.bound):
            asks = isinstance(leaf, (BoundIn, Pattern)) or (isinstance(leaf, BoundCompare) and leaf.op in ("=", "!="))
            # (a Pattern of a computed value names no column)
            if asks and isinstance(leaf, (BoundIn, Pattern, BoundCompare)) and hasattr(leaf.column, "field_id"):
                what = "LIKE" if isinstance(leaf, Pattern) else "="
                named.setdefault(leaf.column.field_id, (leaf.column, set()))[1].add(what)
        notes = []
        kept = pa.array(self.files, pa.string())
        for field_id, (column, asked) in named.items():
            bounds = rows.columns([field_id])
            bounds = bounds.filter(pc.is_in(bounds.column("file_path"), value_set=kept))
            if not bounds.num_rows:
                continue  # no kept file is indexed: "unindexed" says it
            keyed = "keyed" in bounds.column_names and pc.any(pc.fill_null(bounds.column("keyed"), False)).as_py()
            payloads = rows.payloads(field_id, kept).column("indexes")
            if keyed or pc.sum(pc.fill_null(pc.list_value_length(payloads), 0)).as_py():
                continue
            what = _GIVEN_UP.get(type(column.type).__name__, "no keys indexed")
            section = f'[index.tables."{self.table}".columns.{column.name}]'  # in the configuration file
            advice = []
            if "=" in asked:
                advice.append(f'set kinds = ["bloom"] in {section} of the configuration to answer `=`')
            if "LIKE" in asked:
                advice.append(f'an automaton answers LIKE on tags (kinds = ["automaton"] in {section}), not free text')
            n = bounds.num_rows
            notes.append(
                f"{column.name}: min/max only: {what} (the {n} kept indexed file{'s' * (n != 1)}); {'; '.join(advice)}"
            )
        return notes

    def as_json(self) -> dict[str, Any]:
        """The `explain --json` object (its shape is documented in docs/reference/cli.md)."""
        shown = {"table": self.table, "where": self.where, "files": self.files, "summary": self.summary}
        if self.row_groups:
            shown["row_groups"] = {path: list(groups) for path, groups in self.row_groups.items()}
        return shown


_GIVEN_UP = {  # why the automatic choice leaves a column of this type at min/max (docs/index-kinds.md)
    "StringType": "free text, or one value per file",
    "IntegerType": "values fill over half their span, or one value per file",
    "LongType": "values fill over half their span, or one value per file",
    "DateType": "values fill over half their span, or one value per file",
    "FloatType": "a measure",
    "DoubleType": "a measure",
    "DecimalType": "a measure, or values fill over half their span",
    "BooleanType": "min/max answers it",
}


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


@dataclass(frozen=True)
class AlignedEntries:
    """The index's statistics of a list of live files, in that order, and which of them are indexed. A handle
    keeps one per (source snapshot, index snapshot) pair, so what its lookups read and decode serves every later
    one."""

    indexed: np.ndarray
    stats: EntryStatistics | None

    @staticmethod
    def of(live_paths: list[str], rows: IndexRows | None) -> AlignedEntries:
        if rows is None or not live_paths:
            return AlignedEntries(np.zeros(len(live_paths), dtype=bool), None)
        paths = pa.array(live_paths, pa.string())
        files = rows.files()
        indexed_paths = files.filter(pc.fill_null(files.column("indexed"), True)).column("file_path")
        indexed = pc.is_in(paths, value_set=indexed_paths).to_numpy(zero_copy_only=False)
        return AlignedEntries(indexed, EntryStatistics(paths, rows) if indexed.any() else None)


def prune(
    predicate: Expr, live_paths: list[str], entries: pa.Table, kinds: list[IndexKind] | None = None
) -> IndexVerdicts:
    """Index-stage verdicts over `live_paths`, given index entries (any superset of the live ones): "minmax", then
    one stage per kind in `kinds` (default: every kind), each using min/max and every kind before it."""
    return prune_aligned(predicate, AlignedEntries.of(live_paths, IndexRows.of_entries(entries)), kinds)


def index_evidence(aligned: AlignedEntries, kinds: list[IndexKind] | None = None) -> list[Evidence]:
    """The index's evidence over the aligned files, cheap first: min/max and counts, the global key index, then each
    kind in lookup order (default: every kind). A file without an index entry is outside what they cover: unknown,
    so kept."""
    kinds = list(registry().values()) if kinds is None else kinds
    if aligned.stats is None:
        return [_Unindexed(name) for name in ("minmax", KeyIndexEvidence.name, *(kind.name for kind in kinds))]
    covers = aligned.indexed
    keys = KeyIndexEvidence(aligned.stats, covers)
    return [
        MinMaxEvidence(aligned.stats, covers),
        keys,
        *(KindEvidence(kind, aligned.stats, covers, keys.judged) for kind in kinds),
    ]


class _Unindexed(Evidence):
    """An index stage of a table with no index entries among its live files: it knows nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        return None


def prune_aligned(predicate: Expr, aligned: AlignedEntries, kinds: list[IndexKind] | None = None) -> IndexVerdicts:
    """`prune` over entries already aligned with the live files."""
    stages = evaluate(predicate, index_evidence(aligned, kinds), len(aligned.indexed))
    return IndexVerdicts(aligned.indexed, [(s.name, s.verdict.might, s.verdict.all_match) for s in stages])


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
        verdicts = prune_parts(part_kind, predicate, state, learnt, kept & ~all_match, kinds)
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


@dataclass(frozen=True)
class PartVerdicts:
    """The stages of one container kind in one lookup: container i is part `ordinal[i]` of live file `live_of[i]`;
    `results` are the evaluator's stages over them (first what the files' stages learnt, then the parts' own)."""

    kind: PartKind
    live_of: np.ndarray
    ordinal: np.ndarray
    results: list[StageVerdict]

    @property
    def might(self) -> np.ndarray:
        return self.results[-1].verdict.might

    @property
    def all_match(self) -> np.ndarray:
        return self.results[-1].verdict.all_match & self.might

    def narrowed(self, kept: np.ndarray, all_match: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Files kept and all-match after the parts: a file with parts, none of which might match, is dropped; one
        whose every part matches on every row is all-match."""
        judged = np.zeros(len(kept), dtype=bool)
        judged[self.live_of] = True
        any_kept = np.zeros(len(kept), dtype=bool)
        any_kept[self.live_of[self.might]] = True
        not_all = np.zeros(len(kept), dtype=bool)
        not_all[self.live_of[~self.all_match]] = True
        kept = kept & (~judged | any_kept)
        return kept, kept & (all_match | (judged & ~not_all))

    def stages(self, files_in: int) -> list[Stage]:
        """The parts' own stages, counting files (with or without parts) and parts in and out."""
        unjudged = files_in - len(np.unique(self.live_of))
        shown, parts_in = [], int(self.results[0].verdict.might.sum())
        for result in self.results[1:]:
            parts_out = int(result.verdict.might.sum())
            files_out = unjudged + len(np.unique(self.live_of[result.verdict.might]))
            name = f"{self.kind.name}: {result.name}"
            shown.append(Stage(name, files_in, files_out, parts_in, parts_out, self.kind.key))
            files_in, parts_in = files_out, parts_out
        return shown

    def answer(self, live_paths: list[str]) -> KeptParts:
        files, counts = np.unique(self.live_of, return_counts=True)
        proven = {path: parts for path, parts in self._by_file(live_paths, self.all_match).items() if parts}
        return KeptParts(
            self.kind.name,
            kept=self._by_file(live_paths, self.might),
            all_match=proven,
            total=len(self.live_of),
            counts={live_paths[f]: int(c) for f, c in zip(files, counts, strict=True)},
        )

    def _by_file(self, live_paths: list[str], mask: np.ndarray) -> dict[str, tuple[int, ...]]:
        """Per file with a part kept, its parts in `mask` (containers are ordered by file, then part)."""
        found: dict[str, tuple[int, ...]] = {live_paths[i]: () for i in np.unique(self.live_of[self.might]).tolist()}
        files, starts = np.unique(self.live_of[mask], return_index=True)
        ordinals, bounds = self.ordinal[mask].tolist(), [*starts.tolist(), int(mask.sum())]
        for k, file in enumerate(files.tolist()):
            found[live_paths[file]] = tuple(ordinals[bounds[k] : bounds[k + 1]])
        return found


# Files that may reach one container kind's stages in one lookup. The stages cost ~1-2 us per part judged (their
# lists read and decoded, each stage's verdict); a predicate that keeps more files than this reads so much that
# narrowing inside its files saves little of its time, so every part of them is kept (as the Bloom stage leaves a
# leaf with too many probes to the others).
MAX_PART_FILES = 5_000
MAX_ROW_GROUP_FILES = MAX_PART_FILES  # its name before container kinds


def prune_parts(
    part_kind: PartKind,
    predicate: Expr,
    state: TableState,
    learnt: dict[int, Verdict],
    kept: np.ndarray,
    kinds: list[IndexKind],
) -> PartVerdicts | None:
    """The stages of `part_kind` over the parts of the `kept` files (the file stages' survivors not proven all-match,
    whose parts all match too) that have its statistics for a column the predicate names (None when none has, or
    more than MAX_PART_FILES files would reach them): each part takes its file's leaf verdicts (`PerPart`),
    narrowed by its own bounds and payloads, read only for these files."""
    candidates = np.flatnonzero(kept & state.aligned.indexed)
    # judged_leaves unwraps widened leaves: each leaf here is one evidence answers, naming its column
    columns = (getattr(leaf, "column", None) for leaf in judged_leaves(predicate))
    field_ids = list(dict.fromkeys(column.field_id for column in columns if column is not None))
    if state.rows is None or not 0 < len(candidates) <= MAX_PART_FILES or not field_ids:
        return None
    live_paths = state.live_paths
    paths = pa.array([live_paths[i] for i in candidates], pa.string())
    stats = part_kind.statistics(paths, state.rows, field_ids)
    if stats is None or not len(stats.file_of):
        return None
    live_of = candidates[stats.file_of]
    part_evidence = [
        PerPart(learnt, live_of, "files"),
        MinMaxEvidence(stats),
        *(KindEvidence(kind, stats) for kind in kinds),
    ]
    results = evaluate(predicate, part_evidence, len(live_of))
    return PartVerdicts(part_kind, live_of, stats.ordinal, results)
