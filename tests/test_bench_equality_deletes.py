"""The equality-delete benchmark at toy size (benchmarks/bench_equality_deletes.py): every table is built, every
cell measured, and each scan returns every live row and no deleted one (the script asserts the count). Timings are
not checked here (docs/benchmarks.md has them)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_the_benchmark_measures_each_table_and_counts_its_live_rows(capsys) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_equality_deletes

        bench_equality_deletes.main(files=2, rows=2_000, deletes=[0, 50])
    finally:
        sys.path.remove(str(BENCHMARKS))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [line.split("|")[-2].strip() for line in lines[1:]] == ["4,000", "3,950"], "rows returned per table"
