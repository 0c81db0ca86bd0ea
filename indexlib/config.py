"""The TOML configuration: which catalog, where index tables live, how Spark runs.

`[catalog]` goes to `pyiceberg.catalog.load_catalog(name, **props)` unchanged, with one convenience:
relative paths in `warehouse` and in a `sqlite:///` `uri` are resolved against the conf file's directory (the
packaged default's against the data location, `data_home()`), so every configuration works from any working
directory.

The file is checked against a declared schema (`_schema`) before anything is read from it: a misspelt section or
key is an error naming it and the closest valid one, and an unquoted dotted key where a property is expected (TOML
reads `s3.secret-access-key = ...` as a nested table, which pyiceberg would never see) is an error showing the
quoted form. No error shows a value of a property table: those hold credentials.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from indexlib.errors import UserError
from indexlib.index_kinds.registry import can_index, parse_settings, setting_names
from indexlib.index_kinds.settings import IndexSettings
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
    """`[airflow]`: what the DAGs in airflow_dags/ run and how (docs/how-to/airflow.md)."""

    builds: tuple[BuildSchedule, ...] = ()
    spark_conn_id: str | None = None  # set: Spark jobs go through SparkSubmitOperator; unset: in the task's process
    pool: str = "default_pool"
    retries: int = 2
    retry_delay: timedelta = timedelta(minutes=5)
    timeout: timedelta = timedelta(hours=3)
    upkeep_schedule: str = "@daily"
    verify_sample: int = 20
    expire_older_than_hours: float = 72.0


DEFAULT_SERVE_PORT = 8181  # the port Iceberg REST catalogs conventionally use
DEFAULT_TOKEN_ENV = "SKIPINDEX_SERVE_TOKEN"


@dataclass(frozen=True, repr=False)
class ServeSettings:
    """`[serve]`: the planning service (`skipindex serve`, docs/how-to/serve.md). The bearer token comes from
    `token` or, preferably, the environment variable named by `token_env`; it is a secret (never shown)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_SERVE_PORT
    token: str | None = None
    token_env: str = DEFAULT_TOKEN_ENV
    tasks_per_batch: int = 1000  # file scan tasks per response; the rest as plan tasks fetched from `tasks`
    max_request_bytes: int = 1024 * 1024  # larger request bodies are refused (413)
    plans_kept: int = 256  # plans whose further batches stay fetchable (the oldest forgotten first)
    plans_kept_bytes: int = 512 * 1024 * 1024  # ... and at most this many bytes of them (the newest plan always kept)
    handles_kept: int = 64  # per plan worker: tables whose index handle (and its cache) stays open (LRU)
    plan_workers: int = 2  # processes that plan (0: plans in the service's own process, in threads)
    max_header_bytes: int = 16 * 1024  # a request line and headers longer than this are refused (431)
    max_response_bytes: int = 16 * 1024 * 1024  # a batch of tasks larger than this is split into further batches
    idle_timeout_seconds: int = 5  # a connection with no request under way that sends nothing this long is closed
    request_timeout_seconds: int = 30  # a request whose head and body have not all arrived by then: 408, closed

    def __repr__(self) -> str:
        return (
            f"ServeSettings(host={self.host!r}, port={self.port}, token={'***' if self.token else None}, "
            f"token_env={self.token_env!r}, tasks_per_batch={self.tasks_per_batch}, "
            f"max_request_bytes={self.max_request_bytes}, plans_kept={self.plans_kept}, "
            f"plans_kept_bytes={self.plans_kept_bytes}, handles_kept={self.handles_kept}, "
            f"plan_workers={self.plan_workers}, max_header_bytes={self.max_header_bytes}, "
            f"max_response_bytes={self.max_response_bytes}, idle_timeout_seconds={self.idle_timeout_seconds}, "
            f"request_timeout_seconds={self.request_timeout_seconds})"
        )

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
    row_groups: str = "false"  # [index] row_groups: "true", "false" or "auto" (indexing/file_indexer.py)
    # [index.tables."ns.name"]: table-wide settings, and per column under `columns` (validated at load)
    table_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    airflow: AirflowSettings = AirflowSettings()
    serve: ServeSettings = ServeSettings()

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
        found = set().union(*(secret_values(getattr(self, name)) for name in _PROPERTY_TABLES))
        return found | ({self.serve.token} if self.serve.token else set())

    def column_settings(self, table: str, schema: Any) -> dict[int, IndexSettings]:
        """Index settings per field id of `table`'s top-level columns; UserError naming the setting when the
        configuration names a column the table does not have or a kind the column's type cannot hold."""
        raw = self.table_settings.get(table, {})
        table_wide = parse_settings(
            {k: v for k, v in raw.items() if k not in ("columns", "row_groups")},
            self.index_defaults,
            f'index.tables."{table}"',
        )
        by_name = {f.name: f for f in schema.fields}
        settings = {f.field_id: table_wide for f in schema.fields}
        for name, column_raw in raw.get("columns", {}).items():
            where = f'config file {self.path}: index.tables."{table}".columns.{name}'
            if name not in by_name:
                raise UserError(f"{where}: table {table} has no column {name!r}")
            column = by_name[name]
            column_settings = parse_settings(column_raw, table_wide, where)
            for kind in dict.fromkeys((*(column_settings.kinds or ()), *(column_settings.row_group_kinds or ()))):
                if not can_index(kind, column.field_type):
                    article = "an" if kind[:1] in "aeiou" else "a"
                    raise UserError(f"{where}: {article} {kind} index cannot be built on {name} ({column.field_type})")
            settings[column.field_id] = column_settings
        return settings

    def row_groups_for(self, table: str) -> str:
        """`row_groups` of `table` (its `[index.tables."..."]` value, else `[index]`'s): "true", "false" or "auto"."""
        raw = self.table_settings.get(table, {})
        return _row_groups_mode(raw["row_groups"]) if "row_groups" in raw else self.row_groups

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


