"""The pruning answers recorded before the one-evaluator refactor (issue 28) stay the answers after it: every stage
keeps and proves all-match for the same files on 1,000 random file sets x 4 predicates of the property test, every
rule-table predicate, and 484 predicates on each partitioned table (tests/pruning_snapshot.py says how the cases
are made; rewrite the snapshot only for a change whose answers were checked against brute force)."""

from __future__ import annotations

import json

import pytest
from pruning_snapshot import SNAPSHOT, index_answers, partition_answers, partition_wheres, rule_answers


@pytest.fixture(scope="module")
def recorded():
    return json.loads(SNAPSHOT.read_text())


def _differences(before: list[str] | dict, after: list[str] | dict) -> list[str]:
    keys = range(len(before)) if isinstance(before, list) else before.keys()
    return [f"{key}: before {before[key]!r}, now {after[key]!r}" for key in keys if before[key] != after[key]]


@pytest.mark.slow
def test_index_stages_answer_as_recorded(recorded):
    now = index_answers()
    assert [case["case"] for case in now] == [case["case"] for case in recorded["index"]], (
        "the generated cases changed (hypothesis version or strategies?): the comparison would be meaningless"
    )
    changed = [
        f"case {n}: {diff}"
        for n, (before, after) in enumerate(zip(recorded["index"], now, strict=True))
        for diff in _differences(before["answers"], after["answers"])
    ]
    assert not changed, f"{len(changed)} answers changed, e.g. " + "\n".join(changed[:10])


def test_rule_tables_answer_as_recorded(recorded):
    now = rule_answers()
    for settings, before in recorded["rules"].items():
        changed = _differences(before, now[settings])
        assert not changed, f"{settings}: " + "\n".join(changed)


def test_partition_stage_answers_as_recorded(recorded):
    now = partition_answers()
    assert now["wheres"] == recorded["partitions"]["wheres"], "the generated predicates changed"
    for table, before in recorded["partitions"].items():
        if table == "wheres":
            continue
        assert now[table]["files"] == before["files"], f"{table}: the files changed"
        wheres = partition_wheres()
        changed = [
            f"{wheres[i]}: before {old}, now {new} (files {before['files']})"
            for i, (old, new) in enumerate(zip(before["answers"], now[table]["answers"], strict=True))
            if old != new
        ]
        assert not changed, f"{table}: {len(changed)} answers changed, e.g. " + "\n".join(changed[:10])
