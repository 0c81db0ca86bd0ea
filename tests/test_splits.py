"""Spark tasks planned by bytes (indexing/splits.py): every file in exactly one task, no task over the split size
unless one file alone is, many small files packed together, big files spread over the cores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexlib.config import DEFAULT_OPEN_COST_BYTES
from indexlib.indexing.splits import plan_splits, progress_parallelism, split_size
from indexlib.sources.base import DataFileRef

MB = 1024 * 1024


def _files(*sizes: int) -> list[DataFileRef]:
    return [DataFileRef(f"f{i:05d}", 1, size, "PARQUET") for i, size in enumerate(sizes)]


@pytest.mark.parametrize(
    ("sizes", "parallelism", "tasks", "rule"),
    [
        ([10_000] * 2_000, 2, 65, "2,000 small files: 31 per 128 MiB task (each costs 4 MiB to open), not 2,000 tasks"),
        ([10_000] * 10, 2, 2, "a small table still spreads over the cores: the split shrinks to total / cores"),
        ([10_000] * 10, 1, 1, "one core: one task"),
        ([1_000 * MB] * 3, 2, 3, "a file bigger than the split size is a task of its own"),
        ([100 * MB, 20 * MB, 20 * MB, 5 * MB], 2, 2, "largest first, each split filled until the next file overflows"),
        ([0] * 5, 4, 5, "empty files still cost their open: the split size is at least one open cost"),
    ],
)
def test_tasks_are_planned_by_bytes(sizes, parallelism, tasks, rule):
    splits = plan_splits(_files(*sizes), 128 * MB, 4 * MB, parallelism)
    assert len(splits) == tasks, rule


@pytest.mark.parametrize(
    ("sizes", "tasks", "rule"),
    [
        ([10_000] * 12, 2, "12 tiny files: one task per core, a task's fixed cost would outweigh its work"),
        ([20 * MB] * 6, 6, "6 files of 20 MB: a task per file, so progress moves file by file, not once at the end"),
        ([20 * MB] * 40, 8, "40 such files: at most 4 tasks per core"),
        ([1_000 * MB] * 40, 40, "a big table is planned by bytes as before"),
        (
            [10_000] * 2_000,
            8,
            "2,000 small files: 4 tasks per core, not 65 (a Python task's fixed cost is ~0.1-0.25 s)",
        ),
    ],
)
def test_a_table_that_would_run_one_task_per_core_gets_several_so_progress_moves(sizes, tasks, rule):
    """With the build's open cost (`[build] open_cost_bytes`, what a file costs the indexer beyond its bytes)."""
    files = _files(*sizes)
    parallelism = progress_parallelism(files, 2, DEFAULT_OPEN_COST_BYTES)
    assert len(plan_splits(files, 128 * MB, DEFAULT_OPEN_COST_BYTES, parallelism)) == tasks, rule


@given(
    st.lists(st.integers(0, 300 * MB), max_size=200),
    st.integers(1, 256 * MB),
    st.integers(0, 8 * MB),
    st.integers(1, 64),
)
def test_every_file_is_in_exactly_one_task_and_no_task_overflows_unless_one_file_does(sizes, limit, cost, cores):
    files = _files(*sizes)
    splits = plan_splits(files, limit, cost, cores)
    assert sorted(f.path for s in splits for f in s.files) == sorted(f.path for f in files), "each file once"
    size = split_size(files, limit, cost, cores)
    for split in splits:
        planned = sum(f.file_size_in_bytes + cost for f in split.files)
        assert planned <= size or len(split.files) == 1, "a task holds at most one split's bytes, or one big file"
    assert all(s.files for s in splits), "no empty task"


def test_a_build_runs_one_spark_task_per_split_and_the_entries_do_not_depend_on_the_plan(
    conf_path, catalog, spark, tmp_path, caplog
):
    import random

    from lakes import Lake, events_batch

    from indexlib.config import load_config
    from indexlib.indexing.build import build_index
    from indexlib.store.table import IndexTable

    lake = Lake("iceberg", catalog, tmp_path, "events")
    for n in range(12):
        lake.append(events_batch(random.Random(n), n * 10, 10, "a").drop_columns(["part"]))
    entries = {}
    for label, build in (("packed", ""), ("one file per task", "split_bytes = 1\nopen_cost_bytes = 0\n")):
        conf = tmp_path / f"{len(entries)}.toml"
        conf.write_text(conf_path.read_text().replace("sqlite:///", f"sqlite:///{len(entries)}-") + "[build]\n" + build)
        config = load_config(conf)
        catalog_n = config.load_catalog()
        catalog_n.create_namespace_if_not_exists("db")
        catalog_n.register_table("db.events", lake.iceberg.metadata_location)
        with caplog.at_level("INFO", logger="indexlib"):
            build_index(config, "db.events", spark)
        entries[label] = IndexTable(catalog_n, "skipindex", "db.events").entries().sort_by("file_path")
        assert "indexed 12 files (" in caplog.text, "the build reports its progress"
    assert "indexing 12 files (0.0 MB) in 3 Spark tasks" in caplog.text, "12 small files for 2 cores: 3 tasks, not 12"
    assert "in 12 Spark tasks" in caplog.text, "split_bytes = 1: one file per task"
    drop = ["source_version"]
    assert entries["packed"].drop_columns(drop).equals(entries["one file per task"].drop_columns(drop)), (
        "the same entries whatever the plan"
    )
