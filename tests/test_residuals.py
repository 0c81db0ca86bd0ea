"""The per-file residual rules (indexlib/pruning/residuals.py), one file's statistics per row of the table: each
case states its rule, the residual expected, and is checked against the oracle: on rows the statistics allow
(values within the bounds, NULL and NaN where counted), pyiceberg's own Arrow reading of the trimmed residual selects
exactly the rows of the whole filter."""

from __future__ import annotations

import itertools
from datetime import date
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg import expressions as ice
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import expression_to_pyarrow, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DecimalType, DoubleType, FloatType, LongType, NestedField, StringType
from pyiceberg.utils.datetime import date_to_days
from test_reader_residuals import spark_reading

from indexlib.index_kinds.registry import registry
from indexlib.index_kinds.settings import IndexSettings
from indexlib.pruning.residuals import file_residuals, nan_widened
from indexlib.statistics import key_hash
from indexlib.statistics.canonical import distinct_keys, literal_hashes
from indexlib.statistics.column_stats import physical_arrow_type
from indexlib.statistics.key_hash import key_hashes
from indexlib.statistics.provider import ColumnRef, ColumnStatistics, StatisticsProvider

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "s", StringType(), required=False),
    NestedField(3, "d", DateType(), required=False),
    NestedField(4, "amount", DecimalType(10, 2), required=False),
    NestedField(5, "x", DoubleType(), required=False),
    NestedField(6, "f", FloatType(), required=False),
)
NAMES = {f.field_id: f.name for f in SCHEMA.fields}
IDS = {f.name: f.field_id for f in SCHEMA.fields}


def day(text: str) -> int:
    return date_to_days(date.fromisoformat(text))


class Files(StatisticsProvider):
    """Fixed statistics: per column name, per file (lower, upper, nulls, NaNs), optionally with the distinct values
    the file holds, of which a real Bloom filter (the registered kind's own build) is the column's payload; a bound
    None is unknown, and a column not named has no statistics at all."""

    def __init__(self, *files: dict[str, tuple]) -> None:
        self.files = files
        self.num_files = len(files)

    def payloads(self, column: ColumnRef, kind: str, version: int, files: np.ndarray) -> list[bytes | None]:
        found: list[bytes | None] = []
        for i in files:
            stats = self.files[i].get(column.name)
            if kind != "bloom" or stats is None or len(stats) < 5:
                found.append(None)
                continue
            keys = distinct_keys(pa.array(stats[4], physical_arrow_type(column.type)), column.type)
            found.append(registry()[kind].build(keys, column.type, IndexSettings()).payload)
        return found

    def column(self, column: ColumnRef) -> ColumnStatistics:
        arrow = physical_arrow_type(column.type)
        stats = [f.get(column.name) for f in self.files]
        known = [s is not None for s in stats]
        return ColumnStatistics(
            lower=pa.array([s[0] if s else None for s in stats], arrow),
            upper=pa.array([s[1] if s else None for s in stats], arrow),
            value_count=np.array([100 if k else -1 for k in known], dtype=np.int64),
            null_count=np.array([s[2] if s else -1 for s in stats], dtype=np.int64),
            nan_count=np.array([s[3] if s else -1 for s in stats], dtype=np.int64),
        )


