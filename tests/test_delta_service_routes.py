"""Delta tables in the service's catalog, without Spark (the Spark SQL reads are tests/test_delta_service.py): what a
load and a plan of a Delta table answer, read as the rules of the translation (indexlib/service/delta_tables.py).
The table is written by delta-rs with deletion vectors committed as Spark's DELETE writes them
(tests/delta_vectors.py), inline and in files; the service answers through its real routes, in process.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import sweep
from delta_vectors import MAGIC, bitmap, commit_deletion_vectors, live_adds
from deltalake import DeltaTable, write_deltalake
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from iceberg_tables import batch, predicate
from pyiceberg.catalog.rest import TableResponse
from test_serve import TOKEN

from indexlib.config import load_config
from indexlib.indexing.build import build_index
from indexlib.service.app import create_app
from indexlib.service.names import TableName
from indexlib.service.routes import Routes
from indexlib.sources.delta_log import z85_decode

HOSTILE = ["a b", "x/y=z", "c:d%20", "", None, "ü"]


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 7 for i in ids], pa.int32()),
            "p": pa.array([HOSTILE[i % len(HOSTILE)] for i in ids], pa.string()),
        }
    )


@pytest.fixture
def served(tmp_path: Path) -> tuple[Routes, dict[str, str], Any]:
    """`vectors`: partitioned by hostile strings (NULL too), deletion vectors inline, in 'u' and in 'p' files;
    `plain`: no vectors, no partitions."""
    paths = {"vectors": str(tmp_path / "vectors"), "plain": str(tmp_path / "plain")}
    write_deltalake(
        paths["vectors"], rows(0, 60), partition_by=["p"], configuration={"delta.enableDeletionVectors": "true"}
    )
    write_deltalake(paths["plain"], rows(0, 20))
    listed = "".join(f'{name} = "{path}"\n' for name, path in paths.items())
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///{tmp_path}/catalog.db"\nwarehouse = "{tmp_path}/wh"\n'
        f"[serve]\nplan_workers = 0\n[serve.delta_tables]\n{listed}"
    )
    config = load_config(conf)
    build_index(config, paths["vectors"])
    return Routes(config, TOKEN), paths, config


def answer(reply: Any) -> Any:
    return json.loads(reply.body) if reply.body else None


EVENTS = TableName(("delta",), "vectors")


def test_delta_tables_are_listed_under_their_namespace(served):
    routes, _, _ = served
    assert ("delta",) in {tuple(n) for n in answer(routes.call("list_namespaces", ()))["namespaces"]}
    listed = answer(routes.call("list_tables", ("delta",)))["identifiers"]
    assert sorted(t["name"] for t in listed) == ["plain", "vectors"], "every configured Delta table is listed"
    assert routes.call("table_exists", EVENTS).status == 204
    assert routes.call("table_exists", TableName(("delta",), "other")).status == 404, "an unconfigured name: 404"
    assert routes.call("load_table", TableName(("delta",), "other")).status == 404


def test_load_translates_the_delta_snapshot(served):
    routes, paths, _ = served
    commit_deletion_vectors(paths["vectors"], {next(iter(live_adds(paths["vectors"]))): {0}}, storage="u")
    loaded = TableResponse.model_validate(answer(routes.call("load_table", EVENTS)))
    metadata = loaded.metadata
    assert metadata.format_version == 3, "deletion vectors: format version 3"
    assert [s.snapshot_id for s in metadata.snapshots] == [0, 1], "one snapshot per Delta version, its id the version"
    assert metadata.current_snapshot_id == 1
    spec = metadata.spec()
    schema = metadata.schema()
    assert [(schema.find_field(f.source_id).name, str(f.transform)) for f in spec.fields] == [("p", "identity")]
    mapping = json.loads(metadata.properties["schema.name-mapping.default"])
    assert {m["names"][0]: m["field-id"] for m in mapping} == {f.name: f.field_id for f in schema.fields}, (
        "an unmapped table's columns are found by name"
    )
    plain = TableResponse.model_validate(answer(routes.call("load_table", TableName(("delta",), "plain")))).metadata
    assert plain.format_version == 2 and not plain.spec().fields, "no vectors, no partitions: v2, unpartitioned"


def test_a_file_vector_is_sent_as_icebergs_reader_reads_it(served):
    """Iceberg's reader reads `content-size-in-bytes` bytes at `content-offset`: a 4-byte big-endian length (the
    size less 8), the magic number, the bitmap, and a big-endian CRC-32 of magic and bitmap; those bitmap bytes are
    the ones written for that data file's deleted positions."""
    routes, paths, _ = served
    adds = list(live_adds(paths["vectors"]))
    deleted = {adds[0]: {0, 2}, adds[1]: {1}, adds[2]: {0}}
    commit_deletion_vectors(paths["vectors"], {adds[0]: {0, 2}, adds[1]: {1}}, storage="u")
    commit_deletion_vectors(paths["vectors"], {adds[2]: {0}}, storage="p")
    planned = answer(routes.call("plan", EVENTS, b"{}"))
    by_file = {t["data-file"]["file-path"]: t for t in planned["file-scan-tasks"]}
    assert len(by_file) == len(adds), "no filter: every live file"
    checked = 0
    for path, positions in deleted.items():
        task = next(t for p, t in by_file.items() if p.endswith(unquote(path)))
        (reference,) = task["delete-file-references"]
        vector = planned["delete-files"][reference]
        assert vector["file-format"] == "puffin" and vector["referenced-data-file"] == task["data-file"]["file-path"]
        assert vector["partition"] == task["data-file"]["partition"], "a vector's partition is its data file's"
        with open(vector["file-path"], "rb") as stream:
            stream.seek(vector["content-offset"])
            blob = stream.read(vector["content-size-in-bytes"])
        length, data, crc = struct.unpack(">I", blob[:4])[0], blob[4:-4], struct.unpack(">I", blob[-4:])[0]
        assert length == vector["content-size-in-bytes"] - 8 == len(data), "the length field is the size less 8"
        assert struct.unpack("<i", data[:4])[0] == MAGIC and crc == zlib.crc32(data), "magic first, CRC-32 last"
        assert data == bitmap(positions) and vector["record-count"] == len(positions), "the file's own vector"
        checked += 1
    assert checked == 3


