"""The `[airflow]` table of the configuration: what the DAGs schedule, read and checked when the file loads, so that
a wrong setting is one line naming it rather than a DAG that fails at run time. No Airflow needed."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from indexlib.config import AirflowSettings, BuildSchedule, load_config
from indexlib.errors import UserError


def _load(conf_path, airflow: str):
    conf_path.write_text(conf_path.read_text() + airflow)
    return load_config(conf_path)


def test_without_an_airflow_table_the_defaults_hold(config):
    assert config.airflow == AirflowSettings(), "no [airflow]: no build DAGs, in-process tasks, sane defaults"
    assert config.airflow.retries == 2 and config.airflow.timeout == timedelta(hours=3)


def test_each_listed_table_gets_its_schedule(conf_path):
    config = _load(
        conf_path,
        """
[airflow]
spark_conn_id = "spark_local"
retries = 0
timeout_minutes = 30
[airflow.builds."db.events"]
schedule = "@hourly"
[airflow.builds."db.clicks"]
every_minutes = 15
[airflow.builds."/lake/orders"]
asset = "iceberg://warehouse/db/orders"
""",
    )
    assert config.airflow.builds == (
        BuildSchedule("db.events", cron="@hourly"),
        BuildSchedule("db.clicks", every=timedelta(minutes=15)),
        BuildSchedule("/lake/orders", asset="iceberg://warehouse/db/orders"),
    )
    assert (config.airflow.spark_conn_id, config.airflow.retries) == ("spark_local", 0)
    assert config.airflow.timeout == timedelta(minutes=30)


@pytest.mark.parametrize(
    ("airflow", "message"),
    [
        ("[airflow]\nretrys = 3\n", "airflow.retrys: unknown setting"),
        ("[airflow]\nretries = -1\n", "airflow.retries must be an integer >= 0"),
        ("[airflow]\ntimeout_minutes = 0\n", "airflow.timeout_minutes must be an integer >= 1"),
        ('[airflow]\nexpire_older_than_hours = "soon"\n', "airflow.expire_older_than_hours must be a number >= 0"),
        ('[airflow.builds."db.events"]\n', 'airflow.builds."db.events" needs exactly one of schedule'),
        (
            '[airflow.builds."db.events"]\nschedule = "@daily"\nevery_minutes = 5\n',
            'airflow.builds."db.events" needs exactly one of',
        ),
        (
            '[airflow.builds."db.events"]\ncron = "@daily"\n',
            'airflow.builds."db.events".cron: unknown setting (expected one of schedule, every_minutes, asset)',
        ),
        ('[airflow.builds."db.events"]\nevery_minutes = 0\n', "every_minutes must be an integer >= 1"),
        ('[airflow.builds."db.events"]\nasset = "db.events"\n', "asset must be a URI"),
        ('[airflow.builds."db.events"]\nschedule = ""\n', "schedule must be a non-empty string"),
    ],
)
def test_a_wrong_airflow_setting_is_one_line_naming_it(conf_path, airflow, message):
    with pytest.raises(UserError, match=re.escape(message)) as exc:
        _load(conf_path, "\n" + airflow)
    assert str(exc.value).startswith(f"config file {conf_path}: ") and "\n" not in str(exc.value), (
        "one line, naming the file"
    )
