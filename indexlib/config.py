"""The TOML configuration: which catalog, where index tables live, how Spark runs.

`[catalog]` goes to `pyiceberg.catalog.load_catalog(name, **props)` unchanged, with one convenience:
relative paths in `warehouse` and in a `sqlite:///` `uri` are resolved against the conf file's directory (the
packaged default's against the data location, `data_home()`), so every configuration works from any working
directory (`PATH_RULE`). A SQLite catalog file is created only by a caller that may write (`Config.load_catalog`).

Each section of the file is a frozen pydantic model (`IndexOptions`, which `_file_model` completes with the settings
the index kinds declare; `BuildSettings`, `SparkSettings`, `LookupSettings`, `DeltaSettings`, `_AirflowSection` and
its `_BuildScheduleSection`s, `FollowSettings`, `ServeSettings`), closed (a key it does not declare is an error)
and strict (`true` is not an integer, nor `"2"`). A setting is declared once, as a field of its section's model with
its default, its bounds and its one line of help (`description`, which the docs' configuration reference shows,
`setting_help()`): a new setting is that one field. The file is validated whole before anything is read from it,
and the first error is one line naming the file and the key as TOML writes it, from pydantic's error location:
`_wording` words pydantic's errors, in one place. A misspelt section or key names the closest valid one, and an
unquoted dotted key where a property is expected (TOML reads `s3.secret-access-key = ...` as a nested table, which
pyiceberg would never see) shows the quoted form. No error shows a value of a property table: those hold
credentials.

What the rest of the code reads is `Config`: the validated section models themselves (`config.index`,
`config.build`, `config.spark`, `config.lookup`, `config.delta`, `config.follow`, `config.serve`), with `[catalog]`'s
paths resolved, `[index]`'s index settings parsed by the index kinds (`parse_settings`; a table's and its columns'
resolved by them too, `resolve_table_settings`) and `[airflow]` as `AirflowSettings` (durations as timedeltas, one
`BuildSchedule` per table).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from indexlib.errors import UserError
from indexlib.index_kinds.registry import parse_settings, resolve_table_settings, row_groups_mode, setting_names
from indexlib.index_kinds.settings import IndexSettings, declared_settings
from indexlib.redaction import redact_properties, redact_text, secret_values

CONF_ENV = "SKIPINDEX_CONF"  # the configuration file, when --conf is not given
HOME_ENV = "SKIPINDEX_HOME"  # the data location of the packaged default
LOCAL_CONF_PATH = Path("conf/local.toml")  # a checkout's (or a project directory's) own configuration
PACKAGED_CONF_PATH = Path(__file__).parent / "defaults" / "local.toml"  # shipped in the wheel
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024  # Spark's spark.sql.files.maxPartitionBytes
# What a file costs the indexer beyond its bytes: ~8 ms of CPU per small file, what ~40 KB of data costs at its
# ~5 MB/s per core (docs/benchmarks.md, "The build on many small files"). Spark's own openCostInBytes (4 MiB)
# prices a JVM read and made builds of small files run one Python task per 31 files, each with a fixed cost.
DEFAULT_OPEN_COST_BYTES = 64 * 1024
DEFAULT_LOCAL_MAX_FILES = 1000  # work at or under both runs without Spark (docs/benchmarks.md)
# In the process, files index a core each (`local_threads`) at ~45 MB/s on 2 cores against a warm Spark local[2]'s
# ~60-80 MB/s after its ~15 s start: they cross past 1 GB; 512 MiB keeps a follower's backlog of a few 100 MB
# commits out of Spark and leaves bigger work to a cluster's cores.
DEFAULT_LOCAL_MAX_BYTES = 512 * 1024 * 1024
DEFAULT_INDEX_NAMESPACE = "skipindex"
DEFAULT_CATALOG_NAME = "default"
DEFAULT_SERVE_PORT = 8181  # the port Iceberg REST catalogs conventionally use
DEFAULT_TOKEN_ENV = "SKIPINDEX_SERVE_TOKEN"


# ---- the file's sections, as pydantic models -------------------------------------------------------------------------
# A failed rule of our own is a PydanticCustomError whose message follows the key's dotted path: type "config_rule"
# after a space (`serve.token must be ...`), "config_reason" after a colon (`lookup.time_zone: unknown time zone`).
# Validators pass a table on untouched where one value belongs, for the strict type to refuse it as a table.


def _rule(message: str, **ctx: Any) -> PydanticCustomError:
    return PydanticCustomError("config_rule", message, ctx)


def _reason(reason: str) -> PydanticCustomError:
    return PydanticCustomError("config_reason", "{reason}", {"reason": reason})


def _text(value: Any) -> Any:
    """A setting read as text: any single value as its `str()`, as the loader has always read these."""
    return value if isinstance(value, dict) else str(value)


def _property(value: Any) -> str:
    """A property (`[catalog]`, `[spark.options]`, `[delta.storage_options]`): one value, passed on as text. The
    errors carry no message of their own: `_wording` words them, never showing the value (a credential)."""
    if isinstance(value, dict):  # s3.secret-access-key = "..." unquoted: {"s3": {"secret-access-key": "..."}}
        raise PydanticCustomError("nested_table", "a nested table")
    if isinstance(value, list):
        raise PydanticCustomError("array", "an array")
    return str(value)


def _non_empty(value: Any) -> Any:
    if not isinstance(value, dict) and (not isinstance(value, str) or not value.strip()):
        raise _rule("must be a non-empty string, got {got}", got=repr(value))
    return value


def _non_empty_unshown(value: Any) -> Any:
    """As `_non_empty`, the message naming the setting only (`[serve]`'s strings: one is the token)."""
    if not isinstance(value, dict) and (not isinstance(value, str) or not value.strip()):
        raise _rule("must be a non-empty string")
    return value


def _uri(value: str) -> str:
    if "://" not in value:
        raise _rule("must be a URI (scheme://...), got {got}", got=repr(value))
    return value


def _row_groups(value: Any) -> Any:
    if isinstance(value, dict):
        return value
    try:
        return row_groups_mode(value)
    except ValueError as exc:
        raise _reason(str(exc)) from None


def _time_zone(value: str) -> str:
    from indexlib.query.sql import Clock

    try:  # fail now, naming the file, rather than at the first lookup
        Clock.system(value)
    except UserError as exc:
        raise _reason(str(exc)) from None
    return value


def _dialect(value: str) -> str:
    from indexlib.query.sql import check_dialect

    try:
        check_dialect(value)
    except UserError as exc:
        raise _reason(str(exc)) from None
    return value


def _one_value(value: Any) -> Any:
    if isinstance(value, dict):
        raise PydanticCustomError("table_for_value", "a table")
    return value


_Text = Annotated[str, BeforeValidator(_text)]
_Properties = dict[str, Annotated[str, BeforeValidator(_property)]]
_RowGroups = Annotated[Literal["true", "false", "auto"], BeforeValidator(_row_groups)]
_IndexValue = Annotated[Any, BeforeValidator(_one_value)]  # an index kind's setting, read by `parse_settings`


class _Section(BaseModel):
    """A table of the file: frozen, closed, strict; no error of pydantic's shows a value (`_wording` words them)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, hide_input_in_errors=True)


class BuildSettings(_Section):
    """`[build]`: how builds and backfills run."""

    split_bytes: int = Field(
        default=DEFAULT_SPLIT_BYTES,
        ge=1,
        description=(
            "Spark tasks are planned by bytes, as Spark's file scan: up to this many bytes per task "
            "(fewer when the table is small)"
        ),
    )
    open_cost_bytes: int = Field(
        default=DEFAULT_OPEN_COST_BYTES,
        ge=0,
        description="each file costs its size plus this many bytes to open, when planning tasks",
    )
    backfill_files_per_commit: int = Field(
        default=500, ge=1, description="backfill commits whole partitions in batches of about this many files"
    )
    on_unreadable_file: Annotated[Literal["fail", "skip"], BeforeValidator(_text)] = Field(
        default="fail",
        description=(
            '"fail": name the file, commit nothing; "skip": index the others, report it (it stays '
            "unindexed, so always kept)"
        ),
    )
    index_existing_files: bool = Field(
        default=True,
        description=(
            "the first build indexes every live file; false: it only records the watermark, and "
            "`skipindex backfill` indexes the rest"
        ),
    )
    local_max_files: int = Field(
        default=DEFAULT_LOCAL_MAX_FILES,
        ge=0,
        description=(
            "work at or under both this and `local_max_bytes` is indexed in the skipindex process, "
            "without Spark; above either, on Spark; 0: always Spark"
        ),
    )
    local_max_bytes: int = Field(default=DEFAULT_LOCAL_MAX_BYTES, ge=0, description="see `local_max_files`")
    local_threads: int = Field(
        default=0,
        ge=0,
        description=(
            "threads indexing in the skipindex process, a file each (fewer files: the rest share the files' "
            "columns); 0: one per CPU core"
        ),
    )


class SparkSettings(_Section):
    """`[spark]`: the Spark session of local runs."""

    master: _Text = Field(default="local[*]", description="the master of a local session; ignored under spark-submit")
    app_name: _Text = Field(default="skipindex", description="the Spark application name")
    options: _Properties = Field(
        default_factory=dict, description='any Spark configuration, as `"spark.ui.enabled" = "false"`'
    )

    def __repr__(self) -> str:  # the options may hold credentials: shown redacted (indexlib/redaction.py)
        return f"SparkSettings(master={self.master!r}, app_name={self.app_name!r}, options={redact_properties(self.options)!r})"

    __str__ = __repr__


class LookupSettings(_Section):
    """`[lookup]`: how WHERE clauses are read, both checked through indexlib.query.sql when the file loads."""

    time_zone: Annotated[str, BeforeValidator(_text), AfterValidator(_time_zone)] | None = Field(
        default=None, description="session zone for CURRENT_DATE / NOW(); unset: this machine's zone (Spark's default)"
    )
    dialect: Annotated[str, BeforeValidator(_text), AfterValidator(_dialect)] | None = Field(
        default=None, description='sqlglot dialect of WHERE clauses ("spark": "double quotes" are strings); unset: ANSI'
    )


class DeltaSettings(_Section):
    """`[delta]`: Delta tables' logs, read by delta-rs."""

    storage_options: _Properties = Field(
        default_factory=dict,
        description=(
            "passed to delta-rs for Delta tables' logs (its object-store keys, e.g. AWS_REGION); data "
            "files are read through pyiceberg FileIO with the s3./gcs./adls. properties of [catalog]"
        ),
    )

    def __repr__(self) -> str:  # the options may hold credentials: shown redacted (indexlib/redaction.py)
        return f"DeltaSettings(storage_options={redact_properties(self.storage_options)!r})"

    __str__ = __repr__


class _BuildScheduleSection(_Section):
    """`[airflow.builds."<table>"]`: exactly one of a cron expression or preset, a fixed interval in minutes, or the
    URI of the source table's Airflow Asset."""

    schedule: Annotated[str, BeforeValidator(_non_empty)] | None = Field(
        default=None, description="a cron expression or preset (`@hourly`)"
    )
    every_minutes: int | None = Field(default=None, ge=1, description="a fixed interval, in minutes")
    asset: Annotated[str, BeforeValidator(_non_empty), AfterValidator(_uri)] | None = Field(
        default=None,
        description="the URI of the source table's Airflow Asset, which the writer's DAG lists in its outlets",
    )

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        # counted on the keys given, before their values are checked; an unknown key or a table where a value
        # belongs is left to the fields' errors, which name it
        keys = set(data) if isinstance(data, dict) and not any(isinstance(v, dict) for v in data.values()) else None
        if keys is not None and keys <= set(cls.model_fields) and len(keys) != 1:
            raise _rule("needs exactly one of {names}", names=", ".join(cls.model_fields))
        return data

    def schedule_for(self, table: str) -> BuildSchedule:
        every = None if self.every_minutes is None else timedelta(minutes=self.every_minutes)
        return BuildSchedule(table, self.schedule, every, self.asset)


class _AirflowSection(_Section):
    """`[airflow]`: what the DAGs in airflow_dags/ run and how."""

    spark_conn_id: _Text | None = Field(
        default=None,
        description=(
            "an Airflow connection of type spark: Spark jobs go through SparkSubmitOperator; unset: "
            "Spark runs inside the task (local[*] or [spark] master)"
        ),
    )
    pool: _Text = Field(default="default_pool", description="the Airflow pool of every task (one slot per task)")
    retries: int = Field(default=2, ge=0, description="retries per task")
    retry_delay_minutes: int = Field(default=5, ge=0, description="minutes between a task's retries")
    timeout_minutes: int = Field(default=180, ge=1, description="execution_timeout of every task, in minutes")
    upkeep_schedule: _Text = Field(default="@daily", description="schedule of the upkeep DAG (compact, verify, expire)")
    verify_sample: int = Field(default=20, ge=0, description="entries the upkeep DAG's verify recomputes per table")
    expire_older_than_hours: float = Field(
        default=72.0,
        ge=0,
        description="the upkeep DAG's expire: index snapshots and unreferenced files older than this",
    )
    follow_minutes: float = Field(
        default=0.0,
        ge=0,
        description=(
            "0: no follower DAG; N: a `skipindex_follow` DAG whose one task runs `skipindex build "
            "--follow` over `[follow] tables` for N minutes, then the next run starts at once"
        ),
    )
    builds: dict[str, _BuildScheduleSection] = Field(
        default_factory=dict,
        description=(
            'one incremental build DAG per table (`[airflow.builds."ns.name"]`), with one of '
            "`schedule`, `every_minutes` or `asset`"
        ),
    )

    def settings(self) -> AirflowSettings:
        return AirflowSettings(
            builds=tuple(section.schedule_for(table) for table, section in self.builds.items()),
            spark_conn_id=self.spark_conn_id,
            pool=self.pool,
            retries=self.retries,
            retry_delay=timedelta(minutes=self.retry_delay_minutes),
            timeout=timedelta(minutes=self.timeout_minutes),
            upkeep_schedule=self.upkeep_schedule,
            verify_sample=self.verify_sample,
            expire_older_than_hours=float(self.expire_older_than_hours),
            follow_minutes=float(self.follow_minutes),
        )


class FollowSettings(_Section):
    """`[follow]`: `skipindex build --follow` (indexing/follow.py): the tables it follows when no `--table` is given,
    how often it asks each for its current version, and how it retries a transient failure."""

    tables: list[Annotated[str, BeforeValidator(_non_empty)]] = Field(
        default_factory=list,
        description='the tables followed when no `--table` is given, e.g. ["db.events", "/data/lake/clicks"]',
    )
    interval_seconds: float = Field(
        default=1.0,
        gt=0,
        description=(
            "seconds between two polls of each table's current version (one catalog query for SQL "
            "catalogs, the new log entries for Delta)"
        ),
    )
    retries: int = Field(
        default=10,
        ge=0,
        description=(
            "consecutive transient failures (a lost commit race, an I/O or catalog outage) retried with "
            "back-off before the follower exits with the error's code"
        ),
    )
    max_backoff_seconds: float = Field(
        default=60.0, gt=0, description="the longest wait between two retries (jittered exponential back-off up to it)"
    )
    expire_after_minutes: float = Field(
        default=60.0,
        gt=0,
        description=(
            "with each compaction of a followed table's index (every 50 batches), its index snapshots older than "
            "this are expired and the files only they used deleted (as `skipindex expire --older-than`): a "
            "follower commits one snapshot per batch, and every commit rewrites the list of them"
        ),
    )


_ServeText = Annotated[str, BeforeValidator(_non_empty_unshown)]


class ServeSettings(_Section):
    """`[serve]`: the planning service (`skipindex serve`, docs/how-to/serve.md). The bearer token comes from
    `token` or, preferably, the environment variable named by `token_env`; it is a secret (never shown)."""

    host: _ServeText = Field(
        default="127.0.0.1", description="address to bind; bind other addresses only behind a firewall or proxy"
    )
    port: int = Field(default=DEFAULT_SERVE_PORT, ge=0, le=65535, description="port to listen on")
    token: _ServeText | None = Field(
        default=None, description="the bearer token itself (a secret, never printed); prefer `token_env`"
    )
    token_env: _ServeText = Field(
        default=DEFAULT_TOKEN_ENV,
        description="the environment variable holding the bearer token (at least 16 characters)",
    )
    tasks_per_batch: int = Field(
        default=1000, ge=1, description="file scan tasks per response; the rest as plan tasks fetched from `tasks`"
    )
    max_request_bytes: int = Field(default=1024 * 1024, ge=1, description="larger request bodies are refused (413)")
    plans_kept: int = Field(
        default=256, ge=1, description="plans whose further batches stay fetchable (the oldest forgotten first)"
    )
    handles_kept: int = Field(
        default=64,
        ge=1,
        description=(
            "per plan worker: tables whose index handle (and its cache) stays open (the least recently used closed)"
        ),
    )
    max_header_bytes: int = Field(
        default=16 * 1024, ge=1024, description="a longer request line and headers are refused (431, or h11's 400)"
    )
    max_response_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1,
        description=(
            "a batch of tasks larger than this is split into further batches (at least 2 x max_request_bytes)"
        ),
    )
    idle_timeout_seconds: int = Field(
        default=5, ge=1, description="a connection with no request under way that sends nothing this long is closed"
    )
    request_timeout_seconds: int = Field(
        default=30, ge=1, description="a request not received whole this long after its first byte: 408, closed"
    )
    plans_kept_bytes: int = Field(
        default=512 * 1024 * 1024,
        ge=1,
        description=(
            "at most this many bytes of kept plans' further batches (the oldest forgotten first; the "
            "newest plan is always kept)"
        ),
    )
    plan_workers: int = Field(
        default=2,
        ge=0,
        description=(
            "processes that plan, so no plan holds up `/health` or another client's connection; 0 plans "
            "in the service's own process, in threads"
        ),
    )
    delta_tables: _Properties = Field(
        default_factory=dict,
        description=(
            'Delta tables served as Iceberg tables, as `name = "path or URI"` (a `[serve.delta_tables]` table): '
            "listed under `delta_namespace`, read through the service by any Iceberg REST client, planned by "
            "the index; read-only"
        ),
    )
    delta_namespace: _ServeText = Field(
        default="delta", description="the namespace the `delta_tables` are listed under (one level)"
    )

    @field_validator("max_response_bytes")
    @classmethod
    def _holds_a_task(cls, value: int, info: ValidationInfo) -> int:
        request = info.data.get("max_request_bytes")  # absent when it failed its own check
        if request is not None and value < 2 * request:  # one task (a file and the filter as its residual) fits
            raise _rule(
                "must be at least twice serve.max_request_bytes ({least}), got {got}", least=2 * request, got=value
            )
        return value

    def __repr__(self) -> str:
        return (
            f"ServeSettings(host={self.host!r}, port={self.port}, token={'***' if self.token else None}, "
            f"token_env={self.token_env!r}, tasks_per_batch={self.tasks_per_batch}, "
            f"max_request_bytes={self.max_request_bytes}, plans_kept={self.plans_kept}, "
            f"plans_kept_bytes={self.plans_kept_bytes}, handles_kept={self.handles_kept}, "
            f"plan_workers={self.plan_workers}, max_header_bytes={self.max_header_bytes}, "
            f"max_response_bytes={self.max_response_bytes}, idle_timeout_seconds={self.idle_timeout_seconds}, "
            f"request_timeout_seconds={self.request_timeout_seconds}, delta_tables={self.delta_tables!r}, "
            f"delta_namespace={self.delta_namespace!r})"
        )

    __str__ = __repr__  # pydantic's own str() would show the token

    def resolve_token(self) -> str:
        """The token the service requires: `token`, else `$token_env`; refused when neither is set or it is short."""
        token = self.token if self.token is not None else os.environ.get(self.token_env)
        if not token:
            raise UserError(
                f"skipindex serve needs a bearer token: set ${self.token_env} (or [serve] token_env names another "
                "variable, or [serve] token); requests without it are refused"
            )
        if len(token) < 16:
            raise UserError("the serve token must be at least 16 characters (e.g. `openssl rand -hex 32`)")
        return token


