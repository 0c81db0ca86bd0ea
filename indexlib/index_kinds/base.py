"""The interface of an index kind: one module per kind implements it, `registry.py` lists the kinds.

A kind builds one payload from one file's distinct column values (`Keys`, see statistics/canonical.py), stores it with
its format version in the entry's `indexes` list, and answers, for the files still in play at once (the ones the
cheaper stages kept; or row groups), two questions about a leaf
(as pruning.evaluate does for min/max): might some row match (False only when the payload proves none can), and do
all rows match (True only when proven). A file without a payload of the kind, with a payload of a newer version, or
written for a column type of another physical domain, answers "might match, not proven": unknown means keep.
A payload the kind cannot read (damaged) makes `verdict` raise ValueError rather than guess; the lookup then reads
that one file's payload as unknown and warns (pruning/kinds.py). A kind is one peer among the evidence of the
pruning framework (pruning/evaluator.py): it judges leaves, the evaluator combines them over the predicate tree.

Leaves a kind sees (`KindLeaf`): `ValueSet` (`=`, `!=`, IN, NOT IN on one column, gathered from the predicate tree so
that NOT IN can be answered as a whole), `Pattern` (LIKE, starts_with, RLIKE), and, for a kind whose `answers` says
so, any other bound leaf of query/model.py (a range `BoundCompare`, `IsNull`, `IsNaN`, `BoundField`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pyiceberg.types import IcebergType

from indexlib.index_kinds.settings import IndexSettings, Setting
from indexlib.query.model import Expr, Pattern
from indexlib.query.value_set import ValueSet
from indexlib.statistics.canonical import Keys
from indexlib.statistics.provider import ColumnStatistics
from indexlib.statistics.verdict import Verdict

KindLeaf = ValueSet | Pattern | Expr  # what `verdict` is asked about (see the module docstring)


@dataclass(frozen=True)
class BuiltIndex:
    payload: bytes
    exact: bool = False  # the payload describes exactly the file's values (no false positives)


class IndexKind(ABC):
    name: ClassVar[str]
    version: ClassVar[int]  # format version of the payload; readers ignore payloads newer than theirs
    settings: ClassVar[tuple[Setting, ...]] = ()  # the kind's own settings, set in `[index]` like any other
    lookup_rank: ClassVar[int]  # lookup order: cheap and precise first
    may_be_exact: ClassVar[bool] = False  # kinds whose payload can be exact build first (see `wanted`)
    # Never the automatic choice (a column gets it only where `kinds` names it): its lookup stage is reported only
    # where it judged a leaf, so tables without its payloads explain as before (pruning/evaluator.py)
    opt_in: ClassVar[bool] = False
    # Registered after tables were indexed without it: as for `opt_in`, its stage is reported only where it judged a
    # leaf; and it (with its settings) counts in a column's configuration version only where the column may get it
    # (`may_build`: `kinds` name it, or leave the choice to the kind), so tables that cannot get it keep
    # their entries when it is registered
    late: ClassVar[bool] = False
    # The kind answers only positive equalities (`=`, IN, LIKE without wildcards) by the values' canonical hashes and
    # proves nothing all-match: where the global key index judged a leaf (same hashes: its collisions are the
    # kind's too) the kind's payload can add nothing, so the lookup does not read it there (pruning/kinds.py)
    equality_filter: ClassVar[bool] = False

    @abstractmethod
    def can_index(self, iceberg_type: IcebergType) -> bool:
        """Whether a column of this type can get the kind at all (a `kinds` list naming it otherwise is an error)."""

    def chosen(
        self, settings: IndexSettings, iceberg_type: IcebergType, keys: Keys, rows: int, built: Iterable[BuiltIndex]
    ) -> bool:
        """Whether this file's column gets the kind: as `settings.kinds` says when set, else the kind's own choice.
        `rows`: the column's non-null, non-NaN values in the file (or row group), repeats counted, of which `keys`
        are the distinct ones; `built`: the payloads already built for the column in this file (kinds that may be
        exact build first)."""
        if settings.kinds is not None:
            return self.name in settings.kinds and self.can_index(iceberg_type) and len(keys) > 0
        return self.wanted(settings, iceberg_type, keys, rows, built)

    @abstractmethod
    def wanted(
        self, settings: IndexSettings, iceberg_type: IcebergType, keys: Keys, rows: int, built: Iterable[BuiltIndex]
    ) -> bool:
        """The automatic choice: whether the payload can prune more than what is stored anyway, for what it costs
        to build and store (the rule is written in the kind's module docstring; docs/index-kinds.md, "The automatic
        choice"). `settings.kinds` is None here; `build` sees the same settings, so it can tell the two apart."""

    def sized_for(self, settings: IndexSettings, table_files: int) -> IndexSettings:
        """The settings to build one file's payload with in a table of `table_files` live files: a kind whose
        precision over the whole table depends on the file count sizes itself here (the Bloom filter). The
        configuration version is taken from the declared settings, not these, so a growing table rebuilds nothing."""
        return settings

    def may_build(self, settings: IndexSettings) -> bool:
        """Whether a column with `settings` may get this kind's payloads, for the configuration version: always for a
        kind neither opt-in nor late (the version has always counted every such kind); else where `kinds` or
        `row_group_kinds` name it, or, for a late kind the automatic choice may pick, where `kinds` is left to it."""
        if not (self.opt_in or self.late):
            return True
        if self.name in {*(settings.kinds or ()), *(settings.row_group_kinds or ())}:
            return True
        return not self.opt_in and settings.kinds is None

    def outgrown(self, payload: bytes, distinct: int, settings: IndexSettings, table_files: int, slack: float) -> bool:
        """Whether `payload` (of `distinct` values, built from the declared `settings` sized for some table) is
        more than `slack` times less precise than `sized_for(settings, table_files)` promises, and a payload built
        now would be more precise: the table has outgrown it (compaction rebuilds it, indexing/resizing.py). Only a
        kind that sizes itself by the table can be outgrown."""
        return False

    def sized_tables(self, payload: bytes, distinct: int, settings: IndexSettings) -> tuple[int, int] | None:
        """The range (least, greatest) of table sizes in live files for which `sized_for(settings, table)` builds a
        payload of `distinct` values exactly as large as `payload`, so the payload can be recomputed as it was built
        (`skipindex verify`); None when the kind does not size itself by the table or no table size gives it."""
        return None

    @abstractmethod
    def build(self, keys: Keys, iceberg_type: IcebergType, settings: IndexSettings) -> BuiltIndex | None:
        """The payload for one file's column (`keys`: its distinct values, see statistics/canonical.py `Keys`), or None
        when it could not prune anything (e.g. an automaton generalised to every string)."""

    def answers(self, leaf: KindLeaf) -> bool:
        """Whether `verdict` and `reads` may be asked about `leaf`: value sets and patterns, unless the kind says
        more (a kind that answers ranges or IS NULL overrides this)."""
        return isinstance(leaf, (ValueSet, Pattern))

    @abstractmethod
    def verdict(self, leaf: KindLeaf, payloads: Sequence[bytes | None], stats: ColumnStatistics) -> Verdict | None:
        """Per-file verdict from `payloads` (None where a file has none), or None when the kind cannot use `leaf`.
        Raises when a payload is not one this kind wrote."""

    def values_held(
        self, column_type: IcebergType, values: Sequence[object], payloads: Sequence[bytes | None]
    ) -> np.ndarray | None:
        """Per (file, value), whether the file might hold the value (a value of the column's physical domain, as a
        bound literal is): (files, values) booleans, False only where the file's payload proves no row holds it; a
        file without a payload holds every value. None when the kind cannot say (the default). Used to trim a
        file's IN list to the values it may hold (pruning/residuals.py); raises as `verdict` does on a payload the
        kind did not write."""
        return None

    @abstractmethod
    def reads(self, leaf: KindLeaf) -> str | None:
        """For explain: what the kind checks for `leaf`, or None when it does not answer it."""
