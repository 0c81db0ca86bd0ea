"""Partition evidence: what a data file's partition values alone prove about a leaf of the predicate.

Iceberg records, for every data file, the spec it was written under and one partition tuple (e.g. `day(ts)`,
`bucket[16](id)`, `truncate[4](name)`), read from the manifests the planner lists anyway. It needs no index entry,
so it also covers files committed after the last build, and a bucket proves `id = 42` absent where min/max cannot.

Two readings, one per kind of transform. A partition value that is an interval of its column (identity, year,
month, day, hour; Delta's identity partitions) is read as the column's bounds and counts and judged by the min/max
rules like an index entry (statistics/partition_values.py has its safety argument). Bucket and truncate (and void or
any later transform) are not intervals the rules can use, so the leaf is lifted through pyiceberg's projections onto
those fields of the file's spec; the argument for that reading follows.

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

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

# mypy takes the pydantic fields of pyiceberg's predicates for their constructor, so it rejects the positional calls
# pyiceberg documents (apache/iceberg-python#3101): those calls carry a `type: ignore` naming the issue.
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
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.typedef import Record

from indexlib.pruning.evaluator import Evidence, evaluate
from indexlib.pruning.iceberg_filter import to_iceberg_filter, to_strict_iceberg_filter
from indexlib.pruning.minmax import MinMaxEvidence
from indexlib.query.model import Expr, Widened
from indexlib.query.normalize import leaves
from indexlib.sources.base import DataFileRef, IcebergPartitioning, IdentityPartitioning, Source
from indexlib.statistics.partition_values import BOUNDING_TRANSFORMS, Pairs, PartitionValueStatistics
from indexlib.statistics.verdict import Verdict

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.transforms import Transform

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
    """What each file's partition values prove about one leaf. A partition value that is an interval of its column
    (identity, year, month, day, hour) is read as the column's bounds and counts and judged by the min/max rules
    (statistics/partition_values.py): the same rules as the index's, for every leaf, calendar fields included. Only
    bucket and truncate (and any transform not named there) are lifted through pyiceberg's projections, per file
    spec (`partition_verdict`, safety argument in the module docstring). Delta's identity partitions are intervals."""

    name = "partition"

    def __init__(self, source: Source, files: Sequence[DataFileRef]) -> None:
        self.source_name, self.files = source.name, files
        partitioning = source.partitioning
        self.table: Table | None = None
        self.projected: set[int] = set()  # source columns of fields left to pyiceberg's projection
        if isinstance(partitioning, IcebergPartitioning):
            self.table = partitioning.table
            specs = self.table.specs()
            fields = [field for spec in specs.values() for field in spec.fields]
            self.projected = {f.source_id for f in fields if _transform_name(f.transform) not in BOUNDING_TRANSFORMS}
            self.bounded = {f.source_id for f in fields if _transform_name(f.transform) in BOUNDING_TRANSFORMS}
            pairs = _iceberg_pairs(specs, files)
        elif isinstance(partitioning, IdentityPartitioning):
            self.columns = partitioning.columns
            self.bounded = {column.field_id for column in partitioning.columns}
            pairs = _identity_pairs(partitioning, files)
        else:
            raise TypeError(f"unknown partitioning {partitioning!r} of {source.name}")
        statistics = PartitionValueStatistics(len(files), pairs, lambda: [ref.record_count for ref in files])
        self.bounds = MinMaxEvidence(statistics, name=self.name)

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        column = getattr(leaf, "column", None)
        if column is None or not self.files:
            return None
        verdicts = []
        if column.field_id in self.bounded:
            verdicts.append(self.bounds.answer(leaf, candidates))
        if column.field_id in self.projected:
            verdicts.append(self._projected(leaf))
        found = [verdict for verdict in verdicts if verdict is not None]
        if not found:
            return None  # no partition is derived from the column this leaf reads
        return found[0] if len(found) == 1 else found[0].narrowed_by(found[1])

    def _projected(self, leaf: Expr) -> Verdict | None:
        try:
            assert self.table is not None  # `projected` is empty unless the source is an Iceberg table
            might, all_match = partition_verdict(
                self.table,
                self.files,
                to_iceberg_filter(leaf, self.projected),
                case_sensitive=True,
                strict_filter=to_strict_iceberg_filter(leaf, self.projected),
                projected=_is_projected,
            )
        except Exception:  # never fail a lookup over partition values: they prove nothing, every file is kept
            log.warning("partition values not used for %s (leaf %s)", self.source_name, leaf, exc_info=True)
            return None
        return Verdict(might, all_match)

    def lifted(self, predicate: Expr) -> list[str]:
        """For explain: the partition fields the predicate is lifted to."""
        used = _columns_named(predicate)
        if self.table is None:
            return [f"{c.name} (identity)" for c in self.columns if c.field_id in used] if self.files else []
        if not (self.projected | self.bounded) & used:
            return []
        try:
            sources = self.projected | self.bounded
            return lifted_fields(self.table, to_iceberg_filter(predicate, sources), case_sensitive=True)
        except Exception:  # explain only
            return []