class IndexOptions(_Section):
    """`[index]`: where index tables live and whether they hold row groups. `_file_model` adds the index kinds'
    settings and `tables`, which `parse_settings` reads."""

    namespace: _Text = Field(
        default=DEFAULT_INDEX_NAMESPACE, description="the namespace index tables are created in, in the same catalog"
    )
    row_groups: _RowGroups = Field(
        default="false",
        description=(
            'also index each Parquet row group (counts, bounds, payloads): true, false, or "auto" = '
            "files of at least 32 MiB with two or more row groups; a lookup then names the row groups "
            "to read"
        ),
    )


class _ConfigFile(_Section):
    """The whole file, its sections in the order the configuration reference shows them."""

    catalog: _Properties = Field(
        default_factory=dict,
        description=(
            "passed unchanged to pyiceberg.catalog.load_catalog(name, **props): `name` (default "
            '"default") is the catalog name, every other key a catalog or FileIO property; relative '
            "paths in `warehouse` and in a `sqlite:///` `uri` are resolved against the conf file's "
            "directory"
        ),
    )
    index: IndexOptions = Field(
        default_factory=IndexOptions,
        description=(
            "where index tables live and what they hold; the index settings may also be set per table and column"
        ),
    )
    build: BuildSettings = Field(default_factory=BuildSettings, description="how builds and backfills run")
    spark: SparkSettings = Field(
        default_factory=SparkSettings,
        description=(
            "the Spark session of local runs (`skipindex build`); under spark-submit the cluster's settings win"
        ),
    )
    lookup: LookupSettings = Field(default_factory=LookupSettings, description="how WHERE clauses are read")
    delta: DeltaSettings = Field(default_factory=DeltaSettings, description="Delta tables")
    airflow: _AirflowSection = Field(
        default_factory=_AirflowSection, description="what the DAGs in airflow_dags/ run and how"
    )
    follow: FollowSettings = Field(
        default_factory=FollowSettings,
        description=("`skipindex build --follow`: a long-running process that indexes each new commit of its tables"),
    )
    serve: ServeSettings = Field(default_factory=ServeSettings, description="the planning service (`skipindex serve`)")


