"""The answer of every pruning rule, per file: might some row match, and is every row proven to match."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Verdict:
    """Over N files: `might[i]` is False only when file i provably holds no matching row; `all_match[i]` is True only
    when every row of file i provably matches. Unknown is (might, not all_match): keep the file, keep the filter."""

    might: np.ndarray
    all_match: np.ndarray

    @staticmethod
    def unknown(n: int) -> Verdict:
        """Nothing is known about n files: each might match, none is proven."""
        return Verdict(np.ones(n, dtype=bool), np.zeros(n, dtype=bool))

    @staticmethod
    def constant(n: int, value: bool) -> Verdict:
        """A predicate that is TRUE (or FALSE) for every row of n files."""
        return Verdict(np.full(n, value), np.full(n, value))

    def __and__(self, other: Verdict) -> Verdict:
        """Of `a AND b`: might where both might, proven where both are."""
        return Verdict(self.might & other.might, self.all_match & other.all_match)

    def __or__(self, other: Verdict) -> Verdict:
        """Of `a OR b`: might where either might, proven where either is."""
        return Verdict(self.might | other.might, self.all_match | other.all_match)

    def narrowed_by(self, other: Verdict) -> Verdict:
        """Two sound verdicts on the same predicate: a file is kept only if both keep it, proven if either proves it."""
        return Verdict(self.might & other.might, self.all_match | other.all_match)

    def never_proven(self) -> Verdict:
        """The same files kept, none proven (a widened leaf: its rows are a superset of the true ones)."""
        return Verdict(self.might, np.zeros(len(self.might), dtype=bool))
