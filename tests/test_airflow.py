"""The DAGs in airflow_dags/, run for real: Airflow 3 with a temporary AIRFLOW_HOME migrated on SQLite, the DAG
folder parsed by a DagBag, each DAG run by `dag.test()` against real Iceberg tables (SQLite catalog), and the index
it builds checked against the rows. One test goes through SparkSubmitOperator and a real `spark-submit`.

Airflow reads AIRFLOW_HOME when it is first imported, so nothing here imports it at module level."""

from __future__ import annotations

import importlib.metadata
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from lakes import PARTS, Lake, checked_answers, events_batch, live_rows

from indexlib.cli import CommandFailed, run_or_raise
from indexlib.config import load_config
from indexlib.store.table import IndexTable, index_asset_uri

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).resolve().parents[1] / "airflow_dags"


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW_HOME", str(home))
        env.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        env.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS))
        airflow = Path(sys.executable).with_name("airflow")
        subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True, timeout=300)
        yield home


def _dags(conf_path: Path, **env: str):
    """The DAG folder parsed the way the scheduler does, with `conf_path` as the configuration."""
    from airflow.dag_processing.dagbag import DagBag

    os.environ["SKIPINDEX_CONF"] = str(conf_path)
    os.environ.update(env)
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}, "the DAG files import cleanly"
    return bag


def _conf(conf_path: Path, airflow: str) -> Path:
    conf_path.write_text(
        conf_path.read_text()
        + "[build]\nbackfill_files_per_commit = 2\n"
        + "[airflow]\nretries = 0\nexpire_older_than_hours = 0\nverify_sample = 50\n"
        + airflow
    )
    return conf_path


def _states(run) -> dict[str, list[str]]:
    states: dict[str, list[str]] = {}
    for ti in sorted(run.get_task_instances(), key=lambda ti: (ti.task_id, ti.map_index)):
        states.setdefault(ti.task_id, []).append(str(ti.state))
    return states