class _IndexChoice(_Section):
    """The index settings every table and column takes beside the kinds' own (`setting_names()`); their values
    are read by `parse_settings`."""

    kinds: _IndexValue = Field(
        default=None, description='"bloom", "automaton", both, or [] for min/max only; unset: the automatic choice'
    )
    row_group_kinds: _IndexValue = Field(
        default=None, description="the same for row-group payloads (default: as `kinds`); [] = row-group bounds only"
    )
    key_index: _IndexValue = Field(
        default=None,
        description='the global key index (value -> files): unset or "auto" = identifier columns of tables of 5,000+ files; true / false to force',
    )


@functools.lru_cache(maxsize=8)
def _file_model(settings: tuple[str, ...]) -> type[_ConfigFile]:
    """`_ConfigFile` with `[index]`, `[index.tables."<table>"]` and its `columns.<column>` declaring `settings`, the
    index settings (`setting_names()`: the index kinds, plug-ins among them, declare them, each with its help,
    `Setting.help`; `parse_settings` checks their values). Keyed by the names, so a kind registered later gets a
    model of its own."""
    kinds = declared_settings()

    def described(name: str) -> Any:
        choice = _IndexChoice.model_fields.get(name)
        return Field(default=None, description=choice.description if choice else kinds[name].help or None)

    declared: dict[str, Any] = {name: (_IndexValue, described(name)) for name in settings}  # (type, field) each
    column = create_model("_IndexColumn", __base__=_Section, **declared)
    table_fields: dict[str, Any] = {
        **declared,
        "row_groups": (_RowGroups | None, Field(default=None, description="`row_groups` for this table")),
        "columns": (
            dict[str, column],  # type: ignore[valid-type]
            Field(
                default_factory=dict,
                description='per column (`[index.tables."ns.name".columns.c]`): the index settings',
            ),
        ),
    }
    table = create_model("_IndexTable", __base__=_Section, **table_fields)
    tables = dict[str, table]  # type: ignore[valid-type]
    tables_field: Any = Field(
        default_factory=dict,
        description='per table (`[index.tables."ns.name"]`, a Delta table by its path): the index settings, `row_groups`, and per column under `columns`',
    )
    index_fields: dict[str, Any] = {**declared, "tables": (tables, tables_field)}
    index = create_model("IndexOptions", __base__=IndexOptions, **index_fields)
    index_field = Field(default_factory=index, description=_ConfigFile.model_fields["index"].description)
    return create_model("_ConfigFile", __base__=_ConfigFile, index=(index, index_field))


