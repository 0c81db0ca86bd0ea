"""The one rule of a lookup, through the turns of a table's life that move it away from what the index last saw:
a rollback after the index was compacted or backfilled, a handle made from a stale table object, column renames
(schema-only commits, no new snapshot), a compaction of the index under a held handle.

    A lookup never skips a live data file holding a matching row, never returns a file that is not live, and
    claims "all match" only for files where every row matches; `files_total` counts the live files.

Each test replays one sequence on real tables (Iceberg through the SQLite catalog, Delta through delta-rs where the
sequence exists there) with a real Spark build, and checks every answer, of a one-off lookup and of a held handle,
against the rows of every live file, read from the files."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from lakes import Lake, live_rows
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StringType

from indexlib.handle import IndexHandle, open_handle
from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact
from indexlib.lookup import LookupResult, lookup
from indexlib.query.sql import Clock
from indexlib.store.table import IndexTable

CLOCK = Clock()
ROWS_PER_FILE = 20
BATCH_SCHEMA = pa.schema([("id", pa.int64()), ("service", pa.string())])
Row = dict
Matches = Callable[[Row], bool]
# (predicate, the same as a function of one row; None is SQL NULL, which never matches)
ID_QUERIES: list[tuple[str, Matches]] = [
    ("id = 5", lambda r: r["id"] == 5),
    ("id >= 0", lambda r: r["id"] is not None and r["id"] >= 0),
    ("id = 45", lambda r: r["id"] == 45),
    ("id < 30", lambda r: r["id"] is not None and r["id"] < 30),
    ("id >= 40", lambda r: r["id"] is not None and r["id"] >= 40),
    ("service = 'svc0'", lambda r: r["service"] == "svc0"),
]


def _batch(start: int) -> pa.Table:
    """One data file's rows: ids start .. start + 19, one service name per file."""
    ids = range(start, start + ROWS_PER_FILE)
    return pa.Table.from_pylist([{"id": i, "service": f"svc{start}"} for i in ids], schema=BATCH_SCHEMA)


def _names(paths: set[str]) -> list[str]:
    return sorted(path.rsplit("/", 1)[-1] for path in paths)


def _violations(result: LookupResult, rows: dict[str, list[Row]], where: str, matches: Matches, who: str) -> list[str]:
    """Each way `result` breaks the rule against the rows of every live file (`rows`: live path -> its rows)."""
    files, all_match = set(result.files), set(result.all_match)
    truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
    every = {path for path, file_rows in rows.items() if file_rows and all(matches(r) for r in file_rows)}
    problems = []
    if not truth <= files:
        problems.append(f"{who} {where!r} skipped a live file holding a matching row: {_names(truth - files)}")
    if not files <= set(rows):
        problems.append(f"{who} {where!r} returned a file that is not live: {_names(files - set(rows))}")
    wrong = (all_match & set(rows)) - every  # a file that is not live is reported above
    if wrong:
        problems.append(f"{who} {where!r} claimed all-match where not every row matches: {_names(wrong)}")
    if result.summary["files_total"] != len(rows):
        problems.append(
            f"{who} {where!r}: files_total {result.summary['files_total']} is not the {len(rows)} live files"
        )
    return problems


def _check(
    config,
    name: str,
    step: str,
    handle: IndexHandle | None = None,
    queries: list[tuple[str, Matches]] = ID_QUERIES,
    rows: dict[str, list[Row]] | None = None,
) -> dict[str, LookupResult]:
    """Every query, one-off and through `handle`, obeys the rule, and the handle answers as the one-off lookup
    (`rows`: every live file's rows; default: read now)."""
    rows = rows if rows is not None else live_rows(config, name)
    problems, answers = [], {}
    for where, matches in queries:
        fresh = lookup(config, name, where, CLOCK)
        problems += _violations(fresh, rows, where, matches, "a one-off lookup of")
        answers[where] = fresh
        if handle is not None:
            try:
                held = handle.lookup(where, CLOCK)
            except Exception as exc:  # e.g. a column the handle does not know
                problems.append(f"a held handle's lookup of {where!r} answers as a one-off lookup does, not: {exc}")
                continue
            problems += _violations(held, rows, where, matches, "a held handle's lookup of")
            if (held.files, held.all_match, held.summary) != (fresh.files, fresh.all_match, fresh.summary):
                problems.append(f"a held handle answers {where!r} as a one-off lookup does: {held.summary}")
    assert not problems, f"after {step}:\n" + "\n".join(problems)
    return answers


def _file_holding(config, name: str, value: int) -> str:
    return next(path for path, rows in live_rows(config, name).items() if any(r["id"] == value for r in rows))


def _indexed(config, name: str) -> set[str]:
    return IndexTable(config.load_catalog(), config.index_namespace, name).indexed_paths()


