"""Index kinds are plug-ins: the indexer, the configuration and the lookup iterate the registry, so a third kind
needs only its own module and one entry point. Shown with a toy kind registered the way a package would."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import write_and_index
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, LongType, NestedField, StringType

from indexlib import plugins
from indexlib.config import Config
from indexlib.errors import UserError
from indexlib.index_kinds import loading
from indexlib.index_kinds.base import BuiltIndex, IndexKind
from indexlib.index_kinds.loading import ENTRY_POINT_GROUP
from indexlib.index_kinds.registry import parse_settings, registry
from indexlib.index_kinds.settings import IndexSettings, Setting, positive_int
from indexlib.indexing.file_indexer import config_version
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.query.model import Pattern
from indexlib.query.value_set import ValueSet
from indexlib.statistics.provider import ColumnStatistics
from indexlib.statistics.verdict import Verdict

MAX_KEYS = Setting("toy_max_keys", 100, positive_int)


class ToyIndex(IndexKind):
    """The file's exact set of keys, as JSON: answers `=` / IN exactly."""

    name = "toy"
    version = 1
    settings = (MAX_KEYS,)
    lookup_rank = 30

    def can_index(self, iceberg_type: IcebergType) -> bool:
        return isinstance(iceberg_type, StringType)

    def wanted(self, settings, iceberg_type, keys, rows, built: Iterable[BuiltIndex]) -> bool:
        return self.can_index(iceberg_type) and 0 < len(keys) <= settings.value(MAX_KEYS)

    def build(self, keys, iceberg_type, settings) -> BuiltIndex:
        return BuiltIndex(json.dumps(keys.texts()).encode(), exact=True)

    def verdict(self, leaf, payloads: Sequence[bytes | None], stats: ColumnStatistics) -> Verdict | None:
        if not isinstance(leaf, ValueSet) or leaf.negated:
            return None
        might = [p is None or any(v in json.loads(p) for v in leaf.values) for p in payloads]
        return Verdict(np.array(might, dtype=bool), np.zeros(len(payloads), dtype=bool))

    def reads(self, leaf: ValueSet | Pattern) -> str | None:
        return "toy key sets" if isinstance(leaf, ValueSet) else None


def _registered(monkeypatch, points):
    """What the registry sees when the entry-point group holds `points` (as an installed package would declare)."""
    monkeypatch.setattr(plugins, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    loading.loaded_kinds.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_registry():
    loading.loaded_kinds.cache_clear()
    yield
    loading.loaded_kinds.cache_clear()


@pytest.fixture
def with_toy(monkeypatch):
    toy = EntryPoint("toy", f"{__name__}:ToyIndex", ENTRY_POINT_GROUP)
    _registered(monkeypatch, [*entry_points(group=ENTRY_POINT_GROUP), toy])


def test_the_built_in_kinds_are_registered_through_the_entry_point_group(monkeypatch):
    points = list(entry_points(group=ENTRY_POINT_GROUP))
    assert {point.name for point in points} == {"bloom", "automaton", "ngram"}, (
        "pyproject.toml registers the three (reinstall)"
    )
    assert list(registry()) == ["bloom", "automaton", "ngram"], "lookup order: cheap and precise first"


def test_without_package_metadata_the_built_in_kinds_are_loaded_directly(monkeypatch):
    _registered(monkeypatch, [])  # a checkout on sys.path, not installed
    assert list(registry()) == ["bloom", "automaton", "ngram"]
    assert IndexSettings(bloom_fpp=0.2).to_json() == {
        "kinds": None,
        "bloom_fpp": 0.2,
        "bloom_false_files": 0.5,
        "automaton_max_ndv": 256,
        "automaton_max_states": 256,
        "automaton_max_bytes": 2048,
        "ngram_size": 4,
        "ngram_fpp": 0.1,
    }, "left to the automatic choice, a column may get every kind: every kind's settings count"
    tagged = IndexSettings(kinds=("bloom",)).to_json()
    assert "ngram_size" not in tagged, "a late kind's settings count only where the column may get the kind"
    assert IndexSettings(kinds=("ngram",)).to_json()["ngram_size"] == 4, "named: its settings count"


def test_settings_accept_only_the_registered_kinds_settings(monkeypatch):
    with pytest.raises(TypeError, match="unexpected keyword argument 'toy_max_keys'"):
        IndexSettings(toy_max_keys=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bloom_fp'"):
        IndexSettings(bloom_fp=0.2)  # a typo is not silently the default
    assert IndexSettings(bloom_fpp=0.01) == IndexSettings(), "a value equal to its default is the default"
    assert hash(IndexSettings(bloom_fpp=0.01)) == hash(IndexSettings())
    assert IndexSettings(bloom_fpp=0.02) != IndexSettings()


def test_a_registered_kind_gets_its_settings_its_payloads_and_its_lookup_stage(tmp_path, with_toy):
    assert list(registry()) == ["bloom", "automaton", "ngram", "toy"]
    settings = parse_settings({"kinds": ["toy"], "toy_max_keys": 5}, IndexSettings(), "index")
    assert settings.value(MAX_KEYS) == 5, "the configuration accepts the kind's own setting"
    assert IndexSettings(toy_max_keys=5).value(MAX_KEYS) == 5, "once registered, the constructor takes it too"
    with pytest.raises(ValueError, match="index.toy_max_keys: expected an integer >= 1"):
        parse_settings({"toy_max_keys": 0}, IndexSettings(), "index")
    assert config_version({2: settings}) != config_version({2: settings.updated(toy_max_keys=6)}), "rebuilds"

    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "tag", StringType()))
    tables = [
        pa.Table.from_pylist([{"id": 1, "tag": "a"}, {"id": 2, "tag": "c"}], schema=schema.as_arrow()),
        pa.Table.from_pylist([{"id": 3, "tag": "a"}, {"id": 4, "tag": "b"}], schema=schema.as_arrow()),
    ]
    paths, entries = write_and_index(tmp_path, tables, schema, settings)
    kinds = {i["kind"] for column in entries.column("columns").to_pylist()[0] for i in column["indexes"] or []}
    assert kinds == {"toy"}, "the indexer built the toy payload (and, with kinds = [toy], nothing else)"

    verdicts = prune(bound_predicate("tag = 'b'", schema, "db.t"), paths, entries)
    stages = {name: kept.tolist() for name, kept, _ in verdicts.stages}
    assert stages["minmax"] == [True, True], "min/max alone cannot rule out 'b' in ['a', 'c']"
    assert stages["toy"] == [False, True], "the toy stage runs in the lookup and removes the first file"


def test_a_registered_kind_is_refused_on_a_type_it_cannot_index(with_toy):
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "tag", StringType()))
    config = Config(Path("x.toml"), "c", {}, table_settings={"db.t": {"columns": {"tag": {"kinds": ["toy"]}}}})
    assert config.column_settings("db.t", schema)[2].kinds == ("toy",)
    config = Config(Path("x.toml"), "c", {}, table_settings={"db.t": {"columns": {"id": {"kinds": ["toy"]}}}})
    with pytest.raises(UserError, match=r"columns.id: a toy index cannot be built on id \(long\)"):
        config.column_settings("db.t", schema)
