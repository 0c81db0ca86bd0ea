"""Skip-index DAGs for Airflow 3 (docs/how-to/airflow.md):

- `skipindex_build__<index table>`: the incremental build of each table under `[airflow.builds]`, on its schedule
  (cron or preset, interval, or the source table's Asset); a build that changed the index (files indexed or removed,
  a new watermark) emits an event of the index's Asset, `skipindex://<catalog>/<namespace>/<index table>`, through
  an AssetAlias: a run with nothing new emits none, so DAGs scheduled on the index do not run for nothing.
- `skipindex_backfill`: triggered with params (table, partition predicate); plans the partitions still to do and
  runs one mapped task per batch of whole partitions, so a failure retries one batch. Batches commit safely side by
  side (store/table.py re-plans a commit that lost a race).
- `skipindex_upkeep`: per table, compact, verify (stale entries fail the task), expire old index snapshots and the
  files no snapshot needs.
- `skipindex_follow`, when `[airflow] follow_minutes` is set: one long task, `skipindex build --follow` over the
  `[follow] tables` for that many minutes (each new commit indexed within seconds), on Airflow's continuous
  schedule, so the next run starts as soon as one ends and resumes from the index's watermark.

No logic here: each task runs a `skipindex` command in its own process, or, when `[airflow] spark_conn_id` names a
Spark connection, the Spark jobs run through `SparkSubmitOperator` with the scripts in indexlib/jobs/. The
configuration file comes from the Airflow Variable `skipindex_conf`, else the environment variable `SKIPINDEX_CONF`,
else skipindex's own default order (docs/reference/configuration.md). A configuration Airflow cannot use is one import
error: the line naming the setting.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, AssetAlias, Context, Param, Variable, task
from airflow.sdk.exceptions import AirflowFailException

from indexlib import jobs
from indexlib.cli import CommandFailed, run_or_raise
from indexlib.config import BuildSchedule, Config, load_config
from indexlib.errors import UserError
from indexlib.store.changes import IndexState
from indexlib.store.table import index_asset_uri, index_table_name

CONF_VARIABLE = "skipindex_conf"
JOBS = Path(jobs.__file__).parent
START = datetime(2024, 1, 1)
JOB_SCRIPTS = {"build": "build_index.py", "backfill": "backfill.py", "verify": "verify.py"}
log = logging.getLogger("skipindex.airflow")  # Airflow imports this file under a generated module name


def _airflow_variable(key: str) -> str | None:
    """The Variable `key`, or None, read where this process can read it.

    The Task SDK's `Variable.get` asks the supervisor (the dag-processor's parser and the task runner have one); in a
    process without one (`airflow dags test`, `dags list --local`, `dags reserialize`) it reads only environment
    variables and configured secrets backends, never the metadata database where `airflow variables set` writes, and
    a `default` hides the miss. There, Airflow core's `Variable.get` reads the database as well."""
    value = Variable.get(key, default=None)
    if value is not None:
        return value
    if getattr(sys.modules.get("airflow.sdk.execution_time.task_runner"), "SUPERVISOR_COMMS", None) is not None:
        return None  # supervised: the supervisor has already asked the API server
    from airflow.models.variable import Variable as StoredVariable

    return StoredVariable.get(key, default_var=None)


def _conf_source() -> tuple[str | None, str]:
    """The configuration path the DAGs and their tasks use, and where it came from (for the import error)."""
    if (path := _airflow_variable(CONF_VARIABLE)) is not None:
        return path, f"the Airflow Variable {CONF_VARIABLE}"
    if (path := os.environ.get("SKIPINDEX_CONF")) is not None:
        return path, "the environment variable SKIPINDEX_CONF"
    return None, f"the skipindex default: no Airflow Variable {CONF_VARIABLE}, no SKIPINDEX_CONF"


def _load(path: str | None, source: str) -> Config:
    """The configuration; if it cannot be read, one line (the DAG file's import error) saying where it looked."""
    try:
        return load_config(path)
    except UserError as exc:
        _one_line_import_error()
        raise UserError(f"{exc} (from {source})") from None


