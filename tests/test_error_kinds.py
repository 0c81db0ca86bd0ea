"""Failures have kinds (indexlib/errors.py), and each kind reaches the caller as the kind says: the command line's exit
code, and whether the commit protocol retries. Every case is caused for real: a real SQLite catalog, a real index
table, a real locked database, a table with a real equality delete file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy
from iceberg_tables import commit_equality_delete
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, NoSuchTableError

import indexlib.store.table as store_table
from indexlib.cli import CommandFailed, main, run_or_raise
from indexlib.errors import CommitConflict, UserError
from indexlib.indexing.build import build_index
from indexlib.store.table import IndexTable

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("tag", pa.string())])


@pytest.fixture
def indexed(config, catalog) -> IndexTable:
    table = catalog.create_table("db.small", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "tag": ["a", "b", None]}, schema=SCHEMA))
    build_index(config, "db.small")
    return IndexTable(catalog, config.index_namespace, "db.small")


def _locked_sqlite(tmp_path: Path) -> Exception:
    """What SQLAlchemy raises when another connection holds SQLite's write lock: the SQL catalog's lost race."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    engine = sqlalchemy.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
    try:
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text("INSERT INTO t VALUES (1)"))
    except sqlalchemy.exc.OperationalError as exc:
        return exc
    finally:
        holder.rollback()
        holder.close()
        engine.dispose()
    raise AssertionError("the write lock was not held")


def _missing_sqlite_table() -> Exception:
    """An SQLite error that is no race: the same exception type, another cause."""
    engine = sqlalchemy.create_engine("sqlite://")
    try:
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text("SELECT * FROM no_such_table"))
    except sqlalchemy.exc.OperationalError as exc:
        return exc
    raise AssertionError("the query succeeded")


RACES: list[tuple[str, Callable[[Path], Exception]]] = [
    ("the catalog's conflict check", lambda _: CommitFailedException("requirement failed: branch main has changed")),
    ("an unknown commit outcome", lambda _: CommitStateUnknownException("timed out")),
    ("SQLite's write lock held by another writer", _locked_sqlite),
]
NOT_RACES: list[tuple[str, Callable[[Path], Exception]]] = [
    ("a missing table", lambda _: NoSuchTableError("db.gone")),
    ("an SQLite error that is not a lock", lambda _: _missing_sqlite_table()),
    ("a bug", lambda _: ValueError("bad value")),
]


@pytest.mark.parametrize(("what", "make"), RACES, ids=[w for w, _ in RACES])
def test_a_lost_commit_race_is_retried_on_the_reloaded_table(indexed, tmp_path, what, make) -> None:
    failure = make(tmp_path)
    attempts: list[object] = []

    def attempt(table: object) -> str:
        attempts.append(table)
        if len(attempts) == 1:
            raise failure
        return "committed"

    assert indexed._retrying(attempt) == "committed", f"{what}: retried until it commits"
    assert len(attempts) == 2 and attempts[0] is not attempts[1], f"{what}: each attempt on the table reloaded"


@pytest.mark.parametrize(("what", "make"), NOT_RACES, ids=[w for w, _ in NOT_RACES])
def test_a_failure_that_is_no_race_is_raised_at_once(indexed, tmp_path, what, make) -> None:
    failure = make(tmp_path)
    attempts: list[object] = []

    def attempt(table: object) -> None:
        attempts.append(table)
        raise failure

    with pytest.raises(type(failure)) as raised:
        indexed._retrying(attempt)
    assert raised.value is failure and len(attempts) == 1, f"{what}: not retried, raised as it is"


def test_races_lost_on_every_attempt_end_in_a_retryable_commit_conflict(indexed, monkeypatch) -> None:
    monkeypatch.setattr(store_table, "COMMIT_ATTEMPTS", 3)
    attempts: list[object] = []

    def attempt(table: object) -> None:
        attempts.append(table)
        raise CommitFailedException("requirement failed: branch main has changed")

    with pytest.raises(CommitConflict, match=r"gave up after 3 conflicting commits: requirement failed") as raised:
        indexed._retrying(attempt)
    assert len(attempts) == 3
    assert isinstance(raised.value.__cause__, CommitFailedException), "the last lost race is the cause"
    assert (raised.value.exit_code, raised.value.retryable, raised.value.http_status) == (75, True, 409)


def test_a_table_with_equality_deletes_is_explained_like_any_other(conf_path, config, catalog, capsys) -> None:
    """Equality delete files are matched to the data files they apply to, not refused (exit code 3 before): the
    live files are listed from the snapshot's manifests, which pyiceberg's planning refuses to plan."""
    table = catalog.create_table("db.upserts", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "tag": ["a", "b", "c"]}, schema=SCHEMA))
    commit_equality_delete(table, 2)
    build_index(config, "db.upserts")
    code = main(["explain", "--conf", str(conf_path), "--table", "db.upserts", "--where", "id = 2", "--json"])
    assert code == 0, capsys.readouterr().err
    assert len(json.loads(capsys.readouterr().out)["files"]) == 1, "the file that held id 2 is kept (unknown: keep)"


def test_bad_input_is_exit_code_2_and_not_retryable(conf_path, indexed, capsys) -> None:
    code = main(["explain", "--conf", str(conf_path), "--table", "db.small", "--where", "nope = 1"])
    assert code == UserError.exit_code == 2 and "unknown column 'nope'" in capsys.readouterr().err
    with pytest.raises(CommandFailed, match="unknown column 'nope'") as failed:
        run_or_raise(["explain", "--conf", str(conf_path), "--table", "db.small", "--where", "nope = 1"])
    assert not failed.value.retryable


def test_equality_deletes_older_than_every_data_file_delete_nothing_and_are_not_refused(config, catalog) -> None:
    """A delete manifest written before the oldest data file's sequence number applies to no data file (pyiceberg
    skips it when it plans, so do we): the table is readable."""
    table = catalog.create_table("db.rewritten", schema=SCHEMA)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "tag": ["a", "b"]}, schema=SCHEMA))
    commit_equality_delete(table, 2)
    table = catalog.load_table("db.rewritten")
    table.append(pa.table({"id": pa.array([5], pa.int64()), "tag": ["e"]}, schema=SCHEMA))
    assert build_index(config, "db.rewritten").files_indexed == 2, "the first file predates the delete"
    with table.transaction() as transaction:  # every data file rewritten after the delete
        transaction.overwrite(pa.table({"id": pa.array([1, 5], pa.int64()), "tag": ["a", "e"]}, schema=SCHEMA))
    table = catalog.load_table("db.rewritten")
    assert table.inspect.delete_files().num_rows == 1, "the equality delete file is still live"
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 5], "pyiceberg plans it"
    assert build_index(config, "db.rewritten").files_indexed == 1
