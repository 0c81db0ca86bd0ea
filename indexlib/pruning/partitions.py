"""Partition stage: what a data file's partition values alone prove about a row filter.

Iceberg records, for every data file, the spec it was written under and one partition tuple (e.g. `day(ts)`,
`bucket[16](id)`, `truncate[4](name)`), read from the manifests the planner lists anyway. It needs no index entry,
so it also covers files committed after the last build, and a bucket proves `id = 42` absent where min/max cannot.

Safety argument, once for the whole module. Every row of a file maps to the file's partition tuple.
- might: pyiceberg's inclusive projection turns the filter into a predicate on partition tuples that every matching
  row's tuple satisfies (its partitions are a superset of the matching ones). A file whose tuple fails it holds no
  matching row, so it is skipped.
- all: the strict projection is a predicate whose tuples hold only matching rows (a subset). A file whose tuple
  passes it matches on every row. pyiceberg evaluates `null != v`, `null NOT IN (...)` as true, SQL as unknown, so
  each negative leaf (!=, NOT IN, NOT starts_with, NOT isnan) gets an explicit NOT NULL before projecting.
- unknown keeps: a file with no partition record or an unknown spec id, an unpartitioned spec, a spec that cannot
  be projected, or a NaN partition value (engines order NaN differently) gives might = True, all = False.
Each file is judged under its own spec, so spec evolution needs nothing more; fields a v1 table removed become
`void`, which projects to nothing (might stays True, all stays False).

The per-transform projections were read in pyiceberg 0.12 `transforms.py` and found sound: identity (every
operator), year/month/day/hour (monotone floor transforms: ranges, =, IN; strict ranges, !=, NOT IN), bucket
(=, IN; strict !=, NOT IN), truncate (monotone: ranges, =, IN, starts_with; strict ranges, !=, NOT IN,
starts_with), void (nothing). One assumption stays: pre-1970 time partition values were computed with floor
semantics, as current writers (and pyiceberg's) do. Old Iceberg Java releases truncated towards zero; Java's planner
still widens its projections for such files (ProjectionUtil.fixInclusiveTimeProjection), pyiceberg does not.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyiceberg import expressions as ice
from pyiceberg.expressions.visitors import (
    BooleanExpressionVisitor,
    bind,
    expression_evaluator,
    extract_field_ids,
    inclusive_projection,
    rewrite_not,
    strict_projection,
    visit,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import DateType

from indexlib.pruning.evaluator import Evidence, evaluate
from indexlib.pruning.iceberg_filter import to_iceberg_filter, to_strict_iceberg_filter
from indexlib.pruning.minmax import MinMaxEvidence
from indexlib.query.model import COMPARE, And, BoundField, Const, Expr, Or, Widened
from indexlib.query.normalize import leaves
from indexlib.query.visitor import ExprVisitor
from indexlib.sources.base import DataFileRef, IcebergPartitioning, IdentityPartitioning, Source
from indexlib.statistics.partition_values import PartitionValueStatistics
from indexlib.statistics.verdict import Verdict

log = logging.getLogger(__name__)

_Verdict = Callable[[Any], tuple[bool, bool]]
_UNKNOWN = (True, False)


@dataclass(frozen=True)
class PartitionPruning:
    """What the files' partition values prove about a bound predicate: per-file might / all_match, and for explain
    the partition fields the predicate was lifted to."""

    might: np.ndarray
    all_match: np.ndarray
    lifted: list[str] = field(default_factory=list)

    @staticmethod
    def unknown(n: int) -> PartitionPruning:
        unknown = Verdict.unknown(n)
        return PartitionPruning(unknown.might, unknown.all_match)


def prune_partitions(source: Source, files: Sequence[DataFileRef], predicate: Expr) -> PartitionPruning:
    """The partition evidence alone over `files` of `source` for a bound predicate (what a backfill selects its
    files by); never fails (evidence that cannot run proves nothing: every file is kept)."""
    evidence = PartitionEvidence(source, files)
    verdict = evaluate(predicate, [evidence], len(files))[-1].verdict
    return PartitionPruning(verdict.might, verdict.all_match, evidence.lifted(predicate))


class PartitionEvidence(Evidence):
    """What each file's partition values prove about one leaf. Iceberg: the leaf lifted through the file's spec
    (pyiceberg projections, see the module docstring), and calendar-field leaves decided by time partitions
    (`calendar_field_verdict`). Delta (identity partitions): each file's partition value read as its column's
    bounds and counts, judged by the min/max rules (statistics/partition_values.py)."""

    name = "partition"

    def __init__(self, source: Source, files: Sequence[DataFileRef]) -> None:
        self.source_name, self.files = source.name, files
        partitioning = source.partitioning
        self.table: Any = None
        self.identity: MinMaxEvidence | None = None
        if isinstance(partitioning, IcebergPartitioning):
            self.table = partitioning.table
            self.sources = {field.source_id for spec in self.table.specs().values() for field in spec.fields}
        elif isinstance(partitioning, IdentityPartitioning):
            self.sources = {column.field_id for column in partitioning.columns}
            self.columns = partitioning.columns
            names = {column.name for column in partitioning.columns}
            values = [{c: v for c, v in ref.partition or () if c in names} for ref in files]
            statistics = PartitionValueStatistics(values, [ref.record_count for ref in files])
            self.identity = MinMaxEvidence(statistics, name=self.name)
        else:
            raise TypeError(f"unknown partitioning {partitioning!r} of {source.name}")

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        column = getattr(leaf, "column", None)
        if column is None or column.field_id not in self.sources or not self.files:
            return None  # no partition is derived from the column this leaf reads
        if self.identity is not None:
            return self.identity.answer(leaf, candidates)
        try:
            might, all_match = partition_verdict(
                self.table,
                self.files,
                to_iceberg_filter(leaf, self.sources),
                case_sensitive=True,
                strict_filter=to_strict_iceberg_filter(leaf, self.sources),
            )
            if isinstance(leaf, BoundField):
                field_might, field_all_match = calendar_field_verdict(self.table, self.files, leaf)
                might, all_match = might & field_might, all_match | field_all_match
        except Exception:  # never fail a lookup over partition values: they prove nothing, every file is kept
            log.warning("partition values not used for %s (leaf %s)", self.source_name, leaf, exc_info=True)
            return None
        return Verdict(might, all_match)

    def lifted(self, predicate: Expr) -> list[str]:
        """For explain: the partition fields the predicate is lifted to."""
        used = _columns_named(predicate)
        if self.identity is not None:
            return [f"{c.name} (identity)" for c in self.columns if c.field_id in used] if self.files else []
        if not self.sources & used:
            return []
        try:
            return lifted_fields(self.table, to_iceberg_filter(predicate, self.sources), case_sensitive=True)
        except Exception:  # explain only
            return []


def _columns_named(predicate: Expr) -> set[int]:
    """Field ids of the columns the predicate's leaves read (inside widened leaves too)."""
    named: set[int] = set()
    for leaf in leaves(predicate):
        if isinstance(leaf, Widened):
            named |= _columns_named(leaf.child)
        elif (column := getattr(leaf, "column", None)) is not None:
            named.add(column.field_id)
    return named


