"""Row-group pruning (format 5, `[index] row_groups`): a lookup never leaves out a row group holding a row where the
predicate is TRUE, never drops a file holding one, and claims "all match" for a row group (or a file) only where
every row is TRUE.

Real components throughout: Parquet files written row group by row group, added to a real Iceberg table (SQLite
catalog) with `add_files`, indexed by the real build (`build_index`, the per-file task in this process: the same
`index_file(..., row_groups="true")` Spark maps), and asked through the public `lookup` path (`read_state` +
`lookup_in`). The truth is DuckDB over the same rows, per (file, row group), with SQL three-valued logic.

- The property test draws files of every column type the file-level property test covers
  (tests/test_pruning_properties.py, whose predicate strategy it reuses), each row group with its own pattern per
  column (all NULL, all NaN, one value, no NULL beside some NULL), row groups of one row among them, indexed with
  the automatic choice or every kind forced with tiny budgets. EXAMPLES examples x PREDICATES_PER_EXAMPLE
  predicates: 20 examples in `make test`, 150 in `make test-long` (SKIPINDEX_ROW_GROUP_EXAMPLES=N runs N), and the
  explicit examples every run checks. (A row group judged with a neighbouring file's evidence took 150 examples to
  find once, and was missed by 60; a rule test and an explicit example catch it.)
- The rule tests state each rule with a hand-made case and its expected row groups exactly (what must be kept, and
  what the index proves may be left out).
- `wants_row_groups` decides which files get row-group entries.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from conftest import sweep
from deltalake import DeltaTable, WriterProperties, write_deltalake
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType
from test_pruning_properties import SCHEMA, VALUES, ZONES, nullable, predicates

from indexlib.config import Config, load_config
from indexlib.errors import UserError
from indexlib.indexing.build import build_index
from indexlib.indexing.file_indexer import AUTO_ROW_GROUPS_MIN_BYTES, wants_row_groups
from indexlib.lookup import lookup, lookup_in, read_state
from indexlib.query.sql import Clock

EXAMPLES = sweep("SKIPINDEX_ROW_GROUP_EXAMPLES", short=20, long=150)
PREDICATES_PER_EXAMPLE = 6
CLOCK = Clock()

# The property test's files: no Iceberg field ids in the Parquet schema (add_files maps columns by name).
PLAIN_SCHEMA = pa.schema([f.remove_metadata() for f in SCHEMA.as_arrow()])
NAN_COLUMNS = {"f", "r"}
# Index settings drawn per example: the automatic choice, or every kind forced with tiny budgets (trimmed automata,
# Bloom filters with a 30 % false-positive rate), so the row groups' Bloom and automaton stages are under the oracle.
INDEX_SETTINGS = [
    "",
    'kinds = ["bloom", "automaton"]\nbloom_fpp = 0.3\nautomaton_max_states = 2\nautomaton_max_bytes = 16\n',
    'kinds = ["bloom", "automaton"]\nbloom_fpp = 0.3\nautomaton_max_states = 4\nautomaton_max_bytes = 64\n',
]


@st.composite
def row_groups(draw: st.DrawFn) -> list[dict]:
    """One row group (1 to 4 rows): per column all NULL, all NaN (float columns), one value (bounds x..x: all-match
    proofs), no NULL, or NULLs among values."""
    size = draw(st.sampled_from([1, 1, 2, 3, 4]))
    columns = {}
    for name, values in VALUES.items():
        modes = ["mixed", "mixed", "no nulls", "one value", "all null"] + (["all nan"] if name in NAN_COLUMNS else [])
        mode = draw(st.sampled_from(modes))
        if mode == "all null":
            columns[name] = [None] * size
        elif mode == "all nan":
            columns[name] = [math.nan] * size
        elif mode == "one value":
            columns[name] = [draw(values)] * size
        else:
            drawn = values if mode == "no nulls" else nullable(values)
            columns[name] = draw(st.lists(drawn, min_size=size, max_size=size))
    return [{name: column[i] for name, column in columns.items()} for i in range(size)]


files = st.lists(st.lists(row_groups(), min_size=1, max_size=4), min_size=1, max_size=3)


def write_row_groups(path: Path, groups: list[pa.Table]) -> str:
    """A Parquet file with exactly these row groups, in this order."""
    with pq.ParquetWriter(path, groups[0].schema) as writer:
        for group in groups:
            writer.write_table(group, row_group_size=max(1, group.num_rows))
    assert pq.ParquetFile(path).metadata.num_row_groups == len(groups), "one row group per table written"
    return str(path)


@dataclass
class Catalogs:
    """One SQLite catalog for the module, a config per index setting (the same catalog), a fresh table name each."""

    configs: list
    counter: itertools.count

    def table(self, schema: Schema, setting: int = 0) -> tuple[str, Config]:
        """A new empty, unpartitioned Iceberg table of `schema`: (its name, the config that builds it)."""
        name = f"db.t{next(self.counter)}"
        self.configs[setting].load_catalog().create_table(name, schema=schema)
        return name, self.configs[setting]


def _config(base: Path, index: str, name: str) -> Config:
    conf = base / f"{name}.toml"
    conf.write_text(
        f'[catalog]\nname = "rg"\ntype = "sql"\nuri = "sqlite:///{base}/catalog.db"\nwarehouse = "file://{base}/wh"\n'
        f"[index]\nrow_groups = true\n{index}"
    )
    return load_config(conf)


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory) -> Catalogs:
    base = tmp_path_factory.mktemp("row-groups")
    configs = [_config(base, index, f"conf{n}") for n, index in enumerate(INDEX_SETTINGS)]
    configs[0].load_catalog().create_namespace("db")
    return Catalogs(configs, itertools.count())


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


def _indexed_table(
    catalogs: Catalogs, directory: Path, file_groups: list[list[pa.Table]], schema: Schema, setting: int = 0
):
    """A real Iceberg table of `schema` holding one data file per element of `file_groups` (its row groups), built
    with row-group entries; (config, name, paths)."""
    name, config = catalogs.table(schema, setting=setting)
    paths = [write_row_groups(directory / f"file-{n}.parquet", groups) for n, groups in enumerate(file_groups)]
    config.load_catalog().load_table(name).add_files(paths)
    build_index(config, name)
    return config, name, paths


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    file_rows=files,
    wheres=st.lists(predicates, min_size=PREDICATES_PER_EXAMPLE, max_size=PREDICATES_PER_EXAMPLE),
    zone=st.sampled_from(ZONES),
    setting=st.sampled_from(range(len(INDEX_SETTINGS))),
)
# each file's row groups judged by their own evidence, not a neighbouring file's; NULL-only row groups
@example(
    file_rows=[[[{"s": "a"}], [{"s": "b"}]], [[{"s": "c"}], [{"s": None}]]],
    wheres=["s = 'b'", "s = 'c'", "s LIKE 'c%'", "s IS NULL", "NOT (s IS NOT NULL)", "s IN ('a', 'c')"],
    zone="UTC",
    setting=1,
)
# NaN-only row groups beside numbers: NaN is above every number and min/max leave it out
@example(
    file_rows=[[[{"f": math.nan}, {"f": math.nan}], [{"f": 1.0}]], [[{"f": None}], [{"f": 2.5, "r": math.nan}]]],
    wheres=["f > 2.5", "isnan(f)", "NOT (f < 2.5)", "f = 1.0", "r >= 0.25", "f IS NULL"],
    zone="UTC",
    setting=0,
)
# one-value row groups, where all-match is provable, beside a row group it is not
@example(
    file_rows=[[[{"i": 1, "d": dt.date(2024, 1, 31)}, {"i": 1, "d": dt.date(2024, 1, 31)}], [{"i": 2}]]],
    wheres=["i = 1", "NOT (i != 1)", "i BETWEEN 1 AND 1", "d = DATE '2024-01-31'", "month(d) = 1", "i IN (1, NULL)"],
    zone="Asia/Kolkata",
    setting=2,
)
def test_no_row_group_holding_a_true_row_is_left_out_and_all_match_is_never_overclaimed(
    tmp_path_factory, catalogs, duck, file_rows, wheres, zone, setting
):
    file_groups = [[pa.Table.from_pylist(rows, schema=PLAIN_SCHEMA) for rows in groups] for groups in file_rows]
    config, name, paths = _indexed_table(catalogs, tmp_path_factory.mktemp("files"), file_groups, SCHEMA, setting)
    state = read_state(config, name)
    for f, groups in enumerate(file_groups):  # the property is about row-group entries: they must be there
        if len(groups) > 1:
            first = state.source.schema.fields[0].field_id
            stored = state.rows.row_groups(first, pa.array([paths[f]], pa.string())).column("row_groups").to_pylist()
            assert [len(listed or ()) for listed in stored] == [len(groups)], f"file {f} has row-group entries"

    labelled = [
        group.append_column("file", pa.array([f] * group.num_rows, pa.int32())).append_column(
            "rg", pa.array([g] * group.num_rows, pa.int32())
        )
        for f, groups in enumerate(file_groups)
        for g, group in enumerate(groups)
    ]
    duck.execute(f"SET TimeZone = '{zone}'")
    duck.register("t", pa.concat_tables(labelled))
    counts = ", ".join(f"count(*) FILTER (WHERE {sqlglot.transpile(where, write='duckdb')[0]})" for where in wheres)
    truth = {
        (row[0], row[1]): row[2:]
        for row in duck.execute(f"SELECT file, rg, count(*), {counts} FROM t GROUP BY file, rg").fetchall()
    }
    duck.unregister("t")

    for k, where in enumerate(wheres):
        result = lookup_in(state, name, where, CLOCK)
        shown = f"{where!r} (zone {zone}, settings {setting})"
        kept_files = {kept.file.path: kept for kept in result.kept_files}
        for f, groups in enumerate(file_groups):
            path = paths[f]
            per_group = [(truth[f, g][0], truth[f, g][1 + k]) for g in range(len(groups))]
            rows = [group.to_pylist() for group in groups]
            file_true = sum(matched for _, matched in per_group)
            file_total = sum(total for total, _ in per_group)
            assert path in result.files or file_true == 0, (
                f"file {f} dropped but {file_true} of its rows are TRUE for {shown}: {rows}"
            )
            assert path not in result.all_match or file_true == file_total, (
                f"file {f} claimed all-match but {file_true}/{file_total} rows are TRUE for {shown}: {rows}"
            )
            listed = result.kept_parts("row_groups").kept.get(path)
            needed = kept_files[path].row_groups if path in kept_files else ()
            proven = result.kept_parts("row_groups").all_match.get(path, ())
            for g, (total, matched) in enumerate(per_group):
                if matched:
                    assert listed is None or g in listed, (
                        f"row group {g} of file {f} left out of row_groups {listed} but {matched}/{total} rows are "
                        f"TRUE for {shown}: {rows}"
                    )
                    assert needed is None or g in needed, (
                        f"KeptFile.row_groups {needed} of file {f} leaves out row group {g} with {matched} TRUE "
                        f"rows for {shown}: {rows}"
                    )
                if g in proven:
                    assert matched == total, (
                        f"row group {g} of file {f} claimed all-match but {matched}/{total} rows are TRUE for "
                        f"{shown}: {rows}"
                    )
                    assert listed is not None and g in listed, "an all-match row group is one of the kept ones"


# ---- the rules, case by case --------------------------------------------------------------------------------------

RULE_SCHEMA = Schema(
    NestedField(1, "k", LongType()),
    NestedField(2, "x", DoubleType()),
    NestedField(3, "s", StringType()),
)
RULE_ARROW = pa.schema([("k", pa.int64()), ("x", pa.float64()), ("s", pa.string())])
RULE_MAPPING = create_mapping_from_schema(RULE_SCHEMA).model_dump_json()  # the files carry no field ids
NAN = math.nan


def _groups(*groups: list[tuple]) -> list[pa.Table]:
    """Row groups of (k, x, s) rows."""
    return [
        pa.Table.from_pylist([dict(zip(("k", "x", "s"), row, strict=True)) for row in g], schema=RULE_ARROW)
        for g in groups
    ]


# an unsorted key: every row group's bounds hold 12, one row group holds it
SCATTERED = _groups([(1, 0.0, "a"), (20, 0.0, "a"), (5, 0.0, "a")], [(2, 0.0, "a"), (12, 0.0, "a"), (19, 0.0, "a")])
SCATTERED += _groups([(0, 0.0, "a"), (25, 0.0, "a"), (3, 0.0, "a")])
# bounds per row group 1..9, 13..20, 21..30: the file's bounds (1..30) hold 12, no row group's do
GAPPED = _groups([(1, 1.0, "p"), (9, 2.0, "p")], [(13, 1.0, "p"), (20, 2.0, "p")], [(21, 1.0, "p"), (30, 2.0, "p")])
# NULL and NaN patterns of x: NULLs, no NULL, all NULL, all NaN, NaN beside numbers
NULLS = _groups(
    [(1, None, "a"), (2, 1.0, "a")],
    [(3, 2.0, "a"), (4, 3.0, "a")],
    [(5, None, "a"), (6, None, "a")],
    [(7, NAN, "a"), (8, NAN, "a")],
    [(9, NAN, "a"), (10, 5.0, "a")],
)
# k: 5..5 without NULLs, 5 beside NULL, 5 beside 6
FIVES = _groups([(5, 0.0, "a"), (5, 0.0, "a")], [(5, 0.0, "a"), (None, 0.0, "a")], [(5, 0.0, "a"), (6, 0.0, "a")])
# for NOT IN: k in {1, NULL}, {3, NULL}, {3, 4}
NOT_IN = _groups([(1, 0.0, "a"), (None, 0.0, "a")], [(3, 0.0, "a"), (None, 0.0, "a")], [(3, 0.0, "a"), (4, 0.0, "a")])


@dataclass(frozen=True)
class Case:
    rule: str
    groups: list[pa.Table]
    where: str
    kept: tuple[int, ...] | None  # row groups in `row_groups`; None: the file is dropped
    all_match: tuple[int, ...] = ()


RULES = [
    Case("a point query on an unsorted key keeps only the row group holding it (its Bloom filter)", SCATTERED,
         "k = 12", (1,)),
    Case("row-group bounds exclude what the file's bounds hold", GAPPED, "k BETWEEN 10 AND 14", (1,)),
    Case("a file whose every row group is excluded is dropped from files", GAPPED, "k = 12", None),
    Case("`x IS NULL` keeps only the row groups with NULLs; all-match where every value is NULL", NULLS,
         "x IS NULL", (0, 2), (2,)),
    Case("`x IS NOT NULL` leaves out the all-NULL row group; all-match where no NULL", NULLS, "x IS NOT NULL",
         (0, 1, 3, 4), (1, 3, 4)),
    Case("`isnan(x)` keeps only the row groups with NaN; all-match where every value is NaN", NULLS, "isnan(x)",
         (3, 4), (3,)),
    Case("`x > 0.5` leaves out the all-NULL row group and keeps the all-NaN one (NaN sorts above every number)",
         NULLS, "x > 0.5", (0, 1, 3, 4), (1,)),
    Case("`x < 2.5` keeps NaN's neighbour only where a number is below 2.5", NULLS, "x < 2.5", (0, 1)),
    Case("all-match: bounds 5..5 and no NULL; a NULL or a 6 beside 5 is not", FIVES, "k = 5", (0, 1, 2), (0,)),
    Case("`k <> 5` leaves out the 5..5 row groups (NULL is not TRUE)", FIVES, "k <> 5", (2,)),
    Case("`NOT IN` with a NULL in the row group: only the row group of numbers outside the list is all-match",
         NOT_IN, "k NOT IN (1, 2)", (1, 2), (2,)),
    Case("`k NOT IN (3, NULL)` is never TRUE: nothing is all-match", NOT_IN, "k NOT IN (3, NULL)", None),
    Case("an OR keeps the union of the row groups each side keeps", GAPPED, "k = 1 OR k = 30", (0, 2)),
    Case("an AND of two columns keeps where both might hold, all-match where both are proven", NULLS,
         "k >= 3 AND x IS NULL", (2,), (2,)),
    Case("a predicate every row holds makes every row group and the file all-match", GAPPED, "s = 'p'",
         (0, 1, 2), (0, 1, 2)),
]  # fmt: skip


@pytest.mark.parametrize("case", RULES, ids=[case.rule for case in RULES])
def test_row_group_rules(catalogs, tmp_path, case):
    config, name, (path,) = _indexed_table(catalogs, tmp_path, [case.groups], RULE_SCHEMA)
    result = lookup(config, name, case.where, CLOCK)
    if case.kept is None:
        assert path not in result.files, f"{case.rule}: the file is dropped ({result.kept_parts('row_groups').kept})"
        return
    assert result.files == [path], case.rule
    every = len(case.all_match) == len(case.groups)
    assert (path in result.all_match) == every, f"{case.rule}: the file is all-match exactly when each row group is"
    if (
        every and not result.kept_parts("row_groups").kept
    ):  # proven by the file stages: its row groups need no stage of their own
        assert result.kept_parts("row_groups").all_match == {}, f"{case.rule}: a file proven whole names no row groups"
    else:
        assert result.kept_parts("row_groups").kept == {path: case.kept}, f"{case.rule}: row groups kept"
        assert result.kept_parts("row_groups").all_match.get(path, ()) == case.all_match, (
            f"{case.rule}: row groups all-match"
        )
    (kept,) = result.kept_files
    assert kept.row_groups == (None if len(case.kept) == len(case.groups) else case.kept), (
        f"{case.rule}: KeptFile.row_groups is what a reader reads (None: every row group)"
    )


def test_each_row_group_takes_its_own_files_evidence(catalogs, tmp_path):
    """Two files, each matching `k = 1 OR s = 'z'` by a different leaf: the first file's evidence rules out the
    second leaf, the second file's the first. A row group judged with another file's evidence loses its row."""
    by_k = _groups([(1, 0.0, "a"), (2, 0.0, "a")], [(3, 0.0, "b"), (4, 0.0, "b")])
    by_s = _groups([(10, 0.0, "z"), (11, 0.0, "y")], [(12, 0.0, "c"), (13, 0.0, "d")])
    config, name, (first, second) = _indexed_table(catalogs, tmp_path, [by_k, by_s], RULE_SCHEMA)
    result = lookup(config, name, "k = 1 OR s = 'z'", CLOCK)
    assert result.kept_parts("row_groups").kept == {first: (0,), second: (0,)}, (
        "each file's first row group holds the match"
    )
    assert result.kept_parts("row_groups").all_match == {}, "(2, 'a') and (11, 'y') are not TRUE"


def test_a_file_without_row_group_entries_beside_one_with_is_read_whole(catalogs, tmp_path):
    """One file indexed with row_groups = false (the table's first build), one after it with row_groups = true."""
    name, with_groups = catalogs.table(RULE_SCHEMA)
    conf = tmp_path / "without.toml"  # the same catalog
    conf.write_text(Path(with_groups.path).read_text().replace("row_groups = true", "row_groups = false"))
    table = with_groups.load_catalog().load_table(name)
    first = write_row_groups(tmp_path / "first.parquet", GAPPED)
    table.add_files([first])
    build_index(load_config(conf), name)
    second = write_row_groups(tmp_path / "second.parquet", GAPPED)
    table.add_files([second])
    build_index(with_groups, name)

    result = lookup(with_groups, name, "k BETWEEN 10 AND 14", CLOCK)
    assert result.files == sorted([first, second]), "both files' bounds (1..30) hold the range"
    assert result.kept_parts("row_groups").kept == {second: (1,)}, (
        "only the file with row-group entries lists row groups"
    )
    assert {kept.file.path: kept.row_groups for kept in result.kept_files} == {first: None, second: (1,)}, (
        "a file without row-group entries is read whole"
    )
    assert result.kept_parts("row_groups").total == 3, "only the second file's row groups reach the row-group stages"
    minmax = next(stage for stage in result.stages if stage.name == "row groups: minmax")
    assert (minmax.files_in, minmax.files_out, minmax.parts_in, minmax.parts_out) == (2, 2, 3, 1), (
        "the row-group stages count files (with or without row groups) and the row groups in and out"
    )

    dropped = lookup(with_groups, name, "k BETWEEN 10 AND 12", CLOCK)
    assert dropped.files == [first], "the second file is dropped by its row groups; the first is kept (unknown)"


def test_a_partition_and_row_group_bounds_together_prove_all_match(tmp_path):
    """`part = 'a' AND k = 5` on a Delta table partitioned by part: the partition column is not in the data files, so
    only the partition proves the first leaf (for the whole file, so for each row group), and only a row group's
    bounds (5..5, no NULLs) the second (pruning/containers.py)."""
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "d"\ntype = "sql"\nuri = "sqlite:///{tmp_path}/catalog.db"\n'
        f'warehouse = "file://{tmp_path}/wh"\n[index]\nrow_groups = true\n'
    )
    config = load_config(conf)
    path = str(tmp_path / "lake")
    schema = pa.schema([("k", pa.int64()), ("part", pa.string())])
    files = [  # (k per row, part): two files of part a, one of part b; row groups of three rows
        ([5, 5, 5, None, 5, 7], "a"),
        ([6, 6, 6, 5, 5, 5], "a"),
        ([5, 5, 5], "b"),
    ]
    for ks, part in files:
        write_deltalake(
            path,
            pa.Table.from_pylist([{"k": k, "part": part} for k in ks], schema),
            mode="append",
            partition_by=["part"],
            writer_properties=WriterProperties(max_row_group_size=3),
        )
    build_index(config, path)
    by_rows = {tuple(pq.read_table(uri).column("k").to_pylist()): uri for uri in DeltaTable(path).file_uris()}
    first, second = (by_rows[tuple(ks)] for ks, _ in files[:2])

    result = lookup(config, path, "part = 'a' AND k = 5", CLOCK)
    assert sorted(result.files) == sorted([first, second]), "the partition stage drops the file of part b"
    assert result.kept_parts("row_groups").kept == {first: (0, 1), second: (1,)}, "row groups holding a 5"
    assert result.kept_parts("row_groups").all_match == {first: (0,), second: (1,)}, (
        "each file's row group of 5, 5, 5: part = 'a' by the partition, k = 5 by its bounds 5..5 without NULLs"
    )
    assert result.all_match == [], "row group 1 of the first file has a NULL and a 7; the second has a 6..6 row group"
    (kept_second,) = [kept for kept in result.kept_files if kept.file.path == second]
    assert kept_second.row_groups == (1,) and not kept_second.all_match


