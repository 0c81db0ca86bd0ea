"""Which path `Scan.to_spark()` takes, and what each path needs (indexlib/scans/spark.py), on real tables and the
run's real SparkSession:

- Data file paths are names, never patterns: a kept file whose name holds `[`, `]`, `*`, `?`, `{`, `}`, `\\`, a space
  or `%` is read, by every reader and route, and no other file is (stray files a glob or a decoding would name lie
  beside them), on an Iceberg table (`add_files`) and a Delta table (a deletion vector on one of them too): the rows
  are those of SQL over the files' real rows.
- Spark's Python workers are asked once per session whether they import the package (`python_workers`); a WHERE
  whose jar-free read runs inside them fails at `to_spark`, before any Spark job, in one line naming the fix, or
  takes the format's own connector where the session has it; a WHERE read by Spark's own Parquet reader needs
  nothing there. The workers without the package are real: the session's `pythonExec` (what PySpark starts its
  workers with, from `PYSPARK_PYTHON` / `spark.pyspark.python`) pointed, for the test, at a venv made here that has
  every package of this one but pyiceberg.
- The path and what it needs are visible before reading: in the scan's repr and in `Scan.explain(spark)`.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_vectors import brute_force, commit_deletion_vectors
from deltalake import write_deltalake
from test_scan_rules import ids, sql_ids, write_nan_table

import indexlib
from indexlib.errors import UserError
from indexlib.handle import open_handle
from indexlib.indexing.build import build_index
from indexlib.scans.spark import AUTO, CONNECTOR, FILES, PARQUET, PYICEBERG, ROW_GROUPS, python_workers, routes
from indexlib.scans.spark_connectors import has_runtime
from indexlib.sources.delta import is_delta_name

NAN = math.nan
NAMES = [  # (a data file's name, what Spark would read for it as a pattern or a decoded URI)
    ("a[1].parquet", "[1] is a character class: a1.parquet"),
    ("b]x.parquet", "a lone ]"),
    ("c*.parquet", "* is any run of characters: every file starting with c"),
    ("d?.parquet", "? is any one character: dX.parquet"),
    ("e{x,y}.parquet", "{x,y} is a choice: ex.parquet"),
    ("f}.parquet", "a lone }"),
    ("g\\h.parquet", "a backslash escapes the next character"),
    ("i j.parquet", "a space"),
    ("k%20l.parquet", "%20 decoded is a space: k l.parquet"),
    ("m%.parquet", "a lone % is no escape"),
    ("plain.parquet", "a name with none of them"),
]
STRAYS = ["a1.parquet", "cX.parquet", "dX.parquet", "ex.parquet", "k l.parquet"]  # not in the table
WHERES = [
    ("id % 3 = 0", "filtered rows of whole files, no floating-point column named: Spark's Parquet reader"),
    ("x > 2 OR isnan(x)", "files with NaN where the WHERE looks: pyiceberg / pyarrow in Spark's Python workers"),
    ("id = 21 OR id = 53", "two files kept of many"),
]
SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64())])


def file_rows(n: int) -> pa.Table:
    """The rows of the `n`th file of NAMES: ids 10n .. 10n+4; every other file holds a NaN."""
    x = [0.5, 1.0, 2.5, 3.0, 4.5]
    if n % 2:
        x[1] = NAN
    return pa.table({"id": pa.array(range(10 * n, 10 * n + 5), pa.int64()), "x": pa.array(x, pa.float64())})


def write_files(folder: Path) -> list[str]:
    """NAMES' files in `folder` (and the strays, id 999, beside them): their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    for stray in STRAYS:
        pq.write_table(pa.table({"id": pa.array([999], pa.int64()), "x": pa.array([9.0])}), folder / stray)
    paths = []
    for n, (name, _) in enumerate(NAMES):
        pq.write_table(file_rows(n), folder / name)
        paths.append(str(folder / name))
    return paths


@pytest.fixture
def odd_iceberg(config, catalog, tmp_path) -> tuple[str, pa.Table]:
    """db.t: NAMES' files imported with `add_files` (no field ids: read through the name mapping), indexed."""
    table = catalog.create_table("db.t", SCHEMA)
    table.add_files(write_files(tmp_path / "imported"))
    build_index(config, "db.t")
    return "db.t", pa.concat_tables(file_rows(n) for n in range(len(NAMES)))


