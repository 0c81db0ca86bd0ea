"""Table formats are plug-ins (indexlib/sources/registry.py): a format is one module holding one `SourceFormat`,
found through the entry-point group `skipindex.formats`; a format whose files one of `FileReads` describes gets
names, builds, lookups and every scan without a change anywhere else.

The proof is tests/toy_format.py, a third format in one module (a folder of Parquet files and a manifest the test
writes: partition values kept out of the files, deleted row positions, NULL, NaN and LIKE's wildcards in the
values), registered here as an installed package would register it. Every output is checked against brute force:
DuckDB's SQL over every live row of the table (deleted rows dropped, partition values added).
"""

from __future__ import annotations

import math
from collections import Counter
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from toy_format import write_toy

from indexlib import plugins
from indexlib.errors import UserError
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index
from indexlib.sources.registry import BUILT_IN, ENTRY_POINT_GROUP, format_for, formats

TOY = EntryPoint("toy", "toy_format:FORMAT", ENTRY_POINT_GROUP)


def _registered(monkeypatch, points: list[EntryPoint]) -> None:
    """What the registry sees when the entry-point group holds `points` (as installed packages would declare)."""
    monkeypatch.setattr(plugins, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    formats.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_formats():
    formats.cache_clear()
    yield
    formats.cache_clear()


@pytest.fixture
def toy_registered(monkeypatch) -> None:
    _registered(monkeypatch, [*entry_points(group=ENTRY_POINT_GROUP), TOY])


# Names: which format a table name is -------------------------------------------------------------------------------

NAMES = [
    ("db.t", "iceberg", "a dotted name is an Iceberg table in the configured catalog"),
    ("/data/events.v2", "delta", "a path is a Delta table, dots and all"),
    ("s3://lake/events", "delta", "a URI is a Delta table"),
    ("toy:/data/t", "toy", "a registered format recognises its own names before the built-in ones"),
    ("toy:db.t", "toy", "before Iceberg too, which would take any dotted name"),
]


@pytest.mark.parametrize(("name", "expected", "rule"), NAMES)
def test_a_name_is_opened_by_the_first_format_that_recognises_it(toy_registered, name, expected, rule) -> None:
    assert format_for(name).name == expected, rule


def test_a_name_no_format_recognises_is_one_line_naming_the_registered_formats(toy_registered) -> None:
    with pytest.raises(UserError, match=r"^table 'events' must be named namespace\.table .* \(or a table of: toy\)$"):
        format_for("events")


def test_the_built_in_formats_are_registered_and_found_without_package_metadata(monkeypatch) -> None:
    registered = {point.name for point in entry_points(group=ENTRY_POINT_GROUP)}
    assert registered == set(BUILT_IN), "pyproject.toml registers every built-in format (reinstall)"
    _registered(monkeypatch, [])  # a checkout on sys.path, not installed
    assert list(formats()) == ["delta", "iceberg"], "Delta's paths are tried before Iceberg's dotted names"
    assert format_for("/data/t").name == "delta"


# A toy table: every scan through the index holds exactly the rows SQL returns ---------------------------------------

SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.string()), ("k", pa.int64()), ("f", pa.float64()), ("s", pa.string())])
WHERES = [
    "id = 7",
    "id >= 30 AND id < 70",
    "g = 'b c'",
    "g = 'a' AND id % 3 = 0",
    "k IS NULL OR k NOT IN (1, 2)",
    "f > 0.5",
    "f IS NULL",
    "s LIKE 'x\\_%' ESCAPE '\\'",
    "s LIKE '%\\%%' ESCAPE '\\'",
    "id = 100000",
]


def _file(start: int, count: int, group: str) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": ids,
            "g": [group] * count,
            "k": [None if i % 7 == 0 else i % 5 for i in ids],
            "f": [math.nan if i % 11 == 0 else None if i % 13 == 0 else (i % 10) / 10 for i in ids],
            "s": [f"x_{i}" if i % 4 == 0 else f"y%{i}" if i % 4 == 1 else f"xy{i}" for i in ids],
        },
        schema=SCHEMA,
    )


FILES = [  # (rows, positions deleted from the file)
    (_file(0, 20, "a"), []),
    (_file(20, 20, "a"), [0, 3, 19]),
    (_file(40, 20, "b c"), []),
    (_file(60, 20, "b c"), [5]),
    (_file(80, 20, "d"), list(range(20))),  # every row deleted
]


def _live_rows(files: list[tuple[pa.Table, list[int]]]) -> pa.Table:
    return pa.concat_tables(
        [table.filter(pa.array([i not in set(gone) for i in range(table.num_rows)])) for table, gone in files]
    )