def _transform_name(transform: Transform[Any, Any]) -> str | None:
    """The name statistics/partition_values.py knows a transform by, or None (bucket, truncate, void, others)."""
    for kind, name in _BOUNDING:
        if isinstance(transform, kind):
            return name
    return None


_BOUNDING = (
    (IdentityTransform, "identity"),
    (YearTransform, "year"),
    (MonthTransform, "month"),
    (DayTransform, "day"),
    (HourTransform, "hour"),
)


def _is_projected(field: PartitionField) -> bool:
    return _transform_name(field.transform) is None


def _iceberg_pairs(specs: dict[int, PartitionSpec], files: Sequence[DataFileRef]) -> Pairs:
    """Per file, the (transform, value) pairs of its spec's fields on a column; none for a file without a partition
    record or with an unknown spec (unknown: kept)."""

    def pairs(field_id: int) -> list[list[tuple[str, Any]] | None]:
        positions: dict[int, list[tuple[int, str]]] = {}
        for spec_id, spec in specs.items():
            positions[spec_id] = [
                (position, name)
                for position, field in enumerate(spec.fields)
                if field.source_id == field_id and (name := _transform_name(field.transform)) is not None
            ]
        out: list[list[tuple[str, Any]] | None] = []
        for ref in files:
            at = positions.get(ref.spec_id) if ref.partition is not None else None
            try:
                out.append([(name, ref.partition[position]) for position, name in at] if at else None)
            except (IndexError, TypeError):  # a record that does not fit its spec proves nothing
                out.append(None)
        return out

    return pairs


def _identity_pairs(partitioning: IdentityPartitioning, files: Sequence[DataFileRef]) -> Pairs:
    names = {column.field_id: column.name for column in partitioning.columns}

    def pairs(field_id: int) -> list[list[tuple[str, Any]] | None]:
        name = names.get(field_id)
        out: list[list[tuple[str, Any]] | None] = []
        for ref in files:
            values = dict(ref.partition or ())
            out.append([("identity", values[name])] if name in values else None)
        return out

    return pairs


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
    table: Table,
    files: Sequence[DataFileRef],
    row_filter: ice.BooleanExpression,
    case_sensitive: bool = False,
    strict_filter: ice.BooleanExpression | None = None,
    projected: Callable[[PartitionField], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(might, all) boolean arrays over `files` for the unbound pyiceberg `row_filter`.

    `projected`, when given, picks the partition fields to project onto (the others are left out of each spec, as
    if the file were not partitioned by them: sound, since a subset of a spec's fields proves less).

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
    verdicts: dict[int, tuple[_Verdict | None, list[int] | None]] = {}
    seen: dict[tuple[int, tuple[Any, ...]], tuple[bool, bool]] = {}
    unknown = Verdict.unknown(len(files))
    might, all_match = unknown.might, unknown.all_match
    for i, ref in enumerate(files):
        if ref.partition is None or ref.spec_id not in specs:
            continue
        if ref.spec_id not in verdicts:
            spec, positions = _reduced(specs[ref.spec_id], projected)
            verdicts[ref.spec_id] = (
                _spec_verdict(
                    schema, spec, row_filter, row_filter if strict_filter is None else strict_filter, case_sensitive
                ),
                positions,
            )
        verdict, positions = verdicts[ref.spec_id]
        if verdict is None:
            continue
        key: tuple[int, tuple[Any, ...]] | None
        try:
            key = (ref.spec_id, tuple(ref.partition))
            result = seen.get(key)  # files share partitions: evaluate each tuple once
        except TypeError:  # an unhashable partition value: just evaluate
            key, result = None, None
        if result is None:
            try:
                record = ref.partition if positions is None else Record(*(ref.partition[p] for p in positions))
            except (IndexError, TypeError):  # a record that does not fit its spec proves nothing
                continue
            result = verdict(record)
            if key is not None:
                seen[key] = result
        might[i], all_match[i] = result
    return might, all_match


def lifted_fields(table: Table, row_filter: ice.BooleanExpression, case_sensitive: bool = False) -> list[str]:
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


def _reduced(
    spec: PartitionSpec, projected: Callable[[PartitionField], bool] | None
) -> tuple[PartitionSpec, list[int] | None]:
    """`spec` with only the fields `projected` picks, and their positions in the file's record (None: all)."""
    if projected is None:
        return spec, None
    positions = [position for position, part in enumerate(spec.fields) if projected(part)]
    if len(positions) == len(spec.fields):
        return spec, None
    return PartitionSpec(*(spec.fields[p] for p in positions), spec_id=spec.spec_id), positions


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
            return ice.And(ice.NotNull(predicate.term), predicate)  # type: ignore[call-arg]  # pyiceberg#3101
        return predicate

    def visit_bound_predicate(self, predicate: ice.BoundPredicate) -> ice.BooleanExpression:
        raise TypeError(f"expected an unbound row filter, got {predicate}")
