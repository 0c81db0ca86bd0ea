"""Per-file residuals: a scan's filter simplified, for each file, by what the index's bounds and counts prove about
that file's rows, so that a plan's answer grows with its files, not with files x filter (an IN of 1,000 keys on a
table sorted by the key leaves a few keys per file).

The reader applies a file's residual to that file's rows only, so the residual must select exactly the rows the
whole filter selects among them, under the reader's own reading of NULL and NaN (pyiceberg's Arrow reading, Iceberg
Java's evaluator, SQL): each rule below is exact on every row a file can hold, not only "might match".

1. Bounds. The non-NULL, non-NaN values of a file's column lie within its [lower, upper] bounds, in the column's
   physical domain (statistics/column_stats.py; bounds of an older type are decoded into the current one). A
   truncated string bound is still a bound (a lower bound is a prefix of the least value, an upper bound was
   incremented past the greatest), and an unknown or NaN bound is no bound on that side (minmax.value_window): a
   file the index does not know keeps the whole list.
2. Sets. `x IN S` and `x IN S'` agree on every row of the file when S' keeps every value of S some row may hold:
   on a value a row holds because it is in both or neither; on NULL and NaN because neither is in either list (a NaN
   literal is never trimmed: its leaf is left as it came). So do `x NOT IN S` and `x NOT IN S'`. A value outside
   the bounds is held by no row (1), nor is one an index kind's payload rules out (`IndexKind.values_held`: a
   Bloom filter's negative is certain, it is the very probe that prunes files by `=`), nor, in a file whose column
   is keyed, one whose hash no key row of the file holds (the global key index keys every distinct value such a file
   holds; a hash two values share admits both), so S' keeps the values within the bounds that every kind and the
   key index let the file hold. An IN of 1,000 keys over files whose bounds span every key keeps
   the keys each file's Bloom filter admits: its own and ~1 % more.
3. Classes. pyiceberg reads a set of one literal as `=` / `!=` and an empty one as FALSE / TRUE, and its reading of
   NULL differs between them (`NULL NOT IN (1, 2)` is TRUE in pyiceberg's Arrow reading, `NULL != 1` is not). So a
   trimmed list keeps at least two literals, padded with literals of S outside the bounds (which equal no value of
   the file), except as rule 5 allows.
4. Proven TRUE. A leaf the min/max rules (pruning/minmax.py) prove TRUE on every row of the file (`all_match`: no
   NULL, no NaN where it matters) is TRUE, under any number of NOTs.
5. Under no NOT. Where every node above a leaf is an AND or an OR, a leaf TRUE on no row of the file (FALSE or NULL
   on each: `might` is False) may be FALSE, and an IN may be trimmed to one literal (`=`, NULL where IN is FALSE) or
   to none (FALSE): AND and OR are monotone (FALSE < NULL < TRUE, Kleene), so a leaf that is never TRUE can be read
   as FALSE without changing which rows are TRUE at the root.

Only these leaves are read: `=`, `!=`, `<`, `<=`, `>`, `>=`, IN and NOT IN on a column of a type with bounds (not
`float`: pyiceberg rounds a double literal to a float, so the literal compared is not the one sent). Any other leaf,
a literal that does not convert to the column's type, a column the current schema lacks, and a subtree deeper than
`MAX_DEPTH` are kept as they came. Files whose residuals come out the same share one expression object (the
service writes each distinct residual once per answer).

A reader also skips a file's row groups by its residual, by statistics that leave NaN out; for a file that may hold
NaN, `nan_widened` then keeps the row groups a NaN may match in (its docstring has the argument).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

import numpy as np

# mypy takes the pydantic fields of pyiceberg's predicates for their constructor, so it rejects the positional calls
# pyiceberg documents (apache/iceberg-python#3101): those calls carry a `type: ignore` naming the issue.
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    Or,
    Reference,
    SetPredicate,
)
from pyiceberg.expressions.literals import AboveMax, BelowMin, Literal
from pyiceberg.schema import Schema
from pyiceberg.types import FloatType, IcebergType

from indexlib.index_kinds.registry import registry
from indexlib.pruning.minmax import column_verdict, value_window
from indexlib.query.model import BoundColumn, BoundCompare
from indexlib.query.value_set import ValueSet
from indexlib.statistics.canonical import literal_hashes
from indexlib.statistics.column_stats import supports_bounds
from indexlib.statistics.key_hash import stored_hashes
from indexlib.statistics.provider import StatisticsProvider

if TYPE_CHECKING:
    from indexlib.statistics.provider import ColumnStatistics

MAX_DEPTH = 200  # deeper subtrees are kept as they came

_OPS: dict[type, str] = {
    EqualTo: "=",
    NotEqualTo: "!=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
}

# What a leaf becomes in one file: kept as it came, TRUE, FALSE, or its list trimmed to values[start:stop]
KEEP: tuple[str] = ("keep",)
TRUE: tuple[str] = ("true",)
FALSE: tuple[str] = ("false",)
Outcome = tuple[Any, ...]


@dataclass(frozen=True)
class _Leaf:
    """One leaf the rules read: per file (in the order asked), what it becomes, and how a trimmed list is written."""

    outcomes: list[Outcome]
    rebuild: Callable[[Outcome], BooleanExpression]


def file_residuals(
    residual: BooleanExpression,
    binding: Schema,
    current: Schema,
    stats: StatisticsProvider | None,
    files: Sequence[int],
    case_sensitive: bool = True,
) -> list[BooleanExpression]:
    """`residual` simplified for each of `files` (positions among the files `stats` describes; module docstring).
    Its columns are named as in `binding` and read, by field id, as the `current` schema's columns `stats` holds."""
    if stats is None or not files or isinstance(residual, AlwaysTrue | AlwaysFalse):
        return [residual] * len(files)
    positions = np.asarray(files, dtype=np.int64)
    leaves: dict[int, _Leaf] = {}
    _Reader(binding, current, stats, positions, case_sensitive, leaves).read(residual, positive=True, depth=0)
    if not leaves:
        return [residual] * len(files)
    made: dict[tuple[Outcome, ...], BooleanExpression] = {}
    found = []
    for i in range(len(files)):
        key = tuple(leaf.outcomes[i] for leaf in leaves.values())
        if key not in made:
            chosen = {node: leaf.rebuild(leaf.outcomes[i]) for node, leaf in leaves.items() if leaf.outcomes[i] != KEEP}
            made[key] = _rebuilt(residual, chosen, 0)
        found.append(made[key])
    return found


