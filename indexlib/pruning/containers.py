"""Containers inside containers: what the evaluator learnt of each leaf over data files, as evidence about each of
their row groups.

Safe: a file's verdict on a leaf is about every row of the file. "No row of the file matches" holds for the rows of
each of its row groups, and so does "every row of the file matches". So each row group may take its file's verdict,
and the evaluator narrows it by the row groups' own evidence (pruning/evaluator.py). Taking it per leaf, not
combining file and row-group verdicts of the whole predicate, keeps what each side proves of different leaves: with
`part = 'a' AND k = 5`, the partition proves the first leaf of the file and a row group's bounds (5..5, no NULLs)
the second, so that row group is all-match. And the file's evidence is not asked again: its verdicts are reused.
"""

from __future__ import annotations

import numpy as np

from indexlib.pruning.evaluator import Evidence
from indexlib.query.model import Expr
from indexlib.statistics.verdict import Verdict


class PerPart(Evidence):
    """The leaf verdicts `learnt` over containers (`evaluate(..., learnt=)`), answered for their parts: part i is in
    container `container_of[i]`. `reads`: what the containers' stages read, for explain."""

    def __init__(self, learnt: dict[int, Verdict], container_of: np.ndarray, name: str) -> None:
        self.learnt, self.container_of, self.name = learnt, container_of, name

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        found = self.learnt.get(id(leaf))
        if found is None:
            return None
        return Verdict(found.might[self.container_of], found.all_match[self.container_of])
