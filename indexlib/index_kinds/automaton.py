"""Husky-style trimmed automaton per (file, string column): an anchored regex whose language holds every distinct
value of the file, exactly when the minimal automaton fits the budget, a superset otherwise (indexlib/automaton).

Safety: the language L contains every non-null value of the file. So `col IN S` cannot match when no string of S is
in L; `col NOT IN S` cannot match when L is a subset of S; a pattern cannot match when L and the pattern's language
are disjoint (decided by automaton product, never by running user regexes; over the work caps: "might match"). All
rows match when the column has no NULLs and L is included in the predicate's language (L non-empty since the file
has values). NULL rows make every leaf NULL, so negated leaves prove "all" only without NULLs.

Payload, version 1: UTF-8 JSON `{"regex": "^(?:compactor|reader|writer)$", "exact": true, "states": 17}`; the
regex reads the same in Python `re` and Java `Pattern`, so other engines can use the index too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import IcebergType, StringType

from indexlib.automaton.limits import STORED_CACHE_SIZE, Unsupported
from indexlib.index_kinds.base import BuiltIndex, IndexKind, KindLeaf
from indexlib.index_kinds.settings import IndexSettings, Setting, positive_int
from indexlib.query.model import Pattern
from indexlib.query.value_set import ValueSet
from indexlib.statistics.canonical import Keys
from indexlib.statistics.provider import ColumnStatistics
from indexlib.statistics.verdict import Verdict

if TYPE_CHECKING:
    from indexlib.automaton import TagAutomaton

MAX_NDV = Setting(
    "automaton_max_ndv",
    256,
    positive_int,
    "automatic choice: string columns with at most this many distinct values per file get an automaton",
)
MAX_STATES = Setting(
    "automaton_max_states", 256, positive_int, "budget: states of the minimal automaton before trimming"
)
MAX_BYTES = Setting("automaton_max_bytes", 2048, positive_int, "budget: bytes of the emitted regex")

# The automatic choice (AutomatonIndex docstring; docs/index-kinds.md "The automatic choice"). Part of the
# configuration version through indexing/file_indexer.py AUTOMATIC_CHOICE_VERSION: change that when changing these.
TINY_SET = 16  # at most this many distinct values: an automaton even when they do not repeat
REPEATS = 2  # otherwise each distinct value must come back this many times on average (a tag, not an id)
TEXT_BUDGET = 8  # and the distinct values' UTF-8 must be at most this many times automaton_max_bytes


class AutomatonIndex(IndexKind):
    """The automatic choice (unless `kinds` says otherwise): an automaton for tags, not identifiers. A string
    column of a file gets one when

    * it has at most `automaton_max_ndv` (256) distinct values, and
    * they are tags: at most `TINY_SET` (16) distinct values, or values that repeat (at most half as many distinct
      values as non-null values: `service` in a log shard, not 150 random ids in a file of 150 rows), and
    * the build is bounded: the distinct values hold at most `TEXT_BUDGET` x `automaton_max_bytes` (16 KiB) of
      UTF-8, and the superset is found by the symbol-class ladder alone (`build_tag_regex(trim="classes")`: the
      exact automaton, else the first class rung that fits whole; at most 7 attempts, each abandoned at
      `automaton_max_states`: a few ms), not by the whole search with prefix truncations and ranking (20-70 ms per
      column of a file, 98 % of the per-file work on files of 150 ids). A trimmed automaton gets a Bloom filter
      beside it, as before.

    Configured (`kinds = ["automaton"]`), a column gets its automaton whatever its values, trimmed by the whole
    search when the exact one is over the budget."""

    name = "automaton"
    version = 1
    settings = (MAX_NDV, MAX_STATES, MAX_BYTES)
    lookup_rank = 20
    may_be_exact = True

    def can_index(self, iceberg_type: IcebergType) -> bool:
        return isinstance(iceberg_type, StringType)

    def wanted(
        self, settings: IndexSettings, iceberg_type: IcebergType, keys: Keys, rows: int, built: Iterable[BuiltIndex]
    ) -> bool:
        distinct = len(keys)
        if not isinstance(iceberg_type, StringType) or not 0 < distinct <= settings.value(MAX_NDV):
            return False
        if distinct > TINY_SET and distinct * REPEATS > rows:
            return False  # values that do not repeat: identifiers
        return pc.sum(pc.binary_length(keys.blobs)).as_py() <= TEXT_BUDGET * settings.value(MAX_BYTES)

    def build(self, keys: Keys, iceberg_type: IcebergType, settings: IndexSettings) -> BuiltIndex | None:
        from indexlib.automaton import build_tag_regex  # the automaton machinery: imported where used
        from indexlib.automaton.emit import ANY_STRING_REGEX

        tag = build_tag_regex(
            keys.texts(),
            max_states=settings.value(MAX_STATES),
            max_bytes=settings.value(MAX_BYTES),
            trim=True if settings.kinds is not None else "classes",  # the automatic choice: bounded (see above)
        )
        if tag.regex == ANY_STRING_REGEX:
            return None  # generalised to every string: it would only cost bytes
        payload = json.dumps({"regex": tag.regex, "exact": tag.exact, "states": tag.states}, ensure_ascii=False)
        return BuiltIndex(payload.encode(), exact=tag.exact)

    def verdict(  # type: ignore[override]  # asked only about leaves `answers` accepts
        self, leaf: ValueSet | Pattern, payloads: Sequence[bytes | None], stats: ColumnStatistics
    ) -> Verdict | None:
        if isinstance(leaf, ValueSet):
            values = leaf.values
            if not all(isinstance(value, str) for value in values):
                return None

            ordered = sorted(set(values))

            def some_in(automaton: TagAutomaton) -> bool:
                return automaton.accepts_any(ordered)

            def only_in(automaton: TagAutomaton) -> bool:
                return automaton.subset_of(ordered)

            if leaf.negated:  # NOT IN: might = L not within the set; all = no value of the set in L
                return self._judge(payloads, stats, might=lambda a: not only_in(a), proven=lambda a: not some_in(a))
            return self._judge(payloads, stats, might=some_in, proven=only_in)
        args = (leaf.kind, leaf.pattern, leaf.escape)
        if leaf.negated:
            return self._judge(
                payloads, stats, might=lambda a: not a.all_match(*args), proven=lambda a: not a.might_match(*args)
            )
        return self._judge(payloads, stats, might=lambda a: a.might_match(*args), proven=lambda a: a.all_match(*args))

    def _judge(
        self,
        payloads: Sequence[bytes | None],
        stats: ColumnStatistics,
        might: Callable[[TagAutomaton], bool],
        proven: Callable[[TagAutomaton], bool],
    ) -> Verdict:
        """Apply the two tests to each distinct automaton once (files of a table share few: one per tag set), and
        spread the answers over the files with Arrow's dictionary encoding of the payloads."""
        encoded = pa.array(payloads, pa.binary()).dictionary_encode()
        answers = [(might(automaton), proven(automaton)) for automaton in map(_load, encoded.dictionary.to_pylist())]
        which = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        has = which >= 0
        at = np.where(has, which, 0)
        might_each = np.array([a[0] for a in answers] or [True], dtype=bool)
        proven_each = np.array([a[1] for a in answers] or [False], dtype=bool)
        might_out = ~has | might_each[at]
        proven_out = has & proven_each[at]
        no_nulls = stats.known & (stats.null_count == 0) & (stats.comparable_values > 0)
        return Verdict(might_out, proven_out & no_nulls)

    def answers(self, leaf: KindLeaf) -> bool:
        """Value sets of strings and case-sensitive patterns: an automaton holds strings (no payload is read for other
        leaves; ILIKE would need the language of every case of the pattern, in each engine's case tables)."""
        if isinstance(leaf, ValueSet):
            return all(isinstance(value, str) for value in leaf.values)
        return isinstance(leaf, Pattern) and leaf.kind != "ilike"

    # (as `verdict`, asked only about leaves `answers` accepts)
    def reads(self, leaf: ValueSet | Pattern) -> str | None:  # type: ignore[override]
        if isinstance(leaf, ValueSet):
            if not all(isinstance(v, str) for v in leaf.values):
                return None
            return (
                "automata L (where built): is L within the set"
                if leaf.negated
                else "automata L (where built): is a literal in L"
            )
        return "automata L (where built): product of L with the pattern (emptiness, inclusion)"


@lru_cache(maxsize=STORED_CACHE_SIZE)
def _load(payload: bytes) -> TagAutomaton:
    """The automaton of one payload. Raises ValueError when the payload is not one this kind wrote (not JSON, no
    string "regex", or a regex emit.py cannot have written): the lookup then reads the file's automaton as unknown
    (pruning/kinds.py `KindEvidence`), never as the language of whatever the damaged regex still parses to."""
    from indexlib.automaton import TagAutomaton
    from indexlib.automaton.parse import parse_stored_regex

    try:
        regex = json.loads(payload)["regex"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"automaton payload is not its JSON: {error}") from None
    if not isinstance(regex, str):
        raise ValueError(f"automaton payload's regex is a {type(regex).__name__}")
    try:
        parse_stored_regex(regex)  # what from_regex would silently widen to every string
    except (Unsupported, RecursionError) as error:
        raise ValueError(f"automaton regex {regex[:60]!r} does not parse: {error}") from None
    return TagAutomaton.from_regex(regex)
