"""The planning-service benchmark at toy size, end to end (a real `skipindex serve` process, pyiceberg and raw HTTP
clients in forked processes, the query benchmark's tables built by `skipindex build`): every cell is measured and
the rows through the service equal client-side planning's (the script asserts it). Timings are not checked here
(docs/benchmarks.md has them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = [pytest.mark.slow, pytest.mark.long_only]  # `make test-long` runs it


@pytest.fixture(scope="module")
def results() -> tuple[list, list]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_serve

        return bench_serve.main(["--quick", "--files", "300", "--samples", "16"])
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_plan_latency_cells(results: tuple[list, list]) -> None:
    latency, _ = results
    assert [(row.files, row.query) for row in latency] == [(300, "="), (300, "IN 10")]
    for row in latency:
        cells = {(cell.kind, cell.clients) for cell in row.latencies}
        assert cells == {(kind, clients) for kind in ("pyiceberg", "raw HTTP") for clients in (1, 8)}
        assert all(0 < cell.p50 <= cell.p99 and cell.throughput > 0 for cell in row.latencies)
        assert row.served_kept <= row.client_kept, f"{row.query}: the service plans no more files than pyiceberg"
        assert row.rows >= 1, f"{row.query}: the keys are taken from the table's rows"


def test_end_to_end_rows_equal_and_pruned(results: tuple[list, list]) -> None:
    _, e2e = results
    assert len(e2e) == 14, "seven queries per table, two tables"
    for row in e2e:
        assert row.served_files <= row.client_files <= row.total_files, f"{row.table} {row.query}"
        assert row.client_s > 0 and row.served_s > 0 and row.client_plan_s > 0 and row.served_plan_s > 0
    point = [row for row in e2e if row.query == "point"]
    assert all(row.served_files == 1 for row in point), "a one-file point query is planned as that file"
