"""The answers of the pruning rules on a fixed set of cases, recorded before a refactor and compared after it.

Three families, each answered per stage (which files each stage keeps, which it proves all-match):
* "index": the random file sets and predicates of test_pruning_properties.py, generated deterministically
  (hypothesis with `derandomize=True`, so the same inputs every run; each case stores a fingerprint of its inputs so
  a change in generation reads as such, not as a changed answer), through `pruning.index_evidence.prune` (min/max, Bloom, automaton);
* "rules": every predicate of the rule tables of test_pruning_rules.py on its one file;
* "partitions": the partitioned Iceberg tables of test_partition_pruning.py and predicates built from a fixed list of
  leaves (seeded `random`), through the lookup's partition stage.

`python tests/pruning_snapshot.py` (from the repository root, with PYTHONPATH set to it) writes
tests/data/pruning_snapshot.json; test_pruning_snapshot.py recomputes and compares.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

SNAPSHOT = Path(__file__).parent / "data" / "pruning_snapshot.json"
INDEX_EXAMPLES = 1000


def _bits(mask: Any) -> str:
    return "".join("1" if bit else "0" for bit in np.asarray(mask, dtype=bool))


def index_cases(examples: int = INDEX_EXAMPLES) -> list[tuple[list[list[dict]], list[str], int]]:
    """(file rows, predicates, index settings position) of test_pruning_properties, the same on every run.

    Hypothesis (6.13x on) also draws, now and then, from the literals it finds in the project's own loaded modules
    (`hypothesis.internal.conjecture.providers._get_local_constants`): generated so, the cases would change with any
    literal added to indexlib, or any module of it imported lazily. They are generated without that pool, so they
    depend only on hypothesis and the strategies."""
    from unittest import mock

    import test_pruning_properties as props
    from hypothesis.internal.conjecture import providers

    cases: list[tuple[list[list[dict]], list[str], int]] = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        file_rows=props.files,
        wheres=st.lists(props.predicates, min_size=props.PREDICATES_PER_EXAMPLE, max_size=props.PREDICATES_PER_EXAMPLE),
        which=st.integers(0, 2),
    )
    def collect(file_rows: list[list[dict]], wheres: list[str], which: int) -> None:
        cases.append((file_rows, wheres, which))

    no_local_constants = providers.Constants()  # an empty pool of each type
    with mock.patch.object(providers, "_get_local_constants", lambda: no_local_constants):
        collect()
    return cases


def _fingerprint(case: Any) -> str:
    return hashlib.sha256(repr(case).encode()).hexdigest()[:16]


def _stages(verdicts: Any) -> str:
    """`stage:kept:all-match` per stage, `|` between stages; a bit per file. The key index stage (added after the
    recording; these cases build no key rows) is left out when it answers as the stage before it."""
    shown = [f"{name}:{_bits(kept)}:{_bits(all_match)}" for name, kept, all_match in verdicts.stages]
    names = [name for name, _, _ in verdicts.stages]
    return "|".join(
        answer
        for k, answer in enumerate(shown)
        if not (names[k] == "key index" and k and answer.split(":", 1)[1] == shown[k - 1].split(":", 1)[1])
    )


def index_answers(examples: int = INDEX_EXAMPLES, every: int = 1) -> list[dict[str, Any]]:
    """Every case's fingerprint, and the answers of every `every`-th case (the others' answers are None)."""
    import test_pruning_properties as props
    from conftest import write_and_index

    from indexlib.pruning.index_evidence import prune
    from indexlib.query.binding import bound_predicate

    settings_list = list(props.INDEX_SETTINGS.elements)  # sampled_from keeps its elements
    answers = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (file_rows, wheres, which) in enumerate(index_cases(examples)):
            if n % every:
                answers.append({"case": _fingerprint((file_rows, wheres, which)), "answers": None})
                continue
            directory = Path(tmp) / str(n)
            directory.mkdir()
            tables = [pa.Table.from_pylist(r, schema=props.ARROW_SCHEMA) for r in file_rows]
            paths, entries = write_and_index(directory, tables, props.SCHEMA, settings_list[which])
            per_where = []
            for where in wheres:
                try:
                    predicate = bound_predicate(where, props.SCHEMA, "db.t")
                except Exception as error:  # noqa: BLE001 - a refused predicate is an answer too
                    per_where.append(f"error: {type(error).__name__}")
                    continue
                per_where.append(_stages(prune(predicate, paths, entries)))
            answers.append({"case": _fingerprint((file_rows, wheres, which)), "answers": per_where})
    return answers


def rule_answers() -> dict[str, Any]:
    import test_pruning_rules as rules
    from conftest import write_and_index

    from indexlib.index_kinds.settings import IndexSettings
    from indexlib.pruning.index_evidence import prune
    from indexlib.query.binding import bound_predicate

    wheres = [where for table in (rules.SKIP, rules.KEEP, rules.ALL_MATCH, rules.NOT_ALL_MATCH) for where, _ in table]
    table = pa.Table.from_pylist(rules.ROWS, schema=rules.SCHEMA.as_arrow())
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, index_settings in (("minmax only", IndexSettings(kinds=())), ("automatic", IndexSettings())):
            paths, entries = write_and_index(tmp, [table], rules.SCHEMA, index_settings)
            out[name] = {
                where: _stages(prune(bound_predicate(where, rules.SCHEMA, "db.t", rules.CLOCK), paths, entries))
                for where in wheres
            }
    return out


# Leaves over the columns of test_partition_pruning's tables, combined at random into trees.
PARTITION_LEAVES = [
    "region = 'eu'",
    "region != 'eu'",
    "region IN ('eu', '')",
    "region NOT IN ('eu', 'us')",
    "region IS NULL",
    "region IS NOT NULL",
    "region LIKE 'e%'",
    "region NOT LIKE 'e%'",
    "region < 'f'",
    "region LIKE '%u'",
    "x > 0.0",
    "x <= 0.0",
    "x = 0.0",
    "x != 0.0",
    "isnan(x)",
    "NOT isnan(x)",
    "x >= 1.0",
    "ts >= TIMESTAMP '2024-03-01 00:00:00'",
    "ts < TIMESTAMP '2024-03-01 00:00:00'",
    "ts <= TIMESTAMP '1969-12-31 23:59:59'",
    "ts < TIMESTAMP '1970-01-01 00:00:00'",
    "ts > TIMESTAMP '2024-03-31 23:59:59.999999'",
    "ts = TIMESTAMP '2024-03-01 00:30:00'",
    "ts IN (TIMESTAMP '2024-02-29 23:00:00', TIMESTAMP '2024-04-01 00:45:00')",
    "ts != TIMESTAMP '2023-06-15 10:15:00'",
    "ts IS NULL",
    "ts IS NOT NULL",
    "CAST(ts AS DATE) = DATE '2024-02-29'",
    "date_trunc('month', ts) = TIMESTAMP '2024-03-01 00:00:00'",
    "month(ts) = 3",
    "month(ts) != 2",
    "day(ts) < 15",
    "day(ts) = 29",
    "hour(ts) >= 23",
    "year(ts) = 2024",
    "d = DATE '2024-02-29'",
    "d >= DATE '2024-03-01'",
    "d < DATE '1970-01-01'",
    "d <= DATE '2024-03-31'",
    "d IN (DATE '2023-06-15', DATE '2024-04-01')",
    "d != DATE '2024-03-01'",
    "d NOT IN (DATE '1969-12-31')",
    "d IS NULL",
    "month(d) = 3",
    "day(d) = 29",
    "year(d) < 2000",
    "id = 0",
    "id = 7",
    "id IN (1, 2, 3)",
    "id != 7",
    "id NOT IN (7, 8)",
    "id > 10",
    "id IS NULL",
    "id IS NOT NULL",
    "s = ''",
    "s = 'banana'",
    "s = 'ñandú'",
    "s IN ('apple', 'b')",
    "s LIKE 'apple%'",
    "s LIKE 'ap%'",
    "starts_with(s, 'ban')",
    "s LIKE '😀a%'",
    "s NOT LIKE 'app%'",
    "s NOT LIKE 'a%'",
    "s < 'apr'",
    "s <= 'b'",
    "s > 'az'",
    "s >= 'band'",
    "s != 'b'",
    "s NOT IN ('b', '')",
    "s IS NULL",
    "s RLIKE '^ap'",
    "n < 10",
    "n <= -11",
    "n >= 12",
    "n > 9",
    "n = 5",
    "n IN (-15, 27)",
    "n != 5",
    "n NOT IN (25, 27)",
    "n IS NULL",
    "tag = 'eu'",
    "tag = 'apr'",
    "tag != 'nulls'",
]


def partition_wheres(count: int = 400, seed: int = 28) -> list[str]:
    """Every leaf alone, then `count` random trees of 2-4 leaves with AND / OR / NOT."""
    rng = random.Random(seed)

    def tree(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(PARTITION_LEAVES)
        shape = rng.choice(["AND", "OR", "OR", "NOT"])
        if shape == "NOT":
            return f"NOT ({tree(depth - 1)})"
        return f"({tree(depth - 1)} {shape} {tree(depth - 1)})"

    return [*PARTITION_LEAVES, *(tree(3) for _ in range(count))]


def partition_answers(
    stage: Callable[[Any, list, Any], Any] | None = None, directory: str | None = None
) -> dict[str, Any]:
    """Per table of test_partition_pruning and predicate: the partition stage's (might, all-match) over its files,
    ordered by their labels. With `directory` the tables stay there, and each table's entry has the `paths` of its
    files in that order (for brute force)."""
    import test_partition_pruning as parts
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec

    from indexlib.query.binding import bound_predicate
    from indexlib.sources.iceberg import IcebergSource

    if stage is None:
        stage = _partition_stage()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = directory or scratch
        catalog = SqlCatalog("snap", uri=f"sqlite:///{tmp}/catalog.db", warehouse=f"file://{tmp}/warehouse")
        catalog.create_namespace("db")
        wheres = partition_wheres()
        for name, (fields, batches) in sorted(parts.TABLES.items()):
            spec = PartitionSpec(
                *(
                    PartitionField(parts.SOURCE_ID[column], 1000 + i, transform, part_name)
                    for i, (column, transform, part_name) in enumerate(fields)
                )
            )
            table = catalog.create_table(f"db.{name}", schema=parts.SCHEMA, partition_spec=spec)
            parts._append(table, batches)
            source = IcebergSource(catalog, f"db.{name}")
            files = source.live_files()
            labels = parts._labels(files)
            order = sorted(range(len(files)), key=lambda i: labels[i])
            per_where = []
            for where in wheres:
                predicate = bound_predicate(where, parts.SCHEMA, f"db.{name}")
                might, all_match = stage(source, files, predicate)
                per_where.append(
                    f"{_bits(np.asarray(might, dtype=bool)[order])}:{_bits(np.asarray(all_match, dtype=bool)[order])}"
                )
            out[name] = {"files": [labels[i] for i in order], "answers": per_where}
            if directory is not None:
                out[name]["paths"] = [files[i].path for i in order]
    out["wheres"] = _fingerprint(wheres)
    return out


def _partition_stage() -> Callable[[Any, list, Any], Any]:
    """The lookup's partition stage: (might, all_match) over `files` for a bound predicate."""
    from indexlib.pruning import partitions

    def stage(source: Any, files: list, predicate: Any) -> tuple[Any, Any]:
        result = partitions.prune_partitions(source, files, predicate)
        return result.might, result.all_match

    return stage


def compute(examples: int = INDEX_EXAMPLES) -> dict[str, Any]:
    return {"index": index_answers(examples), "rules": rule_answers(), "partitions": partition_answers()}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(compute(), ensure_ascii=False, indent=0, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT} ({SNAPSHOT.stat().st_size:,} bytes)")
