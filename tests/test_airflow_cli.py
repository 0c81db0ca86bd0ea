"""The Airflow Variable route, through the real `airflow` CLI as a new team runs it: a temporary AIRFLOW_HOME
migrated on SQLite, `airflow variables set skipindex_conf <file>`, and NO `SKIPINDEX_CONF` in the environment. Each
command runs in an empty working directory, so nothing can fall back to a conf/local.toml that happens to be there.

These commands parse the DAG file in a process without a Task SDK supervisor, where `Variable.get` does not read
the metadata database (airflow_dags/skipindex_dags.py, `_airflow_variable`). Each `airflow` start-up costs seconds:
keep these few."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lakes import Lake, live_rows, partitioned_events

from indexlib.config import load_config
from indexlib.store.table import IndexTable

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAG_IDS = {"skipindex_build__db__events", "skipindex_backfill", "skipindex_upkeep"}
SCHEDULED = '[airflow]\nretries = 0\n[airflow.builds."db.events"]\nschedule = "@hourly"\n'


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """`airflow <args>` in a fresh AIRFLOW_HOME, run from an empty directory, without SKIPINDEX_CONF."""
    home = tmp_path_factory.mktemp("airflow_home")
    cwd = tmp_path_factory.mktemp("empty_cwd")
    env = {k: v for k, v in os.environ.items() if k != "SKIPINDEX_CONF" and not k.startswith("AIRFLOW")}
    env |= {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "airflow_dags"),
        "PYTHONPATH": str(REPO),  # this checkout's indexlib, whatever the venv's editable install points at
        "PYSPARK_PYTHON": sys.executable,
    }

    def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run([AIRFLOW, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)

    migrated = run("db", "migrate")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return run


def _set_variable(airflow, value: Path) -> None:
    done = airflow("variables", "set", "skipindex_conf", str(value))
    assert done.returncode == 0, done.stderr[-3000:]


def _rows(airflow, *args: str) -> list[dict]:
    """The rows of `airflow <args> --output json` (its last line: Airflow logs warnings to stdout before it;
    `list-import-errors` exits 1 when it lists any)."""
    done = airflow(*args, "--output", "json")
    lines = done.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("["), f"`airflow {' '.join(args)}` printed its rows: {done.stderr[-3000:]}"
    return json.loads(lines[-1])


@pytest.fixture
def lake(catalog, tmp_path) -> Lake:
    return partitioned_events(catalog, tmp_path, "events", seed=26)


def test_airflow_dags_test_builds_the_index_with_the_configuration_named_by_the_variable(airflow, conf_path, lake):
    conf_path.write_text(conf_path.read_text() + SCHEDULED)
    _set_variable(airflow, conf_path)
    done = airflow("dags", "test", "skipindex_build__db__events", timeout=600)
    assert done.returncode == 0, f"`airflow dags test` succeeds with only the Variable set: {done.stderr[-3000:]}"
    config = load_config(conf_path)
    indexed = IndexTable(config.load_catalog(), config.index_namespace, lake.name).indexed_paths()
    assert indexed == set(live_rows(config, lake.name)) and len(indexed) == 3, "the build indexed every live file"


@pytest.mark.parametrize(
    ("steps", "rule"),
    [
        ([("dags", "list", "--local")], "`dags list --local` parses the folder itself"),
        ([("dags", "reserialize"), ("dags", "list")], "`dags reserialize` stores the DAGs that `dags list` shows"),
    ],
)
def test_the_dag_commands_list_every_dag_with_the_configuration_named_by_the_variable(airflow, conf_path, steps, rule):
    conf_path.write_text(conf_path.read_text() + SCHEDULED)
    _set_variable(airflow, conf_path)
    *before, (_, _, *list_args) = steps
    for step in before:
        done = airflow(*step)
        assert done.returncode == 0, done.stderr[-3000:]
    assert {dag["dag_id"] for dag in _rows(airflow, "dags", "list", *list_args)} == DAG_IDS, rule
    assert _rows(airflow, "dags", "list-import-errors", *list_args) == [], f"{rule}, with no import error"


def test_a_variable_naming_a_missing_file_is_one_import_error_saying_where_the_path_came_from(airflow, tmp_path):
    missing = tmp_path / "nowhere.toml"
    _set_variable(airflow, missing)
    [error] = [row["error"] for row in _rows(airflow, "dags", "list-import-errors", "--local")]
    assert error == f"config file not found: {missing} (from the Airflow Variable skipindex_conf)", (
        "the import error is one line naming the missing file and the Variable it came from"
    )


@pytest.mark.parametrize(
    ("airflow_table", "setting"),
    [
        ("[airflow]\nretrys = 3\n", "airflow.retrys: unknown setting (did you mean airflow.retries?)"),
        pytest.param(  # a schedule refused as the cron case below is, in the long profile
            '[airflow.builds."db.events"]\nschedule = "@hourlyy"\n',
            'airflow.builds."db.events".schedule: ',
            marks=pytest.mark.long_only,
        ),
        ('[airflow]\nupkeep_schedule = "61 * * * *"\n', "airflow.upkeep_schedule: "),
    ],
)
def test_the_check_before_deploying_shows_a_wrong_setting_as_one_line_naming_it(
    airflow, conf_path, airflow_table, setting
):
    """`airflow dags list-import-errors --local`, the check docs/how-to/airflow.md gives: settings the configuration file refuses
    and schedules only Airflow refuses (a cron expression) alike."""
    conf_path.write_text(conf_path.read_text() + airflow_table)
    _set_variable(airflow, conf_path)
    [error] = [row["error"] for row in _rows(airflow, "dags", "list-import-errors", "--local")]
    assert "\n" not in error.strip(), f"one line, no traceback: {error}"
    assert error.startswith(f"config file {conf_path}: {setting}"), error
    assert error.endswith("(from the Airflow Variable skipindex_conf)"), error
