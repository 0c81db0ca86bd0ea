"""Min/max/null-count pruning over all files at once.

`FileStatistics` is the small interface between storage and the algorithm (as DataFusion's PruningStatistics):
per column, arrays over N files of lower/upper bounds, value, null and NaN counts. Missing numbers are "unknown".
`evaluate` answers, per file, two questions about a bound, normalised predicate:

* might[i]: some row of file i might make the predicate TRUE. False only when the statistics prove no row can.
  Every unknown (no stats, no bound, type we cannot compare) answers True.
* all[i]: every row of file i is proven to make the predicate TRUE (a planner may drop the residual filter).
  Every unknown answers False.

Patterns (LIKE, starts_with, RLIKE) use their literal prefix (see patterns.py): the strings with prefix P form one
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

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import DateType, LongType

from indexlib.binding import BoundColumn, BoundCompare, BoundField, Widened, literal_scalar
from indexlib.column_stats import decode_bounds, parse_type, physical_arrow_type, same_domain, supports_bounds
from indexlib.patterns import pattern_shape
from indexlib.predicate import And, Const, Expr, IsNaN, IsNull, Or, Pattern, Unusable

if TYPE_CHECKING:
    from pyiceberg.types import PrimitiveType

    from indexlib.index_kinds import IndexKind

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ColumnStatistics:
    """One column over N files. Counts are -1 where unknown; bounds are null where unknown."""

    lower: pa.Array
    upper: pa.Array
    value_count: np.ndarray
    null_count: np.ndarray
    nan_count: np.ndarray

    @cached_property
    def known(self) -> np.ndarray:
        return self.value_count >= 0

    @cached_property
    def comparable_values(self) -> np.ndarray:
        """Rows that are neither NULL nor NaN (the ones bounds describe); -1 where unknown."""
        return np.where(self.known, self.value_count - self.null_count - self.nan_count, -1)

    def window(self, start: int, stop: int) -> ColumnStatistics:
        """Files start..stop-1 only."""
        return ColumnStatistics(
            lower=self.lower.slice(start, stop - start),
            upper=self.upper.slice(start, stop - start),
            value_count=self.value_count[start:stop],
            null_count=self.null_count[start:stop],
            nan_count=self.nan_count[start:stop],
        )


class FileStatistics:
    """Per-file statistics of the entries in an index-table scan, decoded lazily per column.

    Corrupt statistics. A stored byte string may be damaged: a bound of the wrong length for its type, not UTF-8,
    or tagged with a type name that does not parse; a Bloom filter that is truncated or not one pybloom-live wrote;
    an automaton payload that is not JSON, lacks its regex, or whose regex does not parse. The decoders and the
    index kinds raise on such a value instead of guessing. Bounds are decoded, and each kind judges, for all files
    at once (the fast path); only when that raises is the step redone over halves of the files, down to single
    files (`_isolate`), and each file that still fails alone gets that statistic as unknown: both bounds null, or
    the kind's "might match, not proven" for it. One warning per lookup and (column, kind or "bounds") names the
    column, how many files and one of them.
    Safe: unknown is what a missing statistic already means, it only turns "cannot match" into "might match" and
    "all match" into "not proven" for the damaged file, so no matching file is skipped and no residual filter is
    wrongly dropped; every other file gets exactly the answer it gets without the damaged one (each file's answer
    depends only on its own entry); the query answers. Free on healthy data: the halving runs only after the fast
    path raised. Not covered: damage that still reads as a well-formed value (a flipped bit inside an 8-byte bound
    or a Bloom bit array, a string bound cut at a character boundary) cannot be told from data without checksums.
    """

    def __init__(self, entries: pa.Table) -> None:
        self.entries = entries
        self.num_files = entries.num_rows
        self._columns: dict[int, ColumnStatistics] = {}
        self._payloads: dict[tuple[int, str, int], list[bytes | None]] = {}
        self._kind_verdicts: dict[tuple[str, Any], Verdict | None] = {}
        self._reported: set[tuple[int, str]] = set()
        flat = pc.list_flatten(entries.column("columns"))
        self._parents = pc.list_parent_indices(entries.column("columns")).to_numpy()
        self._flat = pa.Table.from_struct_array(flat) if len(flat) else None

    def payloads(self, column: BoundColumn, kind: str, version: int) -> list[bytes | None]:
        """Per file, the payload of index `kind` for `column`; None where absent, newer than `version`, or written
        for a column type of another physical domain (its keys would not be this type's keys)."""
        key = (column.field_id, kind, version)
        if key not in self._payloads:
            self._payloads[key] = self._find_payloads(column, kind, version)
        return self._payloads[key]

    def kind_verdict(
        self, kind: IndexKind, target: ValueSet | Pattern, column: ColumnStatistics, candidates: np.ndarray
    ) -> Verdict | None:
        """`kind`'s verdict on `target`, reading payloads only of `candidates` (files not ruled out yet; the others
        answer "might match", which is sound whatever the candidates were, so the answer is cached: each lookup
        stage evaluates the predicate again with one more kind)."""
        key = (kind.name, target)
        if key not in self._kind_verdicts:
            payloads = self.payloads(target.column, kind.name, kind.version)
            payloads = [p if keep else None for p, keep in zip(payloads, candidates, strict=True)]
            try:
                self._kind_verdicts[key] = kind.verdict(target, payloads, column)
            except Exception as error:  # a damaged payload: isolate it (see the class docstring)

                def judge(start: int, stop: int) -> Verdict:
                    answer = kind.verdict(target, payloads[start:stop], column.window(start, stop))
                    return answer if answer is not None else _unknown(stop - start)

                parts, bad, error = _isolate(self.num_files, judge, _unknown, error)
                self._report(target.column, kind.name, np.flatnonzero(bad), error)
                self._kind_verdicts[key] = Verdict(
                    np.concatenate([part.might for part in parts]), np.concatenate([part.all for part in parts])
                )
        return self._kind_verdicts[key]

    def _report(self, column: BoundColumn, what: str, files: np.ndarray, error: Exception) -> None:
        """Warn once per lookup and (column, what) about the files (entry rows) whose `what` could not be read."""
        if not len(files) or (column.field_id, what) in self._reported:
            return
        self._reported.add((column.field_id, what))
        log.warning(
            "ignoring %d corrupt %s payload(s) of column %s, read as unknown (e.g. data file %s): %s",
            len(files),
            what,
            column.name,
            self.entries.column("file_path")[int(files[0])].as_py(),
            error,
        )

    def _find_payloads(self, column: BoundColumn, kind: str, version: int) -> list[bytes | None]:
        found: list[bytes | None] = [None] * self.num_files
        if self._flat is None or "indexes" not in self._flat.column_names:
            return found  # entries written before index kinds existed
        is_column = pc.equal(self._flat.column("field_id"), column.field_id).to_numpy(zero_copy_only=False)
        rows = self._flat.filter(is_column)
        indexes = _binary(rows.column("indexes"))
        flat_indexes = pc.list_flatten(indexes)
        if not len(flat_indexes):
            return found
        types = rows.column("type")
        usable_types = [
            t
            for t in pc.unique(types).to_pylist()
            if (stored := _parsed(t)) is not None and same_domain(stored, column.type)
        ]
        usable_row = pc.is_in(types, value_set=pa.array(usable_types, pa.string())).to_numpy(zero_copy_only=False)
        flat = pa.Table.from_struct_array(flat_indexes)
        row_of = pc.list_parent_indices(indexes).to_numpy()
        wanted = (
            pc.and_(pc.equal(flat.column("kind"), kind), pc.less_equal(flat.column("version"), version)).to_numpy(
                zero_copy_only=False
            )
            & usable_row[row_of]
        )
        parents = self._parents[is_column][row_of[wanted]]
        for parent, payload in zip(parents, flat.column("payload").filter(pa.array(wanted)).to_pylist(), strict=True):
            found[parent] = payload
        return found

    def column(self, column: BoundColumn) -> ColumnStatistics:
        if column.field_id not in self._columns:
            self._columns[column.field_id] = self._decode(column)
        return self._columns[column.field_id]

    def _decode(self, column: BoundColumn) -> ColumnStatistics:
        n = self.num_files
        value_count = np.full(n, -1, dtype=np.int64)
        null_count = np.full(n, -1, dtype=np.int64)
        nan_count = np.full(n, -1, dtype=np.int64)
        arrow_type = physical_arrow_type(column.type) if supports_bounds(column.type) else pa.null()
        lower = pa.nulls(n, arrow_type)
        upper = pa.nulls(n, arrow_type)
        if self._flat is not None:
            rows = self._flat.filter(pc.equal(self._flat.column("field_id"), column.field_id))
            mask = pc.equal(self._flat.column("field_id"), column.field_id).to_numpy(zero_copy_only=False)
            parents = self._parents[mask]
            value_count[parents] = rows.column("value_count").to_numpy()
            null_count[parents] = rows.column("null_count").to_numpy()
            nan_count[parents] = pc.fill_null(rows.column("nan_count"), 0).to_numpy()
            if supports_bounds(column.type) and rows.num_rows:
                lower_parts, upper_parts, positions = [], [], []
                types = rows.column("type").combine_chunks()
                for type_string in pc.unique(types).to_pylist():  # usually one: the type the bounds were written for
                    same = pc.equal(types, type_string)
                    files = parents[same.to_numpy(zero_copy_only=False)]
                    lower_bytes = _binary(rows.column("lower").filter(same))
                    upper_bytes = _binary(rows.column("upper").filter(same))
                    lower, upper = self._decode_bounds(column, type_string, lower_bytes, upper_bytes, files)
                    lower_parts.append(lower)
                    upper_parts.append(upper)
                    positions.append(files)
                order = np.concatenate(positions)
                lower = _scatter(pa.concat_arrays(lower_parts), order, n, arrow_type)
                upper = _scatter(pa.concat_arrays(upper_parts), order, n, arrow_type)
        return ColumnStatistics(
            lower=lower,
            upper=upper,
            value_count=value_count,
            null_count=null_count,
            nan_count=nan_count,
        )

    def _decode_bounds(
        self, column: BoundColumn, type_string: str, lower: pa.Array, upper: pa.Array, files: np.ndarray
    ) -> tuple[pa.Array, pa.Array]:
        """Lower and upper bounds written for `type_string` (one entry row each, of data files `files`), decoded
        into `column`'s domain; a damaged pair reads as unknown (see the class docstring)."""
        arrow_type = physical_arrow_type(column.type)

        def unknown(n: int) -> tuple[pa.Array, pa.Array]:
            return pa.nulls(n, arrow_type), pa.nulls(n, arrow_type)

        stored = _parsed(type_string)
        if stored is None:
            self._report(column, "bounds", files, ValueError(f"unknown type {type_string!r}"))
            return unknown(len(files))

        def decode(start: int, stop: int) -> tuple[pa.Array, pa.Array]:
            length = stop - start
            return (
                decode_bounds(stored, column.type, lower.slice(start, length)),
                decode_bounds(stored, column.type, upper.slice(start, length)),
            )

        try:
            return decode(0, len(files))
        except Exception as error:  # a damaged bound: isolate it
            parts, bad, error = _isolate(len(files), decode, unknown, error)
            self._report(column, "bounds", files[bad], error)
            return pa.concat_arrays([p[0] for p in parts]), pa.concat_arrays([p[1] for p in parts])


def _parsed(type_string: str) -> PrimitiveType | None:
    """The stored type, or None when the name does not parse (damaged, or a type this reader does not know)."""
    try:
        return parse_type(type_string)
    except Exception:
        return None


def _unknown(n: int) -> Verdict:
    return Verdict(np.ones(n, dtype=bool), np.zeros(n, dtype=bool))


def _isolate(
    n: int, run: Callable[[int, int], T], unknown: Callable[[int], T], error: Exception
) -> tuple[list[T], np.ndarray, Exception]:
    """After `run(0, n)` raised `error`: `run` over halves of 0..n-1, recursively, down to single items; each item
    that fails alone gets `unknown(1)`. Returns the parts in order (covering 0..n-1), the failed items, and the
    first of their errors (else `error`). k bad items among n cost O(k log n) calls of `run`."""
    parts: list[T] = []
    bad = np.zeros(n, dtype=bool)
    errors: list[Exception] = []

    def failed(start: int, stop: int, exc: Exception) -> None:
        if stop - start <= 1:
            if stop > start:
                bad[start] = True
                errors.append(exc)
                parts.append(unknown(1))
            return
        middle = (start + stop) // 2
        for low, high in ((start, middle), (middle, stop)):
            try:
                part = run(low, high)
            except Exception as sub:
                failed(low, high, sub)
            else:
                parts.append(part)

    failed(0, n, error)
    return parts, bad, errors[0] if errors else error


def _binary(column: pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _scatter(values: pa.Array, positions: np.ndarray, n: int, arrow_type: pa.DataType) -> pa.Array:
    """An array of length n holding values[k] at positions[k] and null elsewhere."""
    index = np.full(n, -1, dtype=np.int64)
    index[positions] = np.arange(len(positions))
    taken = values.take(pa.array(np.where(index >= 0, index, 0), pa.int64()))
    return pc.if_else(pa.array(index >= 0), taken, pa.nulls(n, arrow_type))


@dataclass(frozen=True)
class Verdict:
    might: np.ndarray
    all: np.ndarray


@dataclass(frozen=True)
class ValueSet:
    """`column IN values` (or `=`), or with `negated` `column NOT IN values` (or `!=`): what index kinds answer
    for equality. Gathered from a disjunction of `=` / conjunction of `!=` on one column, so that NOT IN is judged
    as a whole (a file holding only 'a' and 'b' matches no row of `NOT IN ('a', 'b')`, though it matches `!= 'a'`)."""

    column: BoundColumn
    values: tuple[Any, ...]
    negated: bool = False


def value_set(expr: Expr) -> ValueSet | None:
    """The ValueSet `expr` is exactly (an OR of `=` or an AND of `!=` on one column), if any."""
    first = expr
    while isinstance(first, (And, Or)):
        first = first.left
    if not isinstance(first, BoundCompare) or first.op not in ("=", "!="):
        return None
    joiner = Or if first.op == "=" else And
    values: list[Any] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, joiner):
            stack.extend((node.right, node.left))
        elif isinstance(node, BoundCompare) and node.op == first.op and node.column == first.column:
            values.append(node.value)
        else:
            return None
    return ValueSet(first.column, tuple(values), negated=first.op == "!=")


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
    has_nans = stats.nan_count != 0  # True also where unknown
    op = leaf.op
    if op == "=":
        # A value equal to v lies within [lower, upper].
        might = (
            has_values
            & _true_where_unknown(pc.less_equal(lower, value))
            & _true_where_unknown(pc.greater_equal(upper, value))
        )
        proven = (
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
        proven = no_nulls & (outside | (stats.comparable_values == 0))
    elif op in ("<", "<="):
        # Some value below v exists iff lower is below v; all are iff upper is.
        might = has_values & _true_where_unknown(_ARROW_COMPARE[op](lower, value))
        proven = no_nulls & no_nans & _false_where_unknown(_ARROW_COMPARE[op](upper, value))
    else:  # ">", ">="
        might = (has_values & _true_where_unknown(_ARROW_COMPARE[op](upper, value))) | has_nans
        proven = no_nulls & no_nans & _false_where_unknown(_ARROW_COMPARE[op](lower, value))
    return Verdict(might | ~stats.known, proven & stats.known)


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
        proven = np.zeros(len(might), dtype=bool)
        if shape.exact == "prefix":
            upper_starts = pc.starts_with(stats.upper, pattern=shape.prefix)
            both = _false_where_unknown(lower_starts) & _false_where_unknown(upper_starts)
            proven = (stats.null_count == 0) & (both | (shape.prefix == ""))
        positive = Verdict(might | ~stats.known, proven & stats.known & (stats.value_count > 0))
    if not leaf.negated:
        return positive
    return Verdict(~positive.all, stats.known & ~positive.might & (stats.null_count == 0))


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


def evaluate(expr: Expr, stats: FileStatistics, kinds: Sequence[IndexKind] = ()) -> Verdict:
    """Per-file might-match / all-match of a bound, normalised predicate (see module docstring), from min/max and
    the payloads of `kinds`: for a value set or a pattern, each kind that can answer narrows `might` (both verdicts
    are sound, so their conjunction is) and may prove `all`."""
    n = stats.num_files
    target = (value_set(expr) or (expr if isinstance(expr, Pattern) else None)) if kinds else None
    if target is not None:
        verdict = evaluate(expr, stats)
        column = stats.column(target.column)
        for kind in kinds:
            answer = stats.kind_verdict(kind, target, column, verdict.might)
            if answer is not None:
                verdict = Verdict(verdict.might & answer.might, verdict.all | answer.all)
        return verdict
    if isinstance(expr, Const):
        return Verdict(np.full(n, bool(expr.value)), np.full(n, bool(expr.value)))
    if isinstance(expr, Unusable):
        return Verdict(np.ones(n, dtype=bool), np.zeros(n, dtype=bool))  # not evaluable: might match, unproven
    if isinstance(expr, Widened):
        return Verdict(evaluate(expr.child, stats, kinds).might, np.zeros(n, dtype=bool))
    if isinstance(expr, And):
        left, right = evaluate(expr.left, stats, kinds), evaluate(expr.right, stats, kinds)
        return Verdict(left.might & right.might, left.all & right.all)
    if isinstance(expr, Or):
        left, right = evaluate(expr.left, stats, kinds), evaluate(expr.right, stats, kinds)
        return Verdict(left.might | right.might, left.all | right.all)
    if isinstance(expr, BoundCompare):
        return _compare(expr, stats.column(expr.column))
    if isinstance(expr, IsNull):
        return _is_null(expr, stats.column(expr.column))
    if isinstance(expr, IsNaN):
        return _is_nan(expr, stats.column(expr.column))
    if isinstance(expr, Pattern):
        return _pattern(expr, stats.column(expr.column))
    if isinstance(expr, BoundField):
        return _field(expr, stats.column(expr.column))
    raise TypeError(f"cannot evaluate {expr!r}")


def statistics_used(leaf: Expr) -> str:
    """Which statistics the min/max stage reads for one bound leaf (for explain)."""
    if isinstance(leaf, Widened):
        return statistics_used(leaf.child) + " (literal widened: never proves all rows match)"
    if isinstance(leaf, (And, Or)):
        return "; ".join(statistics_used(part) for part in (leaf.left, leaf.right))
    if isinstance(leaf, BoundCompare):
        return f"lower/upper bounds and null/NaN counts of {leaf.column.name}"
    if isinstance(leaf, IsNull):
        return f"null and value counts of {leaf.column.name}"
    if isinstance(leaf, IsNaN):
        return f"NaN, null and value counts of {leaf.column.name}"
    if isinstance(leaf, Pattern):
        shape = pattern_shape(leaf.kind, leaf.pattern, leaf.escape)
        if shape.exact == "equal":
            return f"lower/upper bounds of {leaf.column.name} (pattern is an equality)"
        if not shape.prefix:
            return f"null counts of {leaf.column.name} only (no literal prefix)"
        return f"lower/upper bounds of {leaf.column.name} against prefix {shape.prefix!r}"
    if isinstance(leaf, BoundField):
        period = {"month": "year", "day": "month", "hour": "day"}[leaf.field]
        return f"lower/upper bounds of {leaf.column.name}, for files within one {period}"
    if isinstance(leaf, Unusable):
        return f"none: {leaf.reason}"
    return "none"
