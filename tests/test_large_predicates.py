"""Predicates at planner scale: an IN list of any length is one set leaf, evaluated as a set by every stage (bounds,
Bloom filters, automata, partition projection); long chains of one operator and deep nesting never reach Python's
recursion limit, and beyond the documented limits (400 levels of parentheses, 100 of AND/OR/NOT) the error is one
line.

Ground truth is DuckDB over the same rows, as in test_pruning_properties.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot
from conftest import sweep, write_and_index
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DecimalType, IntegerType, LongType, NestedField, StringType

from indexlib.errors import UserError
from indexlib.index_kinds.settings import IndexSettings
from indexlib.lookup import lookup
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import _as_sets, _bind_leaf, bind, bound_predicate, in_list_values
from indexlib.query.model import BoundIn, Compare, In, Not, Or
from indexlib.query.normalize import leaves
from indexlib.query.sql import MAX_LOGIC_DEPTH, MAX_PARENTHESES, Clock, parse_where

SCHEMA = Schema(
    NestedField(1, "i", LongType()),
    NestedField(2, "s", StringType()),
    NestedField(3, "dec", DecimalType(9, 2)),
    NestedField(4, "d", DateType()),
    NestedField(5, "n", IntegerType()),
)
ARROW_SCHEMA = SCHEMA.as_arrow()
WORDS = [f"k{n:03d}" for n in range(80)] + ["", "é", "Ω", "a'b", "\U0001f600"]
DAY0 = dt.date(2024, 1, 1)
CLOCK = Clock()


def _domain(column: str, rng: random.Random):
    """A random value of the column's domain (wide enough that files differ, narrow enough that lists hit)."""
    if column in ("i", "n"):
        return rng.randint(-200, 200)
    if column == "s":
        return rng.choice(WORDS)
    if column == "dec":
        return Decimal(rng.randint(-500, 500)).scaleb(-2)
    return DAY0 + dt.timedelta(days=rng.randint(0, 120))


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return str(value)


@st.composite
def lakes(draw: st.DrawFn) -> list[pa.Table]:
    """1-6 files of 0-40 rows; each file draws from its own slice of the domain, with NULLs."""
    rng = draw(st.randoms(use_true_random=False))
    tables = []
    for _ in range(draw(st.integers(1, 6))):
        rows = []
        for _ in range(rng.randint(0, 40)):
            rows.append({c: None if rng.random() < 0.1 else _domain(c, rng) for c in ("i", "s", "dec", "d", "n")})
        tables.append(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA))
    return tables


@st.composite
def large_in_predicates(draw: st.DrawFn) -> str:
    """`c [NOT] IN (2..3,000 values)`, sometimes with a NULL in the list, sometimes AND/OR-ed with another leaf."""
    rng = draw(st.randoms(use_true_random=False))
    column = draw(st.sampled_from(["i", "s", "dec", "d", "n"]))
    values = [_domain(column, rng) for _ in range(draw(st.sampled_from([2, 5, 40, 300, 3000])))]
    if column in ("i", "n") and draw(st.booleans()):
        values += [2**31, -(2**31) - 1, 10**20]  # out of an INT's (or a BIGINT's) range: never equal
    if draw(st.integers(0, 5)) == 0:
        values.append(None)
    negation = draw(st.sampled_from(["", "NOT "]))
    leaf = f"{column} {negation}IN ({', '.join(_literal(v) for v in values)})"
    other = draw(st.sampled_from(["", "i < 0", "s = 'k001'", "d IS NULL", f"{column} IN ({_literal(values[0])})"]))
    if not other:
        return leaf
    return f"({leaf} {draw(st.sampled_from(['AND', 'OR']))} {other})"


INDEX_SETTINGS = st.sampled_from(
    [
        IndexSettings(),
        IndexSettings(kinds=("bloom", "automaton"), bloom_fpp=0.3, automaton_max_states=2, automaton_max_bytes=16),
        IndexSettings(kinds=("bloom",), bloom_fpp=0.01),
    ]
)


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