# the defaults of the settings the dataclasses below hold, so that a Config built in code and a file that leaves the
# keys out agree
_AIRFLOW = _AirflowSection()


# ---- what the rest of the code reads ---------------------------------------------------------------------------------


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
    """`[airflow]`: what the DAGs in airflow_dags/ run and how (docs/how-to/airflow.md)."""

    builds: tuple[BuildSchedule, ...] = ()
    spark_conn_id: str | None = None  # set: Spark jobs go through SparkSubmitOperator; unset: in the task's process
    pool: str = _AIRFLOW.pool
    retries: int = _AIRFLOW.retries
    retry_delay: timedelta = timedelta(minutes=_AIRFLOW.retry_delay_minutes)
    timeout: timedelta = timedelta(minutes=_AIRFLOW.timeout_minutes)
    upkeep_schedule: str = _AIRFLOW.upkeep_schedule
    verify_sample: int = _AIRFLOW.verify_sample
    expire_older_than_hours: float = _AIRFLOW.expire_older_than_hours
    follow_minutes: float = _AIRFLOW.follow_minutes  # 0: no follower DAG


@dataclass(frozen=True, repr=False)
class Config:
    """The configuration as the code reads it (`load_config`): the validated file, resolved."""

    path: Path
    catalog_name: str
    catalog_properties: dict[str, str]  # `[catalog]` without `name`, relative paths resolved (`PATH_RULE`)
    index: IndexOptions = field(default_factory=IndexOptions)
    build: BuildSettings = field(default_factory=BuildSettings)  # read once per build (indexing/spec.py)
    spark: SparkSettings = field(default_factory=SparkSettings)
    lookup: LookupSettings = field(default_factory=LookupSettings)
    delta: DeltaSettings = field(default_factory=DeltaSettings)
    # `[index]`'s index settings, parsed by the index kinds, and `[index.tables."ns.name"]` as the file writes them
    # (table-wide settings, and per column under `columns`), which the index kinds resolve per table
    # (`resolve_table_settings`)
    index_defaults: IndexSettings = IndexSettings()
    table_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    airflow: AirflowSettings = AirflowSettings()
    follow: FollowSettings = field(default_factory=FollowSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)

    @property
    def index_namespace(self) -> str:
        """`[index] namespace`: where index tables live, in the configured catalog."""
        return self.index.namespace

    @property
    def time_zone(self) -> str | None:
        """`[lookup] time_zone`: the session zone of CURRENT_DATE / NOW(); None: the machine's local zone."""
        return self.lookup.time_zone

    @property
    def dialect(self) -> str | None:
        """`[lookup] dialect`: the sqlglot dialect of WHERE clauses; None: ANSI quoting."""
        return self.lookup.dialect

    @property
    def delta_storage_options(self) -> dict[str, str]:
        """`[delta.storage_options]`, for delta-rs."""
        return self.delta.storage_options

    def __repr__(self) -> str:  # the property tables hold credentials: shown redacted (indexlib/redaction.py)
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "catalog_properties":
                value = redact_properties(value)
            shown.append(f"{f.name}={value!r}")
        return f"Config({', '.join(shown)})"

    def secrets(self) -> set[str]:
        """The configured secret values (`[catalog]`, `[spark] options`, `[delta.storage_options]`), which no
        message may show: pass them to `indexlib.redaction.redact_text`."""
        tables = (self.catalog_properties, self.spark.options, self.delta_storage_options)
        found = set().union(*(secret_values(table) for table in tables))
        return found | ({self.serve.token} if self.serve.token else set())

    def column_settings(self, table: str, schema: Any) -> dict[int, IndexSettings]:
        """Index settings per field id of `table`'s top-level columns, resolved by the index kinds
        (`resolve_table_settings`); UserError naming the setting when the configuration names a column the table
        does not have or a kind the column's type cannot hold."""
        try:
            settings, _ = resolve_table_settings(
                table, schema, self.index_defaults, self.index.row_groups, self.table_settings.get(table, {})
            )
        except ValueError as exc:
            raise UserError(f"config file {self.path}: {exc}") from None
        return settings

    def row_groups_for(self, table: str) -> str:
        """`row_groups` of `table` (its `[index.tables."..."]` value, else `[index]`'s): "true", "false" or "auto"."""
        raw = self.table_settings.get(table, {})
        return row_groups_mode(raw["row_groups"]) if "row_groups" in raw else self.index.row_groups

    def load_catalog(self, create: bool = True) -> Any:
        """The configured pyiceberg catalog. A SQLite catalog whose file does not exist yet is created (with its
        folder) only when `create`; read-only callers (lookups, `explain`, `stats`) pass False and get a UserError
        naming the resolved path and the path rule (`PATH_RULE`), rather than a new empty catalog."""
        from pyiceberg.catalog import load_catalog

        db_path = sqlite_path(self.catalog_properties)
        if db_path is not None and not db_path.exists():
            if not create:
                raise UserError(
                    f"catalog {self.catalog_name!r} of {self.path}: SQLite file {db_path} does not exist "
                    f"({PATH_RULE}); nothing was created"
                )
            db_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return load_catalog(self.catalog_name, **self.catalog_properties)
        except Exception as exc:  # pyiceberg raises many types here; all mean "this catalog config is wrong"
            reason = redact_text(str(exc), self.secrets())
            raise UserError(f"cannot load catalog {self.catalog_name!r} from {self.path}: {reason}") from None