def _roll_back(lake: Lake, version: int) -> None:
    """Make `version` current again: Iceberg moves the main branch back to that snapshot (no new snapshot), Delta
    commits a restore (a new version with the files of that one)."""
    if lake.kind == "iceberg":
        lake.iceberg.manage_snapshots().rollback_to_snapshot(version).commit()
    else:
        DeltaTable(lake.name).restore(version)


@pytest.fixture(params=["iceberg", "delta"])
def lake(request, catalog, tmp_path) -> Lake:
    return Lake(request.param, catalog, tmp_path, "life")


def test_a_file_brought_back_by_a_rollback_after_compact_is_returned_and_indexed_again(config, lake, spark):
    for start in (0, 20, 40):
        lake.append(_batch(start))
    build_index(config, lake.name, spark)
    watermark = lake.version()
    handle = open_handle(config, lake.name)
    _check(config, lake.name, "the build", handle)
    brought_back = _file_holding(config, lake.name, 5)

    lake.delete("id < 20")  # the whole of file F
    assert brought_back not in live_rows(config, lake.name)
    _check(config, lake.name, "the delete of F", handle)
    compact(config, lake.name)  # the index compacted while F is not live
    _check(config, lake.name, "the index compaction", handle)
    _roll_back(lake, watermark)
    assert brought_back in live_rows(config, lake.name), "the rollback makes F live again"
    answers = _check(config, lake.name, "a rollback to the build's version, F live again", handle)
    assert brought_back in answers["id = 5"].files and brought_back in answers["id >= 0"].files

    built = build_index(config, lake.name, spark)
    assert brought_back in _indexed(config, lake.name), (
        f"a build after the rollback indexes F again, live and without an entry ({built.message()})"
    )
    _check(config, lake.name, "the build after the rollback", handle)
    lake.append(_batch(60))
    _check(config, lake.name, "an append after it", handle)
    build_index(config, lake.name, spark)
    _check(config, lake.name, "the build after the append", handle)
    assert _indexed(config, lake.name) == set(live_rows(config, lake.name)), "every live file indexed, nothing else"


def test_a_file_a_rollback_removed_after_a_backfill_is_never_returned(config, lake, spark):
    for start in (0, 20):
        lake.append(_batch(start))
    build_index(config, lake.name, spark)
    watermark = lake.version()
    handle = open_handle(config, lake.name)
    _check(config, lake.name, "the build", handle)

    lake.append(_batch(40))  # file G, holding 45
    gone = _file_holding(config, lake.name, 45)
    backfill(config, lake.name, spark=spark)  # indexes G, keeping the watermark
    _check(config, lake.name, "the backfill of G", handle)
    _roll_back(lake, watermark)
    assert gone not in live_rows(config, lake.name), "the rollback removes G"
    answers = _check(config, lake.name, "a rollback to the build's version, G gone", handle)
    assert gone not in answers["id = 45"].files and answers["id = 45"].summary["files_total"] == 2

    lake.append(_batch(60))
    _check(config, lake.name, "an append after the rollback", handle)
    build_index(config, lake.name, spark)
    _check(config, lake.name, "the build after it", handle)
    lake.append(_batch(80))
    build_index(config, lake.name, spark)
    _check(config, lake.name, "another append and build", handle)
    assert _indexed(config, lake.name) == set(live_rows(config, lake.name)), "every live file indexed, nothing else"


def test_a_handle_made_from_a_table_object_answers_its_first_lookup_for_the_current_state(
    config, catalog, tmp_path, spark
):
    lake = Lake("iceberg", catalog, tmp_path, "life")
    table = catalog.load_table(lake.name)  # the caller's object, loaded while the table is empty
    handle = IndexHandle.for_iceberg(table, index_namespace=config.index_namespace)
    lake.append(_batch(0))  # committed through another object: `table` still knows no snapshot
    lake.append(_batch(20))
    build_index(config, lake.name, spark)

    first = handle.lookup("id = 7", CLOCK)
    holding = _file_holding(config, lake.name, 7)
    assert (first.files, first.summary["files_total"]) == ([holding], 2), (
        "a handle's first lookup answers for the table's current state (the file holding 7, of 2 live files), "
        f"not for the state of the object it was made from: {first.files}, {first.summary}"
    )
    _check(config, lake.name, "two appends and a build after the handle was made", handle)


SWAP_SCHEMA = Schema(
    NestedField(1, "a", StringType()), NestedField(2, "b", StringType()), NestedField(3, "c", StringType())
)


def _letters(n: int, rows: int = 10) -> pa.Table:
    """File n: a = 'a<n>', b = 'b<n>', c = 'c<n>' on every row."""
    return pa.table({name: [f"{name}{n}"] * rows for name in ("a", "b", "c")})