def _truth(duck, tables: list[pa.Table], wheres: list[str]) -> dict[int, tuple[int, ...]]:
    rows = pa.concat_tables(
        [t.append_column("file", pa.array([n] * t.num_rows, pa.int32())) for n, t in enumerate(tables)]
    )
    duck.register("t", rows)
    counts = ", ".join(f"count(*) FILTER (WHERE {sqlglot.transpile(w, write='duckdb')[0]})" for w in wheres)
    result = {
        row[0]: row[1:] for row in duck.execute(f"SELECT file, count(*), {counts} FROM t GROUP BY file").fetchall()
    }
    duck.unregister("t")
    return result


def _check(verdicts, tables, truth, k, where):
    for n, table in enumerate(tables):
        total, *matched = truth.get(n, (0,) * (k + 2))
        assert verdicts.kept[n] or matched[k] == 0, (
            f"skipped file {n} with {matched[k]} matching rows for {where[:200]!r}: {table.to_pylist()[:5]}"
        )
        assert not verdicts.all_match[n] or matched[k] == total, (
            f"file {n} claimed all-match but {matched[k]}/{total} rows match {where[:200]!r}"
        )


@pytest.mark.slow
@settings(
    max_examples=sweep("SKIPINDEX_LARGE_IN_EXAMPLES", short=20, long=200),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(tables=lakes(), wheres=st.lists(large_in_predicates(), min_size=3, max_size=3), index_settings=INDEX_SETTINGS)
def test_large_in_lists_never_skip_a_matching_file_and_never_overclaim(
    tmp_path_factory, duck, tables, wheres, index_settings
):
    paths, entries = write_and_index(tmp_path_factory.mktemp("files"), tables, SCHEMA, index_settings)
    truth = _truth(duck, tables, wheres)
    for k, where in enumerate(wheres):
        _check(prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries), tables, truth, k, where)


@pytest.mark.slow
def test_an_in_list_of_100000_values_is_one_set_leaf_and_prunes_like_the_set(tmp_path):
    rng = np.random.default_rng(7)
    tables = [
        pa.Table.from_pylist(
            [{"i": int(v), "s": f"key-{v}"} for v in rng.integers(start, start + 10_000, 50)], schema=ARROW_SCHEMA
        )
        for start in range(0, 400_000, 20_000)
    ]
    paths, entries = write_and_index(tmp_path, tables, SCHEMA)
    wanted = rng.integers(0, 400_000, 100_000)
    wheres = [
        f"i IN ({', '.join(map(str, wanted))})",
        f"s IN ({', '.join(f'{chr(39)}key-{v}{chr(39)}' for v in wanted)})",
        f"i NOT IN ({', '.join(map(str, wanted))})",
    ]
    keys = set(wanted.tolist())
    truth = {  # the three predicates over each file's rows, by hand (no NULLs in these files)
        n: (
            t.num_rows,
            *(
                sum(hit(row) for row in t.to_pylist())
                for hit in (
                    lambda row: row["i"] in keys,
                    lambda row: int(row["s"].removeprefix("key-")) in keys,
                    lambda row: row["i"] not in keys,
                )
            ),
        )
        for n, t in enumerate(tables)
    }
    for k, where in enumerate(wheres):
        predicate = bound_predicate(where, SCHEMA, "db.t")
        assert isinstance(predicate, BoundIn) and len(predicate.values) == len(set(wanted.tolist())), (
            "an IN list binds to one set leaf of its distinct values, not an OR of 100,000 comparisons"
        )
        _check(prune(predicate, paths, entries), tables, truth, k, where)
    kept = prune(
        bound_predicate(f"i IN ({', '.join(map(str, range(390_000, 390_100)))})", SCHEMA, "db.t"), paths, entries
    )
    assert kept.kept.sum() <= 2, "a set that falls within one file's bounds keeps about that file, not all"


PLAIN_VALUES = st.one_of(
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1]),
    st.booleans(),
    st.text(max_size=3),
    st.sampled_from(["7", " 8", "1.5", Decimal("2.00"), Decimal("2.5"), 3.0, None]),
)


