"""The TOML configuration: which catalog, where index tables live, how Spark runs.

`[catalog]` goes to `pyiceberg.catalog.load_catalog(name, **props)` unchanged, with one convenience:
relative paths in `warehouse` and in a `sqlite:///` `uri` are resolved against the conf file's directory,
so the embedded default works from any working directory.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from indexlib.errors import UserError
from indexlib.index_kinds.registry import can_index, parse_settings, setting_names
from indexlib.index_kinds.settings import IndexSettings
from indexlib.redaction import redact_properties, redact_text, secret_values

DEFAULT_CONF_PATH = Path("conf/local.toml")
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024  # Spark's spark.sql.files.maxPartitionBytes
DEFAULT_OPEN_COST_BYTES = 4 * 1024 * 1024  # Spark's spark.sql.files.openCostInBytes
DEFAULT_LOCAL_MAX_FILES = 1000  # work at or under both runs without Spark (docs/benchmarks.md)
DEFAULT_LOCAL_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_INDEX_NAMESPACE = "skipindex"
DEFAULT_CATALOG_NAME = "default"
_PROPERTY_TABLES = ("catalog_properties", "spark_options", "delta_storage_options")  # may hold credentials


@dataclass(frozen=True)
class BuildSchedule:
    """When Airflow runs one table's incremental build (`[airflow.builds."<table>"]`): a cron expression or preset,
    a fixed interval, or the URI of the Airflow Asset an upstream writer's DAG updates when it commits."""

    table: str
    cron: str | None = None
    every: timedelta | None = None
    asset: str | None = None


@dataclass(frozen=True)
class AirflowSettings:
    """`[airflow]`: what the DAGs in airflow_dags/ run and how (README, "Airflow")."""

    builds: tuple[BuildSchedule, ...] = ()
    spark_conn_id: str | None = None  # set: Spark jobs go through SparkSubmitOperator; unset: in the task's process
    pool: str = "default_pool"
    retries: int = 2
    retry_delay: timedelta = timedelta(minutes=5)
    timeout: timedelta = timedelta(hours=3)
    upkeep_schedule: str = "@daily"
    verify_sample: int = 20
    expire_older_than_hours: float = 72.0


@dataclass(frozen=True, repr=False)
class Config:
    path: Path
    catalog_name: str
    catalog_properties: dict[str, str]
    index_namespace: str = DEFAULT_INDEX_NAMESPACE
    spark_master: str = "local[*]"
    spark_app_name: str = "skipindex"
    spark_options: dict[str, str] = field(default_factory=dict)
    split_bytes: int = DEFAULT_SPLIT_BYTES  # Spark tasks are planned by bytes (indexing/splits.py)
    open_cost_bytes: int = DEFAULT_OPEN_COST_BYTES
    index_existing_files: bool = True  # first build: index every live file (False: start now, backfill the rest)
    on_unreadable_file: str = "fail"  # "fail": name the file, commit nothing; "skip": leave it unindexed, report it
    backfill_files_per_commit: int = 500
    local_max_files: int = DEFAULT_LOCAL_MAX_FILES  # at or under both: indexed in this process (indexing/local.py)
    local_max_bytes: int = DEFAULT_LOCAL_MAX_BYTES
    delta_storage_options: dict[str, str] = field(default_factory=dict)  # [delta.storage_options] for delta-rs
    time_zone: str | None = None  # session zone for CURRENT_DATE / NOW(); None: the machine's local zone
    dialect: str | None = None  # sqlglot dialect of WHERE clauses; None: ANSI quoting
    index_defaults: IndexSettings = IndexSettings()
    # [index.tables."ns.name"]: table-wide settings, and per column under `columns` (validated at load)
    table_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    airflow: AirflowSettings = AirflowSettings()

    def __repr__(self) -> str:  # the property tables hold credentials: shown redacted (indexlib/redaction.py)
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _PROPERTY_TABLES:
                value = redact_properties(value)
            shown.append(f"{f.name}={value!r}")
        return f"Config({', '.join(shown)})"

    def secrets(self) -> set[str]:
        """The configured secret values (`[catalog]`, `[spark] options`, `[delta.storage_options]`), which no
        message may show: pass them to `indexlib.redaction.redact_text`."""
        return set().union(*(secret_values(getattr(self, name)) for name in _PROPERTY_TABLES))

    def column_settings(self, table: str, schema: Any) -> dict[int, IndexSettings]:
        """Index settings per field id of `table`'s top-level columns; UserError naming the setting when the
        configuration names a column the table does not have or a kind the column's type cannot hold."""
        raw = self.table_settings.get(table, {})
        table_wide = parse_settings(
            {k: v for k, v in raw.items() if k != "columns"}, self.index_defaults, f'index.tables."{table}"'
        )
        by_name = {f.name: f for f in schema.fields}
        settings = {f.field_id: table_wide for f in schema.fields}
        for name, column_raw in raw.get("columns", {}).items():
            where = f'config file {self.path}: index.tables."{table}".columns.{name}'
            if name not in by_name:
                raise UserError(f"{where}: table {table} has no column {name!r}")
            column = by_name[name]
            column_settings = parse_settings(column_raw, table_wide, where)
            for kind in column_settings.kinds or ():
                if not can_index(kind, column.field_type):
                    raise UserError(f"{where}: a {kind} index cannot be built on {name} ({column.field_type})")
            settings[column.field_id] = column_settings
        return settings

    def load_catalog(self) -> Any:
        from pyiceberg.catalog import load_catalog

        try:
            return load_catalog(self.catalog_name, **self.catalog_properties)
        except Exception as exc:  # pyiceberg raises many types here; all mean "this catalog config is wrong"
            reason = redact_text(str(exc), self.secrets())
            raise UserError(f"cannot load catalog {self.catalog_name!r} from {self.path}: {reason}") from None


