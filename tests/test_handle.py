"""The planner's long-lived handle: the same answers as a one-off lookup at every point of a table's life (appends,
builds, deletes, compaction of the source and of the index), read only what changed, and safe from many threads.
Real Iceberg (SQLite catalog) and Delta (delta-rs) tables, a real Spark build, answers checked against the rows."""

from __future__ import annotations

import random
import threading

import pytest
from lakes import PARTS, QUERIES, Lake, events_batch, live_rows, partitioned_events
from pyiceberg import expressions as ice

from indexlib.handle import IndexHandle, open_handle
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact
from indexlib.lookup import FORMAT_STAGE, lookup
from indexlib.query.sql import Clock

CLOCK = Clock()


@pytest.fixture(params=["iceberg", "delta"])
def lake(request, catalog, tmp_path) -> Lake:
    return Lake(request.param, catalog, tmp_path, "events", partitioned=True)


def _same_as_lookup(config, handle: IndexHandle, lake: Lake, step: str) -> None:
    rows = live_rows(config, lake.name)
    for where, matches in QUERIES:
        held, fresh = handle.lookup(where, CLOCK), lookup(config, lake.name, where, CLOCK)
        assert (sorted(held.files), held.summary) == (sorted(fresh.files), fresh.summary), (
            f"after {step}: a handle answers {where!r} as a one-off lookup over the same snapshots does"
        )
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= set(held.files) <= set(rows), f"after {step}: {where!r} keeps every match, only live files"


def test_a_handle_answers_as_a_fresh_lookup_through_the_life_of_a_table(config, lake, spark):
    rng = random.Random(11)
    for n in range(4):
        lake.append(events_batch(rng, n * 40, 40, PARTS[n % 3]))
    handle = open_handle(config, lake.name)
    _same_as_lookup(config, handle, lake, "appends, never built")
    build_index(config, lake.name, spark)
    _same_as_lookup(config, handle, lake, "the first build")
    reads = dict(handle.reads)
    for where, _ in QUERIES:
        handle.lookup(where, CLOCK)
    assert handle.reads == reads, "a warm lookup on unchanged snapshots reads nothing but the current snapshots"
    if lake.kind == "iceberg":
        tables = (handle._source.table, handle._index.load())
        handle.lookup(QUERIES[0][0], CLOCK)
        assert all(
            now is held for now, held in zip((handle._source.table, handle._index.load()), tables, strict=True)
        ), (
            "a warm lookup of unchanged tables parses no table metadata it holds: the catalog still points at the "
            "metadata files it loaded, so it keeps both tables as loaded"
        )

    lake.append(events_batch(rng, 200, 40, "b"))
    _same_as_lookup(config, handle, lake, "an append after the build (its file unindexed, kept)")
    if lake.kind == "iceberg":
        assert handle.reads["source_appends"] == reads["source_appends"] + 1, "an append reads only its manifests"
        assert handle.reads["source_plans"] == reads["source_plans"], "an append does not re-plan the table"
    build_index(config, lake.name, spark)
    _same_as_lookup(config, handle, lake, "the second build")
    assert handle.reads["index_appends"] == reads["index_appends"] + 1, "a build that only adds reads only new entries"

    lake.delete("service = 'auth' OR id < 20")
    _same_as_lookup(config, handle, lake, "a delete (removed files never returned)")
    build_index(config, lake.name, spark)
    _same_as_lookup(config, handle, lake, "the build after the delete")
    lake.compact()
    _same_as_lookup(config, handle, lake, "compaction of the source")
    build_index(config, lake.name, spark)
    compact(config, lake.name)
    _same_as_lookup(config, handle, lake, "the build after compaction, and compaction of the index")