def partition_verdict(
    table: Any,
    files: Sequence[DataFileRef],
    row_filter: ice.BooleanExpression,
    case_sensitive: bool = False,
    strict_filter: ice.BooleanExpression | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(might, all) boolean arrays over `files` for the unbound pyiceberg `row_filter`.

    `strict_filter`, when given, is what `all_match` is proven for: a subset of `row_filter`'s rows. Callers whose
    `row_filter` is a widened (inclusive) translation of their predicate pass the exact-or-narrower one here.

    `table` is a pyiceberg `Table` (or its `TableMetadata`: anything with `schema()` and `specs()`); `files` carry
    their `spec_id` and partition record. `might[i]` is False only when file i's partition values prove no row
    matches; `all_match[i]` is True only when they prove every row does. A filter that does not bind to the table's
    schema raises, as it would in pyiceberg's own scan.
    """
    schema = table.schema()
    bind(schema, row_filter, case_sensitive)  # a caller's mistake (unknown column) should not read as "unknown"
    specs = table.specs()
    verdicts: dict[int, _Verdict | None] = {}
    seen: dict[tuple[int, tuple[Any, ...]], tuple[bool, bool]] = {}
    unknown = Verdict.unknown(len(files))
    might, all_match = unknown.might, unknown.all_match
    for i, ref in enumerate(files):
        if ref.partition is None or ref.spec_id not in specs:
            continue
        if ref.spec_id not in verdicts:
            verdicts[ref.spec_id] = _spec_verdict(
                schema,
                specs[ref.spec_id],
                row_filter,
                row_filter if strict_filter is None else strict_filter,
                case_sensitive,
            )
        verdict = verdicts[ref.spec_id]
        if verdict is None:
            continue
        try:
            key: tuple[int, tuple[Any, ...]] | None = (ref.spec_id, tuple(ref.partition))
            result = seen.get(key)  # files share partitions: evaluate each tuple once
        except TypeError:  # an unhashable partition value: just evaluate
            key, result = None, None
        if result is None:
            result = verdict(ref.partition)
            if key is not None:
                seen[key] = result
        might[i], all_match[i] = result
    return might, all_match


def lifted_fields(table: Any, row_filter: ice.BooleanExpression, case_sensitive: bool = False) -> list[str]:
    """For explain: the partition fields, per spec, that `row_filter` projects onto (inclusive projection).

    E.g. `["spec 0: ts_day = day(ts)", "spec 1: id_bucket = bucket[16](id)"]`; a field whose projection is
    AlwaysTrue (nothing to prune with) is left out.
    """
    schema = table.schema()
    lines = []
    for spec_id, spec in sorted(table.specs().items()):
        if spec.is_unpartitioned():
            continue
        try:
            projected = inclusive_projection(schema, spec, case_sensitive)(row_filter)
            used = extract_field_ids(bind(_partition_schema(schema, spec), projected, case_sensitive))
        except Exception:  # explain only; partition_verdict keeps such files
            continue
        for part in spec.fields:
            if part.field_id in used:
                source = schema.find_column_name(part.source_id)
                lines.append(f"spec {spec_id}: {part.name} = {part.transform}({source})")
    return lines


def _partition_schema(schema: Schema, spec: PartitionSpec) -> Schema:
    return Schema(*spec.partition_type(schema).fields)


def _spec_verdict(
    schema: Schema,
    spec: PartitionSpec,
    row_filter: ice.BooleanExpression,
    strict_filter: ice.BooleanExpression,
    case_sensitive: bool,
) -> _Verdict | None:
    """Evaluate a partition record of `spec`, as pyiceberg's DataScan does; None when the spec proves nothing."""
    if spec.is_unpartitioned():
        return None  # nothing to read: the statistics stages decide
    try:
        partition_schema = _partition_schema(schema, spec)
        might_match = expression_evaluator(
            partition_schema, inclusive_projection(schema, spec, case_sensitive)(row_filter), case_sensitive
        )
        all_match = expression_evaluator(
            partition_schema,
            strict_projection(schema, spec, case_sensitive)(_null_guarded(strict_filter)),
            case_sensitive,
        )
    except Exception:  # e.g. a partition source column since dropped: unknown, keep every file
        log.debug("partition spec %s cannot be projected; its files are kept", spec.spec_id, exc_info=True)
        return None

    def verdict(partition: Any) -> tuple[bool, bool]:
        if any(isinstance(value, float) and value != value for value in partition):
            return _UNKNOWN  # NaN partition value: Spark orders NaN above every number, Python compares it false
        try:
            return bool(might_match(partition)), bool(all_match(partition))
        except Exception:  # a record that does not fit its spec proves nothing
            return _UNKNOWN

    return verdict


def _null_guarded(row_filter: ice.BooleanExpression) -> ice.BooleanExpression:
    """`row_filter` with NOT pushed to the leaves and `x IS NOT NULL AND` before each negative leaf on x."""
    return visit(rewrite_not(row_filter), _NullGuard())


class _NullGuard(BooleanExpressionVisitor[ice.BooleanExpression]):
    _NEGATIVE = (ice.NotEqualTo, ice.NotIn, ice.NotStartsWith, ice.NotNaN)

    def visit_true(self) -> ice.BooleanExpression:
        return ice.AlwaysTrue()

    def visit_false(self) -> ice.BooleanExpression:
        return ice.AlwaysFalse()

    def visit_not(self, child_result: ice.BooleanExpression) -> ice.BooleanExpression:
        raise ValueError(f"NOT should have been pushed to the leaves: {child_result}")

    def visit_and(
        self, left_result: ice.BooleanExpression, right_result: ice.BooleanExpression
    ) -> ice.BooleanExpression:
        return ice.And(left_result, right_result)

    def visit_or(
        self, left_result: ice.BooleanExpression, right_result: ice.BooleanExpression
    ) -> ice.BooleanExpression:
        return ice.Or(left_result, right_result)

    def visit_unbound_predicate(self, predicate: ice.UnboundPredicate) -> ice.BooleanExpression:
        if isinstance(predicate, self._NEGATIVE):
            return ice.And(ice.NotNull(predicate.term), predicate)
        return predicate

    def visit_bound_predicate(self, predicate: ice.BoundPredicate) -> ice.BooleanExpression:
        raise TypeError(f"expected an unbound row filter, got {predicate}")


def calendar_field_verdict(table: Any, files: Sequence[DataFileRef], predicate: Expr) -> tuple[np.ndarray, np.ndarray]:
    """(might, all) of a bound predicate from its calendar-field leaves (`month/day/hour(c) op N`) alone.

    pyiceberg has no projection for month-of-year, but a file partitioned by month(c), day(c), hour(c) or identity(c)
    holds rows whose fields are fixed by the partition value (a non-null partition value means c is never NULL in
    the file), so such a leaf is decided exactly. Every other leaf counts as unknown (might, not all), so the result
    is a sound superset / subset on its own and combines with the projection verdict by AND (might) / OR (all).
    """
    unknown = Verdict.unknown(len(files))
    might, all_match = unknown.might, unknown.all_match
    if not any(isinstance(leaf, BoundField) for leaf in leaves(predicate)):
        return might, all_match
    specs, schema = table.specs(), table.schema()

    seen: dict[Any, tuple[bool, bool]] = {}
    for i, ref in enumerate(files):
        if ref.partition is None:
            continue
        key = (ref.spec_id, tuple(ref.partition))  # files share partitions: evaluate each tuple once
        try:
            result = seen.get(key)
        except TypeError:  # an unhashable partition value: just evaluate
            key, result = None, None
        if result is None:
            result = _CalendarFields(schema, specs.get(ref.spec_id), ref.partition).visit(predicate)
            if key is not None:
                seen[key] = result
        might[i], all_match[i] = result
    return might, all_match


class _CalendarFields(ExprVisitor[tuple[bool, bool]]):
    """(might, all) of a predicate for one partition record, deciding only calendar-field leaves."""

    def __init__(self, schema: Schema, spec: PartitionSpec | None, partition: Any) -> None:
        self.schema, self.spec, self.partition = schema, spec, partition

    def visit_const(self, expr: Const) -> tuple[bool, bool]:
        return bool(expr.value), bool(expr.value)

    def visit_and(self, expr: And) -> tuple[bool, bool]:
        (m1, a1), (m2, a2) = self.visit(expr.left), self.visit(expr.right)
        return m1 and m2, a1 and a2

    def visit_or(self, expr: Or) -> tuple[bool, bool]:
        (m1, a1), (m2, a2) = self.visit(expr.left), self.visit(expr.right)
        return m1 or m2, a1 or a2

    def visit_widened(self, expr: Widened) -> tuple[bool, bool]:
        return self.visit(expr.child)[0], False

    def visit_bound_field(self, expr: BoundField) -> tuple[bool, bool]:
        moment = _partition_moment(self.schema, self.spec, self.partition, expr.column.field_id, expr.field)
        if moment is _ALL_NULL:
            return False, False
        if moment is None:
            return _UNKNOWN
        value = {"month": moment.month, "day": moment.day, "hour": getattr(moment, "hour", 0)}[expr.field]
        result = COMPARE[expr.op](value, expr.value)
        return result, result

    def visit_leaf(self, expr: Expr) -> tuple[bool, bool]:
        return _UNKNOWN  # every other leaf: the projection and statistics stages decide it

    visit_bound_compare = visit_bound_in = visit_is_null = visit_is_nan = visit_pattern = visit_unusable = visit_leaf


_NULL_PRESERVING = ("identity", "year", "month", "day", "hour")  # f(x) is NULL exactly when x is (void is not)
_ALL_NULL = object()


def _partition_moment(schema: Schema, spec: PartitionSpec | None, partition: Any, source_id: int, field: str) -> Any:
    """A date/datetime that shares `field` with every row of the file, from a partition on `source_id`; `_ALL_NULL`
    when the partition value says the column is NULL in every row; None when the spec does not say."""
    if spec is None or partition is None:
        return None
    epoch = dt.datetime(1970, 1, 1)
    for position, part in enumerate(spec.fields):
        if part.source_id != source_id:
            continue
        value, transform = partition[position], str(part.transform)
        if value is None:
            if transform in _NULL_PRESERVING:
                return _ALL_NULL  # every row's value is NULL, so no field comparison is TRUE
            continue
        try:
            if transform == "month" and field == "month":
                year, month = divmod(int(value), 12)
                return dt.date(1970 + year, month + 1, 1)
            if transform == "day" and field in ("month", "day"):
                return value if isinstance(value, dt.date) else (epoch + dt.timedelta(days=int(value))).date()
            if transform == "hour":
                return epoch + dt.timedelta(hours=int(value))
            if transform == "identity":
                if isinstance(schema.find_field(source_id).field_type, DateType):
                    day = value if isinstance(value, dt.date) else (epoch + dt.timedelta(days=int(value))).date()
                    return day if field != "hour" else None
                return value if isinstance(value, dt.datetime) else epoch + dt.timedelta(microseconds=int(value))
        except (OverflowError, ValueError, TypeError):
            return None
    return None