def _asset_events(uri: str) -> list[dict]:
    """The extras of the Asset's events, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
        return list(session.scalars(query.where(AssetModel.name == uri).order_by(AssetEvent.id)))


def _indexed(config, name: str) -> set[str]:
    return IndexTable(config.load_catalog(), config.index_namespace, name).indexed_paths()


@pytest.fixture
def lake(catalog, tmp_path) -> Lake:
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(21)
    for n in range(7):
        lake.append(events_batch(rng, n * 30, 30, PARTS[n % 3]))  # partition a: 3 files, b: 2, c: 2
    return lake


def test_the_environment_keeps_the_full_pyspark_beside_the_spark_provider():
    import pyspark

    assert pyspark.__version__ == importlib.metadata.version("pyspark"), "pyspark's files are pyspark's own"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("pyspark-client")  # it would overwrite pyspark's files (pyproject.toml)
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout


def test_one_build_dag_per_listed_table_on_its_schedule_plus_backfill_and_upkeep(airflow_home, conf_path):
    bag = _dags(
        _conf(
            conf_path,
            '[airflow.builds."db.events"]\nschedule = "@hourly"\n'
            '[airflow.builds."db.clicks"]\nevery_minutes = 15\n'
            '[airflow.builds."db.orders"]\nasset = "iceberg://warehouse/db/orders"\n',
        )
    )
    assert set(bag.dag_ids) == {
        "skipindex_build__db__events",
        "skipindex_build__db__clicks",
        "skipindex_build__db__orders",
        "skipindex_backfill",
        "skipindex_upkeep",
    }
    timetables = {d: type(bag.get_dag(d).timetable).__name__ for d in bag.dag_ids}
    assert "Cron" in timetables["skipindex_build__db__events"], "a cron preset"
    assert "Delta" in timetables["skipindex_build__db__clicks"], "an interval"
    assert "Asset" in timetables["skipindex_build__db__orders"], "the source table's Asset"
    build = bag.get_dag("skipindex_build__db__events").get_task("build")
    assert (build.retries, build.execution_timeout.total_seconds()) == (0, 3 * 3600), "defaults from [airflow]"
    [alias] = build.outlets
    assert (type(alias).__name__, alias.name) == ("AssetAlias", "skipindex_index__db__events"), (
        "the index's Asset is emitted through an alias: only when the build changed the index"
    )
    upkeep = bag.get_dag("skipindex_upkeep")
    assert {t.task_id for t in upkeep.tasks} == {
        f"{step}__{name}"
        for step in ("compact", "verify", "expire")
        for name in ("db__events", "db__clicks", "db__orders")
    }


def test_the_build_dag_tells_downstream_dags_through_the_index_asset_only_when_the_index_changed(
    airflow_home, conf_path, lake, spark
):
    bag = _dags(_conf(conf_path, '[airflow.builds."db.events"]\nschedule = "@hourly"\n'))
    config = load_config(conf_path)
    uri = index_asset_uri(config.catalog_name, config.index_namespace, lake.name)
    before = len(_asset_events(uri))
    dag = bag.get_dag("skipindex_build__db__events")
    assert dag.test().state == "success"
    assert _indexed(config, lake.name) == set(live_rows(config, lake.name))
    events = _asset_events(uri)[before:]
    assert [(e["files_indexed"], e["files_removed"]) for e in events] == [(7, 0)], "an event, saying what changed"
    assert events[0]["source_version"] == lake.version()

    assert dag.test().state == "success"
    assert len(_asset_events(uri)) == before + 1, "a run with nothing new emits no event"

    lake.append(events_batch(random.Random(22), 900, 30, "b"))
    assert dag.test().state == "success"
    assert _indexed(config, lake.name) == set(live_rows(config, lake.name)), "the next run indexes the new file"
    assert [e["files_indexed"] for e in _asset_events(uri)[before:]] == [7, 1]

    lake.delete("part = 'c'")
    assert dag.test().state == "success"
    assert [(e["files_indexed"], e["files_removed"]) for e in _asset_events(uri)[before + 2 :]] == [(0, 2)], (
        "removed files are a change too"
    )
    checked_answers(config, lake.name)


def test_the_backfill_dag_indexes_exactly_the_requested_partitions_one_mapped_task_per_batch(
    airflow_home, conf_path, lake, spark
):
    bag = _dags(_conf(conf_path, ""))
    config = load_config(conf_path)
    run = bag.get_dag("skipindex_backfill").test(run_conf={"table": lake.name, "where": "part = 'a'"})
    assert run.state == "success"
    assert _states(run) == {"plan": ["success"], "backfill": ["success", "success"]}, "3 files, 2 per batch"
    source_rows = live_rows(config, lake.name)
    in_a = {path for path, rows in source_rows.items() if rows[0]["part"] == "a"}
    assert len(in_a) == 3 and _indexed(config, lake.name) == in_a, "exactly the files of partition a"

    # every param given: in one process, dag.test() leaves the last run's conf in the DAG's params
    run = bag.get_dag("skipindex_backfill").test(run_conf={"table": lake.name, "where": None})
    assert run.state == "success", _states(run)
    assert len(_states(run)["backfill"]) == 2, "then b and c, one batch each"
    assert _indexed(config, lake.name) == set(source_rows)
    checked_answers(config, lake.name)


def test_a_backfill_run_without_a_table_is_refused_before_any_task(airflow_home, conf_path):
    from airflow.sdk.exceptions import ParamValidationError

    bag = _dags(_conf(conf_path, ""))
    with pytest.raises(ParamValidationError):
        bag.get_dag("skipindex_backfill").test(run_conf={"where": "part = 'a'"})


def test_the_upkeep_dag_compacts_verifies_and_expires(airflow_home, conf_path, lake, spark):
    bag = _dags(_conf(conf_path, '[airflow.builds."db.events"]\nschedule = "@hourly"\n'))
    config = load_config(conf_path)
    build = bag.get_dag("skipindex_build__db__events")
    for n in range(3):
        assert build.test().state == "success"
        lake.append(events_batch(random.Random(n), 1000 + 30 * n, 30, PARTS[n]))
    assert build.test().state == "success"
    index = IndexTable(config.load_catalog(), config.index_namespace, lake.name)
    assert len(index.reload().metadata.snapshots) > 1

    run = bag.get_dag("skipindex_upkeep").test()
    assert _states(run) == {
        "compact__db__events": ["success"],
        "verify__db__events": ["success"],
        "expire__db__events": ["success"],
    }
    table = index.reload()
    assert len(table.metadata.snapshots) == 1, "old index snapshots expired"
    assert len(table.inspect.files()) == table.inspect.partitions().num_rows, "one data file per index partition"
    checked_answers(config, lake.name)


def test_a_stale_index_fails_the_verify_task_with_a_clear_message_and_nothing_is_expired(
    airflow_home, conf_path, lake, spark
):
    bag = _dags(_conf(conf_path, '[airflow.builds."db.events"]\nschedule = "@hourly"\n'))
    config = load_config(conf_path)
    assert bag.get_dag("skipindex_build__db__events").test().state == "success"
    victim = sorted(live_rows(config, lake.name))[0]
    local = victim.removeprefix("file://")
    rows = pq.read_table(local)
    shifted = [[v + 10_000 for v in rows.column("id").to_pylist()]]
    pq.write_table(rows.set_column(0, rows.schema.field(0), shifted), local)  # keeps the Iceberg field id

    run = bag.get_dag("skipindex_upkeep").test()
    assert run.state == "failed"
    states = _states(run)
    assert (states["verify__db__events"], states["expire__db__events"]) == (["failed"], ["upstream_failed"])
    with pytest.raises(CommandFailed, match=r"^skipindex verify db\.events: the index has stale entries"):
        run_or_raise(["verify", "--conf", str(conf_path), "--table", lake.name])


def test_a_build_that_cannot_index_a_file_fails_at_once_without_its_retries(airflow_home, conf_path, lake, spark):
    """Running the same build again cannot fix an unreadable file: the task fails without using its retries (a lost
    commit race or a failed Spark job would be retried)."""
    conf_path.write_text(
        conf_path.read_text()
        + '[airflow]\nretries = 2\nretry_delay_minutes = 0\n[airflow.builds."db.events"]\nschedule = "@hourly"\n'
    )
    bag = _dags(conf_path)
    victim = sorted(live_rows(load_config(conf_path), lake.name))[0]
    Path(victim.removeprefix("file://")).write_bytes(b"not parquet at all")
    run = bag.get_dag("skipindex_build__db__events").test()
    assert run.state == "failed", _states(run)
    (build,) = [ti for ti in run.get_task_instances() if ti.task_id.startswith("build")]
    assert (str(build.state), build.try_number) == ("failed", 1), "failed on its first try, no retry"


def test_with_a_spark_connection_the_build_runs_through_spark_submit(airflow_home, conf_path, lake, spark):
    connection = json.dumps({"conn_type": "spark", "host": "local[1]"})
    conf = _conf(conf_path, '[airflow.builds."db.events"]\nschedule = "@hourly"\n')
    conf.write_text(conf.read_text().replace("[airflow]\n", '[airflow]\nspark_conn_id = "skipindex_spark"\n', 1))
    bag = _dags(conf, AIRFLOW_CONN_SKIPINDEX_SPARK=connection)
    config = load_config(conf)
    dag = bag.get_dag("skipindex_build__db__events")
    assert type(dag.get_task("build")).__name__ == "SparkSubmitOperator"
    uri = index_asset_uri(config.catalog_name, config.index_namespace, lake.name)
    before = len(_asset_events(uri))
    run = dag.test()
    assert run.state == "success", _states(run)
    assert _indexed(config, lake.name) == set(live_rows(config, lake.name)), "spark-submit built the index"
    assert [e["files_indexed"] for e in _asset_events(uri)[before:]] == [7], "the event, whichever way Spark ran"
    assert dag.test().state == "success"
    assert len(_asset_events(uri)) == before + 1, "and none when nothing changed"
    checked_answers(config, lake.name)


def test_the_follow_dag_runs_the_follower_as_one_long_task_on_the_continuous_schedule(airflow_home, conf_path, lake):
    conf = _conf(conf_path, 'follow_minutes = 0.05\n[follow]\ntables = ["db.events"]\ninterval_seconds = 0.2\n')
    bag = _dags(conf)
    config = load_config(conf_path)
    dag = bag.get_dag("skipindex_follow")
    assert type(dag.timetable).__name__ == "ContinuousTimetable", "the next run starts as soon as one ends"
    [follow] = dag.tasks
    assert follow.execution_timeout.total_seconds() == 0.05 * 60 + 3 * 3600, "its minutes plus [airflow] timeout"
    assert dag.test().state == "success", "the follower stops by itself after follow_minutes, exit 0"
    assert _indexed(config, lake.name) == set(live_rows(config, lake.name)), "it indexed every commit"
    checked_answers(config, lake.name)


def test_a_follow_dag_without_tables_is_one_import_error_naming_the_setting(airflow_home, conf_path):
    from airflow.dag_processing.dagbag import DagBag

    os.environ["SKIPINDEX_CONF"] = str(_conf(conf_path, "follow_minutes = 30\n"))
    bag = DagBag(dag_folder=str(DAGS))
    [error] = bag.import_errors.values()
    assert "airflow.follow_minutes: the follower DAG follows [follow] tables, which lists none" in error
    assert len(error.strip().splitlines()) == 1, f"one line: {error}"
