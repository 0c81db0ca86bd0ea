"""What returning NaN rows costs the scans, side by side in one run (docs/how-to/read-rows.md, "What exact means").

Engines' Parquet readers skip row groups by footer statistics that leave NaN out, so a scan pushes its filter into
DuckDB's and Spark's readers only for files the index counted no NaN in (indexlib/scans/pushdown.py); a file that
holds NaN in a column the WHERE names is read unfiltered and filtered on rows. This measures the price on two
Iceberg tables that differ only in that: FILES files of ROWS rows, `x` a DOUBLE sorted within each file (row groups
of 100,000 rows, so a selective `x > 0.999` lets the reader skip all but the last), one with no NaN, one with one
NaN per file (its first row, in a row group the reader would skip). Every file is kept (each spans [0, 1)); row-group entries are off, so the reader's own
row-group skipping is all there is.

    python benchmarks/bench_nan_rows.py [FILES] [ROWS] [--spark]

Prints a Markdown table for docs/benchmarks.md: best of 3, count(*) of the scan's rows; compare within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField
from timing import best_of

from indexlib.config import load_config
from indexlib.handle import open_handle
from indexlib.indexing.build import build_index

ROW_GROUP_ROWS = 100_000


def _file(rng: np.random.Generator, start: int, rows: int, nan: bool) -> pa.Table:
    x = np.sort(rng.random(rows))
    if nan:
        x[0] = np.nan  # in the first row group, which `x > 0.999` would otherwise skip
    return pa.table({"id": pa.array(np.arange(start, start + rows), pa.int64()), "x": pa.array(x, pa.float64())})


def main(files: int, rows: int, spark_too: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "conf.toml"
        conf.write_text(
            f'[catalog]\nname = "bench"\ntype = "sql"\nuri = "sqlite:///{tmp}/catalog.db"\n'
            f'warehouse = "{tmp}/warehouse"\n[spark]\nmaster = "local[2]"\n'
        )
        config = load_config(conf)
        catalog = config.load_catalog()
        catalog.create_namespace("db")
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "x", DoubleType()))
        for name, nan in (("db.clean", False), ("db.nan", True)):
            table = catalog.create_table(
                name, schema, properties={"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)}
            )
            rng = np.random.default_rng(7)
            for n in range(files):
                table.append(_file(rng, n * rows, rows, nan))
            build_index(config, name)
        where = "x > 0.999"
        print(f"{files} files of {rows:,} rows, row groups of {ROW_GROUP_ROWS:,}; WHERE {where}; best of 3\n")
        print(
            "| scan | no NaN in the files (filter pushed into the reader) | one NaN per file (read, then filtered) | ratio |"
        )
        print("|---|---|---|---|")
        handles = {name: open_handle(config, name) for name in ("db.clean", "db.nan")}

        def duck(name: str) -> int:
            return handles[name].scan(where).to_duckdb().aggregate("count(*)").fetchall()[0][0]

        times = {name: best_of(3, lambda name=name: duck(name)) for name in handles}
        assert duck("db.nan") == duck("db.clean") + files, "every NaN row returned"
        clean, nan = times["db.clean"], times["db.nan"]
        print(f"| DuckDB relation | {clean * 1000:.0f} ms | {nan * 1000:.0f} ms | {nan / clean:.1f}x |")
        if spark_too:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers import indexlib
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
            spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")

            def spark_count(name: str) -> int:
                return handles[name].scan(where).to_spark(spark).count()

            times = {name: best_of(3, lambda name=name: spark_count(name)) for name in handles}
            clean, nan = times["db.clean"], times["db.nan"]
            print(f"| Spark DataFrame | {clean:.2f} s | {nan:.2f} s | {nan / clean:.1f}x |", flush=True)
            spark.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="?", type=int, default=20)
    parser.add_argument("rows", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--spark", action="store_true", help="the Spark DataFrame too")
    args = parser.parse_args()
    main(args.files, args.rows, args.spark)
