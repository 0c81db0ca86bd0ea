"""Relative catalog paths as a newcomer writes them: one rule (against the configuration file's folder), read-only
commands that never create a catalog file, and an unknown-table error that names the catalog it looked in and what
that catalog holds. Real SQLite catalogs made with pyiceberg in temporary folders; the CLI run through its `main`."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from indexlib.cli import main
from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.lookup import lookup
from indexlib.sources.iceberg import SEEN_TABLES_SHOWN

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A user's project: `catalog.db` made with pyiceberg from the project folder (`sqlite:///catalog.db`, so
    relative to the working directory there), holding db.events; configuration files go in `conf/`."""
    root = tmp_path_factory.mktemp("project")
    catalog = load_catalog("lake", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
    catalog.create_namespace("db")
    catalog.create_table("db.events", schema=SCHEMA).append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    (root / "conf").mkdir()
    return root


def _conf(project: Path, uri: str, name: str) -> Path:
    path = project / "conf" / f"{name}.toml"
    path.write_text(f'[catalog]\nname = "lake"\ntype = "sql"\nuri = "{uri}"\nwarehouse = "../wh"\n')
    return path


CASES = [
    # (uri in conf/*.toml, command, exit code, what stderr's one line says, rule)
    (
        "sqlite:///catalog.db",
        "explain",
        2,
        "SQLite file {project}/conf/catalog.db does not exist (relative paths in [catalog] warehouse and a "
        "sqlite:/// uri resolve against the configuration file's folder); nothing was created",
        "a relative SQLite path resolves against the conf file's folder, and explain names the resolved path",
    ),
    (
        "sqlite:///catalog.db",
        "stats",
        2,
        "SQLite file {project}/conf/catalog.db does not exist",
        "stats is read-only too: the same error, no file created",
    ),
    *(
        (
            "sqlite:///catalog.db",
            upkeep,
            2,
            "SQLite file {project}/conf/catalog.db does not exist",
            f"{upkeep} works on index tables that exist: the same error, no file created",
        )
        for upkeep in ("verify", "compact", "expire")
    ),
    (
        "sqlite:///../catalog.db",
        "explain",
        0,
        "",
        "the same catalog named relative to the conf file's folder is found",
    ),
    (
        "sqlite:///{project}/catalog.db",
        "explain",
        0,
        "",
        "an absolute path is used as written",
    ),
]


@pytest.mark.parametrize(("uri", "command", "code", "message", "rule"), CASES)
def test_relative_catalog_paths_resolve_against_the_conf_files_folder(
    project, capsys, uri, command, code, message, rule
):
    conf = _conf(project, uri.format(project=project), f"{command}-{code}")
    args = [command, "--conf", str(conf), "--table", "db.events"]
    done = main(args + (["--where", "id = 1"] if command == "explain" else []))
    err = capsys.readouterr().err
    assert done == code, f"{rule}: {err}"
    if code:
        assert err.count("\n") == 1 and err.startswith("skipindex: error: "), f"{rule}: one line on stderr: {err}"
        assert message.format(project=project) in err, rule
    assert not (project / "conf" / "catalog.db").exists(), f"{rule}: no catalog file created beside the conf file"


def test_a_lookup_from_python_follows_the_same_rule_and_creates_nothing(project):
    config = load_config(_conf(project, "sqlite:///catalog.db", "python"))
    with pytest.raises(UserError, match=r"conf/catalog\.db does not exist") as raised:
        lookup(config, "db.events", "id = 1")
    assert "configuration file's folder" in str(raised.value), "the error states the path rule"
    assert not (project / "conf" / "catalog.db").exists(), "a lookup never creates a catalog"
    assert config.load_catalog(create=True).list_namespaces() == [], "a writer's open still creates the catalog"
    (project / "conf" / "catalog.db").unlink()


def test_an_unknown_table_names_the_resolved_catalog_and_what_it_holds(project, capsys):
    conf = _conf(project, "sqlite:///../catalog.db", "unknown")
    assert main(["explain", "--conf", str(conf), "--table", "db.event", "--where", "id = 1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, f"one line: {err}"
    assert f"unknown table 'db.event' in catalog 'lake' at sqlite:///{project}/catalog.db" in err, err
    assert "namespaces: db; tables: db.events;" in err, f"the tables the catalog holds are listed: {err}"
    assert "configuration file's folder" in err, "the path rule is stated"


def test_the_tables_listed_in_an_unknown_table_error_are_capped(tmp_path, capsys):
    catalog = load_catalog("many", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    for n in range(SEEN_TABLES_SHOWN + 5):
        catalog.create_table(f"db.t{n:02d}", schema=SCHEMA)
    conf = tmp_path / "c.toml"
    conf.write_text('[catalog]\nname = "many"\ntype = "sql"\nuri = "sqlite:///c.db"\nwarehouse = "wh"\n')
    assert main(["stats", "--conf", str(conf), "--table", "db.nope"]) == 2
    err = capsys.readouterr().err
    listed = err.split("tables: ", 1)[1].split(";", 1)[0].split(", ")
    assert listed == [f"db.t{n:02d}" for n in range(SEEN_TABLES_SHOWN)] + ["..."], f"at most the first few: {err}"