# The declared shape of the file. A dict: a table with these keys (`_ANY`: any name, such as a table identifier or a
# column); `_PROPERTIES`: an open table of single values passed to a library (pyiceberg, Spark, delta-rs), which may
# hold credentials; None: a value, checked where it is read. Adding a setting is adding its name here.
_ANY = "*"
_PROPERTIES = "properties"
_BUILD_KEYS = (
    "split_bytes",
    "open_cost_bytes",
    "backfill_files_per_commit",
    "on_unreadable_file",
    "index_existing_files",
    "local_max_files",
    "local_max_bytes",
)
_AIRFLOW_KEYS = (
    "spark_conn_id",
    "pool",
    "retries",
    "retry_delay_minutes",
    "timeout_minutes",
    "upkeep_schedule",
    "verify_sample",
    "expire_older_than_hours",
)

_SERVE_KEYS = (
    *("host", "port", "token", "token_env", "tasks_per_batch", "max_request_bytes", "plans_kept", "handles_kept"),
    *("max_header_bytes", "max_response_bytes", "idle_timeout_seconds", "request_timeout_seconds"),
    *("plans_kept_bytes", "plan_workers"),
)


def config_schema() -> dict[str, Any]:
    """The declared shape of the file, as the loader checks it: a dict per table, `"*"` for any name (a table
    identifier, a column), `"properties"` for an open property table, None for a single value. The docs'
    configuration reference is generated from it, with `SETTING_HELP` and each index kind's `Setting.help`."""
    settings = dict.fromkeys(setting_names())  # index settings: declared by the index kinds (registry.py)
    return {
        "catalog": _PROPERTIES,
        "index": {
            "namespace": None,
            "row_groups": None,
            **settings,
            "tables": {_ANY: {**settings, "row_groups": None, "columns": {_ANY: settings}}},
        },
        "build": dict.fromkeys(_BUILD_KEYS),
        "spark": {"master": None, "app_name": None, "options": _PROPERTIES},
        "lookup": {"time_zone": None, "dialect": None},
        "delta": {"storage_options": _PROPERTIES},
        "airflow": {
            **dict.fromkeys(_AIRFLOW_KEYS),
            "builds": {_ANY: {"schedule": None, "every_minutes": None, "asset": None}},
        },
        "serve": dict.fromkeys(_SERVE_KEYS),
    }