@pytest.mark.parametrize(
    ("mode", "row_groups", "size", "wanted", "rule"),
    [
        ("false", 8, 10 * AUTO_ROW_GROUPS_MIN_BYTES, False, "false: never"),
        ("true", 2, 1, True, "true: every file of two or more row groups, however small"),
        (
            "true",
            1,
            10 * AUTO_ROW_GROUPS_MIN_BYTES,
            False,
            "a file of one row group: its file entry is that row group's",
        ),
        ("auto", 8, AUTO_ROW_GROUPS_MIN_BYTES, True, "auto: files of at least the threshold"),
        ("auto", 8, AUTO_ROW_GROUPS_MIN_BYTES - 1, False, "auto: not below it"),
        ("auto", 1, 10 * AUTO_ROW_GROUPS_MIN_BYTES, False, "auto: not a file of one row group"),
        ("auto", 0, 10 * AUTO_ROW_GROUPS_MIN_BYTES, False, "auto: not a file without row groups"),
    ],
)
def test_which_files_get_row_group_entries(mode, row_groups, size, wanted, rule):
    assert wants_row_groups(mode, row_groups, size) is wanted, rule


@pytest.mark.parametrize(
    ("mode", "groups", "expected"),
    [("true", 3, 3), ("true", 1, None), ("false", 3, None), ("auto", 3, None)],
    ids=["true, three row groups", "true, one row group", "false", "auto, a small file"],
)
def test_index_file_gives_each_column_its_row_groups_when_the_file_wants_them(tmp_path, mode, groups, expected):
    from indexlib.indexing.file_indexer import IndexTask, index_file

    path = write_row_groups(tmp_path / "f.parquet", (SCATTERED if groups == 3 else [pa.concat_tables(SCATTERED)]))
    records, stats = index_file(path, "PARQUET", IndexTask(RULE_SCHEMA, {}, RULE_MAPPING, 1, row_groups=mode))
    assert records == 9
    assert [column.name for column in stats] == ["k", "x", "s"], "every column is indexed"
    for column in stats:
        listed = None if column.row_groups is None else len(column.row_groups)
        assert listed == expected, f"{mode}: {column.name} has {listed} row-group entries"
        if column.row_groups:
            assert [g.value_count for g in column.row_groups] == [3, 3, 3], "counts per row group, footer order"
            assert sum(g.value_count for g in column.row_groups) == column.value_count


