"""Numeric comparisons where Spark and DuckDB answer differently, checked against Spark itself: the index must keep
every file Spark finds a match in, and prove "all match" only where Spark agrees (the DuckDB-checked property test
is test_numeric_edges_property.py). Spark runs with its defaults (ANSI mode on) and with ANSI mode off; a query Spark
refuses (an invalid cast under ANSI) answers nothing and is skipped."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from conftest import write_and_index
from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, FloatType, IntegerType, LongType, NestedField

from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate

SCHEMA = Schema(
    NestedField(1, "n", IntegerType()),
    NestedField(2, "i", LongType()),
    NestedField(3, "dec", DecimalType(10, 2)),
    NestedField(4, "six", DecimalType(10, 6)),
    NestedField(5, "r", FloatType()),
)
ROWS = [
    {"n": 5, "i": 2**53, "dec": Decimal("1.01"), "six": Decimal("0.333333"), "r": 16777216.0},
    {"n": 16777217, "i": 2**63 - 1, "dec": Decimal("0.10"), "six": Decimal("0.500000"), "r": 0.5},
    {"n": -1, "i": 2**53 + 1, "dec": Decimal("99999999.99"), "six": Decimal("0.166667"), "r": None},
]

# (where, why Spark and DuckDB differ)
CASES = [
    ("dec > CAST(1.01 AS FLOAT)", "Spark compares a decimal with a FLOAT in DOUBLE (1.01 > 1.01f), DuckDB in FLOAT"),
    ("dec >= CAST(1.01 AS REAL) AND dec <= CAST(1.01 AS REAL)", "the same, both ways"),
    ("dec != CAST(0.1 AS FLOAT)", "Spark: 0.1 != 0.1f in DOUBLE; DuckDB: 0.1f = 0.1f in FLOAT"),
    ("six = 1.0 / 3", "Spark divides decimals to 6 places (0.333333), DuckDB in DOUBLE"),
    ("six = 1.0 / 6", "Spark rounds 0.1666666.. half up to 0.166667"),
    ("n = '5.5'", "without ANSI Spark truncates '5.5' to 5; DuckDB rounds to 6"),
    ("n = '5.4'", "without ANSI Spark truncates '5.4' to 5"),
    ("r = 16777217", "Spark compares FLOAT with an int literal in DOUBLE"),
    ("i IN (9007199254740993, 1e0)", "IN converts every value to DOUBLE: 9007199254740993 becomes 2^53"),
    ("i = 9007199254740993D", "Spark's D suffix is a DOUBLE literal"),
    ("i + 1 = 9007199254740993e0", "the sum converts to DOUBLE"),
    ("n > 16777216.5F", "Spark's F suffix: int meets FLOAT in FLOAT"),
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    tables = [pa.Table.from_pylist([row], schema=SCHEMA.as_arrow()) for row in ROWS]
    return write_and_index(tmp_path_factory.mktemp("files"), tables, SCHEMA)


@pytest.fixture(scope="module")
def spark_rows(spark):
    frame = spark.createDataFrame(
        [dict(row, file=n) for n, row in enumerate(ROWS)],
        "n INT, i BIGINT, dec DECIMAL(10,2), six DECIMAL(10,6), r FLOAT, file INT",
    )
    frame.createOrReplaceTempView("numeric_edges")
    yield
    spark.catalog.dropTempView("numeric_edges")


@pytest.mark.parametrize("ansi", [True, False], ids=["ansi", "legacy"])
@pytest.mark.parametrize(("where", "why"), CASES, ids=[case[0] for case in CASES])
def test_index_keeps_what_spark_matches(spark, spark_rows, indexed, where, why, ansi):
    from pyspark.errors import PySparkException

    spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    try:
        truth = {
            row["file"]: (row["total"], row["matched"])
            for row in spark.sql(
                f"SELECT file, count(*) AS total, count(*) FILTER (WHERE {where}) AS matched "
                "FROM numeric_edges GROUP BY file"
            ).collect()
        }
    except PySparkException:
        pytest.skip(f"Spark refuses {where!r} with ANSI={ansi}")
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    paths, entries = indexed
    verdicts = prune(bound_predicate(where, SCHEMA, "db.t", dialect="spark"), paths, entries)
    for n in range(len(ROWS)):
        total, matched = truth[n]
        assert verdicts.kept[n] or matched == 0, f"Should keep file {n}: Spark matches it. {why} ({where!r})"
        assert not verdicts.all_match[n] or matched == total, f"Should not claim all-match on file {n}: {why}"