# One line per section and setting of `config_schema()` (dotted, `*` for a name), shown by the docs' configuration
# reference; the index kinds' own settings carry theirs (`Setting.help`). A key without one fails the docs build.
SETTING_HELP: dict[str, str] = {
    "catalog": 'passed unchanged to pyiceberg.catalog.load_catalog(name, **props): `name` (default "default") is '
    "the catalog name, every other key a catalog or FileIO property; relative paths in `warehouse` and in a "
    "`sqlite:///` `uri` are resolved against the conf file's directory",
    "index": "where index tables live and what they hold; the index settings may also be set per table and column",
    "index.namespace": "the namespace index tables are created in, in the same catalog",
    "index.row_groups": 'also index each Parquet row group (counts, bounds, payloads): true, false, or "auto" = files '
    "of at least 32 MiB with two or more row groups; a lookup then names the row groups to read",
    "index.kinds": '"bloom", "automaton", both, or [] for min/max only; unset: the automatic choice',
    "index.row_group_kinds": "the same for row-group payloads (default: as `kinds`); [] = row-group bounds only",
    "index.key_index": 'the global key index (value -> files): unset or "auto" = identifier columns of tables of '
    "5,000+ files; true / false to force",
    "index.tables": 'per table (`[index.tables."ns.name"]`, a Delta table by its path): the index settings, '
    "`row_groups`, and per column under `columns`",
    "index.tables.*.row_groups": "`row_groups` for this table",
    "index.tables.*.columns": 'per column (`[index.tables."ns.name".columns.c]`): the index settings',
    "build": "how builds and backfills run",
    "build.split_bytes": "Spark tasks are planned by bytes, as Spark's file scan: up to this many bytes per task "
    "(fewer when the table is small)",
    "build.open_cost_bytes": "each file costs its size plus this many bytes to open, when planning tasks",
    "build.backfill_files_per_commit": "backfill commits whole partitions in batches of about this many files",
    "build.on_unreadable_file": '"fail": name the file, commit nothing; "skip": index the others, report it '
    "(it stays unindexed, so always kept)",
    "build.index_existing_files": "the first build indexes every live file; false: it only records the watermark, "
    "and `skipindex backfill` indexes the rest",
    "build.local_max_files": "work at or under both this and `local_max_bytes` is indexed in the skipindex "
    "process, without Spark; above either, on Spark; 0: always Spark",
    "build.local_max_bytes": "see `local_max_files`",
    "spark": "the Spark session of local runs (`skipindex build`); under spark-submit the cluster's settings win",
    "spark.master": "the master of a local session; ignored under spark-submit",
    "spark.app_name": "the Spark application name",
    "spark.options": 'any Spark configuration, as `"spark.ui.enabled" = "false"`',
    "lookup": "how WHERE clauses are read",
    "lookup.time_zone": "session zone for CURRENT_DATE / NOW(); unset: this machine's zone (Spark's default)",
    "lookup.dialect": 'sqlglot dialect of WHERE clauses ("spark": "double quotes" are strings); unset: ANSI',
    "delta": "Delta tables",
    "delta.storage_options": "passed to delta-rs for Delta tables' logs (its object-store keys, e.g. AWS_REGION); "
    "data files are read through pyiceberg FileIO with the s3./gcs./adls. properties of [catalog]",
    "airflow": "what the DAGs in airflow_dags/ run and how",
    "airflow.spark_conn_id": "an Airflow connection of type spark: Spark jobs go through SparkSubmitOperator; "
    "unset: Spark runs inside the task (local[*] or [spark] master)",
    "airflow.pool": "the Airflow pool of every task (one slot per task)",
    "airflow.retries": "retries per task",
    "airflow.retry_delay_minutes": "minutes between a task's retries",
    "airflow.timeout_minutes": "execution_timeout of every task, in minutes",
    "airflow.upkeep_schedule": "schedule of the upkeep DAG (compact, verify, expire)",
    "airflow.verify_sample": "entries the upkeep DAG's verify recomputes per table",
    "airflow.expire_older_than_hours": "the upkeep DAG's expire: index snapshots and unreferenced files older than "
    "this",
    "airflow.builds": 'one incremental build DAG per table (`[airflow.builds."ns.name"]`), with one of `schedule`, '
    "`every_minutes` or `asset`",
    "airflow.builds.*.schedule": "a cron expression or preset (`@hourly`)",
    "airflow.builds.*.every_minutes": "a fixed interval, in minutes",
    "airflow.builds.*.asset": "the URI of the source table's Airflow Asset, which the writer's DAG lists in its "
    "outlets",
    "serve": "the planning service (`skipindex serve`)",
    "serve.host": "address to bind; bind other addresses only behind a firewall or proxy",
    "serve.port": "port to listen on",
    "serve.token": "the bearer token itself (a secret, never printed); prefer `token_env`",
    "serve.token_env": "the environment variable holding the bearer token (at least 16 characters)",
    "serve.tasks_per_batch": "file scan tasks per response; the rest as plan tasks fetched from `tasks`",
    "serve.max_request_bytes": "larger request bodies are refused (413)",
    "serve.plans_kept": "plans whose further batches stay fetchable (the oldest forgotten first)",
    "serve.plans_kept_bytes": "at most this many bytes of kept plans' further batches (the oldest forgotten first; "
    "the newest plan is always kept)",
    "serve.handles_kept": "per plan worker: tables whose index handle (and its cache) stays open (the least recently "
    "used closed)",
    "serve.plan_workers": "processes that plan, so no plan holds up `/health` or another client's connection; 0 "
    "plans in the service's own process, in threads",
    "serve.max_header_bytes": "a longer request line and headers are refused (431, or h11's 400)",
    "serve.max_response_bytes": "a batch of tasks larger than this is split into further batches (at least 2 x "
    "max_request_bytes)",
    "serve.idle_timeout_seconds": "a connection with no request under way that sends nothing this long is closed",
    "serve.request_timeout_seconds": "a request not received whole this long after its first byte: 408, closed",
}

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _dotted(path: tuple[str, ...]) -> str:
    """A key path as TOML writes it: `index.tables."db.t".columns.c`."""
    return ".".join(part if _BARE_KEY.fullmatch(part) else f'"{part}"' for part in path)


