"""Shared fixtures: one SparkSession per run, a fresh SQLite-backed pyiceberg catalog per test, and real servers on
127.0.0.1 (tests/servers.py: Spark standalone, PostgreSQL, S3), each started once per run when a test asks for it;
and the two profiles of the long sweeps (`sweep`): short in `make test`, long in `make test-long`."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

from indexlib.config import Config, load_config

# the formats' SQL (Iceberg's ALTER TABLE ... PARTITION FIELD, Delta's DELETE/UPDATE/MERGE/OPTIMIZE) and Delta's
# catalog, set when `make jars` fetched the connectors (docs/how-to/serve.md)
CONNECTOR_CONF = {
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
    "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


# `make test-long` sets SKIPINDEX_LONG=1: every sweep (property test, random histories) runs its long profile
LONG = os.environ.get("SKIPINDEX_LONG", "") not in ("", "0")


def sweep(variable: str, short: int, long: int) -> int:
    """How much a sweep runs (hypothesis examples, steps of a history): `short` in `make test`, `long` under
    SKIPINDEX_LONG=1 (`make test-long`, docs/explanation/testing.md); the sweep's own `variable`, when set, wins.
    The adversarial cases a sweep found stay in it as explicit cases (`@example`, parametrized), run by both."""
    return int(os.environ.get(variable) or (long if LONG else short))


def pytest_report_header() -> str:
    profile = "long (SKIPINDEX_LONG=1)" if LONG else "short (`make test-long` runs the long one)"
    return f"skipindex sweeps: the {profile} profile"


@pytest.fixture(scope="session")
def spark():
    """The run's one SparkSession; with the connectors' jars (indexlib/jars.py) when `make jars` fetched them."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from indexlib.jars import has_connector, spark_jars

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("skipindex-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    jars = spark_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    if has_connector("iceberg", jars) and has_connector("delta", jars):
        for key, value in CONNECTOR_CONF.items():
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connectors(spark):
    """The shared SparkSession with Iceberg's runtime and delta-spark; without their jars the test is skipped (and
    fails under CI, whose `make test` fetches them: a connector test never passes by not running)."""
    from indexlib.jars import has_connector, spark_jars

    jars = spark_jars()
    missing = [name for name in ("iceberg", "delta") if not has_connector(name, jars)]
    if missing:
        message = f"no {' and '.join(missing)} connector jars: run `make jars` (jvm/pom.xml)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return spark


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone master with one worker (2 cores) on 127.0.0.1, stopped by pid at the end of the run."""
    from servers import SparkCluster

    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL 15 server on 127.0.0.1 (trust authentication), stopped by pid at the end of the run."""
    from servers import Postgres

    server = Postgres()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """An S3 HTTP server (moto) on 127.0.0.1, stopped by pid at the end of the run."""
    from servers import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()


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
    IndexSettings for every column, or a list of them, one per file; default: the automatic choice)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from indexlib.indexing.file_indexer import IndexTask, index_file
    from indexlib.store.schema import ENTRY_ARROW_SCHEMA, entry_row

    paths, entries = [], []
    for n, table in enumerate(tables):
        path = f"{directory}/file-{n}.parquet"
        pq.write_table(table, path)
        chosen = settings[n % len(settings)] if isinstance(settings, list) else settings
        per_column = {field.field_id: chosen for field in schema.fields} if chosen is not None else None
        record_count, stats = index_file(path, "PARQUET", IndexTask(schema, {}, None, 1, per_column or {}))
        paths.append(path)
        entries.append(entry_row(path, 0, record_count, 1, stats))
    return paths, pa.Table.from_pylist(entries, schema=ENTRY_ARROW_SCHEMA)


@contextlib.contextmanager
def hash_bits(bits: int):
    """Build and look up with key-index hashes of `bits` bits (statistics/key_hash.py's test hook): fewer bits
    force collisions. Build and lookup must run in this process."""
    from indexlib.statistics import key_hash

    saved, key_hash.HASH_BITS = key_hash.HASH_BITS, bits
    try:
        yield
    finally:
        key_hash.HASH_BITS = saved


SERVER_FIXTURES = ("spark_cluster", "postgres", "s3")


def pytest_collection_modifyitems(items):
    """Tests that use the shared SparkSession or the Spark cluster carry the `spark` marker, tests on real servers the
    `servers` marker; with the `slow` marker on long property runs, `pytest -m 'not spark and not slow and not
    servers'` (`make test-fast`) is the fast loop. Tests marked `long_only` (the benchmarks' end-to-end smoke runs,
    Spark SQL over Delta tables through the service) run in `make test-long` alone."""
    for item in items:
        if not LONG and item.get_closest_marker("long_only"):
            item.add_marker(pytest.mark.skip(reason="in the long profile: `make test-long` runs it"))
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures or "spark_cluster" in fixtures:
            item.add_marker(pytest.mark.spark)
        if any(name in fixtures for name in SERVER_FIXTURES):
            item.add_marker(pytest.mark.servers)
