"""Min/max/null-count pruning over all files at once: the rules, and `MinMaxEvidence`, their place among the peers
of the pruning framework (pruning/evaluator.py).

The rules read a `StatisticsProvider` (statistics/provider.py): per column, arrays over N files of lower/upper
bounds, value, null and NaN counts; missing numbers are "unknown". `evaluate` answers, per file, two questions about
a bound, normalised predicate:

* might[i]: some row of file i might make the predicate TRUE. False only when the statistics prove no row can.
  Every unknown (no stats, no bound, type we cannot compare) answers True.
* all_match[i]: every row of file i is proven to make the predicate TRUE (a planner may drop the residual filter).
  Every unknown answers False.

Patterns (LIKE, starts_with, RLIKE) use their literal prefix (see query/patterns.py): the strings with prefix P form one
interval in UTF-8 byte order, so a file whose bounds lie wholly before or after it cannot match, and a file whose
lower and upper bounds both start with P holds only values starting with P. A negated leaf that is never NULL on a
non-NULL value (NOT LIKE, NOT starts_with, NOT RLIKE) cannot match where the leaf is proven on every row, and
matches every row where the leaf matches none and the column has no NULLs.

Calendar fields (month/day/hour) are monotone within one year / month / day: a file whose bounds share that period
is evaluated on the fields of its bounds; any other file might match.

NaN: engines disagree (Spark and Postgres order NaN above every number and make NaN = NaN true; IEEE makes every
comparison with NaN false but !=). NaN rows are treated as matching `>`, `>=`, `!=` (might), and no rule proves
"all match" for a comparison other than != when a file holds NaNs: sound under both readings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import DateType, LongType

from indexlib.pruning.evaluator import Evidence
from indexlib.query.model import (
    And,
    BoundColumn,
    BoundCompare,
    BoundField,
    BoundIn,
    Const,
    Expr,
    IsNaN,
    IsNull,
    Not,
    Pattern,
    Unusable,
    Widened,
)
from indexlib.query.patterns import pattern_shape
from indexlib.query.value_set import ValueSet
from indexlib.query.visitor import ExprVisitor
from indexlib.statistics.column_stats import physical_arrow_type
from indexlib.statistics.provider import ColumnStatistics, StatisticsProvider
from indexlib.statistics.verdict import Verdict

if TYPE_CHECKING:
    from indexlib.query.model import Or


def literal_scalar(leaf: BoundCompare) -> Any:
    """The leaf's value as an Arrow scalar of the column's physical type."""
    return pa.scalar(leaf.value, type=physical_arrow_type(leaf.column.type))


def _true_where_unknown(result: pa.Array) -> np.ndarray:
    return pc.fill_null(result, True).to_numpy(zero_copy_only=False)


def _false_where_unknown(result: pa.Array) -> np.ndarray:
    return pc.fill_null(result, False).to_numpy(zero_copy_only=False)


_ARROW_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _compare(leaf: BoundCompare, stats: ColumnStatistics) -> Verdict:
    value = literal_scalar(leaf)
    lower, upper = stats.lower, stats.upper
    has_values = stats.comparable_values != 0  # True also where unknown (-1)
    no_nulls = stats.null_count == 0
    no_nans = stats.nan_count == 0
    # True also where unknown; never where the leaf's conjunction excludes NaN rows (query/intervals.py)
    has_nans = (stats.nan_count != 0) & (not leaf.nan_excluded)
    op = leaf.op
    if op == "=":
        # A value equal to v lies within [lower, upper].
        might = (
            has_values
            & _true_where_unknown(pc.less_equal(lower, value))
            & _true_where_unknown(pc.greater_equal(upper, value))
        )
        all_match = (
            no_nulls
            & no_nans
            & _false_where_unknown(pc.equal(lower, value))
            & _false_where_unknown(pc.equal(upper, value))
        )
    elif op == "!=":
        # Cannot match only if every comparable value equals v (lower == upper == v) and there is no NaN.
        single_value = _false_where_unknown(pc.equal(lower, value)) & _false_where_unknown(pc.equal(upper, value))
        might = (has_values & ~single_value) | (has_nans & stats.known) | ~stats.known
        outside = _false_where_unknown(pc.less(upper, value)) | _false_where_unknown(pc.greater(lower, value))
        all_match = no_nulls & (outside | (stats.comparable_values == 0)) & (no_nans | (not leaf.nan_excluded))
    elif op in ("<", "<="):
        # Some value below v exists iff lower is below v; all are iff upper is.
        might = has_values & _true_where_unknown(_ARROW_COMPARE[op](lower, value))
        all_match = no_nulls & no_nans & _false_where_unknown(_ARROW_COMPARE[op](upper, value))
    else:  # ">", ">="
        might = (has_values & _true_where_unknown(_ARROW_COMPARE[op](upper, value))) | has_nans
        all_match = no_nulls & no_nans & _false_where_unknown(_ARROW_COMPARE[op](lower, value))
    return Verdict(might | ~stats.known, all_match & stats.known)


def _is_null(leaf: IsNull, stats: ColumnStatistics) -> Verdict:
    if leaf.negated:  # IS NOT NULL: some row is not null / no row is null
        return Verdict((stats.null_count < stats.value_count) | ~stats.known, stats.known & (stats.null_count == 0))
    return Verdict((stats.null_count != 0) | ~stats.known, stats.known & (stats.null_count == stats.value_count))


def _is_nan(leaf: IsNaN, stats: ColumnStatistics) -> Verdict:
    # NULL rows: isnan is FALSE in Spark and NULL in DuckDB, so NOT isnan might match them but proves nothing.
    if leaf.negated:
        might = (stats.value_count - stats.nan_count > 0) | ~stats.known
        return Verdict(might, stats.known & (stats.nan_count == 0) & (stats.null_count == 0))
    return Verdict((stats.nan_count != 0) | ~stats.known, stats.known & (stats.nan_count == stats.value_count))


def _pattern(leaf: Pattern, stats: ColumnStatistics) -> Verdict:
    shape = pattern_shape(leaf.kind, leaf.pattern, leaf.escape)
    if shape.exact == "equal":
        positive = _compare(BoundCompare("=", leaf.column, shape.prefix), stats)
    else:
        prefix = pa.scalar(shape.prefix, pa.large_string())
        has_values = stats.comparable_values != 0
        before = _false_where_unknown(pc.less(stats.upper, prefix))
        lower_starts = pc.starts_with(stats.lower, pattern=shape.prefix)
        after = _false_where_unknown(pc.and_(pc.greater(stats.lower, prefix), pc.invert(lower_starts)))
        might = has_values & ~before & ~after
        all_match = np.zeros(len(might), dtype=bool)
        if shape.exact == "prefix":
            upper_starts = pc.starts_with(stats.upper, pattern=shape.prefix)
            both = _false_where_unknown(lower_starts) & _false_where_unknown(upper_starts)
            all_match = (stats.null_count == 0) & (both | (shape.prefix == ""))
        positive = Verdict(might | ~stats.known, all_match & stats.known & (stats.value_count > 0))
    if not leaf.negated:
        return positive
    return Verdict(~positive.all_match, stats.known & ~positive.might & (stats.null_count == 0))


def _field(leaf: BoundField, stats: ColumnStatistics) -> Verdict:
    # physical bounds (days or micros) back to calendar values
    is_date = isinstance(leaf.column.type, DateType)
    temporal = pa.date32() if is_date else pa.timestamp("us")
    lower, upper = (
        bounds.cast(pa.int32() if is_date else pa.int64()).cast(temporal) for bounds in (stats.lower, stats.upper)
    )
    period = {"month": "year", "day": "month", "hour": "day"}[leaf.field]
    same_period = pc.equal(pc.floor_temporal(lower, unit=period), pc.floor_temporal(upper, unit=period))
    extract = {"month": pc.month, "day": pc.day, "hour": pc.hour}[leaf.field]
    within = pc.fill_null(same_period, False)
    field_stats = ColumnStatistics(
        lower=pc.if_else(within, extract(lower), pa.scalar(None, pa.int64())).cast(pa.int64()),
        upper=pc.if_else(within, extract(upper), pa.scalar(None, pa.int64())).cast(pa.int64()),
        value_count=stats.value_count,
        null_count=stats.null_count,
        nan_count=stats.nan_count,
    )
    column = BoundColumn(leaf.column.field_id, leaf.column.name, LongType())
    return _compare(BoundCompare(leaf.op, column, leaf.value), field_stats)


def _in_set(target: ValueSet, stats: ColumnStatistics) -> Verdict:
    """`column IN S` (or `NOT IN S`) over all files at once: one sorted-search of each file's bounds in S.

    A file holds a value of S only if some v in S lies within [lower, upper] (`hit`; an unknown or NaN bound is
    read as unbounded on that side). Every row is in S when the file's only value (lower = upper, no NULL, no NaN)
    is in S. NOT IN is the AND of `!= v` over S: a file might match unless its only value is in S (NaN rows always
    might, as for `!=`), and every row matches when no v of S lies within its bounds and it has no NULL.
    """
    values = sorted(set(target.values))
    hit = _any_within(values, stats.lower, stats.upper)
    single_in_set = _false_where_unknown(pc.equal(stats.lower, stats.upper)) & hit
    no_nulls = stats.null_count == 0
    if target.negated:
        has_nans = stats.nan_count != 0  # True also where unknown
        might = ((stats.comparable_values != 0) & ~single_in_set) | (has_nans & stats.known) | ~stats.known
        return Verdict(might, no_nulls & (~hit | (stats.comparable_values == 0)))
    might = (stats.comparable_values != 0) & hit
    return Verdict(might, no_nulls & (stats.nan_count == 0) & single_in_set)


def _any_within(values: list[Any], lower: pa.Array, upper: pa.Array) -> np.ndarray:
    """Per file, whether some value of the sorted `values` lies within [lower, upper]; a null (or NaN) bound
    is no bound on that side."""
    start, stop = value_window(values, lower, upper)
    return stop > start


def value_window(values: list[Any], lower: pa.Array, upper: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per file, the slice `values[start:stop]` of the sorted `values` (physical domain) that lies within
    [lower, upper]; a null (or NaN) bound is no bound on that side, so a file with unknown bounds gets every value."""
    numeric = pa.types.is_integer(lower.type) or pa.types.is_floating(lower.type) or pa.types.is_boolean(lower.type)
    sorted_values = np.array(values, dtype=lower.type.to_pandas_dtype() if numeric else object)

    def positions(bounds: pa.Array, side: Literal["left", "right"], unbounded: int) -> np.ndarray:
        valid = pc.is_valid(bounds).to_numpy(zero_copy_only=False)
        if pa.types.is_floating(bounds.type):
            valid &= ~pc.fill_null(pc.is_nan(bounds), True).to_numpy(zero_copy_only=False)
        if numeric:
            filled = pc.fill_null(bounds, pa.scalar(values[0], bounds.type)).to_numpy(zero_copy_only=False)
        else:
            filled = np.array([v if v is not None else values[0] for v in bounds.to_pylist()], dtype=object)
        found = np.searchsorted(sorted_values, filled, side=side)
        return np.where(valid, found, unbounded)

    return positions(lower, "left", 0), positions(upper, "right", len(values))


