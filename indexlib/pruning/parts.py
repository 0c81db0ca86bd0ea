"""The parts of kept files judged by their own entries, one container kind at a time (store/containers.py: the row
groups of files with row-group entries, any registered kind): each part takes its file's evidence (`PerPart`, the
leaf verdicts the file stages learnt) narrowed by its own bounds and payloads; a file none of whose parts might match
is dropped, the others list the parts a reader needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from indexlib.index_kinds.base import IndexKind
from indexlib.pruning.answers import KeptParts, Stage
from indexlib.pruning.containers import PerPart
from indexlib.pruning.evaluator import StageVerdict, evaluate, judged_leaves
from indexlib.pruning.index_evidence import AlignedEntries
from indexlib.pruning.kinds import KindEvidence
from indexlib.pruning.minmax import MinMaxEvidence
from indexlib.query.model import Expr
from indexlib.statistics.verdict import Verdict
from indexlib.store.containers import PartKind
from indexlib.store.snapshot import IndexRows


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


def prune_parts(
    part_kind: PartKind,
    predicate: Expr,
    aligned: AlignedEntries,
    rows: IndexRows | None,
    live_paths: list[str],
    learnt: dict[int, Verdict],
    kept: np.ndarray,
    kinds: list[IndexKind],
) -> PartVerdicts | None:
    """The stages of `part_kind` over the parts of the `kept` files (the file stages' survivors not proven all-match,
    whose parts all match too) that have its statistics for a column the predicate names (None when none has, or
    more than MAX_PART_FILES files would reach them): each part takes its file's leaf verdicts (`PerPart`),
    narrowed by its own bounds and payloads, read only for these files."""
    candidates = np.flatnonzero(kept & aligned.indexed)
    # judged_leaves unwraps widened leaves: each leaf here is one evidence answers, naming its column
    columns = (getattr(leaf, "column", None) for leaf in judged_leaves(predicate))
    field_ids = list(dict.fromkeys(column.field_id for column in columns if column is not None))
    if rows is None or not 0 < len(candidates) <= MAX_PART_FILES or not field_ids:
        return None
    paths = pa.array([live_paths[i] for i in candidates], pa.string())
    stats = part_kind.statistics(paths, rows, field_ids)
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