# The one rule for relative paths in [catalog], said in the configuration reference and in the errors that name a
# resolved path. pyiceberg's `load_catalog` itself resolves them against the working directory: Python code gets
# the configuration's catalog with `load_config(path).load_catalog()`.
PATH_RULE = "relative paths in [catalog] warehouse and a sqlite:/// uri resolve against the configuration file's folder"
_SQLITE = "sqlite:///"


def sqlite_path(props: dict[str, str]) -> Path | None:
    """The file of a SQLite catalog (`uri = "sqlite:///<path>"`, as resolved), else None (another catalog, or
    SQLite in memory)."""
    uri = props.get("uri", "")
    if not uri.startswith(_SQLITE) or uri == _SQLITE + ":memory:":
        return None
    return Path(uri[len(_SQLITE) :].split("?", 1)[0])


def _resolve_relative(props: dict[str, str], base: Path) -> dict[str, str]:
    resolved = dict(props)
    warehouse = resolved.get("warehouse")
    if warehouse and "://" not in warehouse and not Path(warehouse).is_absolute():
        resolved["warehouse"] = f"file://{(base / warehouse).resolve()}"
    uri = resolved.get("uri", "")
    if uri.startswith(_SQLITE) and not uri.startswith(_SQLITE + "/") and uri != _SQLITE + ":memory:":
        resolved["uri"] = f"{_SQLITE}{(base / uri[len(_SQLITE) :]).resolve()}"  # created by `load_catalog`
    return resolved


