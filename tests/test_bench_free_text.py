"""The free-text benchmark at toy size, end to end (a service log and lineitem written as Iceberg tables, indexed
with and without n-gram filters, every query looked up and scanned both ways): the rules it reports against hold
before any timing means anything. Timings are not checked here (docs/benchmarks.md has them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = [pytest.mark.slow, pytest.mark.long_only]  # `make test-long` runs it

WITH, WITHOUT = "with n-gram filters (defaults)", "without (column at min/max)"


@pytest.fixture(scope="module")
def results() -> dict:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_free_text

        return bench_free_text.main(
            ["--files", "20", "--rows", "500", "--lineitem-scale", "0.01", "--lineitem-files", "4", "--runs", "1"]
        )
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_no_file_holding_a_match_is_dropped_and_the_filters_only_drop_files(results: dict) -> None:
    for table, queries in results.items():
        assert queries, f"{table}: the benchmark found queries of its classes"
        for query in queries:
            assert query.kept[WITH] >= query.true_files, f"{table} {query.fragment!r}: a holding file was dropped"
            assert query.kept[WITHOUT] >= query.kept[WITH], f"{table} {query.fragment!r}: the filters only drop files"


def test_a_request_id_keeps_the_one_file_holding_it(results: dict) -> None:
    unique = [query for query in results["log"] if query.label == "unique"]
    assert unique, "request ids are drawn"
    assert all(query.kept[WITH] == query.true_files == 1 for query in unique), (
        "an id's 13 grams are in no other file's filter (at 20 files)"
    )
