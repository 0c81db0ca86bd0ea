"""Cluster deployment as docs/how-to/spark-cluster.md says: `make dist` packs the project into a virtualenv archive that
`spark-submit --archives ...#environment` unpacks on the executors, and zips indexlib for `--py-files`.

The archive here is reduced (`PACK_INSTALL="--no-deps ."`: the project without its dependencies) so that building
it takes seconds instead of the full one's 4 minutes (690 MB); it goes through the same `make dist` recipe (fresh
venv, non-editable install, venv-pack). The executors' Python worker takes pyspark from Spark's own python/lib zips,
so the tasks run; they report where `import indexlib` finds the package (importing it needs the dependencies).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPARK_SUBMIT = str(Path(sys.executable).with_name("spark-submit"))

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = """
import json, sys
from pyspark.sql import SparkSession

def where(_):
    import importlib.util, os, sys
    # where `import indexlib` finds the package, without running it (the reduced archive has no dependencies)
    found = importlib.util.find_spec("indexlib").origin
    yield {"executable": sys.executable, "prefix": sys.prefix, "indexlib": found, "cwd": os.getcwd()}

spark = SparkSession.builder.getOrCreate()
print("TASKS " + json.dumps(spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()))
spark.stop()
"""


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-o",
            ".venv/.installed",  # the dev venv is what runs these tests: never rebuild it here
            "dist",
            f"DIST={out}",
            f"PACK_VENV={out}/pack-venv",
            "PACK_INSTALL=--no-deps .",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _submit(tmp_path: Path, master: str, *options: str) -> list[dict]:
    job = tmp_path / "where_am_i.py"
    job.write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    done = subprocess.run(
        [SPARK_SUBMIT, "--master", master, "--conf", "spark.ui.enabled=false", *options, str(job)],
        cwd=tmp_path,
        env={**env, "PYSPARK_DRIVER_PYTHON": sys.executable},  # also what finds SPARK_HOME (the pyspark package)
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("TASKS ")]
    assert lines, done.stdout + done.stderr[-4000:]
    return json.loads(lines[0].removeprefix("TASKS "))


def test_executors_run_the_packed_environment_not_the_drivers(dist, tmp_path):
    archive = dist / "skipindex-env.tar.gz"
    # local-cluster: real executor processes, each in a working directory of its own where --archives unpacks,
    # as on a cluster. In local[N] mode Spark unpacks the archive too, but runs the Python workers in the driver's
    # working directory, where ./environment does not exist.
    tasks = _submit(
        tmp_path,
        "local-cluster[1,2,1024]",
        "--archives",
        f"{archive}#environment",
        "--conf",
        "spark.pyspark.python=./environment/bin/python",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",  # else the driver would run ./environment/bin/python too
    )
    # local-cluster's worker keeps the executors' working directories under SPARK_HOME/work (the pyspark package)
    for work in {Path(task["cwd"]).parent for task in tasks if "/work/app-" in task["cwd"]}:
        shutil.rmtree(work, ignore_errors=True)
    assert len(tasks) == 2
    for task in tasks:
        prefix = Path(task["prefix"])
        assert prefix.name == "environment" and prefix != Path(sys.prefix), (
            f"the task's Python is the archive's: {task}"
        )
        assert Path(task["executable"]) == prefix / "bin" / "python", f"./environment/bin/python ran the task: {task}"
        shipped = Path(task["indexlib"])
        assert shipped.is_relative_to(prefix / "lib"), f"indexlib came from the archive's site-packages: {task}"
        assert not shipped.is_relative_to(REPO / "indexlib"), f"not the driver's (editable) indexlib: {task}"


def test_py_files_zip_holds_indexlib_and_executors_import_it(dist, tmp_path):
    zipped = dist / "skipindex.zip"
    names = zipfile.ZipFile(zipped).namelist()
    assert "indexlib/__init__.py" in names and "indexlib/cli.py" in names, "the zip is indexlib's sources"
    assert {info.date_time for info in zipfile.ZipFile(zipped).infolist()} == {(1980, 1, 1, 0, 0, 0)}, "reproducible"
    # the executors run the dev venv's interpreter, which has the dependencies and an editable indexlib of its own:
    # the zip comes first on the tasks' path
    tasks = _submit(tmp_path, "local[2]", "--py-files", str(zipped), "--conf", f"spark.pyspark.python={sys.executable}")
    for task in tasks:
        assert "skipindex.zip" in task["indexlib"], f"the executors imported indexlib from --py-files: {task}"