def _check_shape(
    table: dict[str, Any], schema: dict[str, Any], path: tuple[str, ...], conf_path: Path, named: bool = False
) -> None:
    """UserError for the first key `schema` does not declare, a value that should be a table, or a nested table
    in a property table; messages name keys, never values. `named`: the table's own key is a name (`_ANY`)."""
    for key, value in table.items():
        where = (*path, key)
        expected = schema.get(key, schema.get(_ANY, ...))
        if expected is ...:
            raise UserError(f"config file {conf_path}: {_unknown_key(where, value, schema, named)}")
        if expected is None:
            if isinstance(value, dict):  # `master.x = ...`, `[build.split_bytes]`: a setting is one value
                raise UserError(f"config file {conf_path}: {_dotted(where)} must be a single value, not a table")
            continue
        if not isinstance(value, dict):
            raise UserError(f"config file {conf_path}: {_dotted(where)} must be a table, got a {type(value).__name__}")
        if expected == _PROPERTIES:
            _check_properties(value, where, conf_path)
        else:
            _check_shape(value, expected, where, conf_path, named=key not in schema)


def _unknown_key(where: tuple[str, ...], value: Any, schema: dict[str, Any], in_named: bool) -> str:
    parent, key = where[:-1], where[-1]
    what = "unknown section" if not parent else "unknown setting"
    if in_named and isinstance(value, dict):  # [index.tables.db.t]: TOML read the name's dot as a nesting
        return f'{_dotted(where)}: {what}; a name with a dot is quoted: {_dotted(parent[:-1])}."{parent[-1]}.{key}"'
    known = [name for name in schema if name != _ANY]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {_dotted((*parent, close[0]))}?" if close else f"expected one of {', '.join(known)}"
    return f"{_dotted(where)}: {what} ({hint})"


def _check_properties(props: dict[str, Any], where: tuple[str, ...], conf_path: Path) -> None:
    for key, value in props.items():
        if isinstance(value, dict):  # s3.secret-access-key = "..." unquoted: {"s3": {"secret-access-key": "..."}}
            dotted = ".".join((key, *_first_key_path(value)))
            raise UserError(
                f"config file {conf_path}: {_dotted(where)}: {dotted} is read by TOML as a nested table, which no "
                f'library sees; quote the key: "{dotted}" = ...'
            )
        if isinstance(value, list):
            raise UserError(f"config file {conf_path}: {_dotted((*where, key))} must be a single value, not an array")


def _first_key_path(table: dict[str, Any]) -> tuple[str, ...]:
    """The keys down to the first value in a nested table (none for an empty one)."""
    for key, value in table.items():
        return (key, *_first_key_path(value)) if isinstance(value, dict) else (key,)
    return ()


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
    _check_shape(raw, config_schema(), (), conf_path)

    catalog = dict(raw.get("catalog", {}))
    if not catalog:
        raise UserError(f"config file {conf_path} has no [catalog] table")
    name = str(catalog.pop("name", DEFAULT_CATALOG_NAME))
    props = {key: str(value) for key, value in catalog.items()}

    index = raw.get("index", {})
    spark = dict(raw.get("spark", {}))
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
    row_groups = _checked_row_groups(index, "index", conf_path)
    for table_name, raw_table in table_settings.items():
        _checked_row_groups(raw_table, f'index.tables."{table_name}"', conf_path)
    return Config(
        path=conf_path,
        catalog_name=name,
        catalog_properties=_resolve_relative(
            props, data_home() if conf_path == PACKAGED_CONF_PATH else conf_path.parent
        ),
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
        row_groups=row_groups,
        table_settings=table_settings,
        airflow=_airflow_settings(raw.get("airflow", {}), conf_path),
        serve=_serve_settings(raw.get("serve", {}), conf_path),
    )


