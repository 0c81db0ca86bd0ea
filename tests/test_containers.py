"""Container kinds are plug-ins (indexlib/store/containers.py): a kind of part inside data files is one module
holding one `PartKind`, found through the entry-point group `skipindex.containers`; the lookup judges its parts with
the same evaluator and evidence as files, drops a file none of whose parts might match, carries its kept parts in
`LookupResult.parts` and `KeptFile.parts`, and explain shows its stages.

The proof is tests/toy_container.py, a second kind in one module ("footer row groups": Parquet row groups judged by
their own footers' statistics, not by index entries), registered here as a package would register it. Real
components: Parquet files written row group by row group, added to a real Iceberg table (SQLite catalog), indexed by
the real build without row-group entries (so only the toy kind judges parts), read by the real scans. The truth is
SQL's three-valued logic over the rows, per (file, row group), by DuckDB.
"""

from __future__ import annotations

import itertools
from collections import Counter
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import sweep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from indexlib import plugins
from indexlib.config import Config, load_config
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index
from indexlib.lookup import lookup_in, read_state
from indexlib.query.sql import Clock
from indexlib.store.containers import BUILT_IN, ENTRY_POINT_GROUP, part_kinds

TOY = EntryPoint("footer_row_groups", "toy_container:FOOTER_ROW_GROUPS", ENTRY_POINT_GROUP)
SCHEMA = Schema(NestedField(1, "k", LongType(), required=False), NestedField(2, "v", LongType(), required=False))
ARROW = pa.schema([("k", pa.int64()), ("v", pa.int64())])
CLOCK = Clock()


def _registered(monkeypatch, points: list[EntryPoint]) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    part_kinds.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_kinds():
    part_kinds.cache_clear()
    yield
    part_kinds.cache_clear()


@pytest.fixture
def toy_registered(monkeypatch) -> None:
    _registered(monkeypatch, [*entry_points(group=ENTRY_POINT_GROUP), TOY])


# Registration ------------------------------------------------------------------------------------------------------


def test_the_built_in_container_is_registered_and_found_without_package_metadata(monkeypatch) -> None:
    registered = {point.name for point in entry_points(group=ENTRY_POINT_GROUP)}
    assert registered == set(BUILT_IN), "pyproject.toml registers every built-in container kind (reinstall)"
    _registered(monkeypatch, [])  # a checkout on sys.path, not installed
    assert list(part_kinds()) == ["row_groups"]


def test_a_registered_kind_is_judged_after_the_built_in_ones(monkeypatch) -> None:
    _registered(monkeypatch, [TOY])
    assert list(part_kinds()) == ["row_groups", "footer_row_groups"], "the built-in kind first"


# Rules: what a registered kind's parts prune, exactly ---------------------------------------------------------------


def _write(path: Path, groups: list[list[int | None]]) -> str:
    """A Parquet file whose row groups hold `k` = each list's values (and v = k * 10), in this order."""
    with pq.ParquetWriter(path, ARROW) as writer:
        for values in groups:
            table = pa.table({"k": values, "v": [None if k is None else k * 10 for k in values]}, schema=ARROW)
            writer.write_table(table, row_group_size=len(values))
    return str(path)


def _config(base: Path, row_groups: bool) -> Config:
    conf = base / f"conf-{row_groups}.toml"
    conf.write_text(
        f'[catalog]\nname = "c"\ntype = "sql"\nuri = "sqlite:///{base}/catalog.db"\nwarehouse = "file://{base}/wh"\n'
        f"[index]\nrow_groups = {str(row_groups).lower()}\n"
    )
    return load_config(conf)


_tables = itertools.count()


def _table(base: Path, files: list[list[list[int | None]]], row_groups: bool = False) -> tuple[Config, str, list]:
    """A real Iceberg table holding one data file per element of `files` (its row groups), indexed (with
    row-group entries or not): (config, name, paths)."""
    config = _config(base, row_groups)
    catalog = config.load_catalog()
    catalog.create_namespace_if_not_exists("db")
    name = f"db.t{next(_tables)}"
    catalog.create_table(name, schema=SCHEMA)
    directory = base / name
    directory.mkdir()
    paths = [_write(directory / f"file-{n}.parquet", groups) for n, groups in enumerate(files)]
    catalog.load_table(name).add_files(paths)
    build_index(config, name)
    return config, name, paths


FILES = [
    [[1, 2, 3, 4], [6, 7, 8, 9]],  # bounds 1..9 in the index; no row group holds 5
    [[3, 4, 5], [20, 25, 30]],
    [[100, 150], [None, None]],
    [[5, 5], [5, 5]],  # every row is 5
]

