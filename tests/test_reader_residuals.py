"""The residual a task carries, as the client's reader must get it (pruning/residuals.py, service/planner.py's
`ReaderResiduals`): zeros written for Java's order, NaN-prone files widened (not inside a bounded range), leaves on
columns the client cannot bind replaced. Rule tables, then a property test of the whole against a model of Iceberg
Java's row-group filter (min/max that leave NaN out, ordered by `Double.compare`: -0.0 below 0.0; NOT pushed into
the leaves first): for random residuals and row groups holding NaN, both zeros and NULL, every row group holding a
row that Spark SQL's reading makes TRUE is kept, and the rewritten residual selects the same rows as the original."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyiceberg import expressions as ice
from pyiceberg.expressions.visitors import rewrite_not
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField

from indexlib.pruning.residuals import client_bindable, nan_widened, zero_widened

X, Y = ice.Reference("x"), ice.Reference("y")
XS = frozenset({"x"})

# (residual, sent, rule)
ZERO = [
    (ice.EqualTo(X, 0.0), ice.And(ice.GreaterThanOrEqual(X, -0.0), ice.LessThanOrEqual(X, 0.0)), "= 0: both zeros"),
    (ice.GreaterThanOrEqual(X, 0.0), ice.GreaterThanOrEqual(X, -0.0), ">= 0 from the lower zero"),
    (ice.GreaterThan(X, -0.0), ice.GreaterThan(X, 0.0), "> -0.0 above the upper zero"),
    (ice.LessThanOrEqual(X, -0.0), ice.LessThanOrEqual(X, 0.0), "<= -0.0 up to the upper zero"),
    (ice.LessThan(X, 0.0), ice.LessThan(X, -0.0), "< 0 below the lower zero"),
    (
        ice.NotEqualTo(X, 0.0),
        ice.Not(ice.And(ice.GreaterThanOrEqual(X, -0.0), ice.LessThanOrEqual(X, 0.0))),
        "!= 0: neither zero, as a negated range (a NOT above it makes it `=`)",
    ),
    (
        ice.In(X, [0.0, 3.0]),
        ice.Or(ice.In(X, [0.0, 3.0]), ice.And(ice.GreaterThanOrEqual(X, -0.0), ice.LessThanOrEqual(X, 0.0))),
        "an IN holding a zero gains both zeros' range",
    ),
    (ice.GreaterThan(X, 1.0), ice.GreaterThan(X, 1.0), "no zero: as it came"),
    (ice.EqualTo(Y, 0), ice.EqualTo(Y, 0), "not a floating-point column: as it came"),
]


@pytest.mark.parametrize(("residual", "sent", "rule"), ZERO, ids=[rule for *_, rule in ZERO])
def test_zeros_are_written_for_javas_order(residual, sent, rule) -> None:
    assert zero_widened(residual, XS) == sent, rule


# (residual, widened, rule): NaN-prone files, with the interval rule
NAN = [
    (
        ice.And(ice.GreaterThanOrEqual(X, 680.0), ice.LessThanOrEqual(X, 700.0)),
        ice.And(ice.GreaterThanOrEqual(X, 680.0), ice.LessThanOrEqual(X, 700.0)),
        "a bounded range: NaN is outside it, nothing widened",
    ),
    (
        ice.Not(ice.Or(ice.LessThan(X, 680.0), ice.GreaterThan(X, 700.0))),
        ice.Not(ice.Or(ice.LessThan(X, 680.0), ice.GreaterThan(X, 700.0))),
        "the same range written through a NOT",
    ),
    (
        ice.And(ice.GreaterThan(X, 1.0), ice.Or(ice.EqualTo(X, 5.0), ice.EqualTo(Y, 1))),
        ice.And(ice.Or(ice.GreaterThan(X, 1.0), ice.IsNaN(X)), ice.Or(ice.EqualTo(X, 5.0), ice.EqualTo(Y, 1))),
        "an `=` inside an OR does not bound the conjunction",
    ),
    (
        ice.And(ice.GreaterThan(X, 1.0), ice.In(X, [2.0, 3.0])),
        ice.And(ice.GreaterThan(X, 1.0), ice.In(X, [2.0, 3.0])),
        "an IN beside it excludes NaN",
    ),
    (
        ice.And(ice.LessThan(X, 9.0), ice.Or(ice.GreaterThan(X, 1.0), ice.EqualTo(Y, 1))),
        ice.And(ice.LessThan(X, 9.0), ice.Or(ice.GreaterThan(X, 1.0), ice.EqualTo(Y, 1))),
        "an excluding leaf covers the whole conjunction beneath it",
    ),
    (
        ice.And(ice.GreaterThan(X, 1.0), ice.LessThan(Y, 9)),
        ice.And(ice.Or(ice.GreaterThan(X, 1.0), ice.IsNaN(X)), ice.LessThan(Y, 9)),
        "a bound on another column excludes nothing",
    ),
]


@pytest.mark.parametrize(("residual", "widened", "rule"), NAN, ids=[rule for *_, rule in NAN])
def test_nan_widening_leaves_bounded_ranges_alone(residual, widened, rule) -> None:
    assert nan_widened(residual, XS) == widened, rule


SNAPSHOT = Schema(NestedField(1, "id", LongType()), NestedField(2, "d", DoubleType()), NestedField(3, "s", LongType()))
CURRENT = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "miles", DoubleType()),
    NestedField(4, "s", LongType()),
    schema_id=1,
)
D, S, ID = ice.Reference("d"), ice.Reference("s"), ice.Reference("id")
BINDABLE = [
    (ice.And(ice.EqualTo(D, 1.0), ice.EqualTo(ID, 3)), ice.EqualTo(ID, 3), "a renamed column's leaf is TRUE"),
    (ice.Not(ice.EqualTo(D, 1.0)), ice.AlwaysTrue(), "FALSE under a NOT, so the residual is wider: NOT FALSE"),
    (
        ice.Or(ice.EqualTo(S, 1), ice.EqualTo(ID, 3)),
        ice.AlwaysTrue(),
        "a name dropped and added again is another field",
    ),
    (ice.EqualTo(ID, 3), ice.EqualTo(ID, 3), "a column of the same name and field in both: as it came"),
]


@pytest.mark.parametrize(("residual", "sent", "rule"), BINDABLE, ids=[rule for *_, rule in BINDABLE])
def test_a_residual_names_only_columns_the_client_binds_in_both_schemas(residual, sent, rule) -> None:
    assert client_bindable(residual, SNAPSHOT, CURRENT) == sent, rule
    assert client_bindable(residual, CURRENT, CURRENT) is residual, "one schema: as it came"


# --- the property: a model of Iceberg Java's row-group filter against Spark SQL's reading of the rows -------------

Value = float | None


def spark_reading(node: Any, x: Value) -> bool | None:
    """Three-valued Spark SQL: NaN above every number and equal to itself, -0.0 equal to 0.0, NULL unknown."""
    if isinstance(node, ice.AlwaysTrue | ice.AlwaysFalse):
        return isinstance(node, ice.AlwaysTrue)
    if isinstance(node, ice.And | ice.Or):
        left, right = spark_reading(node.left, x), spark_reading(node.right, x)
        if isinstance(node, ice.And):
            return False if False in (left, right) else None if None in (left, right) else True
        return True if True in (left, right) else None if None in (left, right) else False
    if isinstance(node, ice.Not):
        child = spark_reading(node.child, x)
        return None if child is None else not child
    if isinstance(node, ice.IsNaN | ice.NotNaN):
        if x is None:
            return False
        return math.isnan(x) == isinstance(node, ice.IsNaN)
    if x is None:
        return None

    def key(v: float) -> tuple[int, float]:
        return (1, 0.0) if math.isnan(v) else (0, v)

    if isinstance(node, ice.In | ice.NotIn):
        found = any(key(x) == key(literal.value) for literal in node.literals)
        return found if isinstance(node, ice.In) else not found
    a, b = key(x), key(node.literal.value)
    return {
        ice.GreaterThan: a > b,
        ice.GreaterThanOrEqual: a >= b,
        ice.LessThan: a < b,
        ice.LessThanOrEqual: a <= b,
        ice.EqualTo: a == b,
        ice.NotEqualTo: a != b,
    }[type(node)]


def java_key(v: float) -> tuple[float, int]:
    """`Double.compare`: -0.0 below 0.0 (NaN never reaches it: statistics leave NaN out)."""
    return (v, 0 if math.copysign(1.0, v) < 0 else 1) if v == 0 else (v, 0)


def row_group_kept(node: Any, group: list[Value]) -> bool:
    """Iceberg Java's ParquetMetricsRowGroupFilter, modelled: NOT pushed into the leaves, min/max of the non-NULL,
    non-NaN values in Java's order, no NaN statistics (is_nan, not_nan, != and NOT IN might match)."""
    numbers = [v for v in group if v is not None and not math.isnan(v)]
    low = min(numbers, key=java_key) if numbers else None
    high = max(numbers, key=java_key) if numbers else None
    has_nan = any(v is not None and math.isnan(v) for v in group)

    def might(n: Any) -> bool:
        if isinstance(n, ice.AlwaysTrue | ice.AlwaysFalse):
            return isinstance(n, ice.AlwaysTrue)
        if isinstance(n, ice.And):
            return might(n.left) and might(n.right)
        if isinstance(n, ice.Or):
            return might(n.left) or might(n.right)
        if isinstance(n, ice.IsNaN | ice.NotNaN | ice.NotEqualTo | ice.NotIn):
            return any(v is not None for v in group)
        if low is None or high is None:
            return has_nan  # values but no min/max: might match; NULLs only: none
        if isinstance(n, ice.In):
            return any(java_key(low) <= java_key(lit.value) <= java_key(high) for lit in n.literals)
        v = java_key(n.literal.value)
        return {
            ice.LessThan: java_key(low) < v,
            ice.LessThanOrEqual: java_key(low) <= v,
            ice.GreaterThan: java_key(high) > v,
            ice.GreaterThanOrEqual: java_key(high) >= v,
            ice.EqualTo: java_key(low) <= v <= java_key(high),
        }[type(n)]

    return might(rewrite_not(node))