class KeyedFiles(Files):
    """`Files` whose columns given held values (the fifth element) are keyed in a global key index instead of having
    Bloom filters: a key row per distinct value held, its hash the build's (statistics/key_hash.py)."""

    def payloads(self, column: ColumnRef, kind: str, version: int, files: np.ndarray) -> list[bytes | None]:
        return [None] * len(files)

    def key_holders(self, column: ColumnRef, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keyed = np.zeros(self.num_files, dtype=bool)
        files, found = [], []
        for i, described in enumerate(self.files):
            stats = described.get(column.name)
            if stats is None or len(stats) < 5:
                continue
            keyed[i] = True
            for stored in key_hashes(literal_hashes(column.type, stats[4])):
                if stored in hashes:
                    files.append(i)
                    found.append(stored)
        return keyed, np.array(files, dtype=np.int64), np.array(found, dtype=np.int64)


IN = ice.In
LIST = [1, 5, 9, 20]
CASES = [
    ("values outside the file's bounds are dropped", IN("id", LIST), {"id": (4, 10, 0, 0)}, IN("id", [5, 9])),
    ("a list within the bounds is kept as it came", IN("id", LIST), {"id": (0, 50, 0, 0)}, IN("id", LIST)),
    ("unknown bounds keep the whole list", IN("id", LIST), {"id": (None, None, 0, 0)}, IN("id", LIST)),
    ("no statistics keep the whole list", IN("id", LIST), {}, IN("id", LIST)),
    ("an unknown side is no bound on that side", IN("id", LIST), {"id": (None, 6, 0, 0)}, IN("id", [1, 5])),
    ("an IN trimmed to one value is `=`", IN("id", LIST), {"id": (4, 6, 2, 0)}, ice.EqualTo("id", 5)),
    (
        "an IN with no value in bounds is FALSE for the file (under no NOT)",
        ice.Or(IN("id", [1, 2]), ice.EqualTo("s", "b")),
        {"id": (10, 20, 3, 0), "s": ("a", "c", 0, 0)},
        ice.EqualTo("s", "b"),
    ),
    (
        "a file whose only value is in the list matches on every row: TRUE",
        IN("id", LIST),
        {"id": (5, 5, 0, 0)},
        ice.AlwaysTrue(),
    ),
    ("... but not with NULL rows", IN("id", LIST), {"id": (5, 5, 1, 0)}, ice.EqualTo("id", 5)),
    (
        "NOT IN is trimmed alike, keeping two values (pyiceberg reads NULL NOT IN (a, b) as TRUE, NULL != a not)",
        ice.NotIn("id", LIST),
        {"id": (4, 6, 3, 0)},
        ice.NotIn("id", [5, 9]),
    ),
    (
        "NOT IN with no value in bounds and no NULL is TRUE",
        ice.NotIn("id", LIST),
        {"id": (10, 19, 0, 0)},
        ice.AlwaysTrue(),
    ),
    (
        "NOT IN with no value in bounds keeps two values where NULLs are",
        ice.NotIn("id", LIST),
        {"id": (10, 19, 4, 0)},
        ice.NotIn("id", [9, 20]),
    ),
    (
        "an IN under a NOT keeps two values (it is a NOT IN)",
        ice.Not(IN("id", LIST)),
        {"id": (4, 6, 1, 0)},
        ice.Not(IN("id", [5, 9])),
    ),
    (
        "a leaf proven TRUE on every row is TRUE",
        ice.And(ice.GreaterThan("id", 0), IN("s", ["a", "k", "z"])),
        {"id": (4, 10, 0, 0), "s": ("b", "m", 0, 0)},
        ice.EqualTo("s", "k"),
    ),
    (
        "a comparison TRUE on no row is FALSE under no NOT",
        ice.Or(ice.LessThan("id", 3), IN("s", ["a", "k", "z"])),
        {"id": (4, 10, 1, 0), "s": ("b", "m", 0, 0)},
        ice.EqualTo("s", "k"),
    ),
    (
        "... and kept under a NOT (NOT of NULL is not TRUE)",
        ice.Not(ice.And(ice.LessThan("id", 3), ice.EqualTo("s", "k"))),
        {"id": (4, 10, 1, 0), "s": ("b", "m", 0, 0)},
        ice.Not(ice.And(ice.LessThan("id", 3), ice.EqualTo("s", "k"))),
    ),
    (
        "strings compare in UTF-8 order",
        IN("s", ["apple", "kiwi", "melon", "zebra", "é"]),
        {"s": ("banana", "orange", 0, 0)},
        IN("s", ["kiwi", "melon"]),
    ),
    (
        "a truncated string bound is still a bound",
        IN("s", ["apple", "kiwi", "kiwis", "kz"]),
        {"s": ("ki", "kj", 0, 0)},
        IN("s", ["kiwi", "kiwis"]),
    ),
    (
        "decimals compare as numbers",
        IN("amount", ["1.50", "2.25", "4.00", "9.99"]),
        {"amount": (Decimal("2.00"), Decimal("5.00"), 0, 0)},
        IN("amount", ["2.25", "4.00"]),
    ),
    (
        "dates compare as days",
        IN("d", ["2024-01-01", "2024-01-05", "2024-01-20", "2024-02-01"]),
        {"d": (day("2024-01-03"), day("2024-01-31"), 0, 0)},
        IN("d", ["2024-01-05", "2024-01-20"]),
    ),
    (
        "doubles are trimmed whatever NaN rows the file holds",
        IN("x", [1.0, 2.5, 2.75, 7.0]),
        {"x": (2.0, 3.0, 1, 2)},
        IN("x", [2.5, 2.75]),
    ),
    (
        "float columns are kept (pyiceberg rounds the literal sent)",
        IN("f", [1.0, 2.5, 7.0]),
        {"f": (2.0, 3.0, 0, 0)},
        IN("f", [1.0, 2.5, 7.0]),
    ),
    (
        "values the file's Bloom filter rules out are dropped (no row holds them)",
        IN("id", LIST),
        {"id": (0, 50, 0, 0, [5, 20, 33])},
        IN("id", [5, 20]),
    ),
    (
        "Bloom trimming keeps only values within the bounds too",
        IN("id", LIST),
        {"id": (4, 50, 0, 0, [5, 20, 33])},
        IN("id", [5, 20]),
    ),
    (
        "a NOT IN is trimmed by the Bloom filter alike, padded to two values",
        ice.NotIn("id", LIST),
        {"id": (0, 50, 2, 0, [5, 33])},
        ice.NotIn("id", [1, 5]),
    ),
    (
        "an IN none of whose values the Bloom filter admits is FALSE under no NOT",
        ice.Or(IN("id", [1, 9]), ice.EqualTo("s", "b")),
        {"id": (0, 50, 1, 0, [5, 33]), "s": ("a", "c", 0, 0)},
        ice.EqualTo("s", "b"),
    ),
    (
        "strings are trimmed by their Bloom filter",
        IN("s", ["apple", "kiwi", "melon", "zebra"]),
        {"s": ("a", "zz", 0, 0, ["kiwi", "pear"])},
        ice.EqualTo("s", "kiwi"),
    ),
    (
        "dates are trimmed by their Bloom filter (keys of days)",
        IN("d", ["2024-01-01", "2024-01-05", "2024-01-20", "2024-02-01"]),
        {"d": (day("2024-01-01"), day("2024-02-01"), 0, 0, [day("2024-01-05"), day("2024-01-09")])},
        ice.EqualTo("d", "2024-01-05"),
    ),
    (
        "decimals are trimmed by their Bloom filter (keys of unscaled values)",
        IN("amount", ["1.50", "2.25", "4.00", "9.99"]),
        {"amount": (Decimal("1.00"), Decimal("10.00"), 0, 0, [Decimal("2.25"), Decimal("9.99"), Decimal("3.10")])},
        IN("amount", ["2.25", "9.99"]),
    ),
    (
        "a literal that does not convert keeps its leaf",
        IN("id", ["a", "b"]),
        {"id": (4, 10, 0, 0)},
        IN("id", ["a", "b"]),
    ),
]


@pytest.mark.parametrize(("rule", "expression", "stats", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_files_residual(rule, expression, stats, expected):
    (found,) = file_residuals(expression, SCHEMA, SCHEMA, Files(stats), [0])
    assert found == expected, f"{rule}: {found}"
    if not _binds(expression):
        return  # no reader reads this filter: nothing to compare
    assert _selected(found, stats, expression) == _selected(expression, stats, expression), (
        f"{rule}: {found} selects other rows of the file than {expression}"
    )


KEYED_CASES = [
    (
        "values no key row of a keyed file holds are dropped (the global key index)",
        IN("id", LIST),
        {"id": (0, 50, 0, 0, [5, 20, 33])},
        IN("id", [5, 20]),
    ),
    (
        "a NOT IN is trimmed by the key rows alike, padded to two values",
        ice.NotIn("id", LIST),
        {"id": (0, 50, 2, 0, [5, 33])},
        ice.NotIn("id", [1, 5]),
    ),
    (
        "strings are trimmed by their key rows",
        IN("s", ["apple", "kiwi", "melon", "zebra"]),
        {"s": ("a", "zz", 0, 0, ["kiwi", "pear"])},
        ice.EqualTo("s", "kiwi"),
    ),
    (
        "a column that is not keyed keeps its list",
        IN("id", LIST),
        {"id": (0, 50, 0, 0)},
        IN("id", LIST),
    ),
]


@pytest.mark.parametrize(("rule", "expression", "stats", "expected"), KEYED_CASES, ids=[c[0] for c in KEYED_CASES])
def test_a_keyed_files_residual(rule, expression, stats, expected):
    (found,) = file_residuals(expression, SCHEMA, SCHEMA, KeyedFiles(stats), [0])
    assert found == expected, f"{rule}: {found}"
    assert _selected(found, stats, expression) == _selected(expression, stats, expression), (
        f"{rule}: {found} selects other rows of the file than {expression}"
    )


def test_a_hash_collision_in_the_key_index_keeps_every_value_of_the_hash(monkeypatch):
    """Hashes cut to 2 bits: the 20 values share 4 hashes, so a file holding 5 keeps every listed value of 5's hash
    (a collision admits more values, never fewer), and still selects exactly the file's rows."""
    monkeypatch.setattr(key_hash, "HASH_BITS", 2)
    listed = list(range(1, 21))
    stats = {"id": (0, 50, 1, 0, [5, 33])}
    (found,) = file_residuals(IN("id", listed), SCHEMA, SCHEMA, KeyedFiles(stats), [0])
    kept = sorted(lit.value for lit in found.literals) if isinstance(found, ice.In) else [found.literal.value]
    assert 5 in kept and 1 < len(kept) < len(listed), f"the values of 5's and 33's hashes: {kept}"
    assert _selected(found, stats, IN("id", listed)) == _selected(IN("id", listed), stats, IN("id", listed))


def test_files_with_the_same_trim_share_one_residual_and_others_differ():
    files = Files({"id": (4, 6, 0, 0)}, {"id": (15, 30, 0, 0)}, {"id": (3, 7, 0, 0)}, {})
    found = file_residuals(IN("id", LIST + [30]), SCHEMA, SCHEMA, files, [0, 1, 2, 3])
    assert found[0] is found[2], "one residual object per distinct residual (the answer writes each once)"
    assert found[:3] == [ice.EqualTo("id", 5), IN("id", [20, 30]), ice.EqualTo("id", 5)], "each file its own values"
    assert found[3] == IN("id", LIST + [30]), "a file the index does not know keeps the whole list"


def _binds(expression: ice.BooleanExpression) -> bool:
    try:
        bind(SCHEMA, expression, case_sensitive=True)
    except ValueError:
        return False
    return True


def _values(name: str, stats: dict[str, tuple], expression: ice.BooleanExpression) -> list[Any]:
    """Physical values a file with `stats` may hold in column `name`: its bounds, the literals within them, and
    NULL / NaN where counted."""
    literals = {lit.to(SCHEMA.find_type(name)).value for lit in _literals(expression, name)}
    low, high, nulls, nans, *held = stats.get(name, (None, None, 1, 1))
    values = set(held[0]) if held else {v for v in literals | {low, high} if v is not None}
    within = sorted(v for v in values if (low is None or low <= v) and (high is None or v <= high))
    return within + [None] * (nulls != 0) + [float("nan")] * (nans != 0 and name == "x")


def _literals(expression: Any, name: str) -> list[Any]:
    if isinstance(expression, ice.And | ice.Or):
        return _literals(expression.left, name) + _literals(expression.right, name)
    if isinstance(expression, ice.Not):
        return _literals(expression.child, name)
    if getattr(getattr(expression, "term", None), "name", None) != name:
        return []
    found = list(expression.literals) if isinstance(expression, ice.SetPredicate) else [expression.literal]
    try:
        [lit.to(SCHEMA.find_type(name)).value for lit in found]
    except Exception:
        return []
    return found


def _selected(residual: ice.BooleanExpression, stats: dict, expression: ice.BooleanExpression) -> list[tuple]:
    """The rows pyiceberg's Arrow reading of `residual` selects among every combination of the file's values."""
    columns = sorted({name for name in IDS if _literals(expression, name)} | set(stats))
    combos = list(itertools.product(*(_values(name, stats, expression) for name in columns)))
    arrow = schema_to_pyarrow(SCHEMA)
    data = {}
    for f in SCHEMA.fields:
        if f.name in columns:
            raw = [c[columns.index(f.name)] for c in combos]
            if isinstance(f.field_type, DateType):
                raw = [None if v is None else date.fromordinal(date(1970, 1, 1).toordinal() + v) for v in raw]
            data[f.name] = pa.array(raw, arrow.field(f.name).type)
        else:
            data[f.name] = pa.nulls(len(combos), arrow.field(f.name).type)
    table = pa.table(data, schema=arrow)
    if residual == ice.AlwaysTrue():
        return sorted(map(repr, table.to_pylist()))
    bound = bind(SCHEMA, residual, case_sensitive=True)
    return sorted(map(repr, table.filter(expression_to_pyarrow(bound, SCHEMA)).to_pylist()))


# NaN-prone files (`nan_widened`): a reader skipping row groups by the residual keeps those that may hold a NaN the
# leaf makes TRUE in Spark SQL (NaN above every number); (residual, widened, rule)
X, S_ = ice.Reference("x"), ice.Reference("s")
NAN_WIDENED = [
    (ice.GreaterThan(X, 100.0), ice.Or(ice.GreaterThan(X, 100.0), ice.IsNaN(X)), "`x > c` may hold for NaN"),
    (ice.GreaterThanOrEqual(X, 1.0), ice.Or(ice.GreaterThanOrEqual(X, 1.0), ice.IsNaN(X)), "so may `x >= c`"),
    (
        ice.Not(ice.LessThanOrEqual(X, 1.0)),
        ice.Not(ice.And(ice.LessThanOrEqual(X, 1.0), ice.NotNaN(X))),
        "and NOT (x <= c): the NaN is kept under the NOT",
    ),
    (ice.LessThan(X, 1.0), ice.LessThan(X, 1.0), "`x < c` never holds for NaN: as it came"),
    (ice.Not(ice.GreaterThan(X, 1.0)), ice.Not(ice.GreaterThan(X, 1.0)), "nor does NOT (x > c)"),
    (ice.EqualTo(X, 1.0), ice.EqualTo(X, 1.0), "`=` never holds for NaN: as it came"),
    (ice.GreaterThan(S_, "a"), ice.GreaterThan(S_, "a"), "a column not named prone: as it came"),
    (
        ice.And(ice.GreaterThan(X, 1.0), ice.EqualTo(S_, "a")),
        ice.And(ice.Or(ice.GreaterThan(X, 1.0), ice.IsNaN(X)), ice.EqualTo(S_, "a")),
        "inside AND and OR, each leaf on its own",
    ),
]


@pytest.mark.parametrize(("residual", "widened", "rule"), NAN_WIDENED, ids=[rule for *_, rule in NAN_WIDENED])
def test_a_nan_prone_files_residual_keeps_the_row_groups_nan_may_match_in(residual, widened, rule) -> None:
    assert nan_widened(residual, frozenset({"x"})) == widened, rule
    assert nan_widened(residual, frozenset()) is residual, "no prone column: the residual as it came"


def test_nan_widening_selects_the_same_rows_under_sparks_reading() -> None:
    """The engine applies its own WHERE; under Spark's reading (NaN above every number, equal to itself) each
    widened residual selects exactly the rows of the residual: NaN, NULL, numbers on and around the literal."""

    for residual, widened, rule in NAN_WIDENED:
        if "name='s'" in str(residual):  # the cases on column s leave the residual as it came
            continue
        for x in (float("nan"), 0.5, 1.0, 1.5, 100.0, 101.0, -1.0):
            assert bool(spark_reading(widened, x)) == bool(spark_reading(residual, x)), f"{rule}: x = {x}"
        # NULL: never lost; under a NOT it may be gained (NOT (x <= c AND not_nan(x)) is TRUE on NULL), which the
        # engine's own WHERE drops
        assert spark_reading(widened, None) is True or spark_reading(residual, None) is not True, rule
