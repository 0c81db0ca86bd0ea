"""Index kinds as evidence: the payloads of one kind (index_kinds/base.py), read from a `StatisticsProvider` for the
candidate containers only, judged by the kind.

A kind answers the leaves it knows; it is handed the leaf as a `ValueSet` (`=`, `!=`, IN, NOT IN: the binder gathers
NOT IN into one set so that it is judged as a whole), as the `Pattern` itself, or as the bound leaf for anything else
(ranges, IS NULL, calendar fields), and returns None for a leaf it does not take. A payload the kind cannot read
(damaged) makes it raise; that container's payload is then read as unknown (`isolate_damage`: every other container
gets the answer it gets without the damaged one) and the provider warns once.
"""

from __future__ import annotations

import numpy as np

from indexlib.index_kinds.base import IndexKind, KindLeaf
from indexlib.pruning.evaluator import Evidence
from indexlib.query.model import Expr
from indexlib.query.value_set import value_set
from indexlib.statistics.provider import StatisticsProvider, isolate_damage
from indexlib.statistics.verdict import Verdict


def kind_leaf(leaf: Expr) -> KindLeaf:
    """The shape a kind sees a bound leaf in: a value set where it is one, else the leaf itself."""
    return value_set(leaf) or leaf


class KindEvidence(Evidence):
    """`settled`: per leaf (id), containers an earlier evidence judged so that this kind's payload cannot narrow
    them (the global key index, for a kind that is an `equality_filter`); they are not read."""

    def __init__(
        self,
        kind: IndexKind,
        stats: StatisticsProvider,
        covers: np.ndarray | None = None,
        settled: dict[int, np.ndarray] | None = None,
    ) -> None:
        self.kind, self.stats, self.covers, self.name = kind, stats, covers, kind.name
        self.quiet_when_idle = kind.opt_in or kind.late
        self.settled = settled if kind.equality_filter and settled is not None else {}

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        """The kind judges the candidates alone (its cost follows the files still in play, not the table); the
        others are answered unknown, which the evaluator reads them as anyway."""
        target = kind_leaf(leaf)
        column = getattr(target, "column", None)
        if column is None or not self.kind.answers(target):
            return None
        if id(leaf) in self.settled:
            candidates = candidates & ~self.settled[id(leaf)]
        files = np.flatnonzero(candidates)
        payloads = self.stats.payloads(column, self.kind.name, self.kind.version, files)
        statistics = self.stats.column(column).take(files)
        try:
            found = self.kind.verdict(target, payloads, statistics)
        except Exception as error:  # a damaged payload: isolate it

            def judge(start: int, stop: int) -> Verdict:
                answer = self.kind.verdict(target, payloads[start:stop], statistics.window(start, stop))
                return answer if answer is not None else Verdict.unknown(stop - start)

            parts, bad, error = isolate_damage(len(files), judge, Verdict.unknown, error)
            self.stats.damaged(column, self.kind.name, files[bad], error)
            found = Verdict(
                np.concatenate([part.might for part in parts]), np.concatenate([part.all_match for part in parts])
            )
        if found is None:
            return None
        verdict = Verdict.unknown(self.stats.num_files)
        verdict.might[files], verdict.all_match[files] = found.might, found.all_match
        return verdict

    def describe(self, leaf: Expr) -> str | None:
        target = kind_leaf(leaf)
        return self.kind.reads(target) if self.kind.answers(target) else None