def _one_line_import_error() -> None:
    """Make the import error this parse is about to raise the error's line alone, not Airflow's default of the
    traceback's last frames (which are this file's and say nothing the line does not).

    Airflow reads `[core] dagbag_import_error_tracebacks` when it records the error, after this file raised; each
    parse runs in its own process (the dag-processor's, `airflow dags list-import-errors --local`'s), so the
    setting changes nothing else."""
    from airflow.configuration import conf

    conf.set("core", "dagbag_import_error_tracebacks", "False")


def _checked(dag: DAG, config: Config, setting: str) -> DAG:
    """`dag`, after Airflow's own checks (the schedule's cron expression is only checked when the DAG is stored):
    a failure is one line naming the setting."""
    try:
        dag.validate()
    except Exception as exc:  # Airflow's timetable errors have no common base worth naming
        _one_line_import_error()
        raise UserError(f"config file {config.path}: {setting}: {exc} (from {CONF_SOURCE})") from None
    return dag


def _dag(config: Config, dag_id: str, description: str, schedule, **kwargs) -> DAG:
    """A DAG with the defaults every skipindex DAG shares: retries, timeout and pool from `[airflow]`, no catch-up."""
    settings = config.airflow
    defaults = {
        "retries": settings.retries,
        "retry_delay": settings.retry_delay,
        "execution_timeout": settings.timeout,
        "pool": settings.pool,
    }
    return DAG(
        dag_id=dag_id,
        description=description,
        schedule=schedule,
        start_date=START,
        catchup=False,
        default_args=defaults,
        tags=["skipindex"],
        **kwargs,
    )


@task
def skipindex(command: str, args: list[str]) -> None:
    """One `skipindex` command in this task's process. A failure that running again cannot fix (bad input, a file
    the build cannot index, stale entries) fails the task without its retries; a lost commit race or a failed Spark
    job is retried."""
    try:
        run_or_raise([command, *args])
    except CommandFailed as failed:
        if failed.retryable:
            raise
        raise AirflowFailException(str(failed)) from None


def _submit(config: Config, task_id: str, command: str, **kwargs) -> dict:
    """SparkSubmitOperator arguments: `spark-submit jobs/<script>` through the configured Spark connection, with
    this interpreter on the driver and the executors."""
    return {
        "task_id": task_id,
        "conn_id": config.airflow.spark_conn_id,
        "application": str(JOBS / JOB_SCRIPTS[command]),
        "name": f"skipindex-{command}",
        "spark_binary": str(Path(sys.executable).with_name("spark-submit")),
        "env_vars": {"PYSPARK_PYTHON": sys.executable},
        **kwargs,
    }


def spark_job(config: Config, task_id: str, command: str, args: list[str], **kwargs):
    """`skipindex <command> <args>`, a Spark job: through SparkSubmitOperator when a Spark connection is
    configured, else in this task's process."""
    if config.airflow.spark_conn_id is None:
        return skipindex.override(task_id=task_id, **kwargs)(command=command, args=args)
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(**_submit(config, task_id, command, **kwargs), application_args=args)


def mapped_spark_job(config: Config, task_id: str, command: str, args_list, **kwargs):
    """`spark_job` once per element of `args_list` (dynamic task mapping: each one retries on its own)."""
    if config.airflow.spark_conn_id is None:
        return skipindex.override(task_id=task_id, **kwargs).partial(command=command).expand(args=args_list)
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator.partial(**_submit(config, task_id, command, **kwargs)).expand(application_args=args_list)


class IndexEvent:
    """Pre- and post-execute hooks of a build task: read the index before and after the build (whichever way it
    ran), and emit the index's Asset event through `alias` only if a reader would see a change
    (indexlib/store/changes.py); the event's extra says what changed."""

    def __init__(self, config: Config, table: str) -> None:
        self.config, self.table = config, table
        self.index = Asset(index_asset_uri(config.catalog_name, config.index_namespace, table))
        self.alias = AssetAlias(f"skipindex_index__{index_table_name(table)}")
        self.before = IndexState()

    def _read(self) -> IndexState:
        return IndexState.read(self.config.load_catalog(), self.config.index_namespace, self.table)

    def pre_execute(self, context: Context) -> None:
        self.before = self._read()

    def post_execute(self, context: Context, result: object = None) -> None:
        change = self._read().change_since(self.before)
        if change is None:
            log.info("%s: the index did not change; no event of %s", self.table, self.index.uri)
            return
        context["outlet_events"][self.alias].add(self.index, extra=change.as_extra())
        log.info("%s: the index changed; event of %s with %s", self.table, self.index.uri, change.as_extra())