def column_verdict(leaf: BoundCompare | ValueSet, stats: ColumnStatistics) -> Verdict:
    """The min/max rules for one comparison or value set, over the files `stats` describes."""
    return _compare(leaf, stats) if isinstance(leaf, BoundCompare) else _in_set(leaf, stats)


class MinMaxEvidence(Evidence):
    """The min/max rules above as evidence over the containers of a `StatisticsProvider` (index entries, or
    partition values read as statistics)."""

    name = "minmax"

    def __init__(
        self, stats: StatisticsProvider, covers: np.ndarray | None = None, name: str = "minmax", whose: str = ""
    ) -> None:
        """`whose`: for explain, whose statistics these are when not the index's (e.g. "the format's")."""
        self.stats, self.covers, self.name, self.whose = stats, covers, name, whose

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        return _LeafRules(self.stats).visit(leaf)  # bounds are decoded once per column, for every container

    def describe(self, leaf: Expr) -> str | None:
        used = statistics_used(leaf)
        return f"{self.whose} {used}" if self.whose else used


class _LeafRules(ExprVisitor[Verdict | None]):
    def __init__(self, stats: StatisticsProvider) -> None:
        self.stats = stats

    def visit_bound_compare(self, expr: BoundCompare) -> Verdict:
        return _compare(expr, self.stats.column(expr.column))

    def visit_bound_in(self, expr: BoundIn) -> Verdict:
        return _in_set(ValueSet(expr.column, expr.values, expr.negated), self.stats.column(expr.column))

    def visit_is_null(self, expr: IsNull) -> Verdict:
        return _is_null(expr, self.stats.column(expr.column))

    def visit_is_nan(self, expr: IsNaN) -> Verdict:
        return _is_nan(expr, self.stats.column(expr.column))

    def visit_pattern(self, expr: Pattern) -> Verdict:
        return _pattern(expr, self.stats.column(expr.column))

    def visit_bound_field(self, expr: BoundField) -> Verdict:
        return _field(expr, self.stats.column(expr.column))

    def visit_not(self, expr: Not) -> None:
        return None  # the normalised tree has none; were one left, it is unknown