literals = st.sampled_from([0.0, -0.0, 1.0, -1.0, 5.0, 100.0])
values = st.one_of(st.none(), st.sampled_from([math.nan, 0.0, -0.0, 1.0, -1.0, 5.0, 100.0, 3.0]))
leaves = st.one_of(
    st.builds(lambda c, v: c(X, v), st.sampled_from([ice.LessThan, ice.LessThanOrEqual, ice.GreaterThan]), literals),
    st.builds(lambda c, v: c(X, v), st.sampled_from([ice.GreaterThanOrEqual, ice.EqualTo, ice.NotEqualTo]), literals),
    st.builds(lambda vs: ice.In(X, vs), st.lists(literals, min_size=2, max_size=3, unique_by=java_key)),
    st.builds(lambda vs: ice.NotIn(X, vs), st.lists(literals, min_size=2, max_size=3, unique_by=java_key)),
)
residuals = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.builds(ice.And, children, children), st.builds(ice.Or, children, children), st.builds(ice.Not, children)
    ),
    max_leaves=5,
)


@settings(max_examples=400, deadline=None)
@example(residual=ice.EqualTo(X, 0.0), group=[-0.0, None])  # Java's order puts -0.0 below 0.0
@example(residual=ice.GreaterThanOrEqual(X, 0.0), group=[-0.0])
@example(residual=ice.In(X, [0.0, 3.0]), group=[-0.0])
@example(residual=ice.Not(ice.NotEqualTo(X, 0.0)), group=[-0.0])
@example(residual=ice.GreaterThan(X, 1.0), group=[math.nan, 0.5])  # statistics leave NaN out
@example(residual=ice.Not(ice.LessThanOrEqual(X, 1.0)), group=[math.nan])
@given(residual=residuals, group=st.lists(values, min_size=1, max_size=5))
def test_the_reader_keeps_every_row_group_holding_a_match_and_selects_the_same_rows(residual, group) -> None:
    sent = nan_widened(zero_widened(residual, XS), XS)
    for x in group:
        assert spark_reading(sent, x) is True or spark_reading(residual, x) is not True, (
            f"no row the residual selects is lost: x = {x}, {residual} sent as {sent}"
        )
        # a NULL row may be gained under a NOT (NOT (x < c AND not_nan(x)) is TRUE on NULL): the engine's WHERE
        # drops it; any other row the residual does not select is not selected
        assert x is None or spark_reading(residual, x) is True or spark_reading(sent, x) is not True, (
            f"nor one it does not select gained: x = {x}, {residual} sent as {sent}"
        )
    if any(spark_reading(residual, x) is True for x in group):
        assert row_group_kept(sent, group), f"a row group holding a match is read: {group}, {residual} sent as {sent}"