def data_home() -> Path:
    """Where the packaged default keeps its SQLite catalog and warehouse: `$SKIPINDEX_HOME`, else
    `$XDG_DATA_HOME/skipindex`, else `~/.local/share/skipindex` (the XDG default). Per user, not per directory, so
    `skipindex demo` in one directory and `skipindex explain` in another see the same tables."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative path there is invalid and ignored
        return Path(xdg) / "skipindex"
    return Path.home() / ".local" / "share" / "skipindex"


def find_config(path: str | Path | None = None) -> Path:
    """The configuration file to read: `path` (`--conf`), else `$SKIPINDEX_CONF`, else `./conf/local.toml` if
    present, else the packaged default. A path given explicitly (either way) must exist: falling back to another
    file would run against a catalog the user did not name. The error lists every place looked at."""
    looked: list[str] = []
    if path is not None:
        candidates = [(f"--conf {path}", Path(path))]
    else:
        looked.append("--conf (not given)")
        env = os.environ.get(CONF_ENV)
        if env:
            candidates = [(f"${CONF_ENV}={env}", Path(env))]
        else:
            looked.append(f"${CONF_ENV} (not set)")
            candidates = [(f"./{LOCAL_CONF_PATH}", LOCAL_CONF_PATH), (f"{PACKAGED_CONF_PATH}", PACKAGED_CONF_PATH)]
    for label, candidate in candidates:
        if candidate.is_file():
            return candidate
        looked.append(f"{label} (no such file)")
    if path is not None:  # the one place looked at is the path itself
        raise UserError(f"config file not found: {path}")
    raise UserError(f"config file not found: {candidates[0][1]} (looked at: {'; '.join(looked)})")


# ---- the declared shape, for the docs and for the errors -------------------------------------------------------------
# `_ANY`: any name, such as a table identifier or a column; `_PROPERTIES`: an open table of single values passed to a
# library (pyiceberg, Spark, delta-rs), which may hold credentials; None: a value. Adding a setting is adding a field
# to its section's model, its help as the field's `description`.
_ANY = "*"
_PROPERTIES = "properties"


def config_schema() -> dict[str, Any]:
    """The declared shape of the file, as the loader checks it: a dict per table, `"*"` for any name (a table
    identifier, a column), `"properties"` for an open property table, None for a single value. Read off the section
    models; the docs' configuration reference is generated from it, with `setting_help()`."""
    return _shape(_file_model(setting_names()))