# (where, files kept, {file: footer row groups kept}, {file: those proven all-match}, rule). A file the file stages
# prove all-match (file 3 for `k = 5`) is not judged by parts: every part of it matches too.
RULES = [
    ("k = 5", {1, 3}, {1: (0,)}, {}, "a file whose bounds hold 5 but no row group does is dropped"),
    ("k > 9 AND k < 20", set(), {}, {}, "a gap between two row groups of one file drops it"),
    ("k >= 20", {1, 2}, {1: (1,), 2: (0,)}, {1: (1,), 2: (0,)}, "only the row groups above the bound are kept"),
    ("k IS NULL", {2}, {2: (1,)}, {2: (1,)}, "null counts are part evidence too"),
    ("k IN (2, 150)", {0, 2}, {0: (0,), 2: (0,)}, {}, "an IN keeps the row groups holding any of its values"),
    ("v = 50", {1, 3}, {1: (0,)}, {}, "every column the kind knows judges its parts"),
    ("k = 5 OR v > 0", {0, 1, 2, 3}, {2: (0,)}, {2: (0,)}, "an OR keeps the row groups either side keeps"),
]


@pytest.fixture(scope="module")
def rules_table(tmp_path_factory) -> tuple[Config, str, list]:
    return _table(tmp_path_factory.mktemp("containers"), FILES)


@pytest.mark.parametrize(("where", "files", "kept", "proven", "rule"), RULES, ids=[rule for *_, rule in RULES])
def test_a_registered_kind_prunes_files_by_its_parts(
    toy_registered, rules_table, where, files, kept, proven, rule
) -> None:
    config, name, paths = rules_table
    result = lookup_in(read_state(config, name), name, where, CLOCK)
    footer = result.parts["footer_row_groups"]
    assert footer.kept == {paths[f]: parts for f, parts in kept.items()}, rule
    assert footer.all_match == {paths[f]: parts for f, parts in proven.items()}, f"all-match: {rule}"
    assert result.files == sorted(paths[f] for f in files), f"the files kept: {rule}"
    assert "row_groups" not in result.parts, "no row-group entries: the built-in kind judges nothing"
    assert any(stage.name == "footer row groups: minmax" for stage in result.stages), "explain shows its stages"
    for file in result.kept_files:
        f = paths.index(file.file.path)
        needed = {"footer_row_groups": kept[f]} if f in kept and len(kept[f]) < len(FILES[f]) else {}
        assert file.parts == needed, f"the parts a reader needs of file {f}: {rule}"


def test_each_part_takes_its_own_files_verdicts_where_only_the_file_knows(toy_registered, tmp_path: Path) -> None:
    """The partition column `g` is not among what the toy kind knows (a string): only each file's partition value
    proves which side of the OR can hold, so each part must take its own file's verdict on the `g` leaves."""
    config = _config(tmp_path, row_groups=False)
    catalog = config.load_catalog()
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "k", LongType(), required=False), NestedField(2, "g", StringType(), required=False))
    table = catalog.create_table(
        "db.p", schema=schema, partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "g"))
    )
    arrow = pa.schema([("k", pa.int64()), ("g", pa.string())])
    paths = []
    for g in ("a", "b"):
        path = tmp_path / f"{g}.parquet"
        with pq.ParquetWriter(path, arrow) as writer:
            for k in (5, 7):
                writer.write_table(pa.table({"k": [k, k], "g": [g, g]}, schema=arrow))
        paths.append(str(path))
    table.add_files(paths)
    build_index(config, "db.p")
    result = lookup_in(read_state(config, "db.p"), "db.p", "(g = 'a' AND k = 5) OR (g = 'b' AND k = 7)", CLOCK)
    assert result.parts["footer_row_groups"].kept == {paths[0]: (0,), paths[1]: (1,)}, "a: 5 only; b: 7 only"


def test_explain_and_the_summary_name_the_kind_and_count_its_parts(toy_registered, rules_table) -> None:
    config, name, paths = rules_table
    result = lookup_in(read_state(config, name), name, "k = 5", CLOCK)
    text = result.explain()
    assert "footer row groups in" in text and "footer row groups out" in text, text
    assert f"  {paths[1]}  footer row groups 0" in text, text
    assert "footer row groups kept 1 of 4 in the files judged by them (0 proven to match on every row)" in text, text
    summary = result.summary
    assert (summary["footer_row_groups_total"], summary["footer_row_groups_kept"]) == (4, 1), summary
    assert summary["stages"][-1]["footer_row_groups_out"] == 1, summary