def test_partition_values_travel_exactly(served):
    routes, _, _ = served
    planned = answer(routes.call("plan", EVENTS, b"{}"))
    values = {t["data-file"]["partition"][0] for t in planned["file-scan-tasks"]}
    assert values == {"a b", "x/y=z", "c:d%20", "ü", None}, "hostile strings as written, NULL as null"


def test_a_filter_on_the_partition_column_keeps_its_files(served):
    routes, _, _ = served
    request = json.dumps({"filter": {"type": "is-null", "term": "p"}}).encode()
    planned = answer(routes.call("plan", EVENTS, request))
    assert {t["data-file"]["partition"][0] for t in planned["file-scan-tasks"]} == {None}, "IS NULL keeps NULL's files"


def test_inline_vectors_are_refused_naming_them(served):
    routes, paths, _ = served
    commit_deletion_vectors(paths["vectors"], {next(iter(live_adds(paths["vectors"]))): {1}}, storage="i")
    reply = routes.call("plan", EVENTS, b"{}")
    assert reply.status == 501 and "inline" in answer(reply)["error"]["message"], "inline vectors: refused, named"


def test_version_as_of_plans_that_version(served):
    routes, paths, _ = served
    adds = list(live_adds(paths["vectors"]))
    commit_deletion_vectors(paths["vectors"], {adds[0]: {0}}, storage="u")
    routes.call("load_table", EVENTS)
    old = answer(routes.call("plan", EVENTS, json.dumps({"snapshot-id": 0}).encode()))
    assert not old["delete-files"], "version 0 had no vectors"
    missing = routes.call("plan", EVENTS, json.dumps({"snapshot-id": 7}).encode())
    assert missing.status == 400, "a version the table does not have: 400"


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/namespaces/delta/tables/vectors", {"requirements": [], "updates": []}),
        ("DELETE", "/v1/namespaces/delta/tables/vectors", None),
        ("POST", "/v1/namespaces/delta/tables", {"name": "new", "schema": {"type": "struct", "fields": []}}),
        (
            "POST",
            "/v1/tables/rename",
            {"source": {"namespace": ["db"], "name": "t"}, "destination": {"namespace": ["delta"], "name": "vectors"}},
        ),
        (
            "POST",
            "/v1/transactions/commit",
            {"table-changes": [{"identifier": {"namespace": ["delta"], "name": "vectors"}}]},
        ),
    ],
)
def test_every_write_to_a_delta_table_is_refused_naming_it(served, method, path, body):
    _, _, config = served
    with TestClient(create_app(config, TOKEN)) as client:
        response = client.request(method, path, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 403, f"{method} {path}: a write to a Delta table is a 403"
    assert "delta.vectors" in response.json()["error"]["message"] or "delta.new" in response.json()["error"]["message"]


def test_z85_decodes_the_protocols_example():
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]), "ZeroMQ RFC 32"