def _shape(annotation: Any) -> Any:
    if annotation == _Properties:
        return _PROPERTIES
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {name: _shape(info.annotation) for name, info in annotation.model_fields.items()}
    if get_origin(annotation) is dict:
        return {_ANY: _shape(get_args(annotation)[1])}
    return None


def setting_defaults() -> dict[str, Any]:
    """The default of each setting of `config_schema()` outside named tables, by dotted key, as the loader fills it
    in when the file leaves the key out (None: unset). The index kinds' own settings are None here: their defaults
    are their `Setting.default`."""
    found: dict[str, Any] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            shape = _shape(info.annotation)
            if shape is None:
                found[prefix + name] = info.get_default(call_default_factory=True)
            elif isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
                walk(info.annotation, f"{prefix}{name}.")

    walk(_file_model(setting_names()), "")
    return found


def setting_help() -> dict[str, str]:
    """One line per section and setting of `config_schema()` (dotted, `*` for a name), shown by the docs'
    configuration reference: each field's `description`, where it is declared (the index kinds' own settings:
    their `Setting.help`). A key without one fails the docs build."""
    found: dict[str, str] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            if info.description:
                found[prefix + name] = info.description
            annotation = info.annotation
            if get_origin(annotation) is dict and annotation != _Properties:
                annotation, name = get_args(annotation)[1], f"{name}.*"
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{prefix}{name}.")

    walk(_file_model(setting_names()), "")
    return found


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _dotted(path: tuple[str, ...]) -> str:
    """A key path as TOML writes it: `index.tables."db.t".columns.c`."""
    return ".".join(part if _BARE_KEY.fullmatch(part) else f'"{part}"' for part in path)


def load_config(path: str | Path | None = None) -> Config:
    """The configuration in `path`, or in the first file `find_config` finds; checked whole before it is used."""
    conf_path = find_config(path)
    try:
        raw = tomllib.loads(conf_path.read_text())
    except tomllib.TOMLDecodeError as exc:  # tomllib's messages name the position, never the text
        raise UserError(f"config file {conf_path} is not valid TOML: {exc}") from None
    build = raw.get("build", {})
    if isinstance(build, dict) and "files_per_task" in build:
        raise UserError(
            f"config file {conf_path}: build.files_per_task is gone: Spark tasks are planned by bytes now "
            "(build.split_bytes, build.open_cost_bytes; docs/reference/configuration.md)"
        )
    model = _file_model(setting_names())
    try:
        file, errors = model.model_validate(raw), []
    except ValidationError as exc:
        file, errors = None, exc.errors()

    def fail_on(found: list[ErrorDetails]) -> None:
        if found:
            raise UserError(f"config file {conf_path}: {_wording(found[0], model)}")

    # The first error, in the order the checks have always run: the file's shape (an unknown key, a table where a
    # value belongs or the other way round, a misshapen property), in file order; [catalog]; the values of [build]
    # and [lookup]; the index settings (`parse_settings`); the values of [index], [airflow] and [serve]. Within a
    # section, values in the order its model declares them.
    schema = _shape(model)
    shape = [error for error in errors if _is_shape(error, schema)]
    fail_on(sorted(shape, key=lambda error: _position(raw, error["loc"])))
    if not raw.get("catalog"):
        raise UserError(f"config file {conf_path} has no [catalog] table")
    fail_on([error for error in errors if error["loc"][0] in ("build", "lookup")])
    index = raw.get("index", {})
    defaults, table_settings = _index_settings(index, conf_path)
    fail_on(errors)
    assert file is not None  # no error: validated

    catalog = dict(file.catalog)
    name = catalog.pop("name", DEFAULT_CATALOG_NAME)
    return Config(
        path=conf_path,
        catalog_name=name,
        catalog_properties=_resolve_relative(
            catalog, data_home() if conf_path == PACKAGED_CONF_PATH else conf_path.parent
        ),
        # `[index]` as its own section class: the model `_file_model` made adds the kinds' settings (read into
        # `index_defaults` above) and, made per load, would not pickle for the service's plan workers (validated already)
        index=IndexOptions.model_construct(**{name: getattr(file.index, name) for name in IndexOptions.model_fields}),
        build=file.build,
        spark=file.spark,
        lookup=file.lookup,
        delta=file.delta,
        index_defaults=defaults,
        table_settings=table_settings,
        airflow=file.airflow.settings(),
        follow=file.follow,
        serve=file.serve,
    )


# ---- pydantic's errors as one line each ------------------------------------------------------------------------------
_SHAPE_ERRORS = ("extra_forbidden", "model_type", "dict_type", "nested_table", "array", "table_for_value")


