"""The global key index (issue 30): key rows written with their entries by the build, kept by backfill and
compaction, dropped with their files, read by hash through row-group ranges, and answered as one more peer of the
lookup. Every answer is checked against the rows; collisions are forced through statistics/key_hash.py's hook.
(The automatic choice: tests/test_key_index_choice.py. Random histories with the key index on: test_table_life.py.
Random predicates against brute force: test_pruning_properties.py.)"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from conftest import hash_bits
from lakes import Lake
from pyiceberg.expressions import EqualTo, LessThan

from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact
from indexlib.lookup import lookup
from indexlib.store.table import IndexTable

SCHEMA = pa.schema([("id", pa.int64()), ("code", pa.string()), ("part", pa.string())])
FILES, ROWS = 6, 1_500


def _batch(rng: np.random.Generator, n: int) -> pa.Table:
    ids = rng.choice(10**9, ROWS, replace=False)
    codes = [f"c{v:08x}" for v in rng.integers(0, 2**32, ROWS)]
    return pa.table({"id": ids, "code": codes, "part": ["ab"[n % 2]] * ROWS}, schema=SCHEMA)


@pytest.fixture
def keyed(conf_path, catalog, tmp_path):
    """An Iceberg table of FILES files of random ids and codes, and a configuration with the key index on."""
    rng = np.random.default_rng(7)
    batches = [_batch(rng, n) for n in range(FILES)]
    table = catalog.create_table("db.coded", schema=SCHEMA)
    for batch in batches:
        table.append(batch)
    conf = tmp_path / "keyed.toml"
    conf.write_text(conf_path.read_text() + "[index]\nkey_index = true\n")
    return load_config(conf), "db.coded", table, batches


def _files_holding(table, column: str, values: list) -> set[str]:
    """The live files holding one of `values` in `column`, read from the files themselves."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    found = set()
    for task in table.refresh().scan().plan_files():
        path = task.file.file_path
        data = pq.read_table(path.removeprefix("file://"), columns=[column])
        if pc.any(pc.is_in(data.column(column), value_set=pa.array(values))).as_py():
            found.add(path)
    return found


def test_equality_and_in_lists_answer_from_the_key_rows_and_read_one_row_group_per_key(keyed):
    config, name, table, batches = keyed
    build_index(config, name)
    index = IndexTable(config.load_catalog(), config.index_namespace, name).require()
    key_rows = index.scan(row_filter=LessThan("field_id", 0), selected_fields=("file_path", "key_hash")).to_arrow()
    assert key_rows.num_rows == 2 * FILES * ROWS + FILES, (
        "one key row per distinct value of each keyed column (id, code, and part's one value) and file"
    )
    rng = random.Random(3)
    for values in ([int(batches[2]["id"][5].as_py())], [int(batches[k]["id"][k].as_py()) for k in range(4)] + [-1]):
        where = f"id IN ({', '.join(map(str, values))})"
        result = lookup(config, name, where)
        truth = _files_holding(table, "id", values)
        assert set(result.files) == truth, f"{where}: the key index keeps exactly the files holding a value"
        stages = {stage.name: stage.files_out for stage in result.stages}
        assert stages["key index"] == len(truth), f"{where}: the key index stage is the one that pruned"
        assert result.key_reads is not None and 0 < result.key_reads.row_groups <= len(values), (
            f"{where}: at most one row group read per key ({result.key_reads})"
        )
    absent = lookup(config, name, "code = 'nothere'")
    assert absent.files == [], "a string absent from every file: no file kept"
    code = batches[4]["code"][rng.randrange(ROWS)].as_py()
    assert set(lookup(config, name, f"code LIKE '{code}'").files) == _files_holding(table, "code", [code]), (
        "LIKE without wildcards is an equality: the key index answers it"
    )
    assert len(lookup(config, name, "code LIKE 'c0%'").files) == FILES, "a prefix is not an equality: all kept"


def test_an_in_list_of_100000_values_is_answered_by_the_key_index(keyed):
    config, name, table, batches = keyed
    build_index(config, name)
    values = [int(v) for v in np.random.default_rng(1).integers(10**9, 2 * 10**9, 100_000)]
    values += [int(batches[1]["id"][0].as_py())]
    result = lookup(config, name, f"id IN ({', '.join(map(str, values))})")
    assert set(result.files) == _files_holding(table, "id", values), "100,000 keys: only the file holding one"


def test_collisions_keep_more_files_never_fewer(keyed):
    """With 3-bit hashes every key collides with an eighth of all keys: lookups keep extra files, never drop one."""
    config, name, table, batches = keyed
    with hash_bits(3):
        build_index(config, name)
        for k in range(FILES):
            value = int(batches[k]["id"][k].as_py())
            result = lookup(config, name, f"id = {value}")
            assert _files_holding(table, "id", [value]) <= set(result.files), "a collision never drops a file"
        held = {int(v) for batch in batches for v in batch["id"].to_pylist()}
        absent = next(v for v in range(500_000_000, 600_000_000) if v not in held)  # inside every file's bounds
        missing = lookup(config, name, f"id = {absent}")
        assert len(missing.files) == FILES, "an absent key whose 3-bit hash every file holds keeps every file"


