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