def test_a_file_whose_field_ids_iceberg_would_read_by_is_refused(tmp_path: Path):
    """Without column mapping the columns' ids are derived from their names; a file carrying Parquet field ids of
    its own (here 1 and 2) would be read by Iceberg's reader by those ids, NULL for every column: refused."""
    path = str(tmp_path / "ids")
    ids = pa.schema(
        [
            pa.field(n, t, metadata={b"PARQUET:field_id": str(i).encode()})
            for i, (n, t) in enumerate([("id", pa.int64()), ("k", pa.int32())], 1)
        ]
    )
    write_deltalake(path, pa.table({"id": [1, 2], "k": [3, 4]}).cast(ids))
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///{tmp_path}/catalog.db"\nwarehouse = "{tmp_path}/wh"\n'
        f'[serve]\nplan_workers = 0\n[serve.delta_tables]\nids = "{path}"\n'
    )
    routes = Routes(load_config(conf), TOKEN)
    reply = routes.call("plan", TableName(("delta",), "ids"), b"{}")
    assert reply.status == 501 and "field ids" in answer(reply)["error"]["message"], "refused, never read as NULL"


DRAWN_EXAMPLES = sweep("SKIPINDEX_DELTA_PLAN_EXAMPLES", short=15, long=200)


def _vector_positions(task: dict[str, Any], deletes: list[dict[str, Any]]) -> set[int]:
    """The positions a task's deletion vector deletes, read as Iceberg's reader reads it (at `content-offset`,
    `content-size-in-bytes` long) and decoded from the one-array-container bitmap tests/delta_vectors.py writes."""
    found: set[int] = set()
    for reference in task.get("delete-file-references") or ():
        vector = deletes[reference]
        with open(vector["file-path"], "rb") as stream:
            stream.seek(vector["content-offset"])
            blob = stream.read(vector["content-size-in-bytes"])
        data = blob[4:-4]
        magic, buckets, key = struct.unpack("<iqi", data[:16])
        cookie, containers, _, count, _ = struct.unpack("<IIHHI", data[16:32])
        assert (magic, buckets, key, cookie, containers) == (MAGIC, 1, 0, 12346, 1), "the test's own layout"
        found |= set(struct.unpack(f"<{count + 1}H", data[32 : 32 + 2 * (count + 1)]))
    return found


@pytest.fixture
def drawn_lake(tmp_path: Path) -> tuple[Routes, str]:
    """iceberg_tables' batches (partitioned by g) with vectors in 'u' and 'p' files, indexed between two of them."""
    path = str(tmp_path / "drawn")
    for g in range(3):
        part = batch(100 * g, 40, g).rename_columns(["id", "g", "k", "f", "name"])
        write_deltalake(
            path, part, mode="append", partition_by=["g"], configuration={"delta.enableDeletionVectors": "true"}
        )
    adds = list(live_adds(path))
    commit_deletion_vectors(path, {adds[0]: {0, 3, 7}, adds[1]: {1}}, storage="u")
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///{tmp_path}/catalog.db"\nwarehouse = "{tmp_path}/wh"\n'
        f'[serve]\nplan_workers = 0\n[serve.delta_tables]\ndrawn = "{path}"\n'
    )
    config = load_config(conf)
    build_index(config, path)
    commit_deletion_vectors(path, {adds[0]: {9}, adds[2]: {2, 5}}, storage="p")  # after the build
    return Routes(config, TOKEN), path


@settings(max_examples=DRAWN_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=predicate())
def test_the_rows_of_a_plan_read_as_icebergs_reader_reads_it_are_delta_rs_rows(drawn_lake, drawn):
    """Each task's file, its partition value as the column, less its vector's positions read at the offsets sent,
    filtered by the predicate: exactly the rows SQL selects over delta-rs's own read (its vectors applied)."""
    routes, path = drawn_lake
    where, expression = drawn
    body = json.dumps({"filter": json.loads(expression.model_dump_json(serialize_as_any=True))}).encode()
    planned = answer(routes.call("plan", TableName(("delta",), "drawn"), body))
    read = []
    for task in planned["file-scan-tasks"]:
        rows_of = pq.read_table(task["data-file"]["file-path"]).to_pylist()
        gone = _vector_positions(task, planned["delete-files"])
        g = task["data-file"]["partition"][0]
        read += [row | {"g": g} for i, row in enumerate(rows_of) if i not in gone]
    schema = pa.schema(
        [("id", pa.int64()), ("g", pa.int32()), ("k", pa.int32()), ("f", pa.float32()), ("name", pa.string())]
    )
    con = duckdb.connect()
    through = con.from_arrow(pa.Table.from_pylist(read, schema=schema)).query("t", f"SELECT * FROM t WHERE {where}")
    own = con.from_arrow(pa.table(DeltaTable(path).scan().read_all()).select(schema.names).cast(schema))
    truth = own.query("t", f"SELECT * FROM t WHERE {where}")
    assert Counter(through.fetchall()) == Counter(truth.fetchall()), f"the plan's rows are the table's: {where}"