def test_without_the_registration_the_same_table_keeps_what_the_file_stages_keep(rules_table) -> None:
    config, name, paths = rules_table
    result = lookup_in(read_state(config, name), name, "k = 5", CLOCK)
    assert result.parts == {} and result.files == sorted(paths[f] for f in (0, 1, 3)), "file bounds alone"


@pytest.mark.parametrize("where", [where for where, *_ in RULES])
def test_every_scan_of_a_table_a_registered_kind_pruned_holds_the_rows_sql_returns(
    toy_registered, rules_table, where
) -> None:
    config, name, _ = rules_table
    rows = pa.table(
        {"k": [k for file in FILES for group in file for k in group]},
        schema=pa.schema([("k", pa.int64())]),
    ).append_column("v", pa.array([None if k is None else k * 10 for file in FILES for g in file for k in g]))
    expected = Counter(duckdb.connect().from_arrow(rows).query("t", f"SELECT * FROM t WHERE {where}").fetchall())
    scan = IndexHandle.for_table(config, name).scan(where)
    outputs = {
        "to_arrow": scan.to_arrow(),
        "to_duckdb": scan.to_duckdb().to_arrow_table(),
        "to_polars": scan.to_polars().collect().to_arrow(),
    }
    for output, got in outputs.items():
        found = Counter(zip(got.column("k").to_pylist(), got.column("v").to_pylist(), strict=True))
        assert found == expected, f"{where}: {output} reads the kept files whole (no reader knows the toy kind)"


# Property: never a part holding a TRUE row left out, never all-match overclaimed -------------------------------------

values = st.one_of(st.none(), st.integers(-3, 3))
groups = st.lists(values, min_size=1, max_size=4)
files = st.lists(st.lists(groups, min_size=1, max_size=3), min_size=1, max_size=3)
leaves = st.one_of(
    st.builds(lambda op, c: f"k {op} {c}", st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), st.integers(-4, 4)),
    st.builds(lambda cs: f"k IN ({', '.join(map(str, cs))})", st.lists(st.integers(-4, 4), min_size=1, max_size=3)),
    st.sampled_from(["k IS NULL", "k IS NOT NULL", "v > 0", "v = 20"]),
)
predicates = st.one_of(
    leaves,
    st.builds(lambda a, b, op: f"({a}) {op} ({b})", leaves, leaves, st.sampled_from(["AND", "OR"])),
    st.builds(lambda a: f"NOT ({a})", leaves),
)


@pytest.mark.slow
@settings(
    max_examples=sweep("SKIPINDEX_CONTAINER_EXAMPLES", short=10, long=100),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(file_rows=files, wheres=st.lists(predicates, min_size=4, max_size=4), row_groups=st.booleans())
def test_no_part_holding_a_true_row_is_left_out_and_all_match_is_never_overclaimed(
    toy_registered, tmp_path_factory, file_rows, wheres, row_groups
) -> None:
    config, name, paths = _table(tmp_path_factory.mktemp("parts"), file_rows, row_groups)
    state = read_state(config, name)
    labelled = pa.table(
        {
            "file": [f for f, file in enumerate(file_rows) for g, group in enumerate(file) for _ in group],
            "rg": [g for file in file_rows for g, group in enumerate(file) for _ in group],
            "k": [k for file in file_rows for group in file for k in group],
        }
    )
    con = duckdb.connect()
    con.register("t", labelled)
    for where in wheres:
        truth = {
            (f, g): (total, true)
            for f, g, total, true in con.execute(
                f"SELECT file, rg, count(*), count(*) FILTER (WHERE {where}) "
                "FROM (SELECT *, k * 10 AS v FROM t) GROUP BY file, rg"
            ).fetchall()
        }
        result = lookup_in(state, name, where, CLOCK)
        shown = f"{where!r} over {file_rows} (row-group entries: {row_groups})"
        for kind, kept in result.parts.items():
            for f, file in enumerate(file_rows):
                listed = kept.kept.get(paths[f])
                for g in range(len(file)):
                    total, true = truth[f, g]
                    if listed is not None:
                        assert g in listed or true == 0, f"{kind}: row group {g} of file {f} left out for {shown}"
                    if g in kept.all_match.get(paths[f], ()):
                        assert true == total, f"{kind}: row group {g} of file {f} claimed all-match for {shown}"
        for f, file in enumerate(file_rows):
            true = sum(truth[f, g][1] for g in range(len(file)))
            total = sum(truth[f, g][0] for g in range(len(file)))
            assert paths[f] in result.files or true == 0, f"file {f} dropped for {shown}"
            assert paths[f] not in result.all_match or true == total, f"file {f} claimed all-match for {shown}"
        if row_groups:
            assert "footer_row_groups" not in result.parts or result.files, "both kinds ran in order"
