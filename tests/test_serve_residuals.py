"""Per-file residuals end to end (issue 39: an answer grows with its files, not with files x filter): a real
`skipindex serve` on 127.0.0.1 (test_serve.py's `Serve`) over a 400-file table whose key column is sorted across the
files, a stock pyiceberg `RestCatalog` with server-side planning. The rows a client reads through the service equal
pyiceberg's own client-side scan for random IN / NOT IN lists, and the answer for an IN of 1,000 keys is a small
fraction of what it was when every task repeated the whole list."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_tables import rows
from pyiceberg import expressions as ice
from test_serve import Serve, call, client, served_catalog

from indexlib.indexing.build import build_index

pytestmark = pytest.mark.servers

FILES, ROWS_PER_FILE = 400, 25
KEYS = FILES * ROWS_PER_FILE  # keys 0, 3, 6, ... sorted across the files
SCATTERED_FILES = 40  # db.scattered: the same keys dealt round-robin, so every file's bounds span the whole table


def key_table(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "k": pa.array([3 * i for i in ids], pa.int64()),
            "s": pa.array([f"name-{i:06d}" if i % 11 else None for i in ids], pa.string()),
        }
    )


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("residuals")
    conf, config, catalog = served_catalog(root, '[index.tables."db.keyed"]\nkey_index = true\n')
    table = catalog.create_table("db.keys", key_table(0, 1).schema)
    (root / "data").mkdir()
    paths = []
    for n in range(FILES):
        path = root / "data" / f"part-{n:04d}.parquet"
        pq.write_table(key_table(n * ROWS_PER_FILE, ROWS_PER_FILE), path)
        paths.append(str(path))
    table.add_files(paths)
    build_index(config, "db.keys")
    whole = key_table(0, SCATTERED_FILES * ROWS_PER_FILE)
    for name in ("scattered", "keyed"):  # db.keyed: the same rows, its columns in the global key index
        scattered = catalog.create_table(f"db.{name}", key_table(0, 1).schema)
        (root / name).mkdir()
        paths = []
        for n in range(SCATTERED_FILES):
            path = root / name / f"part-{n:04d}.parquet"
            pq.write_table(whole.take(list(range(n, whole.num_rows, SCATTERED_FILES))), path)
            paths.append(str(path))
        scattered.add_files(paths)
        build_index(config, f"db.{name}")
    return conf, catalog


@pytest.fixture(scope="module")
def server(lake) -> Serve:
    serve = Serve(lake[0]).start()
    yield serve
    serve.stop()


def _filters(draw: random.Random) -> ice.BooleanExpression:
    keys = [draw.randrange(-10, 3 * KEYS + 10) for _ in range(draw.choice([2, 20, 300]))]
    names = [f"name-{draw.randrange(0, KEYS):06d}" for _ in range(draw.choice([2, 40]))]
    return draw.choice(
        [
            ice.In("k", keys),
            ice.NotIn("k", keys),
            ice.Not(ice.In("k", keys)),
            ice.And(ice.In("k", keys), ice.GreaterThanOrEqual("k", draw.randrange(0, 3 * KEYS))),
            ice.Or(ice.In("s", names), ice.In("k", keys)),
            ice.NotIn("s", names),
        ]
    )


@pytest.mark.parametrize(
    ("table", "seed"),
    [("db.keys", n) for n in range(12)] + [("db.scattered", n) for n in range(5)] + [("db.keyed", n) for n in range(5)],
)
def test_rows_of_random_in_lists_are_pyiceberg_own(server, lake, table, seed):
    expression = _filters(random.Random(seed))
    served = client(server).load_table(table)
    assert rows(served.scan(row_filter=expression).to_arrow()) == rows(
        lake[1].load_table(table).scan(row_filter=expression).to_arrow()
    ), f"per-file residuals select the rows of the whole filter: {str(expression)[:200]}"


@pytest.mark.parametrize("table", ["scattered", "keyed"])
def test_where_bounds_span_every_key_each_files_list_holds_the_keys_its_index_admits(server, table):
    """Every file's bounds span the table, so only the index trims: db.scattered's Bloom filters (a file keeps its
    own keys of the list and the filter's few false positives), db.keyed's key rows (its own keys), not the 1,000."""
    keys = sorted(random.Random(3).sample(range(0, 3 * SCATTERED_FILES * ROWS_PER_FILE, 3), 200))
    keys += [3 * SCATTERED_FILES * ROWS_PER_FILE + 3 * n + 1 for n in range(800)]  # absent (beyond the last key)
    tasks = _tasks(server, table, ice.In("k", keys))
    assert len(tasks) == SCATTERED_FILES, "200 present keys are spread over every file"
    own = {k for k in keys if k < 3 * SCATTERED_FILES * ROWS_PER_FILE}
    for task in tasks:
        listed = _listed(task["residual-filter"])
        assert len(listed) < 60, f"{len(listed)} keys in one file's residual (its filter admits its own ~5)"
        assert {k for k in own if k // 3 % SCATTERED_FILES == _file_number(task)} <= set(listed), (
            "every key of the list a file holds stays in its residual"
        )


def _tasks(server: Serve, table: str, expression: ice.BooleanExpression) -> list[dict[str, Any]]:
    body = {"filter": json.loads(expression.model_dump_json(serialize_as_any=True))}
    status, payload = call(server, "POST", f"/v1/namespaces/db/tables/{table}/plan", body)
    assert status == 200, payload
    answers = [payload]
    for token in payload.get("plan-tasks", []):
        status, more = call(server, "POST", f"/v1/namespaces/db/tables/{table}/tasks", {"plan-task": token})
        assert status == 200, more
        answers.append(more)
    return [task for answer in answers for task in answer["file-scan-tasks"]]


def _listed(residual: dict[str, Any]) -> list[int]:
    return residual["values"] if residual["type"] == "in" else [residual["value"]]


def _file_number(task: dict[str, Any]) -> int:
    return int(task["data-file"]["file-path"].rsplit("part-", 1)[1].split(".")[0])


def test_an_answer_grows_with_its_files_not_files_times_filter(server):
    """An IN of 1,000 keys spread over the whole table: most files keep a few keys each. Untrimmed, each kept
    file's task carried the whole list."""
    keys = sorted(random.Random(7).sample(range(0, 3 * KEYS, 3), 1_000))
    whole = json.loads(ice.In("k", keys).model_dump_json(serialize_as_any=True))
    status, payload = call(server, "POST", "/v1/namespaces/db/tables/keys/plan", {"filter": whole})
    assert status == 200, payload
    answers = [payload]
    for token in payload.get("plan-tasks", []):
        status, more = call(server, "POST", "/v1/namespaces/db/tables/keys/tasks", {"plan-task": token})
        assert status == 200, more
        answers.append(more)
    tasks = [task for answer in answers for task in answer["file-scan-tasks"]]
    assert len(tasks) > FILES // 2, "the keys are spread over most files"
    sent = sum(len(json.dumps(answer)) for answer in answers)
    untrimmed = (
        sent + len(tasks) * len(json.dumps(whole)) - sum(len(json.dumps(task.get("residual-filter"))) for task in tasks)
    )
    assert sent < 0.2 * untrimmed, f"{sent:,} bytes sent, {untrimmed:,} with the whole list on every task"
    per_task = [len(json.dumps(task.get("residual-filter"))) for task in tasks]
    assert max(per_task) < len(json.dumps(whole)) / 20, "each file's residual holds the keys within its bounds"