@pytest.mark.parametrize(
    ("row_group_kinds", "expected", "rule"),
    [
        (None, {"bloom"}, "by default row groups get the kinds the automatic choice gives their values"),
        ((), set(), "row_group_kinds = [] keeps row-group bounds and counts but no row-group payloads"),
        (("bloom",), {"bloom"}, "row_group_kinds names the kinds row groups get"),
    ],
)
def test_row_group_kinds_choose_the_row_groups_payloads(tmp_path, row_group_kinds, expected, rule):
    from indexlib.index_kinds.settings import IndexSettings
    from indexlib.indexing.file_indexer import IndexTask, index_file

    path = write_row_groups(tmp_path / "f.parquet", SCATTERED)
    settings = IndexSettings(row_group_kinds=row_group_kinds)
    per_column = {field.field_id: settings.for_row_groups() for field in RULE_SCHEMA.fields}
    task = IndexTask(RULE_SCHEMA, {}, RULE_MAPPING, 1, row_groups="true", row_group_settings=per_column)
    _, stats = index_file(path, "PARQUET", task)
    (k,) = [column for column in stats if column.name == "k"]
    assert len(k.row_groups) == 3 and all(g.lower is not None for g in k.row_groups), f"{rule}: bounds per row group"
    assert {i["kind"] for g in k.row_groups for i in g.indexes} == expected, rule