def statistics_used(leaf: Expr) -> str:
    """Which statistics the min/max stage reads for one bound leaf (for explain)."""
    return _StatisticsUsed().visit(leaf)


class _StatisticsUsed(ExprVisitor[str]):
    def visit_widened(self, expr: Widened) -> str:
        return self.visit(expr.child) + " (literal widened: never proves all rows match)"

    def visit_and(self, expr: And | Or) -> str:
        return "; ".join(self.visit(part) for part in (expr.left, expr.right))

    visit_or = visit_and

    def visit_bound_compare(self, expr: BoundCompare) -> str:
        return f"lower/upper bounds and null/NaN counts of {expr.column.name}"

    def visit_bound_in(self, expr: BoundIn) -> str:
        return f"lower/upper bounds and null/NaN counts of {expr.column.name}, searched for {len(expr.values):,} values"

    def visit_is_null(self, expr: IsNull) -> str:
        return f"null and value counts of {expr.column.name}"

    def visit_is_nan(self, expr: IsNaN) -> str:
        return f"NaN, null and value counts of {expr.column.name}"

    def visit_pattern(self, expr: Pattern) -> str:
        shape = pattern_shape(expr.kind, expr.pattern, expr.escape)
        if shape.exact == "equal":
            return f"lower/upper bounds of {expr.column.name} (pattern is an equality)"
        if not shape.prefix:
            return f"null counts of {expr.column.name} only (no literal prefix)"
        return f"lower/upper bounds of {expr.column.name} against prefix {shape.prefix!r}"

    def visit_bound_field(self, expr: BoundField) -> str:
        period = {"month": "year", "day": "month", "hour": "day"}[expr.field]
        return f"lower/upper bounds of {expr.column.name}, for files within one {period}"

    def visit_unusable(self, expr: Unusable) -> str:
        return f"none: {expr.reason}"

    def visit_const(self, expr: Const) -> str:
        return "none"
