"""The query benchmark at toy size, end to end (tables written, `skipindex build` in a fresh process, every way of
reading run, cold processes included): the rules it reports against hold before any timing means anything.
Timings are not checked here (docs/benchmarks.md has them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = [pytest.mark.slow, pytest.mark.long_only]  # `make test-long` runs it


@pytest.fixture(scope="module")
def rows() -> list:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_query

        return bench_query.main(
            ["--scale", "0.01", "--files", "4", "--shards", "8", "--shard-rows", "2000", "--runs", "1"]
        )
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_every_way_returns_the_same_rows(rows: list) -> None:
    assert len(rows) == 14, "seven queries per table, two tables"
    for row in rows:
        counts = {f"{engine} {way}": cell.rows for (engine, way), cell in row.cells.items()}
        assert len(counts) == 8, f"{row.table} {row.label}: own, warm, cold and limit for pyiceberg and DuckDB"
        assert len(set(counts.values())) == 1, f"{row.table} {row.label}: every way returns the same rows: {counts}"


def test_the_index_keeps_every_matching_file_and_reads_no_more_than_duckdb_over_all(rows: list) -> None:
    for row in rows:
        for engine in ("pyiceberg", "duckdb"):
            warm, limit = row.cells[(engine, "index warm")], row.cells[(engine, "limit")]
            assert limit.files == row.truth_files <= warm.files, (
                f"{row.table} {row.label} ({engine}): the index keeps every file holding a match"
            )
        assert row.cells[("duckdb", "index warm")].files <= row.cells[("duckdb", "own")].files, (
            f"{row.table} {row.label}: through the index DuckDB opens no more files than over every file"
        )


@pytest.fixture(scope="module")
def group_rows() -> list:
    """The row-group mode at toy size: lineitem SF 0.02 in 2 files of 8 row groups, built in this process."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_query

        return bench_query.main(
            ["--row-groups", "8", "--scale", "0.02", "--files", "2", "--runs", "1", "--build-runs", "1", "--no-spark"]
        )
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_row_group_pruning_reads_every_matching_row_group_and_no_more_than_file_level(group_rows: list) -> None:
    assert [row.label for row in group_rows] == [
        "point: order key",
        "point: part key",
        "date range",
        "date range AND part key",
    ]
    for row in group_rows:
        files, groups = row.file_level, row.group_level
        assert files.rows == groups.rows > 0, f"{row.label}: both reads return the matching rows (script asserts)"
        assert row.true_groups <= groups.groups <= files.groups, f"{row.label}: {groups} against {files}"
        assert groups.bytes <= files.bytes and groups.files <= files.files, row.label
    date_range = group_rows[2]
    assert date_range.group_level.groups == date_range.statistics_groups, "a date range: the row groups' bounds"
