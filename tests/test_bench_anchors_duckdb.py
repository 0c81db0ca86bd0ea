"""The anchors benchmark's DuckDB part (benchmarks/bench_anchors_duckdb.py) at toy size, no Spark: bench_anchors'
two data sets (lineitem SF 0.01 in 4 files by ship date, 8 service-log shards of 2,000 rows) and queries, indexed
in this process, each query read by DuckDB over the source files, over a pyarrow copy with Bloom filters, and
through `handle.scan(where).to_duckdb(con)`. No variant returns other rows than brute force (pyarrow reads every
row, DuckDB filters them); a point query on a key the files are not sorted by reads fewer files through the index
than the table holds. Timings are not checked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from indexlib.config import load_config
from indexlib.handle import open_handle
from indexlib.indexing.build import build_index

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict[str, list]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_anchors
        import bench_anchors_duckdb
        from bench_query import _lineitem

        directory = tmp_path_factory.mktemp("anchors-duckdb")
        conf, line_paths, line_queries, _ = _lineitem(directory, 0.01, 4)
        data = {
            "lineitem": (line_paths, bench_anchors._lineitem_queries(line_queries, line_paths)),
            "events": bench_anchors._events(directory, conf, 8, 2_000),
        }
        config = load_config(conf)
        out = {}
        for dataset, (paths, queries) in data.items():
            table = bench_anchors.DATASETS[dataset]
            build_index(config, table)  # in this process, no Spark
            out[dataset] = bench_anchors_duckdb.run_duckdb(
                open_handle(config, table),
                dataset,
                paths,
                queries,
                bench_anchors.BLOOM_COLUMNS[dataset],
                directory / f"duckdb-{dataset}",
                runs=1,
            )
            bench_anchors_duckdb.print_duckdb(out[dataset], dataset)
        return out
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_every_variant_answers_every_query_with_the_expected_rows(rows: dict[str, list]) -> None:
    assert [r.query for r in rows["lineitem"]][:3] == ["point", "IN 10", "IN 1,000"]
    assert "regex on tags" in [r.query for r in rows["events"]]
    for dataset, mine in rows.items():
        for row in mine:
            assert set(row.cells) == {"duckdb", "duckdb+pyarrow bloom", "skipindex to_duckdb"}, row.query
            failed = {v: c.error for v, c in row.cells.items() if c.error}
            assert not failed, f"{dataset} {row.query}: {failed}"
            assert not row.wrong(), f"{dataset} {row.query}: wrong rows from {row.wrong()}"
            assert row.expected_rows > 0 or row.query == "LIKE '%x%'", f"{dataset} {row.query}: a query that matches"


def test_skipindex_reads_fewer_files_for_a_point_query_on_an_unsorted_key(rows: dict[str, list]) -> None:
    for dataset in ("lineitem", "events"):  # l_orderkey (files by ship date), trace_id (random)
        point = next(r for r in rows[dataset] if r.query == "point")
        assert 0 < point.cells["skipindex to_duckdb"].files < point.total_files, point


def test_the_bloom_copy_holds_bloom_filters_and_the_sources_row_groups(rows: dict[str, list]) -> None:
    for dataset, mine in rows.items():
        copy = mine[0].copy
        assert copy is not None and len(copy.files) == mine[0].total_files, dataset
        assert copy.footer_bloom_bytes > 0 and copy.index_bytes > 0, f"{dataset}: Bloom filters written"
