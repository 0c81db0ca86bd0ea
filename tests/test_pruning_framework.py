"""One pruning framework (pruning/evaluator.py): every source of evidence is a peer that judges leaves, one evaluator
combines them over the predicate tree. Shown with a toy kind that answers ranges, which no built-in kind does: it
plugs in as a module and an entry point, and prunes where min/max cannot; checked against brute force (DuckDB)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot
from conftest import sweep, write_and_index
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, LongType, NestedField

from indexlib import plugins
from indexlib.index_kinds import loading
from indexlib.index_kinds.base import BuiltIndex, IndexKind, KindLeaf
from indexlib.index_kinds.loading import ENTRY_POINT_GROUP
from indexlib.index_kinds.settings import IndexSettings
from indexlib.pruning.evaluator import Evidence, evaluate
from indexlib.pruning.index_evidence import AlignedEntries, prune
from indexlib.pruning.kinds import KindEvidence
from indexlib.query.binding import bound_predicate
from indexlib.query.model import BoundCompare, Expr
from indexlib.query.value_set import ValueSet
from indexlib.statistics.provider import ColumnStatistics
from indexlib.statistics.verdict import Verdict
from indexlib.store.snapshot import IndexRows

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "other", LongType()))
RANGES = {"<": (None, -1), "<=": (None, 0), ">": (1, None), ">=": (0, None)}  # (low offset, high offset) of v


class RangeZones(IndexKind):
    """The file's values as runs of consecutive integers, e.g. [[1, 3], [100, 101]]: answers ranges and `=` / IN
    by the gaps between runs (min/max sees only [1, 101])."""

    name = "zones"
    version = 1
    lookup_rank = 40

    def can_index(self, iceberg_type: IcebergType) -> bool:
        return isinstance(iceberg_type, LongType)

    def wanted(self, settings, iceberg_type, keys, rows, built: Iterable[BuiltIndex]) -> bool:
        return self.can_index(iceberg_type) and len(keys) > 0

    def build(self, keys, iceberg_type, settings) -> BuiltIndex:
        values = [int(v) for v in keys.numbers]
        runs: list[list[int]] = []
        for value in values:
            if runs and runs[-1][1] + 1 == value:
                runs[-1][1] = value
            else:
                runs.append([value, value])
        return BuiltIndex(json.dumps(runs).encode(), exact=True)

    def answers(self, leaf: KindLeaf) -> bool:
        if isinstance(leaf, ValueSet):
            return not leaf.negated and all(isinstance(v, int) for v in leaf.values)
        return isinstance(leaf, BoundCompare) and leaf.op in RANGES and isinstance(leaf.value, int)

    def verdict(self, leaf: KindLeaf, payloads: Sequence[bytes | None], stats: ColumnStatistics) -> Verdict:
        if isinstance(leaf, ValueSet):
            wanted = [(v, v) for v in leaf.values]
            covered = set(leaf.values)
        else:
            low, high = RANGES[leaf.op]
            wanted = [(None if low is None else leaf.value + low, None if high is None else leaf.value + high)]

        def inside(run: list[int], low: int | None, high: int | None) -> bool:
            return (low is None or run[0] >= low) and (high is None or run[1] <= high)

        def meets(run: list[int], low: int | None, high: int | None) -> bool:
            return (low is None or run[1] >= low) and (high is None or run[0] <= high)

        might = np.ones(len(payloads), dtype=bool)
        every = np.zeros(len(payloads), dtype=bool)
        for i, payload in enumerate(payloads):
            if payload is None:
                continue
            runs = json.loads(payload)
            might[i] = any(meets(run, lo, hi) for run in runs for lo, hi in wanted)
            if isinstance(leaf, ValueSet):
                every[i] = all(v in covered for run in runs for v in range(run[0], run[1] + 1))
            else:
                every[i] = all(inside(run, *wanted[0]) for run in runs)
        no_nulls = stats.known & (stats.null_count == 0)
        return Verdict(might, every & no_nulls)

    def reads(self, leaf: KindLeaf) -> str | None:
        return "runs of consecutive values (where built)"


@pytest.fixture
def with_zones(monkeypatch):
    zones = EntryPoint("zones", f"{__name__}:RangeZones", ENTRY_POINT_GROUP)
    points = [*entry_points(group=ENTRY_POINT_GROUP), zones]
    monkeypatch.setattr(plugins, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    loading.loaded_kinds.cache_clear()
    yield
    loading.loaded_kinds.cache_clear()


ZONE_SETTINGS = IndexSettings(kinds=("zones",))
FILES = [[1, 2, 3, 100, 101], [50, 51, 52], [5, None], [None]]

# (where, kept by the runs alone, kept by the lookup's stages (min/max, bloom, automaton, zones), the rule)
RULES = [
    ("id >= 101", [True, False, False, True], [True, False, False, False], "the run [100, 101] meets [101, inf)"),
    ("id < 4", [True, False, False, True], [True, False, False, False], "only the run [1, 3] lies below 4"),
    (
        "id BETWEEN 10 AND 20",
        [True, False, False, True],
        [True, False, False, False],
        "each leaf is judged alone: [100, 101] meets id >= 10 and [1, 3] meets id <= 20, so file 0 stays",
    ),
    ("id IN (4, 99)", [False] * 3 + [True], [False] * 4, "4 and 99 lie in file 0's gap; min/max keeps [1, 101]"),
    (
        "id = 4 OR id > 200",
        [False] * 3 + [True],
        [False] * 4,
        "one evaluator: min/max refutes id > 200, the runs refute id = 4, the OR is refuted for file 0",
    ),
]


@pytest.fixture
def zone_files(tmp_path, with_zones):
    tables = [pa.Table.from_pylist([{"id": v, "other": 1} for v in f], schema=SCHEMA.as_arrow()) for f in FILES]
    return write_and_index(tmp_path, tables, SCHEMA, ZONE_SETTINGS)


@pytest.mark.parametrize(("where", "alone", "kept", "rule"), RULES, ids=[r[0] for r in RULES])
def test_a_toy_kind_that_answers_ranges_plugs_in_as_a_peer(zone_files, where, alone, kept, rule):
    paths, entries = zone_files
    predicate = bound_predicate(where, SCHEMA, "db.t")
    aligned = AlignedEntries.of(paths, IndexRows.of_entries(entries))
    runs_only = evaluate(predicate, [KindEvidence(RangeZones(), aligned.stats, aligned.indexed)], len(paths))
    assert runs_only[-1].verdict.might.tolist() == alone, f"{where}, by the runs alone (file 3 has none): {rule}"
    verdicts = prune(predicate, paths, entries)
    assert [name for name, _, _ in verdicts.stages] == ["minmax", "key index", "bloom", "automaton", "zones"]
    assert verdicts.kept.tolist() == kept, f"{where}: {rule}"


def test_a_toy_kind_proves_all_match_only_without_nulls(zone_files):
    paths, entries = zone_files
    verdicts = prune(bound_predicate("id IN (1, 2, 3, 100, 101, 5)", SCHEMA, "db.t"), paths, entries)
    assert verdicts.all_match.tolist() == [True, False, False, False], (
        "file 0's runs lie within the IN list (min/max cannot say: 4..99 are absent from the list); file 2 has a NULL"
    )


class _Spans(Evidence):
    """Evidence that is not an index kind at all: a [low, high] span per container, given as arrays."""

    name = "spans"

    def __init__(self, low: list[int], high: list[int]) -> None:
        self.low, self.high = np.array(low), np.array(high)
        self.asked: list[np.ndarray] = []

    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        if not isinstance(leaf, BoundCompare) or leaf.op != "=":
            return None
        self.asked.append(candidates.copy())
        might = (self.low <= leaf.value) & (leaf.value <= self.high)
        return Verdict(might, np.zeros(len(might), dtype=bool))


def test_evidence_is_asked_only_about_containers_still_in_play():
    first, second = _Spans([0, 10, 20], [5, 15, 25]), _Spans([0, 0, 0], [100, 3, 100])
    predicate = bound_predicate("id = 12 OR other = 22", SCHEMA, "db.t")
    stages = evaluate(predicate, [first, second], 3)
    assert [s.name for s in stages] == ["spans", "spans"], "one stage per evidence, in the order given"
    assert stages[0].verdict.might.tolist() == [False, True, True]
    assert stages[1].verdict.might.tolist() == [False, False, True], "the second narrows each leaf, then the tree"
    assert not any(asked[0] for asked in second.asked), "container 0 was out after the first: never asked again"


def test_a_leaf_no_evidence_answers_keeps_the_container():
    silent = _Spans([0], [0])
    stages = evaluate(bound_predicate("id * 2 = 3 OR other IS NULL", SCHEMA, "db.t"), [silent], 1)
    assert stages[-1].verdict.might.tolist() == [True], "no evidence answers: the container is kept"
    assert not stages[-1].verdict.all_match.any()


values = st.one_of(st.none(), st.integers(-3, 12), st.integers(-3, 12))
files = st.lists(st.lists(values, min_size=1, max_size=6), min_size=1, max_size=4)
leaf = st.builds(
    lambda op, v: f"id {op} {v}", st.sampled_from(["<", "<=", ">", ">=", "=", "!="]), st.integers(-4, 13)
) | st.builds(lambda vs: f"id IN ({', '.join(map(str, vs))})", st.lists(st.integers(-4, 13), min_size=1, max_size=3))
predicates = st.recursive(
    leaf,
    lambda inner: (
        st.builds(lambda a, op, b: f"({a} {op} {b})", inner, st.sampled_from(["AND", "OR"]), inner)
        | inner.map(lambda p: f"NOT ({p})")
    ),
    max_leaves=4,
)


@pytest.mark.slow
@settings(
    max_examples=sweep("SKIPINDEX_FRAMEWORK_EXAMPLES", short=50, long=500),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(file_values=files, wheres=st.lists(predicates, min_size=3, max_size=3))
def test_a_toy_range_kind_never_skips_a_matching_file(tmp_path_factory, with_zones, file_values, wheres):
    tables = [pa.Table.from_pylist([{"id": v, "other": 1} for v in f], schema=SCHEMA.as_arrow()) for f in file_values]
    paths, entries = write_and_index(tmp_path_factory.mktemp("zones"), tables, SCHEMA, ZONE_SETTINGS)
    con = duckdb.connect()
    for where in wheres:
        verdicts = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)
        condition = sqlglot.transpile(where, write="duckdb")[0]
        for n, table in enumerate(tables):
            con.register("t", table)
            matched, total = con.execute(f"SELECT count(*) FILTER (WHERE {condition}), count(*) FROM t").fetchall()[0]
            assert verdicts.kept[n] or matched == 0, f"skipped file {n} {file_values[n]} matching {where}"
            assert not verdicts.all_match[n] or matched == total, f"file {n} {file_values[n]} not all-match {where}"
    con.close()


def test_a_container_outside_what_an_evidence_covers_is_unknown_to_it():
    spans = _Spans([50, 50], [60, 60])
    spans.covers = np.array([True, False])  # container 1 has no entry: whatever the arrays say about it is not known
    stages = evaluate(bound_predicate("id = 12", SCHEMA, "db.t"), [spans], 2)
    assert stages[-1].verdict.might.tolist() == [False, True], "an uncovered container is kept (unknown means keep)"
