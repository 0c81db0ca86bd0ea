"""The index's evidence over a list of live files: its entries aligned with the files (`AlignedEntries`), the
evidence in lookup order (min/max and counts, the global key index, each index kind), and the index stages' verdicts
(`prune`). A file without an index entry is outside what this evidence covers: unknown, so kept by these stages (the
lookup judges it by the format's own statistics instead, lookup.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexlib.index_kinds.base import IndexKind
from indexlib.index_kinds.registry import registry
from indexlib.pruning.evaluator import Evidence, evaluate
from indexlib.pruning.key_index import KeyIndexEvidence
from indexlib.pruning.kinds import KindEvidence
from indexlib.pruning.minmax import MinMaxEvidence
from indexlib.query.model import Expr
from indexlib.statistics.verdict import Verdict
from indexlib.store.entries import EntryStatistics
from indexlib.store.snapshot import IndexRows


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
        shown = (kind.name for kind in kinds if not (kind.opt_in or kind.late))  # listed where they judged a leaf
        return [_Unindexed(name) for name in ("minmax", KeyIndexEvidence.name, *shown)]
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
