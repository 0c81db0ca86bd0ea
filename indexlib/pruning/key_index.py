"""The global key index as evidence: `=`, IN (any length) and LIKE without wildcards on a keyed column, answered
by the files whose key rows hold a literal's hash (store/key_rows.py).

Safety: a file whose column is keyed has a key row for the hash of every distinct non-null, non-NaN value it holds
(statistics/key_hash.py), so a file holding a literal's value is among the files found for the literal's hash; a
hash shared by other values (a collision) only finds more files. Files whose column is not keyed (indexed before
the key index, or not chosen, or never indexed) are unknown: kept. A literal without a key (NaN) makes the leaf
unknown. It never proves a file all-match.
"""

from __future__ import annotations

import numpy as np

from indexlib.pruning.evaluator import Evidence
from indexlib.pruning.kinds import kind_leaf
from indexlib.query.model import Expr
from indexlib.query.value_set import equality_literals
from indexlib.statistics.canonical import literal_hashes
from indexlib.statistics.key_hash import key_hashes
from indexlib.statistics.verdict import Verdict
from indexlib.store.entries import EntryStatistics

NAME = "key index"


class KeyIndexEvidence(Evidence):
    name = NAME

    def __init__(self, stats: EntryStatistics, covers: np.ndarray | None = None) -> None:
        self.stats, self.covers = stats, covers
        self.judged: dict[int, np.ndarray] = {}  # per leaf (id): the files this evidence judged from key rows

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        target = kind_leaf(leaf)
        literals = equality_literals(target)
        column = getattr(target, "column", None)
        if literals is None or column is None:
            return None
        keyed = self.stats.keyed(column) & candidates
        if not keyed.any():
            return None
        hashes = literal_hashes(column.type, literals)
        if hashes is None:  # NaN has no key
            return None
        held = self.stats.key_files(column, key_hashes(hashes))
        self.judged[id(leaf)] = keyed
        return Verdict(~keyed | held, np.zeros(len(keyed), dtype=bool))

    def describe(self, leaf: Expr) -> str | None:
        target = kind_leaf(leaf)
        if equality_literals(target) is None or getattr(target, "column", None) is None:
            return None
        return "global key index (where the column is keyed): files whose key rows hold a literal's hash"