def build_dag(config: Config, table: str, schedule, setting: str) -> DAG:
    name = index_table_name(table)
    event = IndexEvent(config, table)
    with _dag(
        config, f"skipindex_build__{name}", f"Incremental skip-index build of {table}", schedule, max_active_runs=1
    ) as dag:
        spark_job(
            config,
            "build",
            "build",
            [*CONF_ARGS, "--table", table],
            outlets=[event.alias],
            pre_execute=event.pre_execute,
            post_execute=event.post_execute,
        )
    return _checked(dag, config, setting)


def backfill_dag(config: Config) -> DAG:
    with _dag(
        config,
        "skipindex_backfill",
        "Backfill of old partitions: one mapped task per batch of whole partitions",
        None,
        params={
            "table": Param(type="string", minLength=1, description="source table: ns.name, or a Delta table's path"),
            "where": Param(None, type=["null", "string"], description="partition predicate (default: every file)"),
        },
    ) as dag:

        @task
        def plan(params=None) -> list[list[str]]:
            from indexlib.indexing.backfill import plan_backfill

            where = params["where"] or None
            argv = [*CONF_ARGS, "--table", params["table"], *(["--where", where] if where else [])]
            batches = plan_backfill(_load(CONF, CONF_SOURCE), params["table"], where)
            return [[*argv, *(arg for label in batch for arg in ("--partition", label))] for batch in batches]

        mapped_spark_job(config, "backfill", "backfill", plan())
    return dag


def upkeep_dag(config: Config) -> DAG:
    settings = config.airflow
    with _dag(
        config,
        "skipindex_upkeep",
        "Compact, verify and expire every scheduled index",
        settings.upkeep_schedule,
        max_active_runs=1,
    ) as dag:
        for build in settings.builds:
            name = index_table_name(build.table)
            table = [*CONF_ARGS, "--table", build.table]
            compact = skipindex.override(task_id=f"compact__{name}")(command="compact", args=table)
            sample = ["--sample", str(settings.verify_sample)]
            verify = spark_job(config, f"verify__{name}", "verify", [*table, *sample])
            older = ["--older-than", str(settings.expire_older_than_hours)]
            expire = skipindex.override(task_id=f"expire__{name}")(command="expire", args=[*table, *older])
            compact >> verify >> expire
    return _checked(dag, config, "airflow.upkeep_schedule")


def follow_dag(config: Config) -> DAG:
    minutes = config.airflow.follow_minutes
    if not config.follow.tables:
        _one_line_import_error()
        raise UserError(
            f"config file {config.path}: airflow.follow_minutes: the follower DAG follows [follow] tables, which "
            f"lists none (from {CONF_SOURCE})"
        )
    with _dag(
        config,
        "skipindex_follow",
        f"Index each new commit of {', '.join(config.follow.tables)} within seconds, {minutes:g} minutes a run",
        "@continuous",
        max_active_runs=1,
    ) as dag:
        skipindex.override(task_id="follow", execution_timeout=timedelta(minutes=minutes) + config.airflow.timeout)(
            command="build", args=[*CONF_ARGS, "--follow", "--max-minutes", f"{minutes:g}"]
        )
    return _checked(dag, config, "airflow.follow_minutes")


def _schedule(build: BuildSchedule) -> tuple[object, str]:
    """The DAG's schedule, and the setting it came from (for the error if Airflow refuses it)."""
    where = f'airflow.builds."{build.table}"'
    if build.asset is not None:
        return [Asset(build.asset)], f"{where}.asset"
    if build.every is not None:
        return build.every, f"{where}.every_minutes"
    return build.cron, f"{where}.schedule"


CONF, CONF_SOURCE = _conf_source()
CONF_ARGS = ["--conf", CONF] if CONF is not None else []  # none: the task's `skipindex` resolves its default
_config = _load(CONF, CONF_SOURCE)
for _build in _config.airflow.builds:
    _build_dag = build_dag(_config, _build.table, *_schedule(_build))
    globals()[_build_dag.dag_id] = _build_dag
skipindex_backfill = backfill_dag(_config)
skipindex_upkeep = upkeep_dag(_config)
if _config.airflow.follow_minutes > 0:
    skipindex_follow = follow_dag(_config)