def test_row_group_kinds_is_a_column_setting_in_the_configuration_version_only_when_set(tmp_path):
    from indexlib.indexing.file_indexer import config_version

    catalog = '[catalog]\ntype = "sql"\nuri = "sqlite:///c.db"\n'
    conf = tmp_path / "conf.toml"
    conf.write_text(catalog + '[index.tables."db.t".columns.k]\nrow_group_kinds = []\n')
    config = load_config(conf)
    settings = config.column_settings("db.t", RULE_SCHEMA)
    k = next(f.field_id for f in RULE_SCHEMA.fields if f.name == "k")
    assert settings[k].row_group_kinds == () and settings[k].kinds is None, "set on the column, kinds untouched"
    plain = load_config(_conf(tmp_path, catalog)).column_settings("db.t", RULE_SCHEMA)
    assert config_version(plain) == config_version({f: s.updated() for f, s in plain.items()}), "stable"
    assert config_version(settings) != config_version(plain), "setting it makes a backfill rebuild the entries"
    assert "row_group_kinds" not in plain[k].to_json(), "unset, the settings' text is what it was before it existed"
    conf.write_text(catalog + '[index.tables."db.t".columns.k]\nrow_group_kinds = ["nope"]\n')
    with pytest.raises(UserError) as exc:
        load_config(conf)
    assert 'index.tables."db.t".columns.k.row_group_kinds: expected a list of' in str(exc.value), "names the key"


def _conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plain.toml"
    path.write_text(text)
    return path


def test_verify_finds_a_row_group_entry_that_disagrees_with_the_data(catalogs, tmp_path):
    """A row group's bounds are facts of the data like the file's: verify recomputes them and reports the entry
    stale when they differ."""
    from indexlib.indexing.upkeep import verify
    from indexlib.store.schema import ENTRY_ARROW_SCHEMA
    from indexlib.store.table import IndexTable

    config, name, (path,) = _indexed_table(catalogs, tmp_path, [GAPPED], RULE_SCHEMA)
    assert verify(config, name, sample=1, seed=1).ok, "a fresh index agrees with its data"

    def tamper(entries: pa.Table, live_version: int | None) -> pa.Table:
        """Row group 1 of column k claims an upper bound of 0 (the data says 20)."""
        rows = entries.to_pylist()
        for row in rows:
            for column in row["columns"]:
                if column["name"] == "k":
                    column["row_groups"][1]["upper"] = bytes(8)
        return pa.Table.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)

    IndexTable(config.load_catalog(), config.index_namespace, name).rewrite(tamper)
    report = verify(config, name, sample=1, seed=1)
    assert report.stale == [(path, "column k: row_groups differs")], "the damaged row-group entry is stale"