def _shape_at(schema: dict[str, Any], loc: tuple[str, ...]) -> tuple[Any, bool]:
    """The declared shape at `loc`, and whether its last key is a name (`_ANY`) rather than a declared key."""
    shape: Any = schema
    named = False
    for part in loc:
        named = part not in shape
        shape = shape.get(part, shape.get(_ANY))
    return shape, named


def _is_shape(error: ErrorDetails, schema: dict[str, Any]) -> bool:
    """Whether `error` is about the file's shape rather than a value: such errors come first, as the checks ran."""
    loc = tuple(map(str, error["loc"]))
    return error["type"] in _SHAPE_ERRORS or (isinstance(error["input"], dict) and _shape_at(schema, loc)[0] is None)


def _position(raw: dict[str, Any], loc: tuple[int | str, ...]) -> list[int]:
    """Where `loc` is in the file, as the index of each of its keys among its table's: sorts in file order."""
    found: list[int] = []
    table: Any = raw
    for part in loc:
        keys = list(table) if isinstance(table, dict) else []
        found.append(keys.index(part) if part in keys else len(keys))
        table = table.get(part) if isinstance(table, dict) else None
    return found


def _wording(error: ErrorDetails, model: type[BaseModel]) -> str:
    """One pydantic error as the line the loader has always printed after `config file <path>: `: the key as TOML
    writes it, then what is wrong with it. The one place pydantic's errors are worded; a value of a property table
    (a credential) is never shown."""
    loc = tuple(map(str, error["loc"]))
    kind, value, where = error["type"], error["input"], _dotted(loc)
    schema = _shape(model)
    if kind == "extra_forbidden":
        parent, named = _shape_at(schema, loc[:-1])
        return _unknown_key(loc, value, parent, named)
    if kind == "nested_table":
        dotted = ".".join((loc[-1], *_first_key_path(value)))
        return (
            f"{_dotted(loc[:-1])}: {dotted} is read by TOML as a nested table, which no library sees; quote the key: "
            f'"{dotted}" = ...'
        )
    if kind == "array":
        return f"{where} must be a single value, not an array"
    if kind in ("model_type", "dict_type"):
        return f"{where} must be a table, got a {type(value).__name__}"
    if _is_shape(error, schema):
        return f"{where} must be a single value, not a table"
    if kind == "config_rule":
        return f"{where} {error['msg']}"
    if kind == "config_reason":
        return f"{where}: {error['msg']}"
    info = _field_at(model, loc)
    annotation = info.annotation if info is not None else None
    types = get_args(annotation) if isinstance(annotation, UnionType) else (annotation,)
    least = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), None) if info else None
    if kind in ("int_type", "float_type", "greater_than_equal") and least is not None:
        return f"{where} must be {'a number' if float in types else 'an integer'} >= {least}, got {value!r}"
    if kind == "less_than_equal":
        return f"{where} must be at most {error.get('ctx', {}).get('le')}, got {value!r}"
    if kind == "bool_type":
        return f"{where} must be true or false, got {value!r}"
    if kind == "literal_error":
        choices = " or ".join(f'"{choice}"' for choice in get_args(annotation))
        return f"{where} must be {choices}, got {value!r}"
    return f"{where}: {error['msg']}"  # pydantic's own words, which name no value


def _field_at(model: type[BaseModel], loc: tuple[str, ...]) -> FieldInfo | None:
    """The field of `model` (or of a model within it) that `loc` names."""
    node: Any = model
    found = None
    for part in loc:
        if isinstance(node, type) and issubclass(node, BaseModel):
            found = node.model_fields.get(part)
            node = found.annotation if found is not None else None
        elif get_origin(node) is dict:  # `part` is a name: a table identifier, a column
            found, node = None, get_args(node)[1]
        else:
            return None
    return found


def _unknown_key(where: tuple[str, ...], value: Any, schema: dict[str, Any], in_named: bool) -> str:
    parent, key = where[:-1], where[-1]
    what = "unknown section" if not parent else "unknown setting"
    if in_named and isinstance(value, dict):  # [index.tables.db.t]: TOML read the name's dot as a nesting
        return f'{_dotted(where)}: {what}; a name with a dot is quoted: {_dotted(parent[:-1])}."{parent[-1]}.{key}"'
    known = [name for name in schema if name != _ANY]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {_dotted((*parent, close[0]))}?" if close else f"expected one of {', '.join(known)}"
    return f"{_dotted(where)}: {what} ({hint})"


def _first_key_path(table: dict[str, Any]) -> tuple[str, ...]:
    """The keys down to the first value in a nested table (none for an empty one)."""
    for key, value in table.items():
        return (key, *_first_key_path(value)) if isinstance(value, dict) else (key,)
    return ()


def _index_settings(index: dict[str, Any], conf_path: Path) -> tuple[IndexSettings, dict[str, dict[str, Any]]]:
    """Defaults from `[index]`, per-table tables from `[index.tables."ns.name"]` (tables, as validated), all parsed
    now by the index kinds."""
    try:
        defaults = parse_settings({k: v for k, v in index.items() if k in setting_names()}, IndexSettings(), "index")
        tables = dict(index.get("tables", {}))
        for table, raw in tables.items():
            where = f'index.tables."{table}"'
            table_wide = parse_settings(
                {k: v for k, v in raw.items() if k not in ("columns", "row_groups")}, defaults, where
            )
            for column, column_raw in raw.get("columns", {}).items():
                parse_settings(column_raw, table_wide, f"{where}.columns.{column}")
    except ValueError as exc:
        raise UserError(f"config file {conf_path}: {exc}") from None
    return defaults, tables
