"""Containers inside containers: a data file's evidence, as evidence about each of its row groups.

Safe: a file's verdict on a leaf is about every row of the file. "No row of the file matches" holds for the rows of
each of its row groups, and so does "every row of the file matches". So each row group may take its file's answer,
and the evaluator narrows it by the row groups' own evidence (pruning/evaluator.py). Asking at the leaf, not
combining file and row-group verdicts of the whole predicate, keeps what each side proves of different leaves: with
`part = 'a' AND k = 5`, the partition proves the first leaf of the file and a row group's bounds (5..5, no NULLs)
the second, so that row group is all-match.
"""

from __future__ import annotations

import numpy as np

from indexlib.pruning.evaluator import Evidence
from indexlib.query.model import Expr
from indexlib.statistics.verdict import Verdict


class PerPart(Evidence):
    """`whole`'s evidence over N containers, answered for their parts: part i is in container `container_of[i]`."""

    def __init__(self, whole: Evidence, container_of: np.ndarray, containers: int) -> None:
        self.whole, self.container_of, self.containers = whole, container_of, containers
        self.name = whole.name
        self.covers = None if whole.covers is None else whole.covers[container_of]

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        asked = np.zeros(self.containers, dtype=bool)
        asked[self.container_of[candidates]] = True
        found = self.whole.answer(leaf, asked)
        if found is None:
            return None
        return Verdict(found.might[self.container_of], found.all_match[self.container_of])

    def describe(self, leaf: Expr) -> str | None:
        return self.whole.describe(leaf)