@pytest.fixture
def odd_delta(config, tmp_path) -> tuple[str, pa.Table]:
    """A Delta table whose one written file is followed by a commit adding NAMES' files (the log spells each path
    percent-encoded, as the protocol says), then a deletion vector deleting row 1 of `c*.parquet`; indexed."""
    root = tmp_path / "odd delta"
    write_deltalake(str(root), file_rows(20), configuration={"delta.enableDeletionVectors": "true"})
    adds = [
        {
            "add": {
                "path": quote(Path(path).name),
                "partitionValues": {},
                "size": Path(path).stat().st_size,
                "modificationTime": 1_700_000_000_000,
                "dataChange": True,
                "stats": json.dumps({"numRecords": 5}),  # a file with a deletion vector needs its count
            }
        }
        for path in write_files(root)
    ]
    (root / "_delta_log" / f"{1:020}.json").write_text("\n".join(json.dumps(a) for a in adds) + "\n")
    commit_deletion_vectors(str(root), {quote("c*.parquet"): {1}})
    build_index(config, str(root))
    return str(root), brute_force(str(root), SCHEMA, {})


@pytest.fixture(params=["iceberg", "delta"])
def odd_table(request) -> tuple[str, pa.Table]:
    return request.getfixturevalue(f"odd_{request.param}")


def test_a_data_file_path_is_a_name_never_a_pattern(spark, config, odd_table) -> None:
    name, truth_rows = odd_table
    handle = open_handle(config, name)
    assert len(handle.lookup("id >= 0").files) == len(NAMES) + is_delta_name(name), "every file is live"
    readers = [FILES, CONNECTOR] if has_runtime(spark, "delta" if is_delta_name(name) else "iceberg") else [FILES]
    taken = set()
    for where, rule in WHERES:
        truth = sql_ids(truth_rows, where)
        taken |= {route.how for route in routes(handle.lookup(where), handle.dialect).values()}
        for reader in readers:
            got = ids(handle.scan(where).to_spark(spark, reader).toArrow())
            wrong = [
                f"{file} ({what})"
                for n, (file, what) in enumerate(NAMES)
                if [i for i in got if i // 10 == n] != [i for i in truth if i // 10 == n]
            ]
            assert got == truth, (
                f"{name} reader={reader} {where} ({rule}): each file read by its name alone; wrong rows for "
                f"{wrong or 'a stray file'}"
            )
    python_route = ROW_GROUPS if is_delta_name(name) else PYICEBERG
    assert {PARQUET, python_route} <= taken, f"both jar-free routes read files with odd names ({taken})"


# Spark's Python workers ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_without_pyiceberg(tmp_path_factory) -> str:
    """A venv's interpreter that imports every package of this one but pyiceberg (and this checkout), as on a
    cluster where the package's dependencies were not all shipped."""
    root = tmp_path_factory.mktemp("workers")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    packages = root / "packages"
    packages.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("pyiceberg", "__editable__")) and entry.suffix != ".pth":
            (packages / entry.name).symlink_to(entry)
    checkout = Path(indexlib.__file__).resolve().parent.parent
    (site,) = (root / "venv" / "lib").glob("python*/site-packages")
    (site / "workers.pth").write_text(f"{packages}\n{checkout}\n")
    return str(root / "venv" / "bin" / "python")


@pytest.fixture
def bare_workers(spark, python_without_pyiceberg) -> Any:
    """The run's session with its Python workers started by `python_without_pyiceberg` for the test."""
    context = spark.sparkContext
    saved = context.pythonExec
    context.pythonExec = python_without_pyiceberg
    try:
        yield spark
    finally:
        context.pythonExec = saved


def jobs_run(spark: Any) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_the_python_workers_are_asked_once_what_they_import(spark, python_without_pyiceberg) -> None:
    ready = python_workers(spark)
    assert ready.ready and ready.python, f"the run's workers run this interpreter, which imports the package {ready}"
    before = jobs_run(spark)
    assert python_workers(spark) == ready and jobs_run(spark) == before, "asked once per session: no second job"
    context = spark.sparkContext
    saved = context.pythonExec
    context.pythonExec = python_without_pyiceberg
    try:
        missing = python_workers(spark)
    finally:
        context.pythonExec = saved
    assert (missing.ready, missing.python, missing.error) == (
        False,
        python_without_pyiceberg,
        "ModuleNotFoundError: No module named 'pyiceberg'",
    ), "another interpreter is asked again, and what it lacks is said in one line"
    assert python_workers(spark) == ready, "back to the session's own interpreter: its answer, kept"