@settings(max_examples=300, deadline=None)
@given(
    column=st.sampled_from(["i", "n", "s"]),
    values=st.lists(PLAIN_VALUES, min_size=1, max_size=12),
    negated=st.booleans(),
)
def test_an_in_list_binds_as_each_of_its_values_would_alone(column, values, negated):
    values = tuple(v for v in values if v is not None) or (1,)
    op = "!=" if negated else "="
    try:
        common = in_list_values(values)
    except Exception:
        return  # an IN list the binder refuses as a whole: not what this rule is about
    expected = _as_sets([_bind_leaf(op, column, v, SCHEMA, "db.t") for v in common], op, negated)
    assert bind(In(column, values, negated), SCHEMA, "db.t") == expected, (
        "the fast path for plain IN values (ints on integer columns, strings on string columns) binds each value "
        "exactly as the general per-value path does"
    )


@pytest.mark.slow
def test_a_chain_of_3000_comparisons_and_400_levels_of_parentheses_evaluate(tmp_path):
    tables = [pa.Table.from_pylist([{"i": v, "s": "x"}], schema=ARROW_SCHEMA) for v in (5, 50_000)]
    paths, entries = write_and_index(tmp_path, tables, SCHEMA)
    chain = " OR ".join(f"(i = {v} AND s = 'x')" for v in range(3_000))
    kept = prune(bound_predicate(chain, SCHEMA, "db.t"), paths, entries).kept
    assert kept.tolist() == [True, False], "a long OR chain nests log2(n) deep: evaluated, and still prunes"
    deep = "(" * MAX_PARENTHESES + "i = 50000" + ")" * MAX_PARENTHESES
    assert prune(bound_predicate(deep, SCHEMA, "db.t"), paths, entries).kept.tolist() == [False, True]


def _alternating(depth: int) -> str:
    """OR inside AND inside OR ... `depth` levels deep; TRUE for i = 7 only (among small values)."""
    text = "i = 7"
    for level in range(depth):
        text = f"(i != {level + 100} AND {text})" if level % 2 else f"(i = {level + 100} OR {text})"
    return text


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ("(" * (MAX_PARENTHESES + 1) + "i = 1" + ")" * (MAX_PARENTHESES + 1), "at most 400 levels of parentheses"),
        ("(" * 5000 + "i = 1" + ")" * 5000, "at most 400 levels of parentheses"),
        ("NOT " * (MAX_LOGIC_DEPTH + 1) + "i = 1", "and 100 of AND/OR/NOT"),
        (_alternating(MAX_LOGIC_DEPTH + 1), "and 100 of AND/OR/NOT"),
    ],
)
def test_nesting_beyond_the_documented_limits_is_a_one_line_error(where, error):
    with pytest.raises(UserError) as raised:
        parse_where(where)
    message = str(raised.value)
    assert error in message and "\n" not in message and len(message) < 400, (
        "too deep a predicate is refused with one short line naming the limit, never a RecursionError"
    )


DEEP_SCHEMA = Schema(NestedField(1, "i", LongType()), NestedField(2, "s", StringType()))


@pytest.fixture
def deep_table(catalog):
    """A partitioned Iceberg table: explain's list of lifted partition fields translates the whole predicate to
    pyiceberg and projects it (both recursive)."""
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="i"))
    table = catalog.create_table("db.deep", schema=DEEP_SCHEMA, partition_spec=spec)
    for value in (7, 8):
        table.append(pa.table({"i": pa.array([value], pa.int64()), "s": ["x"]}))
    return table


