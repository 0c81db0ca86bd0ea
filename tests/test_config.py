"""The configuration file: which file is read (--conf, $SKIPINDEX_CONF, ./conf/local.toml, the packaged default),
where the packaged default keeps its data, and a file that does not match the declared schema failing with one line
that names the key and the closest valid one. Real files, the real loader, the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexlib.config import CONF_ENV, HOME_ENV, PACKAGED_CONF_PATH, data_home, find_config, load_config
from indexlib.errors import UserError

SKIPINDEX = str(Path(sys.executable).with_name("skipindex"))
CATALOG = '[catalog]\nname = "c"\ntype = "sql"\nuri = "sqlite:///cat.db"\nwarehouse = "wh"\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[bild]\nsplit_bytes = 1\n", "bild: unknown section (did you mean build?)"),
        ("[build]\nsplit_byte = 1\n", "build.split_byte: unknown setting (did you mean build.split_bytes?)"),
        ('[spark]\nmastr = "local[1]"\n', "spark.mastr: unknown setting (did you mean spark.master?)"),
        ('[lookup]\ntimezone = "UTC"\n', "lookup.timezone: unknown setting (did you mean lookup.time_zone?)"),
        (
            '[delta.storage_option]\nAWS_REGION = "eu-west-1"\n',
            "delta.storage_option: unknown setting (did you mean delta.storage_options?)",
        ),
        ("[index]\nbloom_fp = 0.1\n", "index.bloom_fp: unknown setting (did you mean index.bloom_fpp?)"),
        (
            '[index.tables."db.t"]\nkind = ["bloom"]\n',
            'index.tables."db.t".kind: unknown setting (did you mean index.tables."db.t".kinds?)',
        ),
        (
            '[index.tables."db.t".columns.c]\nautomaton_max_state = 3\n',
            'index.tables."db.t".columns.c.automaton_max_state: unknown setting (did you mean '
            'index.tables."db.t".columns.c.automaton_max_states?)',
        ),
        (
            '[airflow]\nschedule = "@daily"\n',
            "airflow.schedule: unknown setting (did you mean airflow.upkeep_schedule?)",
        ),
        (
            '[airflow.builds."db.t"]\nschedul = "@daily"\n',
            'airflow.builds."db.t".schedul: unknown setting (did you mean airflow.builds."db.t".schedule?)',
        ),
        ('namespace = "x"\n', "namespace: unknown section (expected one of catalog, index, build,"),
        (
            "[index.tables.db.t]\nkinds = []\n",
            'index.tables.db.t: unknown setting; a name with a dot is quoted: index.tables."db.t"',
        ),
        ("build = 5\n", "build must be a table, got a int"),
        ('[spark]\nmaster.url = "local[1]"\n', "spark.master must be a single value, not a table"),
        ("[build.split_bytes]\nvalue = 1\n", "build.split_bytes must be a single value, not a table"),
    ],
)
def test_a_key_the_schema_does_not_declare_is_one_line_naming_it_and_the_closest_valid_one(tmp_path, body, message):
    conf = tmp_path / "conf.toml"
    conf.write_text(f"{body}\n{CATALOG}")
    with pytest.raises(UserError) as exc:
        load_config(conf)
    assert str(exc.value).startswith(f"config file {conf}: {message}"), f"the load fails naming the key: {exc.value}"
    assert "\n" not in str(exc.value), "one line"


@pytest.mark.parametrize(
    ("section", "line", "quoted"),
    [
        ("[catalog]", 's3.secret-access-key = "NESTED-SECRET-1"', '"s3.secret-access-key" = ...'),
        ("[catalog.s3]", 'secret-access-key = "NESTED-SECRET-1"', '"s3.secret-access-key" = ...'),
        (
            "[spark.options]",
            'spark.hadoop.fs.s3a.secret.key = "NESTED-SECRET-1"',
            '"spark.hadoop.fs.s3a.secret.key" = ...',
        ),
        ("[delta.storage_options]", 'azure.account.key = "NESTED-SECRET-1"', '"azure.account.key" = ...'),
    ],
)
def test_an_unquoted_dotted_property_is_one_line_showing_the_quoted_form_and_never_the_value(
    tmp_path, section, line, quoted
):
    conf = tmp_path / "conf.toml"
    conf.write_text(f"{CATALOG}{line}\n" if section == "[catalog]" else f"{CATALOG}\n{section}\n{line}\n")
    with pytest.raises(UserError) as exc:
        load_config(conf)
    message = str(exc.value)
    assert quoted in message, f"TOML nests an unquoted dotted key: the error shows how to quote it: {message}"
    assert "NESTED-SECRET-1" not in message and "\n" not in message, f"one line, no value: {message}"


@pytest.mark.parametrize(
    ("given", "env", "local", "expected", "rule"),
    [
        ("given.toml", "env.toml", True, "given.toml", "--conf wins over everything"),
        (None, "env.toml", True, "env.toml", "then $SKIPINDEX_CONF"),
        (None, None, True, "conf/local.toml", "then ./conf/local.toml, when present"),
        (None, None, False, str(PACKAGED_CONF_PATH), "then the packaged default"),
        (None, "", False, str(PACKAGED_CONF_PATH), "an empty $SKIPINDEX_CONF is unset"),
    ],
)
def test_which_config_file_is_read(tmp_path, monkeypatch, given, env, local, expected, rule):
    monkeypatch.chdir(tmp_path)
    for name in ("given.toml", "env.toml", *(["conf/local.toml"] if local else [])):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(CATALOG)
    if env is None:
        monkeypatch.delenv(CONF_ENV, raising=False)
    else:
        monkeypatch.setenv(CONF_ENV, env)
    assert str(find_config(given)) == expected, rule


@pytest.mark.parametrize(
    ("given", "env", "message", "rule"),
    [
        ("missing.toml", None, "config file not found: missing.toml", "a given path must exist: no fallback"),
        (
            None,
            "missing.toml",
            "config file not found: missing.toml (looked at: --conf (not given); $SKIPINDEX_CONF=missing.toml "
            "(no such file))",
            "a path in $SKIPINDEX_CONF must exist: no fallback to another catalog",
        ),
    ],
)
def test_a_config_file_not_found_lists_every_place_looked_at(tmp_path, monkeypatch, given, env, message, rule):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONF_ENV, raising=False)
    if env is not None:
        monkeypatch.setenv(CONF_ENV, env)
    with pytest.raises(UserError) as raised:
        load_config(given)
    assert str(raised.value) == message, rule


@pytest.mark.parametrize(
    ("env", "expected", "rule"),
    [
        ({HOME_ENV: "{tmp}/sk", "XDG_DATA_HOME": "{tmp}/xdg"}, "{tmp}/sk", "$SKIPINDEX_HOME first"),
        ({"XDG_DATA_HOME": "{tmp}/xdg"}, "{tmp}/xdg/skipindex", "then $XDG_DATA_HOME/skipindex"),
        ({"XDG_DATA_HOME": "relative/xdg"}, "{tmp}/home/.local/share/skipindex", "a relative XDG path is ignored"),
        ({}, "{tmp}/home/.local/share/skipindex", "then ~/.local/share/skipindex"),
    ],
)
def test_where_the_packaged_default_keeps_its_data(tmp_path, monkeypatch, env, expected, rule):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in (HOME_ENV, "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    assert data_home() == Path(expected.format(tmp=tmp_path)), rule


def test_the_packaged_default_works_from_any_directory(tmp_path):
    """No --conf, no $SKIPINDEX_CONF, no ./conf/local.toml: the console script reads the packaged default, and its
    catalog lives under the data location, not under the working directory."""
    empty, home = tmp_path / "empty", tmp_path / "home"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (CONF_ENV, HOME_ENV, "XDG_DATA_HOME")}
    done = subprocess.run(
        [SKIPINDEX, "stats", "--table", "db.nope"],
        cwd=empty,
        env={**env, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    catalog = home / ".local/share/skipindex/catalog.db"
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert f"SQLite file {catalog} does not exist" in done.stderr, "the catalog is under the data location"
    assert not catalog.exists(), "a read-only command creates no catalog"
    assert not any(empty.iterdir()), "nothing is written to the working directory"


# ---- [index] row_groups (row-group entries, format 5) --------------------------------------------------------------

ROW_GROUP_TABLES = '[index.tables."db.t"]\nrow_groups = {table}\n'


@pytest.mark.parametrize(
    ("index", "table", "expected", "other", "rule"),
    [
        (None, None, "false", "false", "unset: no row-group entries"),
        ("true", None, "true", "true", "[index] row_groups = true: every table"),
        ("false", None, "false", "false", "false is the default spelled out"),
        ('"auto"', None, "auto", "auto", '"auto": the indexer decides per file'),
        ("true", "false", "false", "true", "a table's own value wins over [index]'s; other tables keep [index]'s"),
        (None, '"auto"', "auto", "false", "a table may turn them on alone"),
        ('"auto"', "true", "true", "auto", "per table true over [index] auto"),
    ],
)
def test_row_groups_is_true_false_or_auto_per_table_falling_back_to_index(
    tmp_path, index, table, expected, other, rule
):
    conf = tmp_path / "conf.toml"
    body = CATALOG + ("[index]\n" + (f"row_groups = {index}\n" if index else ""))
    body += ROW_GROUP_TABLES.format(table=table) if table else ""
    conf.write_text(body)
    config = load_config(conf)
    assert config.row_groups_for("db.t") == expected, f"{rule}: db.t"
    assert config.row_groups_for("db.other") == other, f"{rule}: a table without its own value"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[index]\nrow_groups = "yes"\n', "index.row_groups: expected true, false or \"auto\", got 'yes'"),
        ("[index]\nrow_groups = 1\n", 'index.row_groups: expected true, false or "auto", got 1'),
        ('[index]\nrow_groups = "true"\n', "index.row_groups: expected true, false or \"auto\", got 'true'"),
        (
            '[index.tables."db.t"]\nrow_groups = "Auto"\n',
            'index.tables."db.t".row_groups: expected true, false or "auto", got \'Auto\'',
        ),
        (
            '[index.tables."db.t".columns.c]\nrow_groups = true\n',
            'index.tables."db.t".columns.c.row_groups: unknown setting',
        ),
        ("[index]\nrow_group = true\n", "index.row_group: unknown setting (did you mean index.row_groups?)"),
    ],
)
def test_a_bad_row_groups_value_is_one_line_naming_the_key(tmp_path, body, message):
    conf = tmp_path / "conf.toml"
    conf.write_text(f"{CATALOG}{body}")
    with pytest.raises(UserError) as exc:
        load_config(conf)
    assert str(exc.value).startswith(f"config file {conf}: {message}"), f"the load fails naming the key: {exc.value}"
    assert "\n" not in str(exc.value), "one line"


def test_row_groups_is_not_a_column_setting_and_changes_the_configuration_version_unless_false(tmp_path):
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from indexlib.indexing.file_indexer import config_version

    conf = tmp_path / "conf.toml"
    conf.write_text(CATALOG + '[index]\nbloom_fpp = 0.05\n[index.tables."db.t"]\nrow_groups = true\nkinds = []\n')
    config = load_config(conf)
    settings = config.column_settings("db.t", Schema(NestedField(1, "k", LongType())))
    assert settings[1].kinds == (), "the table's other settings still apply to its columns"
    versions = {mode: config_version(settings, mode) for mode in ("false", "true", "auto")}
    assert versions["false"] == config_version(settings), (
        "entries built before row-group entries existed stay current while row_groups is false"
    )
    assert len(set(versions.values())) == 3, "turning row_groups on (or to auto) makes a backfill rebuild entries"


def test_a_loaded_configuration_pickles_as_the_service_hands_it_to_its_plan_workers(tmp_path):
    """`skipindex serve` spawns its plan workers with the configuration (service/workers.py): it must pickle and come
    back equal, every section included, with index settings set in the file."""
    import pickle

    conf = tmp_path / "conf.toml"
    conf.write_text(
        '[catalog]\nname = "lake"\ntype = "sql"\nuri = "sqlite:///catalog.db"\n'
        '[index]\nnamespace = "idx"\nrow_groups = "auto"\nbloom_fpp = 0.02\n'
        '[index.tables."db.t".columns.id]\nkinds = ["bloom"]\n'
    )
    config = load_config(conf)
    again = pickle.loads(pickle.dumps(config))
    assert again == config, "the plan workers read the configuration the service loaded"
    assert (again.index_namespace, again.index.row_groups) == ("idx", "auto")