def _rebuilt(node: BooleanExpression, chosen: dict[int, BooleanExpression], depth: int) -> BooleanExpression:
    """`node` with the leaves of `chosen` replaced; a subtree where nothing changed is the same object, as it came
    (pyiceberg's constructors would fold NOT NOT x into x)."""
    if id(node) in chosen:
        return chosen[id(node)]
    if depth > MAX_DEPTH:
        return node
    if isinstance(node, And | Or):
        left, right = _rebuilt(node.left, chosen, depth + 1), _rebuilt(node.right, chosen, depth + 1)
        if left is node.left and right is node.right:
            return node
        return And(left, right) if isinstance(node, And) else Or(left, right)
    if isinstance(node, Not):
        child = _rebuilt(node.child, chosen, depth + 1)
        return node if child is node.child else Not(child)
    return node


@dataclass
class _Reader:
    binding: Schema
    current: Schema
    stats: StatisticsProvider
    positions: np.ndarray
    case_sensitive: bool
    leaves: dict[int, _Leaf]

    def read(self, node: BooleanExpression, positive: bool, depth: int) -> None:
        """Records in `leaves` each leaf of `node` a rule reads; `positive`: no NOT above it."""
        if depth > MAX_DEPTH:
            return
        if isinstance(node, And | Or):
            self.read(node.left, positive, depth + 1)
            self.read(node.right, positive, depth + 1)
        elif isinstance(node, Not):
            self.read(node.child, not positive, depth + 1)
        elif isinstance(node, SetPredicate | LiteralPredicate) and isinstance(node.term, Reference):
            leaf = self._leaf(node, positive)
            if leaf is not None:
                self.leaves[id(node)] = leaf

    def _column(self, name: str) -> BoundColumn | None:
        try:
            field_id = self.binding.find_field(name, self.case_sensitive).field_id
            found = self.current.find_field(field_id)
        except ValueError:
            return None
        if not supports_bounds(found.field_type) or isinstance(found.field_type, FloatType):
            return None
        return BoundColumn(field_id, found.name, found.field_type)

    def _leaf(self, node: SetPredicate | LiteralPredicate, positive: bool) -> _Leaf | None:
        column = self._column(cast(Reference, node.term).name)  # `read` passes leaves on a Reference only
        if column is None:
            return None
        try:
            stats = self.stats.column(column).take(self.positions)
        except Exception:  # statistics that cannot be read for this column: the leaf stays as it came
            return None
        if isinstance(node, SetPredicate):
            return self._set(node, column, stats, positive)
        op = _OPS.get(type(node))
        value = _physical(node.literal, column.type) if op is not None else None
        if value is None or op is None:  # op is None only where value is: the check narrows op for mypy
            return None
        verdict = column_verdict(BoundCompare(op, column, value), stats)
        outcomes = [
            _decided(bool(m), bool(a), positive) or KEEP for m, a in zip(verdict.might, verdict.all_match, strict=True)
        ]
        return _Leaf(outcomes, lambda outcome: _constant(outcome, node))

    def _set(self, node: SetPredicate, column: BoundColumn, stats: ColumnStatistics, positive: bool) -> _Leaf | None:
        if not isinstance(node, In | NotIn):
            return None
        by_value: dict[Any, list[Literal[Any]]] = {}
        for literal in node.literals:
            value = _physical(literal, column.type)
            if value is None:
                return None
            by_value.setdefault(value, []).append(literal)
        values = sorted(by_value)
        negated = isinstance(node, NotIn)
        verdict = column_verdict(ValueSet(column, tuple(values), negated), stats)
        start, stop = value_window(values, stats.lower, stats.upper)
        held = self._held(column, values)
        exact = positive and not negated  # rule 5: an IN under no NOT may become `=` or FALSE
        outcomes: list[Outcome] = []
        firsts, lasts = np.asarray(start).tolist(), np.asarray(stop).tolist()
        if held is not None:  # per file, the values within its bounds it may hold: all files' at once, row by row
            columns = np.arange(len(values))
            rows, picks = np.nonzero(
                held & (columns >= np.asarray(start)[:, None]) & (columns < np.asarray(stop)[:, None])
            )
            cuts = np.searchsorted(rows, np.arange(len(firsts) + 1)).tolist()
            held_picks = picks.tolist()
        flags = zip(verdict.might.tolist(), verdict.all_match.tolist(), firsts, lasts, strict=True)
        for i, (m, a, first, last) in enumerate(flags):
            decided = _decided(m, a, positive)
            if decided is not None:
                outcomes.append(decided)
                continue
            picked: Sequence[int] = range(first, last) if held is None else held_picks[cuts[i] : cuts[i + 1]]
            if len(picked) == len(values):
                outcomes.append(KEEP)
            else:
                outcomes.append(("pick", *_padded(picked, first, last, len(values), exact)))

        def rebuild(outcome: Outcome) -> BooleanExpression:
            if outcome[0] != "pick":
                return _constant(outcome, node)
            kept = [literal for j in outcome[1:] for literal in by_value[values[j]]]
            # In of none is FALSE, of one `=` (rule 5 only); pyiceberg#3101 (see the imports)
            return type(node)(node.term, kept)  # type: ignore[call-arg, arg-type]

        return _Leaf(outcomes, rebuild)

    def _held(self, column: BoundColumn, values: list[Any]) -> np.ndarray | None:
        """Per (file, value), whether some index kind's payload lets the file hold the value (rule 2: a value no
        row holds is in neither list as far as the file's rows go); None when no kind can say."""
        held = None
        for kind in registry().values():
            try:
                payloads = self.stats.payloads(column, kind.name, kind.version, self.positions)
                found = kind.values_held(column.type, values, payloads) if any(payloads) else None
            except Exception:  # a payload the kind cannot read: it rules nothing out
                continue
            if found is not None:
                held = found if held is None else held & found
        keyed = self._keyed(column, values)
        if keyed is not None:
            held = keyed if held is None else held & keyed
        return held

    def _keyed(self, column: BoundColumn, values: list[Any]) -> np.ndarray | None:
        """Per (file, value), False where the file's column is keyed and no key row of the file holds the value's
        hash (the global key index keys every distinct value a keyed file holds; a collision only admits more)."""
        hashes = literal_hashes(column.type, values)
        if hashes is None:
            return None
        stored = stored_hashes(hashes)
        found = self.stats.key_holders(column, np.unique(stored))
        if found is None:
            return None
        keyed, files, pair_hashes = found
        rows = np.full(self.stats.num_files, -1, dtype=np.int64)
        rows[self.positions] = np.arange(len(self.positions))
        if not keyed[self.positions].any():
            return None
        held = np.ones((len(self.positions), len(values)), dtype=bool)
        held[keyed[self.positions]] = False
        order = np.argsort(stored, kind="stable")
        ordered = stored[order]
        first = np.searchsorted(ordered, pair_hashes, side="left")
        last = np.searchsorted(ordered, pair_hashes, side="right")
        for row, start, stop in zip(rows[files].tolist(), first.tolist(), last.tolist(), strict=True):
            if row >= 0:
                held[row, order[start:stop]] = True  # every value of this hash (more than one: a collision)
        return held


