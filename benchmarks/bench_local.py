"""Small work without Spark: `skipindex build` of the same table in a fresh process, once with the files indexed in
the driver (`[build] local_max_files` and `local_max_bytes` above the table) and once on Spark `local[2]`
(`local_max_files = 0`), the way a scheduled build or the CLI pays for it: JVM start-up included. The crossing
point picks the defaults of `local_max_files` and `local_max_bytes` (indexlib/config.py).

Then the cost of planning a mid-sized table as several tasks per core so that progress moves
(indexing/splits.py `progress_parallelism`), against one task per core, on one warm SparkSession.

    python benchmarks/bench_local.py [--small 10,100,1000] [--lineitem 0.1:4,0.5:10]

Prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_build import _lineitem_table, _small_files_table, bench_spark

SPARK = '[spark]\nmaster = "local[2]"\n[spark.options]\n"spark.ui.enabled" = "false"\n'


def _cli_build(conf: Path, namespace: str, build: str) -> float:
    """Seconds of `skipindex build` in a fresh process (the way a scheduler runs it)."""
    variant = conf.with_name(f"{namespace}.toml")
    variant.write_text(conf.read_text() + f'[index]\nnamespace = "{namespace}"\n[build]\n{build}' + SPARK)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "indexlib.cli", "build", "--conf", str(variant), "--table", "bench.small"],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def driver_against_spark(make_table, title: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        conf, paths = make_table(Path(tmp))
        size = sum(Path(p).stat().st_size for p in paths)
        local = _cli_build(conf, "local", "local_max_files = 1000000\nlocal_max_bytes = 1000000000000\n")
        spark = _cli_build(conf, "spark", "local_max_files = 0\n")
    return f"| {title} | {len(paths):,} | {size / 1e6:,.1f} | {local:.1f} | {spark:.1f} | {spark / local:.1f}x |"


def progress_cost(scale: float, files: int) -> list[str]:
    """One warm SparkSession: the same build planned for one task per core, then for progress."""
    from indexlib.config import load_config
    from indexlib.indexing import splits
    from indexlib.indexing.build import build_index

    spark = bench_spark()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        conf, paths = _lineitem_table(Path(tmp), scale, files)
        size = sum(Path(p).stat().st_size for p in paths)
        for n, per_core in enumerate((1, splits.PROGRESS_TASKS_PER_CORE, 1, splits.PROGRESS_TASKS_PER_CORE)):
            splits.PROGRESS_TASKS_PER_CORE = per_core
            variant = Path(tmp) / f"p{n}.toml"
            variant.write_text(conf.read_text() + f'[index]\nnamespace = "p{n}"\n')
            tasks = len(
                splits.plan_splits(_refs(paths), 128 * 2**20, 4 * 2**20, splits.progress_parallelism(_refs(paths), 2))
            )
            started = time.perf_counter()
            build_index(load_config(variant), "bench.small", spark)
            seconds = time.perf_counter() - started
            if n:  # the first run warms the JVM and the Python workers up
                rows.append(f"| {files} files, {size / 1e6:,.1f} MB | {per_core} | {tasks} | {seconds:.1f} |")
    spark.stop()
    return rows


def _refs(paths: list[str]):
    from indexlib.sources.base import DataFileRef

    return [DataFileRef(p, 1, Path(p).stat().st_size, "PARQUET") for p in paths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", default="10,100,1000", help="counts of 200-row files")
    parser.add_argument("--lineitem", default="0.1:4,0.5:10", help="TPC-H lineitem scale:files pairs")
    parser.add_argument("--progress", default="0.5:10", help="scale:files of the progress-planning run ('': skip)")
    args = parser.parse_args()
    print("| table | files | MB | in the driver (s) | on Spark local[2], with start-up (s) | Spark / driver |")
    print("|---|---:|---:|---:|---:|---:|")
    for count in filter(None, args.small.split(",")):
        n = int(count)
        print(driver_against_spark(lambda d, n=n: _small_files_table(d, n, 200), "files of 200 rows"), flush=True)
    for pair in filter(None, args.lineitem.split(",")):
        scale, files = pair.split(":")
        make = lambda d, s=float(scale), f=int(files): _lineitem_table(d, s, f)  # noqa: E731
        print(driver_against_spark(make, f"TPC-H lineitem SF {scale}"), flush=True)
    if args.progress:
        scale, files = args.progress.split(":")
        print("\n| table | tasks per core | tasks | seconds (warm session) |\n|---|---:|---:|---:|")
        print("\n".join(progress_cost(float(scale), int(files))))


if __name__ == "__main__":
    main()
