"""The `skipindex` console script as a user runs it: JSON shape, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from indexlib.indexing.build import build_index
from indexlib.store.table import IndexTable

SKIPINDEX = str(Path(sys.executable).with_name("skipindex"))


RUNNER = Path(__file__).with_name("interrupted_run.py")


def _run(*args: str, tmp: Path | None = None) -> subprocess.CompletedProcess:
    """`tmp`: the temporary directory of the run (TMPDIR), where Spark's log file goes."""
    env = {**os.environ, "TMPDIR": str(tmp)} if tmp is not None else None
    return subprocess.run([SKIPINDEX, *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def indexed_table(config, catalog, spark):
    table = catalog.create_table("db.small", schema=pa.schema([("id", pa.int64()), ("tag", pa.string())]))
    for start in (0, 10, 20):
        table.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64()), "tag": ["a"] * 10}))
    build_index(config, "db.small", spark)
    return table


def test_explain_json_follows_the_documented_shape(conf_path, indexed_table):
    done = _run(
        "explain",
        "--conf",
        str(conf_path),
        "--table",
        "db.small",
        "--where",
        "id BETWEEN 12 AND 14",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"table", "where", "files", "summary"}
    assert out["table"] == "db.small" and out["where"] == "id BETWEEN 12 AND 14"
    live = [t.file.file_path for t in indexed_table.scan().plan_files()]
    assert len(out["files"]) == 1 and out["files"][0] in live, "paths exactly as the source records them"
    summary = out["summary"]
    assert set(summary) == {"has_index", "files_total", "files_kept", "files_unindexed", "files_all_match", "stages"}
    assert summary["has_index"] is True
    assert (summary["files_total"], summary["files_kept"], summary["files_unindexed"]) == (3, 1, 0)
    assert summary["stages"] == [
        {"name": "partition", "files_in": 3, "files_out": 3},
        {"name": "minmax", "files_in": 3, "files_out": 1},
        {"name": "key index", "files_in": 1, "files_out": 1},
        {"name": "bloom", "files_in": 1, "files_out": 1},
        {"name": "automaton", "files_in": 1, "files_out": 1},
    ]


def test_explain_human_output_is_a_readable_table(conf_path, indexed_table):
    done = _run("explain", "--conf", str(conf_path), "--table", "db.small", "--where", "id < 5 OR abs(id) = 3")
    assert done.returncode == 0, done.stderr
    assert "files kept 3 of 3" in done.stdout, "the unusable OR branch keeps every file"
    assert "unused     ABS(id) = 3" in done.stdout, "explain says which part was not used"
    assert "uses lower/upper bounds and null/NaN counts of id" in done.stdout, (
        "explain says which statistics a leaf reads"
    )


@pytest.mark.parametrize(
    ("table", "where", "expected"),
    [
        ("db.nope", "id = 1", "unknown table 'db.nope'"),
        ("db.small", "nope = 1", "unknown column 'nope' in table db.small"),
        ("db.small", "id = = 1", "cannot parse WHERE"),
        ("db.small", "   ", "empty WHERE"),
        ("nodots", "id = 1", "must be named namespace.table"),
        ("/no/such/lake/table", "id = 1", "no Delta table at '/no/such/lake/table'"),
        ("db.small", "(" * 401 + "id = 1" + ")" * 401, "at most 400 levels of parentheses"),
        ("db.small", "(" * 2000 + "id = 1" + ")" * 2000, "at most 400 levels of parentheses"),
        ("db.small", "NOT " * 101 + "id = 1", "and 100 of AND/OR/NOT"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_code_2(conf_path, indexed_table, table, where, expected):
    done = _run("explain", "--conf", str(conf_path), "--table", table, "--where", where)
    assert done.returncode == 2, f"exit code for {expected}: {done.returncode}"
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["backfill", "--table", "db.small", "--where", "id = 1"], "restricts no partition field"),
        (["backfill", "--table", "db.small", "--where", "nope = 1"], "unknown column 'nope'"),
        (["verify", "--table", "db.nope"], "unknown table 'db.nope'"),
        (["compact", "--table", "db.nope"], "unknown table 'db.nope'"),
    ],
)
def test_bad_maintenance_input_is_one_line_and_exit_code_2(conf_path, indexed_table, args, expected):
    done = _run(*args[:1], "--conf", str(conf_path), *args[1:])
    assert done.returncode == 2, f"exit code for {expected}: {done.returncode}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