def _resolve_relative(props: dict[str, str], base: Path) -> dict[str, str]:
    resolved = dict(props)
    warehouse = resolved.get("warehouse")
    if warehouse and "://" not in warehouse and not Path(warehouse).is_absolute():
        resolved["warehouse"] = f"file://{(base / warehouse).resolve()}"
    uri = resolved.get("uri", "")
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/") and uri != prefix + ":memory:":
        db_path = (base / uri[len(prefix) :]).resolve()
        db_path.parent.mkdir(parents=True, exist_ok=True)
        resolved["uri"] = f"{prefix}{db_path}"
    return resolved


def load_config(path: str | Path | None = None) -> Config:
    conf_path = Path(path) if path is not None else DEFAULT_CONF_PATH
    try:
        raw = tomllib.loads(conf_path.read_text())
    except FileNotFoundError:
        raise UserError(f"config file not found: {conf_path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {conf_path} is not valid TOML: {exc}") from None

    catalog = dict(raw.get("catalog", {}))
    if not catalog:
        raise UserError(f"config file {conf_path} has no [catalog] table")
    name = str(catalog.pop("name", DEFAULT_CATALOG_NAME))
    props = {key: str(value) for key, value in catalog.items()}

    index = raw.get("index", {})
    spark = dict(raw.get("spark", {}))
    build = raw.get("build", {})
    if "files_per_task" in build:
        raise UserError(
            f"config file {conf_path}: build.files_per_task is gone: Spark tasks are planned by bytes now "
            "(build.split_bytes, build.open_cost_bytes; README)"
        )
    split_bytes = _positive_int(build, "split_bytes", DEFAULT_SPLIT_BYTES, conf_path)
    open_cost_bytes = _positive_int(build, "open_cost_bytes", DEFAULT_OPEN_COST_BYTES, conf_path, least=0)
    files_per_commit = _positive_int(build, "backfill_files_per_commit", 500, conf_path)
    local_max_files = _positive_int(build, "local_max_files", DEFAULT_LOCAL_MAX_FILES, conf_path, least=0)
    local_max_bytes = _positive_int(build, "local_max_bytes", DEFAULT_LOCAL_MAX_BYTES, conf_path, least=0)
    on_unreadable = str(build.get("on_unreadable_file", "fail"))
    if on_unreadable not in ("fail", "skip"):
        raise UserError(
            f'config file {conf_path}: build.on_unreadable_file must be "fail" or "skip", got {on_unreadable!r}'
        )
    existing = build.get("index_existing_files", True)
    if not isinstance(existing, bool):
        raise UserError(f"config file {conf_path}: build.index_existing_files must be true or false, got {existing!r}")
    unknown = set(build) - {
        "split_bytes",
        "open_cost_bytes",
        "backfill_files_per_commit",
        "on_unreadable_file",
        "index_existing_files",
        "local_max_files",
        "local_max_bytes",
    }
    if unknown:
        raise UserError(f"config file {conf_path}: build.{sorted(unknown)[0]}: unknown setting")
    delta = raw.get("delta", {})
    lookup = raw.get("lookup", {})
    time_zone = lookup.get("time_zone")
    if time_zone is not None:
        from indexlib.query.sql import Clock

        try:  # fail now, naming the file, rather than at the first lookup
            Clock.system(str(time_zone))
        except UserError as exc:
            raise UserError(f"config file {conf_path}: lookup.time_zone: {exc}") from None
    dialect = lookup.get("dialect")
    if dialect is not None:
        from indexlib.query.sql import check_dialect

        try:
            check_dialect(str(dialect))
        except UserError as exc:
            raise UserError(f"config file {conf_path}: lookup.dialect: {exc}") from None
    defaults, table_settings = _index_settings(index, conf_path)
    return Config(
        path=conf_path,
        catalog_name=name,
        catalog_properties=_resolve_relative(props, conf_path.parent),
        index_namespace=str(index.get("namespace", DEFAULT_INDEX_NAMESPACE)),
        spark_master=str(spark.pop("master", "local[*]")),
        spark_app_name=str(spark.pop("app_name", "skipindex")),
        spark_options={key: str(value) for key, value in spark.pop("options", {}).items()},
        split_bytes=split_bytes,
        open_cost_bytes=open_cost_bytes,
        index_existing_files=existing,
        on_unreadable_file=on_unreadable,
        backfill_files_per_commit=files_per_commit,
        local_max_files=local_max_files,
        local_max_bytes=local_max_bytes,
        delta_storage_options={key: str(value) for key, value in delta.get("storage_options", {}).items()},
        time_zone=None if time_zone is None else str(time_zone),
        dialect=None if dialect is None else str(dialect),
        index_defaults=defaults,
        table_settings=table_settings,
        airflow=_airflow_settings(raw.get("airflow", {}), conf_path),
    )


