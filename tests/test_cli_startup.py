"""What `skipindex` imports before it knows it has work to do: `--help` and argument errors import none of pyarrow,
pyiceberg, sqlglot or pydantic (the configuration's models), so they answer at once; `skipindex jars` prints the
`spark.jars` value without a configuration. Not timed: each case lists the modules its fresh interpreter holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from indexlib.cli import CONF_HELP, build_parser
from indexlib.config import CONF_ENV, LOCAL_CONF_PATH
from indexlib.jars import STAMP, spark_jars, spark_jars_value

HEAVY = ("pyarrow", "pyiceberg", "sqlglot", "pydantic", "pyspark")

PROBE = """
import json, sys
from indexlib import cli
try:
    code = cli.main({argv!r})
except SystemExit as exit:
    code = exit.code
print(json.dumps([code, sorted(name for name in {heavy!r} if name in sys.modules)]))
"""


@pytest.mark.parametrize(
    ("argv", "code", "rule"),
    [
        (["--help"], 0, "--help imports no heavy module"),
        (["explain", "--help"], 0, "a command's --help imports no heavy module"),
        (["explain", "--table", "db.t"], 2, "a missing required argument is reported before any heavy import"),
        (["nosuch"], 2, "an unknown command is reported before any heavy import"),
        (["demo", "--scale", "x"], 2, "a malformed number is reported before any heavy import"),
    ],
)
def test_help_and_argument_errors_import_nothing_heavy(argv, code, rule):
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True, timeout=120
    )
    got_code, imported = json.loads(done.stdout.splitlines()[-1])
    assert got_code == code, f"{rule}: exit code {got_code}: {done.stderr}"
    assert imported == [], f"{rule}: imported {imported}"


def test_the_conf_help_names_the_places_the_loader_looks():
    assert f"${CONF_ENV}," in CONF_HELP and f"./{LOCAL_CONF_PATH} " in CONF_HELP, "the help agrees with the loader"


def test_skipindex_jars_prints_the_spark_jars_value(tmp_path: Path, monkeypatch, capsys):
    from indexlib.cli import main

    names = ["delta-spark_4.1_2.13-4.3.0.jar", "iceberg-spark-runtime-4.1_2.13-1.12.0.jar"]
    for name in [*names, "hadoop-client-api-3.3.0.jar"]:  # the last: an artifact Spark ships, left out
        (tmp_path / name).write_bytes(b"")
    (tmp_path / STAMP).write_text("")
    monkeypatch.setenv("SKIPINDEX_JARS", str(tmp_path))
    assert main(["jars"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == ",".join(str(tmp_path / name) for name in names), "comma-separated absolute paths"
    assert printed == spark_jars_value() == ",".join(str(p) for p in spark_jars()), "the command prints the API"


def test_skipindex_jars_without_fetched_jars_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys):
    from indexlib.cli import main

    monkeypatch.setenv("SKIPINDEX_JARS", str(tmp_path))  # no stamp: a copy that stopped half-way is not used
    (tmp_path / "delta-spark_4.1_2.13-4.3.0.jar").write_bytes(b"")
    assert main(["jars"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "make jars" in err, f"one line saying how to fetch them: {err}"


def test_the_jars_command_is_in_the_generated_cli_reference():
    sys.path.insert(0, str(Path(__file__).parents[1] / "docs" / "hooks"))
    try:
        from reference import cli_reference
    finally:
        sys.path.pop(0)
    assert "### `skipindex jars`" in cli_reference(), "a new subcommand appears in docs/reference/cli.md"
    assert "jars" in build_parser().format_help()