def test_missing_config_file_is_a_user_error(tmp_path):
    done = _run("explain", "--conf", str(tmp_path / "missing.toml"), "--table", "db.t", "--where", "a = 1")
    assert done.returncode == 2 and "config file not found" in done.stderr


def test_build_job_runs_as_a_module_and_reports_a_noop(conf_path, indexed_table):
    done = subprocess.run(
        [sys.executable, "-m", "indexlib.jobs.build_index", "--conf", str(conf_path), "--table", "db.small"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert "up to date" in done.stdout and "nothing committed" in done.stdout


@pytest.mark.parametrize(
    ("setting", "message"),
    [('time_zone = "Mars/Olympus"', "lookup.time_zone: unknown time zone"), ('dialect = "sparkk"', "lookup.dialect")],
)
def test_bad_lookup_settings_name_the_file_and_the_setting(tmp_path, setting, message):
    from indexlib.config import load_config
    from indexlib.errors import UserError

    conf = tmp_path / "bad.toml"
    conf.write_text(f'[catalog]\ntype = "sql"\nuri = "sqlite:///c.db"\n[lookup]\n{setting}\n')
    with pytest.raises(UserError, match=f"config file {conf}: {message}"):
        load_config(conf)


# Our own log records (progress, what a build found) are the only lines besides the error and the log path.
# The builds below must run on Spark (they check what Spark's JVM printed), which `local_max_files = 0` forces for
# a table this small (3 files of 10 rows; indexing/local.py).
OWN_RECORD = re.compile(r"^(INFO|WARNING) indexlib(\.\w+)*: ")
LOG_LINE = re.compile(r"^skipindex: Spark's output is in (\S+) \(--verbose shows it here\)$")


@pytest.fixture
def spark_conf_path(conf_path):
    """The test configuration with every build on Spark, however small."""
    conf_path.write_text(conf_path.read_text() + "[build]\nlocal_max_files = 0\n")
    return conf_path


def _table_with_a_corrupt_file(catalog, name: str) -> str:
    table = catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("tag", pa.string())]))
    for start in (0, 10, 20):
        table.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64()), "tag": ["a"] * 10}))
    victim = sorted(task.file.file_path for task in table.scan().plan_files())[1]
    Path(victim.removeprefix("file://")).write_bytes(b"not parquet at all")
    return victim