def _positive_int(
    section: dict[str, Any], name: str, default: int, conf_path: Path, where: str = "build", least: int = 1
) -> int:
    value = section.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise UserError(f"config file {conf_path}: {where}.{name} must be an integer >= {least}, got {value!r}")
    return value


def _airflow_settings(raw: dict[str, Any], conf_path: Path) -> AirflowSettings:
    known = {
        "builds",
        "spark_conn_id",
        "pool",
        "retries",
        "retry_delay_minutes",
        "timeout_minutes",
        "upkeep_schedule",
        "verify_sample",
        "expire_older_than_hours",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        raise UserError(f"config file {conf_path}: airflow.{unknown[0]}: unknown setting")
    builds = []
    for table, section in dict(raw.get("builds", {})).items():
        where = f'airflow.builds."{table}"'
        if not isinstance(section, dict) or set(section) - {"schedule", "every_minutes", "asset"}:
            raise UserError(f"config file {conf_path}: {where} takes schedule, every_minutes or asset only")
        if len(section) != 1:
            raise UserError(f"config file {conf_path}: {where} needs exactly one of schedule, every_minutes, asset")
        every = section.get("every_minutes")
        if every is not None:
            every = timedelta(minutes=_positive_int(section, "every_minutes", 1, conf_path, where))
        cron, asset = section.get("schedule"), section.get("asset")
        for name, value in (("schedule", cron), ("asset", asset)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise UserError(f"config file {conf_path}: {where}.{name} must be a non-empty string, got {value!r}")
        if asset is not None and "://" not in asset:
            raise UserError(f"config file {conf_path}: {where}.asset must be a URI (scheme://...), got {asset!r}")
        builds.append(BuildSchedule(str(table), cron, every, asset))
    conn = raw.get("spark_conn_id")
    older = raw.get("expire_older_than_hours", 72.0)
    if not isinstance(older, int | float) or isinstance(older, bool) or older < 0:
        raise UserError(
            f"config file {conf_path}: airflow.expire_older_than_hours must be a number >= 0, got {older!r}"
        )
    return AirflowSettings(
        builds=tuple(builds),
        spark_conn_id=None if conn is None else str(conn),
        pool=str(raw.get("pool", "default_pool")),
        retries=_positive_int(raw, "retries", 2, conf_path, "airflow", least=0),
        retry_delay=timedelta(minutes=_positive_int(raw, "retry_delay_minutes", 5, conf_path, "airflow", least=0)),
        timeout=timedelta(minutes=_positive_int(raw, "timeout_minutes", 180, conf_path, "airflow")),
        upkeep_schedule=str(raw.get("upkeep_schedule", "@daily")),
        verify_sample=_positive_int(raw, "verify_sample", 20, conf_path, "airflow", least=0),
        expire_older_than_hours=float(older),
    )


def _index_settings(index: dict[str, Any], conf_path: Path) -> tuple[IndexSettings, dict[str, dict[str, Any]]]:
    """Defaults from `[index]`, per-table tables from `[index.tables."ns.name"]`, all validated now."""
    known = {"namespace", "tables", *setting_names()}
    for name in index:
        if name not in known:
            raise UserError(f"config file {conf_path}: index.{name}: unknown setting")
    try:
        defaults = parse_settings(
            {k: v for k, v in index.items() if k in known - {"namespace", "tables"}}, IndexSettings(), "index"
        )
        tables = dict(index.get("tables", {}))
        for table, raw in tables.items():
            where = f'index.tables."{table}"'
            if not isinstance(raw, dict):
                raise ValueError(f"{where}: expected a table of settings")
            table_wide = parse_settings({k: v for k, v in raw.items() if k != "columns"}, defaults, where)
            for column, column_raw in dict(raw.get("columns", {})).items():
                if not isinstance(column_raw, dict):
                    raise ValueError(f"{where}.columns.{column}: expected a table of settings")
                parse_settings(column_raw, table_wide, f"{where}.columns.{column}")
    except ValueError as exc:
        raise UserError(f"config file {conf_path}: {exc}") from None
    return defaults, tables