def test_concurrent_lookups_agree_while_the_table_grows(config, catalog, tmp_path, spark):
    lake = partitioned_events(catalog, tmp_path, "busy", seed=5)
    rng = random.Random(6)  # the appends while readers ask
    build_index(config, lake.name, spark)
    handle = open_handle(config, lake.name)
    where, matches = QUERIES[0]
    totals, problems = set(), []

    def reader() -> None:
        for _ in range(15):
            result = handle.lookup(where, CLOCK)
            totals.add(result.summary["files_total"])
            if result.summary["files_kept"] != len(result.files) or not set(result.all_match) <= set(result.files):
                problems.append(result.summary)

    threads = [threading.Thread(target=reader) for _ in range(6)]
    for thread in threads:
        thread.start()
    for n in range(3, 6):  # the writer appends while the readers ask
        lake.append(events_batch(rng, n * 30, 30, PARTS[n % 3]))
    for thread in threads:
        thread.join()
    assert not problems, f"every answer is internally consistent under concurrency: {problems[:2]}"
    assert totals <= {3, 4, 5, 6}, f"every answer is of one snapshot of the table: {totals}"
    rows = live_rows(config, lake.name)
    final = handle.lookup(where, CLOCK)
    truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
    assert final.summary["files_total"] == 6 and truth <= set(final.files), "after the writes, the latest snapshot"


def test_a_never_indexed_table_keeps_every_file_and_says_it_has_no_index(config, lake, spark):
    rng = random.Random(5)
    for n in range(3):
        lake.append(events_batch(rng, n * 40, 40, PARTS[n % 3]))
    handle = open_handle(config, lake.name)
    live = set(live_rows(config, lake.name))
    for step, has_index in [("never built", False), ("built", True)]:
        if has_index:
            build_index(config, lake.name, spark)
        for name, result in [
            ("handle", handle.lookup("id = 7", CLOCK)),
            ("lookup", lookup(config, lake.name, "id = 7")),
        ]:
            assert result.summary["has_index"] is has_index, (
                f"{step}: the {name}'s summary says whether there is an index"
            )
            assert result.as_json()["summary"]["has_index"] is has_index, f"{step}: so does its JSON"
            if not has_index:
                assert set(result.files) <= live and result.files_unindexed == len(result.files), (
                    f"{step}: with no index the {name} keeps live files, judged by the format's statistics alone"
                )
                assert FORMAT_STAGE in [stage.name for stage in result.stages], f"{step}: {name}"


# (pyiceberg row filter, the rows pyiceberg's own read keeps: its NotIn keeps NULLs, its `!=` does not)
ICEBERG_FILTERS = [
    (ice.EqualTo("id", 17), lambda r: r["id"] == 17),
    (ice.In("service", ["mail", "queue"]), lambda r: r["service"] in ("mail", "queue")),
    (ice.NotIn("service", ["auth", "web"]), lambda r: r["service"] not in ("auth", "web")),
    (ice.Not(ice.EqualTo("part", "a")), lambda r: r["part"] is not None and r["part"] != "a"),
    (
        ice.And(ice.EqualTo("part", "b"), ice.StartsWith("service", "se")),
        lambda r: r["part"] == "b" and (r["service"] or "").startswith("se"),
    ),
    (
        ice.Or(ice.IsNull("service"), ice.GreaterThanOrEqual("id", 100)),
        lambda r: r["service"] is None or r["id"] >= 100,
    ),
]


def test_a_pyiceberg_row_filter_keeps_every_file_holding_a_row_pyiceberg_would_return(config, lake):
    """`handle.lookup` takes pyiceberg's own filter, on Iceberg and Delta tables alike (query/from_iceberg.py)."""
    rng = random.Random(3)
    for n in range(6):
        lake.append(events_batch(rng, n * 30, 30, PARTS[n % 3]))
    build_index(config, lake.name)
    handle = open_handle(config, lake.name)
    rows = live_rows(config, lake.name)
    pruned = False
    for row_filter, matches in ICEBERG_FILTERS:
        result = handle.lookup(row_filter, CLOCK)
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= set(result.files), f"{row_filter}: every file holding a row pyiceberg returns is kept"
        assert not result.all_match, f"{row_filter}: no file is proven all-match for pyiceberg's filter"
        pruned |= len(result.files) < len(rows)
    assert pruned, "the filters prune (a rule that kept everything would pass the check above)"