WORKER_RULES = [  # (format, WHERE, reader, what happens without the package on the workers, explain says, rule)
    ("delta", "id = 3", FILES, "rows", "parquet    1 kept file", "whole files: Spark's own Parquet reader, no Python"),
    (
        "iceberg",
        "id = 3",
        FILES,
        "rows",
        "parquet    1 kept file",
        "whole files: Spark's own Parquet reader, no Python",
    ),
    ("delta", "x > 4", FILES, "refused", "refused", "NaN-prone files are read by pyarrow in the workers"),
    ("iceberg", "x > 4", FILES, "refused", "refused", "NaN-prone files are read by pyiceberg in the workers"),
    ("delta", "x > 4", AUTO, "rows", "connector: Spark's Python workers", "delta-spark reads them instead"),
    ("iceberg", "x > 4", AUTO, "rows", "connector: Iceberg's Spark runtime", "Iceberg's runtime reads them anyway"),
]


@pytest.mark.parametrize("fmt, where, reader, outcome, explained, rule", WORKER_RULES)
def test_a_path_that_needs_the_package_on_the_workers_says_so_before_any_job(
    bare_workers, config, catalog, tmp_path, caplog, fmt, where, reader, outcome, explained, rule
) -> None:
    spark = bare_workers
    if "connector" in explained and not has_runtime(spark, fmt):
        pytest.skip("no connector jars in this session (make jars)")
    name, data = write_nan_table(fmt, catalog, tmp_path)
    build_index(config, name)
    scan = open_handle(config, name).scan(where)
    python_workers(spark)  # asked once per interpreter: what follows runs no Spark job until the read
    before = jobs_run(spark)
    reads = scan.explain(spark, reader).split("\n\n")[-1]
    assert explained in reads, f"{fmt} {where}: {rule}: explain(spark) says {explained!r}\n{reads}"
    if outcome == "refused":
        with pytest.raises(UserError) as refused:
            scan.to_spark(spark, reader)
        message = str(refused.value)
        assert "\n" not in message, f"{rule}: one line"
        for said in ["No module named 'pyiceberg'", "make dist", "docs/how-to/spark-cluster.md", "NaN-prone"]:
            assert said in message, f"{rule}: the line says {said!r}: {message}"
        assert jobs_run(spark) == before, f"{rule}: refused before any Spark job runs"
        return
    with caplog.at_level(logging.WARNING, logger="indexlib.scans.spark"):
        assert ids(scan.to_spark(spark, reader).toArrow()) == sql_ids(data, where), f"{fmt} {where}: {rule}"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if "Python workers" in explained:
        assert len(warned) == 1 and "make dist" in warned[0], f"{rule}: one warning line naming the fix: {warned}"
    else:
        assert not warned, f"{rule}: nothing to warn of: {warned}"


def test_the_scan_says_what_to_spark_needs_on_the_executors(spark, config, catalog, tmp_path) -> None:
    name, _ = write_nan_table("delta", catalog, tmp_path)
    build_index(config, name)
    handle = open_handle(config, name)
    whole, nan = handle.scan("id = 3"), handle.scan("x > 4")
    assert "to_spark needs: Spark's Parquet reader or the format's connector: nothing of ours" in repr(whole)
    assert "1 kept file (NaN-prone 1) read in Spark's Python workers" in repr(nan), repr(nan)
    explained = nan.explain(spark, FILES)
    assert explained.startswith(handle.lookup("x > 4").explain()), "the lookup's explain, then the Spark reads"
    for line in ["reader     files: asked for", "row groups 1 kept file (NaN-prone 1): pyarrow in Spark's Python"]:
        assert line in explained, f"{line!r} in\n{explained}"
    assert explained.splitlines()[-1].endswith(" imports indexlib"), "the workers' answer in this session"