def test_nesting_at_the_limits_runs_through_every_stage_including_partition_projection(config, deep_table):
    schema = DEEP_SCHEMA
    for where, expected in [
        (_alternating(MAX_LOGIC_DEPTH), 1),
        ("NOT " * MAX_LOGIC_DEPTH + "i = 7", 1),
        ("(" * MAX_PARENTHESES + "i = 7" + ")" * MAX_PARENTHESES, 1),
        (f"i IN ({', '.join(map(str, range(10, 900)))}, 7)", 1),
        (f"i NOT IN ({', '.join(map(str, range(10, 900)))}, 7)", 1),
        # identity partition values are intervals (min = max) for the min/max rules, which search the set itself
        (f"i IN ({', '.join(map(str, range(10, 20_000)))}, 7)", 1),
        (f"i IN ({', '.join(map(str, range(-5, 20_000)))})", 2),
        (f"i IN ({', '.join(map(str, range(9, 20_000)))})", 0),  # the range alone rules both files out
    ]:
        result = lookup(config, "db.deep", where)
        assert result.stages[0].name == "partition" and result.stages[0].files_out == expected, (
            f"the partition stage decides {where[:60]!r}... on identity partitions"
        )
    in_leaf = leaves(bound_predicate(f"i IN ({', '.join(map(str, range(10_000)))})", schema, "db.deep"))
    assert len(in_leaf) == 1 and "10,000 values" in str(in_leaf[0]), "explain shows a long IN list as one leaf"


SET_RULES = [  # files: i 1..5, i 10..20, i = 7 only, only NULLs
    ("i IN (5, 100)", [True, False, False, False], "a value equal to a file's upper bound is within the file"),
    ("i IN (0, 10)", [False, True, False, False], "a value equal to a file's lower bound is within the file"),
    ("i IN (6, 9, 21)", [False, False, False, False], "values between and beyond the files' bounds rule files out"),
    ("i IN (7, 30)", [False, False, True, False], "a file of only NULLs holds no value of any set"),
    ("s IN ('a', 'zz')", [True, False, False, False], "strings compare by code point at the bounds too"),
    ("i NOT IN (7, 8)", [True, True, False, False], "NOT IN rules out a file whose only value is in the set"),
    ("i NOT IN (1, 2, 3, 4, 5)", [True, True, True, False], "bounds alone cannot prove several values lie in a set"),
]


@pytest.mark.parametrize(("where", "expected", "rule"), SET_RULES, ids=[rule[0] for rule in SET_RULES])
def test_set_rules_on_bounds(tmp_path, where, expected, rule):
    rows = [
        [{"i": v, "s": s} for v, s in zip(range(1, 6), ["a", "b", "c", "d", "a"], strict=True)],
        [{"i": v, "s": "zzz"} for v in range(10, 21)],
        [{"i": 7, "s": "q"}] * 3,
        [{"i": None, "s": None}] * 3,
    ]
    paths, entries = write_and_index(
        tmp_path, [pa.Table.from_pylist(r, schema=ARROW_SCHEMA) for r in rows], SCHEMA, IndexSettings(kinds=())
    )
    kept = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries).kept.tolist()
    assert kept == expected, f"{rule}: {where} kept {kept}"


def test_planner_code_may_pass_a_predicate_tree_instead_of_sql(config, deep_table):
    keys = tuple(range(10, 100_000)) + (7,)
    tree, text = In("i", keys), f"i IN ({', '.join(map(str, keys))})"
    by_tree, by_text = lookup(config, "db.deep", tree, CLOCK), lookup(config, "db.deep", text, CLOCK)
    assert (by_tree.files, by_tree.summary) == (by_text.files, by_text.summary), (
        "a query.model tree answers as the same predicate written in SQL, without parsing 100,000 literals"
    )
    chain = Compare("=", "i", 10)
    for value in range(11, 20_000):  # a left-deep chain, as a planner's loop builds it: 20,000 levels
        chain = Or(chain, Compare("=", "i", value))
    by_chain = lookup(config, "db.deep", Or(chain, Compare("=", "i", 7)), CLOCK)
    by_set = lookup(config, "db.deep", In("i", (*range(10, 20_000), 7)), CLOCK)
    assert (by_chain.files, by_chain.summary) == (by_set.files, by_set.summary), (
        "a tree's chains of one connective are rebalanced (their length is not a nesting depth), and an OR of "
        "equalities on one column is the same set leaf as an IN list"
    )
    deep = Compare("=", "i", 7)
    for _ in range(MAX_LOGIC_DEPTH + 1):
        deep = Not(deep)
    with pytest.raises(UserError, match="nests 101 levels of AND/OR/NOT"):
        lookup(config, "db.deep", deep, CLOCK)
