"""Property: for random typed files (NULLs, NaNs, Unicode, empty strings, regex metacharacters) and random SQL
predicate trees, the lookup never skips a file holding a TRUE row, and never claims "all match" for a file with a
row that is not TRUE.

Ground truth is DuckDB evaluating the same SQL (transpiled by sqlglot) over the same rows: SQL three-valued logic,
NaN ordered above every number, a random session time zone for the timestamptz column. Parsing, constant folding,
NOT push-down, temporal unwrapping, literal coercion, pattern prefixes and the min/max algebra are all under test.
Files are real Parquet files written with Iceberg field ids and indexed by the build's own per-file code, with
either the automatic index choice or every kind forced with tiny budgets (trimmed automata, Bloom filters with a 30 %
false-positive rate), so the Bloom and automaton stages are under the same oracle.

Each example checks PREDICATES_PER_EXAMPLE predicates against one random set of files: EXAMPLES x
PREDICATES_PER_EXAMPLE (file set, predicate) cases per run, fresh ones each run: 800 in `make test`, 10,000 in `make
test-long` (SKIPINDEX_PROPERTY_EXAMPLES=N runs N x 4), besides the explicit examples (the field's skipping bugs: NaN,
LIKE 'prefix%', NULLs, Unicode past the BMP, time zones, coercions), which every run checks.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from conftest import hash_bits, sweep, write_and_index
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from indexlib.index_kinds.settings import IndexSettings
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate

EXAMPLES = sweep("SKIPINDEX_PROPERTY_EXAMPLES", short=200, long=2500)
PREDICATES_PER_EXAMPLE = 4

SCHEMA = Schema(
    NestedField(1, "i", LongType()),
    NestedField(2, "f", DoubleType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "dec", DecimalType(6, 2)),
    NestedField(6, "b", BooleanType()),
    NestedField(7, "r", FloatType()),
    NestedField(8, "ts", TimestampType()),
    NestedField(9, "tz", TimestamptzType()),
)
ARROW_SCHEMA = SCHEMA.as_arrow()
NAN = float("nan")
ZONES = ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Kiritimati", "Pacific/Pago_Pago"]

ints = st.integers(-5, 5)
doubles = st.sampled_from([-2.5, -1.0, -0.0, 0.0, 0.1, 1.0, 2.5, float("nan"), float("inf")])
strings = st.sampled_from(
    ["", "a", "ab", "abc", "b", "é", "z", "Ω", "a%", "a_c", "a\\b", "a.c", "(x", "0", "\U0001f600"]
)
dates = st.dates(dt.date(2023, 12, 30), dt.date(2024, 3, 2))
decimals = st.decimals(Decimal("-3"), Decimal("3"), places=2, allow_nan=False, allow_infinity=False)
floats32 = st.sampled_from([-1.5, 0.0, 0.1, 0.25, 1.0, float("nan")])
# timestamps around month, day and year boundaries
instants = st.builds(
    lambda day, seconds: dt.datetime.combine(day, dt.time()) + dt.timedelta(seconds=seconds),
    st.sampled_from([dt.date(2023, 12, 31), dt.date(2024, 1, 1), dt.date(2024, 1, 31), dt.date(2024, 2, 1)]),
    st.sampled_from([0, 1, 3599, 3600, 43200, 86399]),
)


def nullable(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), values, values, values)


# each column's values (test_row_group_pruning.py draws its row groups from them too)
VALUES = {
    "i": ints,
    "f": doubles,
    "s": strings,
    "d": dates,
    "dec": decimals,
    "b": st.booleans(),
    "r": floats32,
    "ts": instants,
    "tz": instants.map(lambda t: t.replace(tzinfo=dt.UTC)),
}
rows = st.fixed_dictionaries({name: nullable(values) for name, values in VALUES.items()})
files = st.lists(st.lists(rows, min_size=0, max_size=6), min_size=1, max_size=4)


def _sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return str(value)


timestamps_literals = instants.map(_sql_literal)
# Literals per column, including cross-type ones whose meaning DuckDB and the binder must agree on, and constant
# expressions the front end folds.
LITERALS = {
    "i": st.one_of(
        ints.map(str),
        st.sampled_from(
            ["1.5", "-0.5", "2.0", str(10**20), "'3'", "7 / 2", "2 * 3 - 1", "CAST('4' AS BIGINT)", "1 / 0"]
        ),
    ),
    "f": st.one_of(
        st.sampled_from(["-2.5", "0.0", "0.1", "1.0", "2.5", "CAST('0.1' AS DOUBLE)", "1 / 4"]), ints.map(str)
    ),
    "s": strings.map(_sql_literal),
    "d": st.one_of(
        dates.map(_sql_literal),
        timestamps_literals,
        st.sampled_from(["DATE '2024-01-31' + INTERVAL '1' DAY", "DATE '2024-01-31' + INTERVAL '1' MONTH"]),
    ),
    "dec": st.one_of(decimals.map(str), st.sampled_from(["1.005", "0.5", "2", "99999", "1 / 3"])),
    "b": st.booleans().map(_sql_literal),
    "r": st.sampled_from(["0.1", "0.25", "1.0", "-1.5", "0.3"]),
    "ts": st.one_of(
        timestamps_literals,
        dates.map(_sql_literal),
        st.sampled_from(
            ["TIMESTAMP '2024-01-01 00:00:00' - INTERVAL '1' HOUR", "TIMESTAMP '2024-01-01 05:00:00+05:00'"]
        ),
    ),
    "tz": st.one_of(timestamps_literals, st.just("TIMESTAMP '2024-01-01 00:00:00+05:00'")),
}
COMPARISONS = ["=", "!=", "<>", "<", "<=", ">", ">="]
TEMPORAL = ["d", "ts", "tz"]
TRANSFORMS = {
    "CAST({c} AS DATE)": st.one_of(dates.map(_sql_literal), timestamps_literals),
    "date_trunc('month', {c})": st.one_of(timestamps_literals, dates.map(_sql_literal)),
    "date_trunc('day', {c})": timestamps_literals,
    "date_trunc('hour', {c})": timestamps_literals,
    "year({c})": st.sampled_from(["2023", "2024", "2025", "2023.5"]),
    "month({c})": st.sampled_from(["1", "2", "12", "1.5"]),
    "day({c})": st.sampled_from(["1", "2", "31"]),
    "hour({c})": st.sampled_from(["0", "1", "12", "23"]),
}
PATTERNS = st.sampled_from(
    ["a%", "a", "", "%", "%b", "a_", "a_c", "ab%", "a\\%", "Ω%", "é", "_", "%%", "a%c", "z%", "(x%", "\U0001f600%"]
    + ["%b%", "%c", "_b%", "%.%", "%é", "a%b%c", "__", "%\\%", "%(%", "Ω", "ab"]
)
REGEXES = st.sampled_from(
    ["^a", "^ab", "^a.c", "^a\\.c", "a", "^$", "^\\(x", "^ab*", "^a|z", "b$", "^Ω"]
    + ["c$", "[bz]", "^(a|é)$", "a.c", "\\d", "^[^a]", "^.$", "b|Ω", "^a+b?$", "%", "\\\\", "_c", "^\\x{1F600}"]
)
INDEX_SETTINGS = st.sampled_from(
    [
        IndexSettings(),
        IndexSettings(kinds=("bloom", "automaton"), bloom_fpp=0.3, automaton_max_states=2, automaton_max_bytes=16),
        IndexSettings(kinds=("bloom", "automaton"), bloom_fpp=0.3, automaton_max_states=4, automaton_max_bytes=64),
    ]
)
# the global key index on every column with keys, with the kinds or alone (apart: tests/pruning_snapshot.py draws
# from INDEX_SETTINGS as recorded)
KEY_INDEX_SETTINGS = st.sampled_from(
    [
        IndexSettings(key_index=True),
        IndexSettings(kinds=(), key_index=True),
        [IndexSettings(key_index=True), IndexSettings()],  # files keyed and not, side by side (one per file in turn)
    ]
)
# Bits of the key index's hashes: 64 as built, or 2 (a test hook), where every lookup meets collisions
HASH_BITS = st.sampled_from([64, 64, 2])


def _maybe_null(literals: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(literals, literals, literals, st.just("NULL"))


@st.composite
def leaves(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(list(LITERALS)))
    literal = _maybe_null(LITERALS[column])
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "between", "in", "null", "bare", "special"]))
    if kind == "cmp":
        if draw(st.booleans()):
            return f"{draw(literal)} {draw(st.sampled_from(COMPARISONS))} {column}"
        return f"{column} {draw(st.sampled_from(COMPARISONS))} {draw(literal)}"
    if kind == "between":
        negation = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {negation}BETWEEN {draw(literal)} AND {draw(literal)}"
    if kind == "in":
        values = draw(st.lists(literal, min_size=1, max_size=4))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(values)})"
    if kind == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "bare":
        return draw(st.sampled_from(["b", "NOT b", "b IS TRUE", "b IS NOT FALSE", "i <=> 1", "NOT (i <=> NULL)"]))
    return draw(special_leaves())


@st.composite
def special_leaves(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["transform", "transform", "add", "like", "starts_with", "regexp", "nan"]))
    negation = draw(st.sampled_from(["", "NOT "]))
    if kind == "transform":
        template = draw(st.sampled_from(list(TRANSFORMS)))
        column = draw(st.sampled_from(TEMPORAL if "hour" not in template else ["ts", "tz"]))
        op = draw(st.sampled_from(COMPARISONS))
        return f"{template.format(c=column)} {op} {draw(_maybe_null(TRANSFORMS[template]))}"
    if kind == "add":
        op = draw(st.sampled_from(COMPARISONS))
        return draw(
            st.sampled_from(
                [
                    f"i + 1 {op} {draw(ints)}",
                    f"i - 2 {op} {draw(ints)}",
                    f"3 + i {op} {draw(ints)}",
                    f"dec + 0.5 {op} {draw(decimals)}",
                    f"d + INTERVAL '1' DAY {op} {_sql_literal(draw(dates))}",
                    f"ts - INTERVAL '1' HOUR {op} {_sql_literal(draw(instants))}",
                ]
            )
        )
    if kind == "like":
        pattern = draw(PATTERNS)
        escape = " ESCAPE '\\'" if "\\" in pattern and draw(st.booleans()) else ""
        keyword = draw(st.sampled_from(["LIKE", "LIKE", "ILIKE"]))  # ILIKE: no prefix (any case of it matches)
        return f"s {negation}{keyword} {_sql_literal(pattern)}{escape}"
    if kind == "starts_with":
        return f"{negation}starts_with(s, {_sql_literal(draw(strings))})"
    if kind == "regexp":
        return f"s {negation}RLIKE {_sql_literal(draw(REGEXES))}"
    return f"{negation}isnan({draw(st.sampled_from(['f', 'r', 'i']))})"


predicates = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda p: f"NOT ({p})"),
    ),
    max_leaves=5,
)


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    file_rows=files,
    wheres=st.lists(predicates, min_size=PREDICATES_PER_EXAMPLE, max_size=PREDICATES_PER_EXAMPLE),
    zone=st.sampled_from(ZONES),
    index_settings=st.one_of(INDEX_SETTINGS, KEY_INDEX_SETTINGS),
    bits=HASH_BITS,
)
# NaN above every number, and a NaN-only file whose min/max know nothing
@example(
    file_rows=[[{"f": NAN}, {"f": None}], [{"f": 1.0, "r": 0.25}], [{"f": NAN, "r": NAN}]],
    wheres=["f > 2.5", "NOT (f <= 2.5)", "isnan(f)", "r > 0.25"],
    zone="UTC",
    index_settings=IndexSettings(),
    bits=64,
)
# LIKE 'prefix%' (a bound with no upper end), Unicode past the BMP, empty strings, trimmed automata
@example(
    file_rows=[[{"s": "ab"}, {"s": "abc"}], [{"s": "Ω"}, {"s": "\U0001f600"}], [{"s": ""}, {"s": None}]],
    wheres=["s LIKE 'a%'", "s LIKE '\U0001f600%'", "NOT s LIKE 'Ω%'", "(s = '' OR s RLIKE '^$')"],
    zone="UTC",
    index_settings=IndexSettings(
        kinds=("bloom", "automaton"), bloom_fpp=0.3, automaton_max_states=2, automaton_max_bytes=16
    ),
    bits=64,
)
# NULLs: all-NULL files, NOT IN with a NULL, NULL-safe equality; the key index with colliding hashes
@example(
    file_rows=[[{"i": None, "s": None}], [{"i": 1, "s": "a"}, {"i": None, "s": "b"}]],
    wheres=["i IS NULL", "NOT (s IS NOT NULL)", "i NOT IN (1, NULL)", "NOT (i <=> NULL)"],
    zone="UTC",
    index_settings=IndexSettings(key_index=True),
    bits=2,
)
# a day that is another day in the session's time zone; month and day edges
@example(
    file_rows=[
        [{"tz": dt.datetime(2023, 12, 31, 23, tzinfo=dt.UTC), "ts": dt.datetime(2024, 1, 1), "d": dt.date(2024, 1, 31)}]
    ],
    wheres=[
        "CAST(tz AS DATE) = DATE '2024-01-01'",
        "date_trunc('month', ts) = TIMESTAMP '2024-01-01 00:00:00'",
        "d + INTERVAL '1' DAY > DATE '2024-01-31'",
        "month(d) = 1.5",
    ],
    zone="Pacific/Kiritimati",
    index_settings=IndexSettings(),
    bits=64,
)
# literals of another type: '3' and 1.5 against a long, 1 / 3 against a decimal, -0.0 against 0.0
@example(
    file_rows=[[{"i": 3, "dec": Decimal("1.00"), "f": -0.0, "b": False}], [{"i": 2, "dec": Decimal("0.33")}]],
    wheres=["i = '3'", "i > 1.5", "dec = 1 / 3", "(f = 0.0 AND b IS NOT TRUE)"],
    zone="UTC",
    index_settings=IndexSettings(
        kinds=("bloom", "automaton"), bloom_fpp=0.3, automaton_max_states=4, automaton_max_bytes=64
    ),
    bits=64,
)
def test_lookup_never_skips_a_matching_file_and_never_overclaims_all_match(
    tmp_path_factory, duck, file_rows, wheres, zone, index_settings, bits
):
    with hash_bits(bits):
        _check_lookups(tmp_path_factory, duck, file_rows, wheres, zone, index_settings)


def _check_lookups(tmp_path_factory, duck, file_rows, wheres, zone, index_settings):
    tables = [pa.Table.from_pylist(r, schema=ARROW_SCHEMA) for r in file_rows]
    paths, entries = write_and_index(tmp_path_factory.mktemp("files"), tables, SCHEMA, index_settings)
    rows = pa.concat_tables(
        [t.append_column("file", pa.array([n] * t.num_rows, pa.int32())) for n, t in enumerate(tables)]
    )
    duck.execute(f"SET TimeZone = '{zone}'")
    duck.register("t", rows)
    counts = ", ".join(f"count(*) FILTER (WHERE {sqlglot.transpile(where, write='duckdb')[0]})" for where in wheres)
    truth = {
        row[0]: row[1:] for row in duck.execute(f"SELECT file, count(*), {counts} FROM t GROUP BY file").fetchall()
    }
    duck.unregister("t")

    for k, where in enumerate(wheres):
        verdicts = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)
        kept, all_match = verdicts.kept, verdicts.all_match
        for n, table in enumerate(tables):
            total, *matched = truth.get(n, (0,) + (0,) * len(wheres))
            assert kept[n] or matched[k] == 0, (
                f"skipped file {n} with {matched[k]} matching rows for {where!r} (zone {zone}): {table.to_pylist()}"
            )
            assert not all_match[n] or matched[k] == total, (
                f"file {n} claimed all-match but {matched[k]}/{total} rows match {where!r} (zone {zone}): "
                f"{table.to_pylist()}"
            )
