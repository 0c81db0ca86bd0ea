"""Shared fixtures: one SparkSession per run, a fresh SQLite-backed pyiceberg catalog per test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from indexlib.config import Config, load_config


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("skipindex-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def conf_path(tmp_path: Path) -> Path:
    path = tmp_path / "conf.toml"
    path.write_text(
        '[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'
        '[spark]\nmaster = "local[2]"\n'
    )
    return path


@pytest.fixture
def config(conf_path: Path) -> Config:
    return load_config(conf_path)


@pytest.fixture
def catalog(config: Config):
    catalog = config.load_catalog()
    catalog.create_namespace("db")
    return catalog


def write_and_index(directory, tables, schema, settings=None):
    """Write each Arrow table as a real Parquet file and index it with the build's per-file code (`settings`: one
    IndexSettings for every column; default: the automatic choice)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from indexlib.indexing.file_indexer import index_file
    from indexlib.store.schema import ENTRY_ARROW_SCHEMA, entry_row

    paths, entries = [], []
    for n, table in enumerate(tables):
        path = f"{directory}/file-{n}.parquet"
        pq.write_table(table, path)
        per_column = {field.field_id: settings for field in schema.fields} if settings is not None else None
        record_count, stats = index_file(path, "PARQUET", schema, {}, None, per_column)
        paths.append(path)
        entries.append(entry_row(path, 0, record_count, 1, stats))
    return paths, pa.Table.from_pylist(entries, schema=ENTRY_ARROW_SCHEMA)


def pytest_collection_modifyitems(items):
    """Tests that use the shared SparkSession carry the `spark` marker; with the `slow` marker on long property runs,
    `pytest -m 'not spark and not slow'` (`make test-fast`) is the fast loop."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