def _unpruned(files, where: str) -> Counter:
    return _rows(_unpruned_table(files, where))


def _unpruned_table(files, where: str) -> pa.Table:
    return duckdb.connect().from_arrow(_live_rows(files)).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()


def _through_pandas(table: pa.Table) -> pa.Table:
    """As pandas holds it: NULL and NaN are one value in a float column (and a NULL makes an int column float)."""
    return pa.Table.from_pandas(table.to_pandas(), preserve_index=False)


def _rows(found: Any) -> Counter:
    """Rows as a multiset, NaN spelt so that it equals itself."""
    table = found if isinstance(found, pa.Table) else found.to_arrow_table()
    return Counter(
        tuple((k, "NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items())
        for row in table.select(SCHEMA.names).to_pylist()
    )


@pytest.fixture
def toy(toy_registered, config, catalog, tmp_path: Path) -> tuple[str, IndexHandle]:
    name = write_toy(tmp_path / "toy table", SCHEMA, ["g"], FILES)
    build_index(config, name)
    return name, IndexHandle.for_table(config, name)


@pytest.mark.parametrize("where", WHERES)
def test_every_scan_of_a_toy_table_holds_the_rows_sql_returns(toy, where) -> None:
    _, handle = toy
    found = handle.scan(where)
    expected = _unpruned(FILES, where)
    outputs = {
        "to_arrow": found.to_arrow(),
        "to_arrow_batch_reader": found.to_arrow_batch_reader().read_all(),
        "to_duckdb": found.to_duckdb().to_arrow_table(),
        "to_polars": found.to_polars().collect().to_arrow(),
    }
    for output, got in outputs.items():
        assert _rows(got) == expected, f"{where}: {output} holds the rows of the unpruned query"
    assert found.count() == sum(expected.values()), f"{where}: count() counts them"
    as_pandas = pa.Table.from_pandas(found.to_pandas(), preserve_index=False)
    assert _rows(as_pandas) == _rows(_through_pandas(_unpruned_table(FILES, where))), f"{where}: to_pandas"


@pytest.mark.parametrize("where", WHERES)
def test_a_toy_lookup_never_skips_a_file_holding_a_matching_row(toy, where) -> None:
    _, handle = toy
    paths = [str(p) for p in sorted(Path(handle.name[len("toy:") :]).glob("*.parquet"))]
    holding = {path for path, (table, gone) in zip(paths, FILES, strict=True) if _unpruned([(table, gone)], where)}
    assert holding <= set(handle.lookup(where).files), f"{where}: every file holding a live matching row is kept"


def test_the_toy_index_prunes_by_its_statistics_and_its_partition_values(toy) -> None:
    _, handle = toy
    assert handle.lookup("id = 7").files_total == len(FILES)
    assert len(handle.lookup("id = 7").files) == 1, "min/max of id: one file"
    assert len(handle.lookup("g = 'b c'").files) == 2, "partition values (not stored in the files): two files"
    assert handle.lookup("id = 7").has_index, "the index the build wrote for the toy table"


def test_a_live_handle_reads_a_new_toy_version_and_keeps_its_unindexed_files(toy, config, tmp_path: Path) -> None:
    name, handle = toy
    assert handle.scan("id = 7").count() == 1
    newer = [*FILES, (_file(100, 10, "a"), [])]
    write_toy(tmp_path / "toy table", SCHEMA, ["g"], newer)
    found = handle.scan("id >= 100")
    assert found.result.source_version == 2, "the handle refreshed its source"
    assert _rows(found.to_arrow()) == _unpruned(newer, "id >= 100"), "the new file's rows"
    assert found.result.files_unindexed == len(newer), "the new version's files: unindexed until the next build"
    build_index(config, name)
    assert len(handle.lookup("id >= 100").files) == 1, "indexed by the next build"


@pytest.mark.spark
def test_the_spark_scan_of_a_toy_table_holds_the_rows_sql_returns(spark, toy) -> None:
    _, handle = toy
    for where in WHERES:
        found = handle.scan(where)
        frame = found.to_spark(spark)
        got = _rows(pa.Table.from_pylist([row.asDict() for row in frame.collect()], SCHEMA))
        assert got == _unpruned(FILES, where), f"{where}: the DataFrame's rows (read by name, no connector)"


def test_a_written_toy_file_stores_no_partition_column(tmp_path: Path) -> None:
    name = write_toy(tmp_path / "t", SCHEMA, ["g"], FILES[:1])
    stored = pq.read_schema(next(Path(name[len("toy:") :]).glob("*.parquet")))
    assert "g" not in stored.names, "the toy writer keeps partition values in its manifest alone"