def _padded(picked: Sequence[int], first: int, last: int, count: int, exact: bool) -> tuple[int, ...]:
    """The positions (in the sorted distinct values) a trimmed list keeps: the values the file may hold, widened to
    two values (rule 3) unless the trim may change the predicate's class (rule 5), by the values after the bounds'
    window, then before it. A wider list is still exact: its extra values are held by no row of the file."""
    kept = list(picked)
    if exact or len(kept) >= min(2, count):
        return tuple(kept)
    chosen = set(kept)
    for j in [*range(first, count), *range(first - 1, -1, -1)]:
        if len(kept) >= min(2, count):
            break
        if j not in chosen:
            kept.append(j)
            chosen.add(j)
    return tuple(sorted(kept))


def _decided(might: bool, all_match: bool, positive: bool) -> Outcome | None:
    if all_match:
        return TRUE  # rule 4
    if not might and positive:
        return FALSE  # rule 5
    return None


def _constant(outcome: Outcome, node: BooleanExpression) -> BooleanExpression:
    """TRUE, FALSE, or the leaf as it came (KEEP)."""
    return AlwaysTrue() if outcome == TRUE else AlwaysFalse() if outcome == FALSE else node


@lru_cache(maxsize=256)
def _conversion(literal_type: type, column_type: type) -> Callable[..., Any] | None:
    """The function pyiceberg's `literal.to(column_type)` runs for a literal of `literal_type` and a column type of
    class `column_type`, looked up once: `Literal.to` is a `functools.singledispatchmethod`, which makes a new bound
    function (`functools.update_wrapper`) on every call, most of a conversion's cost over the literals of an IN of
    1,000. Calling its registry's choice is what `to` itself does next, so the conversion is pyiceberg's own. None
    (convert by `to`) where `to` is not such a method."""
    dispatcher = getattr(inspect.getattr_static(literal_type, "to", None), "dispatcher", None)
    return dispatcher.dispatch(column_type) if dispatcher is not None else None