def test_key_rows_go_with_their_files_through_deletes_rebuilds_and_compaction(keyed):
    config, name, table, batches = keyed
    build_index(config, name)
    index = IndexTable(config.load_catalog(), config.index_namespace, name)
    first = int(batches[0]["id"][0].as_py())
    table.delete(EqualTo("id", first))  # rewrites the first file without that row
    build_index(config, name)
    keys = index.reload().scan(row_filter=LessThan("field_id", 0), selected_fields=("file_path",)).to_arrow()
    live = {task.file.file_path for task in table.refresh().scan().plan_files()}
    assert set(keys.column("file_path").to_pylist()) == live, "key rows of the removed file were dropped"
    assert lookup(config, name, f"id = {first}").files == [], "the deleted key is in no live file"
    other = int(batches[3]["id"][7].as_py())
    before = lookup(config, name, f"id = {other}").files
    compact(config, name)
    after = lookup(config, name, f"id = {other}")
    assert after.files == before == sorted(_files_holding(table, "id", [other])), "compaction keeps the key rows"
    files = index.reload().scan(row_filter=EqualTo("field_id", -1)).plan_files()
    assert len(list(files)) == 1, "compaction writes each column's key rows as one data file, sorted by hash"


def test_a_backfill_moves_a_table_onto_the_key_index_and_it_answers_throughout(conf_path, keyed, tmp_path):
    """Entries built before the key index are not keyed: the key index keeps their files, their Bloom filters answer,
    while new files and rebuilt entries are answered from key rows."""
    keyed_config, name, table, batches = keyed
    plain = load_config(conf_path)
    build_index(plain, name)  # without the key index: Bloom filters
    late = _batch(np.random.default_rng(99), 0)
    table.append(late)
    build_index(keyed_config, name)  # the new file is keyed, the older ones are not

    def check(step: str) -> None:
        for value in (int(batches[5]["id"][9].as_py()), int(late["id"][3].as_py())):
            truth = sorted(_files_holding(table, "id", [value]))
            assert lookup(keyed_config, name, f"id = {value}").files == truth, f"{step}: id = {value}"

    check("old entries beside keyed ones")
    stepwise = tmp_path / "stepwise.toml"
    stepwise.write_text(keyed_config.path.read_text() + "[build]\nbackfill_files_per_commit = 2\n")
    result = backfill(load_config(stepwise), name)
    assert result.files_rebuilt == FILES, "the key index changes the configuration version: the old entries rebuilt"
    check("after the backfill")
    value = int(batches[0]["id"][0].as_py())
    assert lookup(keyed_config, name, f"id = {value}").key_reads is not None, "the key index answers the old files"


def test_the_key_index_setting_is_checked(conf_path, catalog):
    for value, shown in (("1", "1"), ('"yes"', "'yes'")):
        bad = conf_path.parent / "bad.toml"
        bad.write_text(conf_path.read_text() + f"[index]\nkey_index = {value}\n")
        with pytest.raises(UserError, match=rf'key_index: expected true, false or "auto", got {shown}'):
            load_config(bad).column_settings("db.t", Lake("iceberg", catalog, conf_path.parent, "t").iceberg.schema())


def test_bloom_payloads_are_not_read_where_the_key_index_judged(keyed, tmp_path):
    """A Bloom filter hashes as the key index does: where the key index judged `=` / IN, a filter cannot narrow the
    answer (its collisions are the key index's too), so the lookup does not read it; the answer is the rows'."""
    from indexlib.lookup import lookup_in, read_state
    from indexlib.query.sql import Clock

    config, name, table, batches = keyed
    both = tmp_path / "both.toml"
    both.write_text(config.path.read_text() + 'kinds = ["bloom"]\n')  # under [index]: filters beside the key index
    both_config = load_config(both)
    build_index(both_config, name)
    value = int(batches[2]["id"][11].as_py())
    state = read_state(both_config, name)
    result = lookup_in(state, name, f"id = {value}", Clock.system("UTC"))
    assert set(result.files) == _files_holding(table, "id", [value])
    payload_reads = [read for read in state.rows.reads if read[0] == "payloads"]
    assert payload_reads == [], f"no Bloom payload read for files the key index judged: {payload_reads}"
    plain = lookup_in(
        read_state(both_config, name), name, f"code = '{batches[0]['code'][0].as_py()}' OR id = -1", Clock.system("UTC")
    )
    assert len(plain.files) == 1, "and the answer is still exact"
