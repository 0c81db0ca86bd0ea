"""Same-column conjunctions judged as one interval (query/intervals.py), one case each, on real Parquet files whose
floating-point column holds NaN, -0.0 and NULL beside numbers; every verdict is checked against the rows themselves
under Spark SQL's reading (NaN above every number and equal to itself, -0.0 equal to 0.0, NULL never TRUE)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from conftest import write_and_index
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField

from indexlib.index_kinds.settings import IndexSettings
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.query.model import FALSE, BoundCompare, operands
from indexlib.query.model import And as AndNode

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
FILES = {
    "small with NaN": [1.0, 50.0, math.nan, None],
    "NaN only": [math.nan, math.nan, None],
    "zeros": [-0.0, -0.0, -0.0],
    "in range": [680.0, 690.0, 700.0],
    "large": [900.0, 1000.0, None],
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    arrow = SCHEMA.as_arrow()  # with the field ids the index reads columns by
    tables = [pa.Table.from_pydict({"id": list(range(len(v))), "x": v}, schema=arrow) for v in FILES.values()]
    paths, entries = write_and_index(tmp_path_factory.mktemp("intervals"), tables, SCHEMA, IndexSettings(kinds=()))
    return paths, entries


def spark_reading(where: str, x: float | None) -> bool:
    """`where` on one row under Spark SQL's reading, by Python over the value (the cases' WHEREs only)."""
    if x is None:
        return False  # every comparison below is NULL on NULL, and so never TRUE
    key = math.inf if math.isnan(x) else x  # NaN above every number; -0.0 == 0.0 as Python compares
    nan = math.isnan(x)
    expression = where.replace("NOT ", "not ").replace(" AND ", " and ").replace(" OR ", " or ").replace("=", "==")
    expression = expression.replace("<==", "<=").replace(">==", ">=").replace("!==", "!=").replace(" IN ", " in ")
    return bool(eval(expression, {"x": key, "nan": nan}))  # noqa: S307 (the table's own WHEREs, below)


# (WHERE, the files kept, the rule)
CASES = [
    ("x >= 680 AND x <= 700", {"in range"}, "NaN lies outside a bounded range: the NaN files are not kept for it"),
    ("x > 100 AND x < 2000", {"in range", "large"}, "an open range too"),
    ("x > 100", {"small with NaN", "NaN only", "in range", "large"}, "alone, `x > c` keeps NaN (above every number)"),
    ("x >= 680 AND NOT (x > 700)", {"in range"}, "NOT (x > 700) is x <= 700: NaN is not in it"),
    ("x > 800 AND x < 700", set(), "an empty range matches nothing"),
    ("x >= 700 AND x <= 700", {"in range"}, "a range of one value is that value"),
    ("x > 700 AND x <= 700", set(), "nor does (700, 700]"),
    ("x IN (1.0, 690.0, 5000.0) AND x >= 100", {"in range"}, "an IN inside a range keeps only its values within"),
    ("x IN (1.0, 2.0) AND x >= 100", set(), "no IN value within the range: nothing"),
    ("x = 0 AND x >= -0.0", {"zeros"}, "-0.0 equals 0: the zeros file"),
    ("x > -0.0 AND x <= 0", set(), "(0, 0] is empty, whichever sign"),
    ("x != 50 AND x < 10", {"small with NaN", "zeros"}, "!= keeps NaN alone, not beside a bound above"),
    ("x > 100 AND x = 690", {"in range"}, "= is FALSE on NaN: NaN files not kept"),
    ("(x > 100 AND x < 800) OR x = 1", {"small with NaN", "in range"}, "each AND chain of an OR on its own"),
    ("x > 100 OR x < 10", {"small with NaN", "NaN only", "zeros", "in range", "large"}, "an OR is no interval"),
]


@pytest.mark.parametrize(("where", "kept", "rule"), CASES, ids=[c[0] for c in CASES])
def test_an_and_chain_on_one_column_is_one_interval(indexed, where, kept, rule):
    paths, entries = indexed
    verdicts = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)
    got = {name for name, keep in zip(FILES, verdicts.kept, strict=True) if keep}
    holding = {name for name, values in FILES.items() if any(spark_reading(where, v) for v in values)}
    assert holding <= got, f"never skip a file holding a match: {where}"
    assert got == kept, f"{rule} ({where})"
    for name, proven in zip(FILES, verdicts.all_match, strict=True):
        if proven:
            assert all(spark_reading(where, v) for v in FILES[name]), f"all-match proven on every row: {where}"


def test_the_rewrite_is_on_the_bound_tree():
    """NaN is excluded on the `>` leaf of a chain holding `<`; an empty chain is FALSE before any statistics."""
    bound = bound_predicate("x >= 680 AND x <= 700 AND id > 3", SCHEMA, "db.t")
    parts = {(p.column.name, p.op): p for p in operands(bound, AndNode) if isinstance(p, BoundCompare)}
    assert parts[("x", ">=")].nan_excluded, "x >= 680 beside x <= 700 is judged on the non-NaN values"
    assert not parts[("id", ">")].nan_excluded, "a column with no bound above keeps its NaN reading"
    assert bound_predicate("x > 5 AND x < 1", SCHEMA, "db.t") == FALSE, "an empty range is FALSE"