def _physical(literal: Literal[Any], column_type: IcebergType) -> Any:
    """The literal in the column's physical domain (days, micros, Decimal, str, bytes, ...), or None where it does
    not convert to the column's type, is out of its range, or is NaN."""
    try:
        convert = _conversion(type(literal), type(column_type))
        converted = convert(literal, column_type) if convert is not None else literal.to(column_type)
    except Exception:
        return None
    if isinstance(converted, AboveMax | BelowMin):
        return None
    value = converted.value
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def nan_widened(residual: BooleanExpression, columns: frozenset[str], case_sensitive: bool = True) -> BooleanExpression:
    """`residual` for a file that may hold NaN in one of the floating-point `columns` (names), such that a reader
    that skips the file's row groups by it keeps every row group holding a NaN that Spark SQL's reading of the leaf
    makes TRUE: `x > c` and `x >= c` (c a number) become `x > c OR is_nan(x)`, and under an odd number of NOTs
    `x < c` and `x <= c` become `x < c AND not_nan(x)`.

    Why. Iceberg's readers (Spark's, through the service) skip a Parquet row group by the residual and the footer's
    min/max, which writers such as pyarrow compute leaving NaN out; in Spark SQL (and in Iceberg Java's evaluator,
    `Double.compare`) NaN is above every number, so `x > 100` holds for it, and a row group of [1.0, NaN] skipped
    by its max of 1.0 loses a matching row. No statistic a reader skips by knows NaN (Parquet has no NaN count),
    so `is_nan(x)` keeps such row groups (a dictionary that holds NaN too).

    Safe for the rows: the engine applies its own WHERE to what it reads, and pyiceberg filters rows by the scan's
    row filter, not the residual; under Spark's and Iceberg Java's reading NaN already satisfies `x > c`, `x >= c`,
    `NOT (x < c)` and `NOT (x <= c)`, so the widened residual selects the same rows there (and, under a NOT, NULL rows
    too: `NOT (x < c AND not_nan(x))` is TRUE on NULL, a row the engine's WHERE then drops). Other leaves are left as
    they came: no reader's statistics drop NaN for them (`!=` and NOT IN keep it, `=` and IN never match it but
    through `is_nan`, which Spark sends for `x = NaN`).

    Not widened: a leaf inside a conjunction that is FALSE on every NaN row of its column, because the conjunction
    (read through its NOTs: an OR under an odd number of NOTs is one) also holds `x < c`, `x <= c`, `x = c` or
    `x IN (...)` on it, in effect (query/intervals.py has the same rule for the index): a row whose x is NaN makes
    that conjunction, and so everything under it, FALSE, so no row group needs reading for its sake.
    `x >= 680 AND x <= 700` stays as it came."""
    if not columns:
        return residual
    names = columns if case_sensitive else frozenset(name.lower() for name in columns)

    def named(node: BooleanExpression) -> str | None:
        """The column (as `names` spells it) of a comparison of one of `columns` with a number, else None."""
        if not isinstance(node, LiteralPredicate | SetPredicate):
            return None
        name = getattr(node.term, "name", None)
        if not isinstance(name, str) or (name if case_sensitive else name.lower()) not in names:
            return None
        values = (
            [literal.value for literal in node.literals] if isinstance(node, SetPredicate) else [node.literal.value]
        )
        if any(isinstance(value, float) and math.isnan(value) for value in values):
            return None
        return name if case_sensitive else name.lower()

    def nan_false(node: BooleanExpression, negated: bool) -> str | None:
        """The column of a leaf that is FALSE on every NaN row of it (in effect, through `negated`), else None."""
        effective: tuple[type, ...] = (
            (LessThan, LessThanOrEqual, EqualTo, In)
            if not negated
            else (GreaterThan, GreaterThanOrEqual, NotEqualTo, NotIn)
        )
        return named(node) if isinstance(node, effective) else None

    chosen: dict[int, BooleanExpression] = {}

    def visit(node: BooleanExpression, negated: bool, excluded: frozenset[str], depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(node, And | Or) and isinstance(node, And) != negated:  # a conjunction, in effect
            items = _conjuncts(node, negated)
            excluded = excluded | {name for item, neg in items if (name := nan_false(item, neg)) is not None}
            for item, neg in items:
                visit(item, neg, excluded, depth + 1)
        elif isinstance(node, And | Or):
            visit(node.left, negated, excluded, depth + 1)
            visit(node.right, negated, excluded, depth + 1)
        elif isinstance(node, Not):
            visit(node.child, not negated, excluded, depth + 1)
        elif isinstance(node, GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
            name = named(node)
            if name is None or name in excluded:
                return
            above = isinstance(node, GreaterThan | GreaterThanOrEqual)
            if above and not negated:
                chosen[id(node)] = Or(node, IsNaN(node.term))  # type: ignore[call-arg]  # apache/iceberg-python#3101
            elif not above and negated:
                chosen[id(node)] = And(node, NotNaN(node.term))  # type: ignore[call-arg]  # apache/iceberg-python#3101

    visit(residual, False, frozenset(), 0)
    return _rebuilt(residual, chosen, 0) if chosen else residual


def _conjuncts(node: BooleanExpression, negated: bool) -> list[tuple[BooleanExpression, bool]]:
    """The operands of the conjunction `node` is in effect (an AND, or an OR under `negated`), through NOTs, each
    with whether it is negated; without recursion (a planner's chains are long)."""
    found: list[tuple[BooleanExpression, bool]] = []
    stack = [(node, negated)]
    while stack:
        item, neg = stack.pop()
        if isinstance(item, Not):
            stack.append((item.child, not neg))
        elif isinstance(item, And | Or) and isinstance(item, And) != neg:
            stack += [(item.right, neg), (item.left, neg)]
        else:
            found.append((item, neg))
    return found


def zero_widened(
    residual: BooleanExpression, columns: frozenset[str], case_sensitive: bool = True
) -> BooleanExpression:
    """`residual` with each comparison of a floating-point column (of `columns`, names) with a zero written so that
    a reader ordering values as Java's `Double.compare` does (-0.0 below 0.0: Iceberg Java's row-group filters and
    manifest evaluators) keeps the row groups of both zeros: `x >= 0` is sent as `x >= -0.0`, `x > -0.0` as
    `x > 0.0`, `x <= -0.0` as `x <= 0.0`, `x < 0` as `x < -0.0`, `x = 0` (and `!=`) as the range
    `x >= -0.0 AND x <= 0.0` (negated), and an IN holding a zero gains that range beside it.

    Why. SQL makes -0.0 equal 0.0, so `x = 0` matches the rows of -0.0; a Java reader skips a row group whose min and
    max are -0.0 for `x = 0` (its max is below 0.0 in Java's order) and loses them. Safe for the rows: under SQL's
    (IEEE) reading each rewritten leaf selects exactly the rows of the leaf it replaces, -0.0 and 0.0 being one
    value, and the engine applies its own WHERE; in Java's order each one covers both zeros."""
    if not columns:
        return residual
    names = columns if case_sensitive else frozenset(name.lower() for name in columns)

    def zero(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and value == 0

    chosen: dict[int, BooleanExpression] = {}

    def visit(node: BooleanExpression, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(node, And | Or):
            visit(node.left, depth + 1)
            visit(node.right, depth + 1)
            return
        if isinstance(node, Not):
            visit(node.child, depth + 1)
            return
        name = getattr(getattr(node, "term", None), "name", None)
        if not isinstance(name, str) or (name if case_sensitive else name.lower()) not in names:
            return
        term = node.term  # type: ignore[attr-defined]
        both = And(_compared(GreaterThanOrEqual, term, -0.0), _compared(LessThanOrEqual, term, 0.0))
        if isinstance(node, SetPredicate) and isinstance(node, In | NotIn):
            if any(zero(literal.value) for literal in node.literals):
                inside = Or(_compared(In, term, node.literals), both)
                chosen[id(node)] = inside if isinstance(node, In) else Not(inside)
            return
        if not isinstance(node, LiteralPredicate) or not zero(node.literal.value):
            return
        written = {
            GreaterThanOrEqual: _compared(GreaterThanOrEqual, term, -0.0),
            GreaterThan: _compared(GreaterThan, term, 0.0),
            LessThanOrEqual: _compared(LessThanOrEqual, term, 0.0),
            LessThan: _compared(LessThan, term, -0.0),
            EqualTo: both,
            NotEqualTo: Not(both),
        }.get(type(node))
        if written is not None:
            chosen[id(node)] = written

    visit(residual, 0)
    return _rebuilt(residual, chosen, 0) if chosen else residual


def _compared(predicate: type, term: Any, literal: Any) -> BooleanExpression:
    """`predicate(term, literal)`, positionally as pyiceberg documents it (apache/iceberg-python#3101: mypy reads
    the pydantic fields as the constructor)."""
    made: BooleanExpression = predicate(term, literal)
    return made


def client_bindable(
    residual: BooleanExpression, binding: Schema, current: Schema, case_sensitive: bool = True
) -> BooleanExpression:
    """`residual` (columns named as in `binding`) with every leaf whose name the client cannot bind replaced by TRUE
    (FALSE under an odd number of NOTs), for a task of a partitioned spec.

    Why. Iceberg Java's REST client (Spark's, through the service) binds a task's residual twice: its
    `ResidualEvaluator` binds it in the partition spec's schema, which is the table's current schema (the client's
    table metadata binds every spec to it), wherever the spec has partition fields; then the file reader binds the
    same names in the scan's schema, which for time travel is the snapshot's (`binding`). A column renamed (or
    dropped, or dropped and added again) since that snapshot has no name that binds to its field in both, and the
    executors fail ("Cannot find field"). So such a leaf is sent as the constant that makes the residual wider:
    AND, OR are monotone and NOT antitone, so TRUE in place of a leaf under an even number of NOTs, FALSE under an
    odd one, makes the residual TRUE on at least every row it was TRUE on; the reader reads more row groups, never
    fewer. Safe for the rows: Spark evaluates every pushed filter again above the scan unless Iceberg tells it that
    the filter selects whole partitions of every spec (`ExpressionUtil.selectsPartitions`, bound in the current
    schema too, where such a name fails to bind: the filter is evaluated again), and pyiceberg filters rows by its own
    row filter. A spec without partition fields binds nothing (`ResidualEvaluator.unpartitioned`): its tasks keep the
    residual as it came."""
    if binding is current or binding.schema_id == current.schema_id or isinstance(residual, AlwaysTrue | AlwaysFalse):
        return residual

    def bindable(name: str) -> bool:
        try:
            field_id = binding.find_field(name, case_sensitive).field_id
            return current.find_field(name, case_sensitive).field_id == field_id
        except ValueError:
            return False

    chosen: dict[int, BooleanExpression] = {}

    def visit(node: BooleanExpression, negated: bool, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(node, And | Or):
            visit(node.left, negated, depth + 1)
            visit(node.right, negated, depth + 1)
        elif isinstance(node, Not):
            visit(node.child, not negated, depth + 1)
        else:
            name = getattr(getattr(node, "term", None), "name", None)
            if isinstance(name, str) and not bindable(name):
                chosen[id(node)] = AlwaysFalse() if negated else AlwaysTrue()

    visit(residual, False, 0)
    return _rebuilt(residual, chosen, 0) if chosen else residual  # pyiceberg's constructors fold the constants