def _serve_settings(raw: dict[str, Any], conf_path: Path) -> ServeSettings:
    for name in ("host", "token", "token_env"):  # messages name the setting, never the token's value
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UserError(f"config file {conf_path}: serve.{name} must be a non-empty string")
    defaults = ServeSettings()
    port = _positive_int(raw, "port", defaults.port, conf_path, "serve", least=0)
    if port > 65535:
        raise UserError(f"config file {conf_path}: serve.port must be at most 65535, got {port}")
    max_request = _positive_int(raw, "max_request_bytes", defaults.max_request_bytes, conf_path, "serve")
    max_response = _positive_int(raw, "max_response_bytes", defaults.max_response_bytes, conf_path, "serve")
    if max_response < 2 * max_request:  # one task (a file and the request's filter as its residual) always fits
        raise UserError(
            f"config file {conf_path}: serve.max_response_bytes must be at least twice serve.max_request_bytes "
            f"({2 * max_request}), got {max_response}"
        )
    return ServeSettings(
        host=str(raw.get("host", defaults.host)),
        port=port,
        token=raw.get("token"),
        token_env=str(raw.get("token_env", defaults.token_env)),
        tasks_per_batch=_positive_int(raw, "tasks_per_batch", defaults.tasks_per_batch, conf_path, "serve"),
        max_request_bytes=max_request,
        plans_kept=_positive_int(raw, "plans_kept", defaults.plans_kept, conf_path, "serve"),
        plans_kept_bytes=_positive_int(raw, "plans_kept_bytes", defaults.plans_kept_bytes, conf_path, "serve"),
        handles_kept=_positive_int(raw, "handles_kept", defaults.handles_kept, conf_path, "serve"),
        plan_workers=_positive_int(raw, "plan_workers", defaults.plan_workers, conf_path, "serve", least=0),
        max_header_bytes=_positive_int(raw, "max_header_bytes", defaults.max_header_bytes, conf_path, "serve", 1024),
        max_response_bytes=max_response,
        idle_timeout_seconds=_positive_int(
            raw, "idle_timeout_seconds", defaults.idle_timeout_seconds, conf_path, "serve"
        ),
        request_timeout_seconds=_positive_int(
            raw, "request_timeout_seconds", defaults.request_timeout_seconds, conf_path, "serve"
        ),
    )


def _positive_int(
    section: dict[str, Any], name: str, default: int, conf_path: Path, where: str = "build", least: int = 1
) -> int:
    value = section.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise UserError(f"config file {conf_path}: {where}.{name} must be an integer >= {least}, got {value!r}")
    return value


def _airflow_settings(raw: dict[str, Any], conf_path: Path) -> AirflowSettings:
    builds = []
    for table, section in dict(raw.get("builds", {})).items():
        where = f'airflow.builds."{table}"'
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


def _row_groups_mode(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "auto":
        return "auto"
    raise ValueError(f'expected true, false or "auto", got {value!r}')


def _checked_row_groups(raw: dict[str, Any], where: str, conf_path: Path) -> str:
    try:
        return _row_groups_mode(raw.get("row_groups", False))
    except ValueError as exc:
        raise UserError(f"config file {conf_path}: {where}.row_groups: {exc}") from None


def _index_settings(index: dict[str, Any], conf_path: Path) -> tuple[IndexSettings, dict[str, dict[str, Any]]]:
    """Defaults from `[index]`, per-table tables from `[index.tables."ns.name"]`, all validated now."""
    known = {"namespace", "tables", "row_groups", *setting_names()}
    try:
        defaults = parse_settings(
            {k: v for k, v in index.items() if k in known - {"namespace", "tables", "row_groups"}},
            IndexSettings(),
            "index",
        )
        tables = dict(index.get("tables", {}))
        for table, raw in tables.items():
            where = f'index.tables."{table}"'
            if not isinstance(raw, dict):
                raise ValueError(f"{where}: expected a table of settings")
            table_wide = parse_settings(
                {k: v for k, v in raw.items() if k not in ("columns", "row_groups")}, defaults, where
            )
            for column, column_raw in dict(raw.get("columns", {})).items():
                if not isinstance(column_raw, dict):
                    raise ValueError(f"{where}.columns.{column}: expected a table of settings")
                parse_settings(column_raw, table_wide, f"{where}.columns.{column}")
    except ValueError as exc:
        raise UserError(f"config file {conf_path}: {exc}") from None
    return defaults, tables