def _rows_by_field_id(config, name: str) -> dict[str, list[Row]]:
    """Every live file's rows under the table's current column names: a file keeps the names it was written with,
    its columns' field ids say which column each is now."""
    table = config.load_catalog().load_table(name)
    by_id = {f.field_id: f.name for f in table.schema().fields}
    rows = {}
    for task in table.scan().plan_files():
        data = pq.read_table(task.file.file_path.removeprefix("file://"))
        ids = [int(field.metadata[b"PARQUET:field_id"]) for field in data.schema]
        rows[task.file.file_path] = data.rename_columns([by_id[i] for i in ids]).to_pylist()
    return rows


def test_a_held_handle_sees_column_renames_that_commit_no_snapshot(config, catalog, spark):
    name = "db.letters"
    table = catalog.create_table(name, schema=SWAP_SCHEMA)
    table.append(_letters(1))
    table.append(_letters(2))
    build_index(config, name, spark)
    handle = open_handle(config, name)
    before = [(f"{c} = '{c}{n}'", lambda r, c=c, n=n: r[c] == f"{c}{n}") for c in "ab" for n in (1, 2)]
    _check(config, name, "the build", handle, before, _rows_by_field_id(config, name))

    for old, new in (("a", "tmp"), ("b", "a"), ("tmp", "b")):  # swap the names of a and b, one commit each
        with table.update_schema() as update:
            update.rename_column(old, new)
    with table.update_schema() as update:
        update.rename_column("c", "d")  # a name the table never had
    assert [f.name for f in catalog.load_table(name).schema().fields] == ["b", "a", "d"]
    rows = _rows_by_field_id(config, name)
    first = next(path for path, file_rows in rows.items() if file_rows[0]["a"] == "b1")
    after = [
        ("a = 'b1'", lambda r: r["a"] == "b1"),
        ("a = 'a1'", lambda r: r["a"] == "a1"),
        ("b = 'a1'", lambda r: r["b"] == "a1"),
        ("b = 'b2'", lambda r: r["b"] == "b2"),
        ("d = 'c1'", lambda r: r["d"] == "c1"),
    ]
    answers = _check(config, name, "column renames (no new snapshot)", handle, after, rows)
    for where, matches in after:  # exact bounds of one value per file: the answer is the truth itself
        truth = sorted(path for path, file_rows in rows.items() if all(matches(r) for r in file_rows))
        assert answers[where].files == answers[where].all_match == truth, (
            f"after the renames, {where!r} returns exactly the files whose rows all match, by the current names"
        )
    assert answers["a = 'b1'"].files == answers["d = 'c1'"].files == [first] and answers["a = 'a1'"].files == []


def test_a_held_handle_returns_no_removed_file_after_the_index_is_compacted(config, lake, spark):
    for start in (0, 20, 40):
        lake.append(_batch(start))
    build_index(config, lake.name, spark)
    removed = _file_holding(config, lake.name, 5)
    lake.delete("id < 20")  # the whole of one file
    assert removed not in live_rows(config, lake.name)
    handle = open_handle(config, lake.name)
    _check(config, lake.name, "the delete of a file", handle)  # the handle caches what it read

    compact(config, lake.name)  # the source removed a file since the build
    answers = _check(config, lake.name, "the index compaction", handle)
    assert all(removed not in result.files for result in answers.values())
    lake.append(_batch(60))
    _check(config, lake.name, "an append after the compaction", handle)
    build_index(config, lake.name, spark)
    _check(config, lake.name, "the build after it", handle)
    compact(config, lake.name)
    _check(config, lake.name, "a second index compaction", handle)


def test_delta_statistics_follow_the_column_name_when_a_schema_merge_moves_the_partition_column(
    config, tmp_path, spark
):
    """delta-rs's schema merge moves the partition columns after columns added later (id, part, tag -> id, tag, part):
    Delta has no field ids without column mapping, so the index's ids must follow the name, not the position."""
    name = str(tmp_path / "lake" / "merged")
    write_deltalake(name, pa.table({"id": [1, 2], "part": ["a", "b"]}), partition_by=["part"])
    merge = {"mode": "append", "partition_by": ["part"], "schema_mode": "merge"}
    write_deltalake(name, pa.table({"id": [3], "part": ["a"], "tag": ["zz"]}), **merge)
    build_index(config, name, spark)
    write_deltalake(name, pa.table({"id": [4], "part": ["b"], "tag": ["b"], "amount": [1.0]}), **merge)
    assert [f.name for f in DeltaTable(name).schema().fields] == ["id", "tag", "part", "amount"]
    queries = [
        ("part = 'a'", lambda r: r["part"] == "a"),
        ("part = 'b'", lambda r: r["part"] == "b"),
        ("tag = 'zz'", lambda r: r.get("tag") == "zz"),
        ("tag = 'b'", lambda r: r.get("tag") == "b"),
        ("part = 'a' AND tag = 'zz'", lambda r: r["part"] == "a" and r.get("tag") == "zz"),
    ]
    _check(config, name, "a merge that moved the partition column", open_handle(config, name), queries)
    build_index(config, name, spark)
    _check(config, name, "the build after it", open_handle(config, name), queries)