def _failing_build(conf: Path, *extra: str, tmp: Path | None = None) -> subprocess.CompletedProcess:
    """`skipindex build` whose every Spark task raises (tests/interrupted_run.py): the Spark job fails, as it does
    when its workers die, with a Java stack in Spark's output."""
    env = {**os.environ, "SKIPINDEX_TEST_TASK_FAILS": "1"} | ({"TMPDIR": str(tmp)} if tmp is not None else {})
    command = [sys.executable, str(RUNNER), "build", "--conf", str(conf), "--table", "db.broken", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.spark
def test_a_failed_spark_job_shows_one_error_line_and_the_log_path_and_no_java_output(
    spark_conf_path, catalog, tmp_path
):
    _table_with_a_corrupt_file(catalog, "db.broken")
    done = _failing_build(spark_conf_path, tmp=tmp_path)
    assert done.returncode == 5 and done.stdout == "", f"a failed Spark job exits 5: {done.stderr}"
    lines = [line for line in done.stderr.splitlines() if not OWN_RECORD.match(line)]
    assert len(lines) == 2, f"the whole stderr is our records, the error line and the log path:\n{done.stderr}"
    assert lines[0] == (
        "skipindex: error: db.broken: index build failed: RuntimeError: skipindex-test: this Python worker fails"
    ), "the worker's own exception, not PySpark's 'see the stack trace below'"
    log = LOG_LINE.match(lines[1])
    assert log, f"the last line names Spark's log: {lines[1]}"
    assert Path(log.group(1)).parent == tmp_path, "the log file is in the temporary directory"
    logged = Path(log.group(1)).read_text()
    assert "ERROR Executor" in logged and "\tat org.apache.spark" in logged, "the Java stack went to the log file"
    assert "WARN" in logged and "Using Spark's default log4j profile" in logged, "so did log4j's start-up lines"


@pytest.mark.spark
def test_an_unreadable_file_fails_the_build_with_exit_code_4_and_one_line_naming_it(spark_conf_path, catalog, tmp_path):
    victim = _table_with_a_corrupt_file(catalog, "db.broken")
    done = _run("build", "--conf", str(spark_conf_path), "--table", "db.broken", tmp=tmp_path)
    assert done.returncode == 4 and done.stdout == "", f"a build that cannot index a file exits 4: {done.stderr}"
    lines = [line for line in done.stderr.splitlines() if not OWN_RECORD.match(line)]
    assert lines[0].startswith(f"skipindex: error: db.broken: cannot index data file {victim}: "), lines[0]
    assert len(lines) == 2 and LOG_LINE.match(lines[1]), f"the error line, then the log path:\n{done.stderr}"


@pytest.mark.spark
def test_verbose_shows_spark_and_java_output_on_the_terminal(spark_conf_path, catalog):
    _table_with_a_corrupt_file(catalog, "db.broken")
    done = _failing_build(spark_conf_path, "--verbose")
    assert done.returncode == 5, done.stderr
    assert "ERROR Executor" in done.stderr and "\tat org.apache.spark" in done.stderr, "--verbose shows it all"
    errors = [line for line in done.stderr.splitlines() if line.startswith("skipindex: error: db.broken: index build")]
    assert len(errors) == 1, f"and the one-line reason: {done.stderr}"
    assert not any(LOG_LINE.match(line) for line in done.stderr.splitlines()), "no log file to name"


@pytest.mark.spark
def test_a_successful_spark_command_prints_only_our_own_records_on_stderr(spark_conf_path, catalog, tmp_path):
    table = catalog.create_table("db.fine", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array(range(10), pa.int64())}))
    done = _run("build", "--conf", str(spark_conf_path), "--table", "db.fine", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    noise = [line for line in done.stderr.splitlines() if not OWN_RECORD.match(line)]
    assert noise == [], f"no WARN lines, no JVM notices on a success: {noise}"
    assert "indexed 1 new files" in done.stdout, done.stdout
    assert not list(tmp_path.glob("skipindex-spark-*")), "after a success Spark's log file is deleted"


NO_INDEX = "db.fresh has no index (no table skipindex.db__fresh); build one with: skipindex build --table db.fresh"


@pytest.mark.parametrize(
    ("args", "code", "stdout", "stderr"),
    [
        (
            ["explain", "--where", "id = 3"],
            0,
            "index      none: db.fresh was never indexed, so the index stages keep every file; build one with: "
            "skipindex build --table db.fresh",
            "",
        ),
        (["explain", "--where", "id = 3", "--json"], 0, '"has_index": false', ""),
        (["stats"], 2, None, f"skipindex: error: {NO_INDEX}"),
        (["stats", "--json", "--where", "id = 3"], 2, None, f"skipindex: error: {NO_INDEX}"),
        (["verify", "--sample", "5"], 2, None, f"skipindex: error: {NO_INDEX}"),
        (
            ["compact"],
            0,
            "db.fresh: no index (no table skipindex.db__fresh), nothing to compact; build one with: skipindex "
            "build --table db.fresh",
            "",
        ),
    ],
    ids=["explain", "explain-json", "stats", "stats-where-json", "verify", "compact"],
)
def test_a_table_never_indexed_is_said_plainly(conf_path, config, catalog, args, code, stdout, stderr):
    table = catalog.create_table("db.fresh", schema=pa.schema([("id", pa.int64())]))
    for start in (0, 10):
        table.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    done = _run(args[0], "--conf", str(conf_path), "--table", "db.fresh", *args[1:])
    assert done.returncode == code, f"skipindex {' '.join(args)} exits {code}: {done.stderr}"
    if stdout is None:
        assert done.stdout == "", "an error prints nothing on stdout"
    else:
        assert stdout in done.stdout, f"skipindex {' '.join(args)} says there is no index and how to build one"
    assert done.stderr.splitlines() == ([stderr] if stderr else []), f"stderr is one line, or empty: {done.stderr}"
    if args[0] in ("explain",) and "--json" not in args:
        assert "files kept 1 of 2" in done.stdout, "with no index, explain judges each file by its manifest entry"
    assert IndexTable(catalog, config.index_namespace, "db.fresh").load() is None, "no command creates an index"


def test_compact_without_a_table_goes_over_indexed_tables_only(conf_path, catalog):
    catalog.create_table("db.fresh", schema=pa.schema([("id", pa.int64())]))
    assert _run("compact", "--conf", str(conf_path), "--table", "db.fresh").returncode == 0
    done = _run("compact", "--conf", str(conf_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), (
        "compact of a never-indexed table leaves it without an index, so compact of every indexed table skips it"
    )


# How to run an example the help of each command prints: the command line, the example's place taken by `{}`.
EXAMPLE_RUNS = {
    "backfill": ["backfill", "--table", "db.examples", "--plan", "--where", "{}"],
    "explain": ["explain", "--table", "db.examples", "--json", "--where", "{}"],
}


def _help_examples() -> list[tuple[str, str]]:
    """(command, example) for every `e.g. "..."` the help of any command prints."""
    from indexlib.cli import build_parser

    [commands] = [a for a in build_parser()._actions if a.choices]  # noqa: SLF001 (argparse's only record of them)
    examples = []
    for name, command in commands.choices.items():
        for action in command._actions:  # noqa: SLF001
            examples += [(name, example) for example in re.findall(r'e\.g\. "([^"]+)"', action.help or "")]
    return examples


def test_every_example_the_help_prints_is_accepted_by_its_command(conf_path, catalog):
    """A table with the columns the examples name, partitioned as the backfill example says (day(ts)); each example
    runs through the console script's entry point and exits 0."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import DateType, NestedField, TimestampType

    from indexlib.cli import main

    schema = Schema(NestedField(1, "ts", TimestampType()), NestedField(2, "l_shipdate", DateType()))
    spec = PartitionSpec(PartitionField(1, 1000, DayTransform(), "ts_day"))
    table = catalog.create_table("db.examples", schema=schema, partition_spec=spec)
    day = pa.array([1_700_000_000_000_000], pa.timestamp("us"))
    table.append(pa.table({"ts": day, "l_shipdate": pa.array([19000], pa.int32()).cast(pa.date32())}))
    examples = _help_examples()
    assert {command for command, _ in examples} == set(EXAMPLE_RUNS), f"every example has a way to run: {examples}"
    for command, example in examples:
        argv = [arg.replace("{}", example) for arg in EXAMPLE_RUNS[command]]
        assert main([*argv, "--conf", str(conf_path)]) == 0, f"`skipindex {command}` accepts its example {example!r}"


def test_the_jvm_output_relayed_to_a_task_log_keeps_each_records_level():
    """What a Spark JVM printed (here: a healthy start, then a failed task), as `run_or_raise` relays it to a
    scheduler's task log: WARN lines are warnings, notices are INFO, a stack stays with its ERROR line."""
    from indexlib.indexing.spark import jvm_records

    output = (
        "WARNING: Using incubator modules: jdk.incubator.vector\n"
        "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n"
        "26/11/24 02:16:38 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform\n"
        'Setting default log level to "WARN".\n'
        "26/11/24 02:16:40 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "file_indexer.py", line 10, in index\n'
        "ValueError: skipindex: cannot index data file x.parquet\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:600)\n"
        "26/11/24 02:16:41 INFO SparkContext: Successfully stopped SparkContext\n"
    )
    records = jvm_records(output)
    assert [level for level, _ in records] == [
        logging.WARNING,
        logging.INFO,
        logging.WARNING,
        logging.INFO,
        logging.ERROR,
        logging.INFO,
    ], records
    assert records[4][1].endswith("(PythonRunner.scala:600)") and "ValueError" in records[4][1], "the stack, whole"


def test_a_record_being_written_is_relayed_whole_once_it_ends(tmp_path, monkeypatch, caplog):
    """The relay runs every 2 s while a command runs: a Java stack half written when it looks must reach the log
    as one ERROR record, not as an ERROR line and a stray INFO tail."""
    from indexlib.indexing import spark

    log_file = tmp_path / "skipindex-spark-test.log"
    monkeypatch.setattr(spark, "_JVM", spark._JvmOutput(to_log=True, log_path=log_file, relayed=0))  # noqa: SLF001
    logger = logging.getLogger("spark.jvm.test")
    log_file.write_text(
        "26/11/24 02:16:38 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
        "26/11/24 02:16:40 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    )
    with caplog.at_level(logging.INFO, logger="spark.jvm.test"):
        spark.relay_jvm_output(logger, final=False)
        assert [r.levelno for r in caplog.records] == [logging.WARNING], "the ERROR record may go on: it waits"
        with log_file.open("a") as out:
            out.write("ValueError: skipindex: cannot index data file x.parquet\n")
        spark.relay_jvm_output(logger)
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.ERROR]
    assert caplog.records[1].getMessage().endswith("cannot index data file x.parquet"), "the stack, whole"
