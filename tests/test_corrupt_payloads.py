"""A damaged index payload at lookup keeps that file and warns; it never fails the query nor moves another file.

Each case writes real Parquet files, indexes them with the build's per-file code, damages one stored value of one
file's entry (a bound, a Bloom filter, an automaton, a type name) and asks the lookup: no exception, the damaged
file is kept and not proven all-match, every other file gets exactly the answer it gets from the intact entries,
and one warning names the column.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import write_and_index
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from indexlib.index_kinds.settings import IndexSettings
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.store.schema import ENTRY_ARROW_SCHEMA

BOTH_KINDS = IndexSettings(kinds=("bloom", "automaton"))  # every column a Bloom filter, strings an automaton too

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "small", IntegerType()),
    NestedField(3, "name", StringType()),
    NestedField(4, "tag", StringType()),
    NestedField(5, "day", DateType()),
    NestedField(6, "ts", TimestampType()),
    NestedField(7, "price", DecimalType(9, 2)),
    NestedField(8, "x", DoubleType()),
)
TAGS = [["compactor", "reader"], ["reader", "writer"], ["metadata", "query"]]


def _rows(k: int) -> list[dict]:
    """File k: id in [100k, 100k + 27] step 3, small in [100k, 100k + 9], name 'a0'..'a8' / 'm..' / 'x..' and one
    NULL, day and ts in month k + 1 of 2024, price in [100k + 0.25, 100k + 9.25], x in [100k + 0.5, 100k + 9.5]."""
    return [
        {
            "id": 100 * k + 3 * i,
            "small": 100 * k + i,
            "name": None if i == 9 else f"{'amx'[k]}{i}",
            "tag": TAGS[k][i % 2],
            "day": dt.date(2024, 1 + k, 1 + i),
            "ts": dt.datetime(2024, 1 + k, 1 + i, 12),
            "price": Decimal(100 * k + i) + Decimal("0.25"),
            "x": 100 * k + i + 0.5,
        }
        for i in range(10)
    ]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    tables = [pa.Table.from_pylist(_rows(k), schema=SCHEMA.as_arrow()) for k in range(3)]
    return write_and_index(tmp_path_factory.mktemp("corrupt"), tables, SCHEMA, BOTH_KINDS)


def _damaged(entries: pa.Table, file: int, column: str, field: str, damage) -> pa.Table:
    """`entries` with `damage` applied to one stored value of one file: `field` is "lower", "upper", "type", or an
    index kind (its payload)."""
    rows = copy.deepcopy(entries.to_pylist())
    stats = next(c for c in rows[file]["columns"] if c["name"] == column)
    if field in ("lower", "upper", "type"):
        stats[field] = damage(stats[field])
    else:
        index = next(i for i in stats["indexes"] if i["kind"] == field)
        index["payload"] = damage(index["payload"])
    return pa.Table.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)


def _answers(paths, entries, where, schema=SCHEMA) -> list[tuple[bool, bool]]:
    verdicts = prune(bound_predicate(where, schema, "db.t"), paths, entries)
    return [(bool(kept), bool(every)) for kept, every in zip(verdicts.kept, verdicts.all_match, strict=True)]


def _automaton(regex: str) -> bytes:
    return json.dumps({"regex": regex, "exact": True, "states": 5}).encode()


# (rule, column, damaged field, damage, WHERE); the damaged file is file 0, which the intact index skips or proves.
CASES = [
    ("a non-UTF-8 upper bound keeps that file and prunes the others", "name", "upper", lambda b: b"\xff" + b, "name >= 'x'"),
    ("a non-UTF-8 lower bound keeps that file and prunes the others", "name", "lower", lambda b: b[:1] + b"\xc3", "name >= 'x'"),
    ("a long bound of 7 bytes keeps that file and prunes the others", "id", "upper", lambda b: b[:7], "id >= 200"),
    ("a long bound of 9 bytes keeps that file (and loses its all-match)", "id", "upper", lambda b: b + b"\x00", "id < 100"),
    ("an int bound of 8 bytes keeps that file and prunes the others", "small", "lower", lambda b: b * 2, "small >= 200"),
    ("a date bound of 3 bytes keeps that file and prunes the others", "day", "upper", lambda b: b[:3], "day >= DATE '2024-03-01'"),
    ("a timestamp bound of 4 bytes keeps that file and prunes the others", "ts", "lower", lambda b: b[:4], "ts > TIMESTAMP '2024-02-20 00:00:00'"),
    ("a decimal bound longer than its precision allows keeps that file", "price", "upper", lambda b: b * 6, "price > 150"),
    ("an empty decimal bound keeps that file and prunes the others", "price", "lower", lambda b: b"", "price > 150"),
    ("a double bound of 4 bytes keeps that file and prunes the others", "x", "upper", lambda b: b[:4], "x >= 200"),
    ("an unknown type name makes both bounds unknown, others still pruned", "id", "type", lambda t: "lnog", "id >= 200"),
    ("a truncated Bloom filter keeps that file; the others' filters still prune", "id", "bloom", lambda b: b[: len(b) // 2], "id IN (4, 104, 204)"),
    ("a Bloom filter cut inside its header keeps that file", "id", "bloom", lambda b: b[:12], "id IN (4, 104, 204)"),
    ("a Bloom filter of random bytes keeps that file", "id", "bloom", lambda b: random.Random(3).randbytes(len(b)), "id IN (4, 104, 204)"),
    ("a Bloom filter with a damaged slice count keeps that file", "id", "bloom", lambda b: b[:8] + bytes([b[8] ^ 4]) + b[9:], "id IN (4, 104, 204)"),
    ("a Bloom filter with extra bytes keeps that file", "id", "bloom", lambda b: b + b"\x00" * 8, "id IN (4, 104, 204)"),
    ("an automaton payload that is not JSON keeps that file; the others still prune", "tag", "automaton", lambda b: b[:-2], "tag LIKE '%rite%'"),
    ("an automaton payload that is not UTF-8 keeps that file", "tag", "automaton", lambda b: b"\xff" + b, "tag LIKE '%rite%'"),
    ("an automaton whose regex does not parse keeps that file", "tag", "automaton", lambda b: _automaton("^(?:compactor|reader$"), "tag LIKE '%rite%'"),
    ("an automaton without a regex field keeps that file", "tag", "automaton", lambda b: b'{"rx": "^a$"}', "tag LIKE '%rite%'"),
    ("an automaton whose regex is not a string keeps that file", "tag", "automaton", lambda b: b'{"regex": 7}', "tag LIKE '%rite%'"),
    ("a damaged automaton proves no longer that every row matches", "tag", "automaton", lambda b: b"{", "tag LIKE '%r'"),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "column", "field", "damage", "where"), CASES, ids=[c[0] for c in CASES])
def test_a_damaged_value_keeps_its_file_and_nothing_else_changes(indexed, caplog, rule, column, field, damage, where):
    paths, entries = indexed
    intact = _answers(paths, entries, where)
    assert intact[0] != (True, False), f"case must matter: the intact index skips or proves file 0 ({where})"
    with caplog.at_level(logging.WARNING, logger="indexlib.statistics.provider"):
        answers = _answers(paths, _damaged(entries, 0, column, field, damage), where)
    assert answers[0] == (True, False), f"Should keep, unproven: {rule} ({where})"
    assert answers[1:] == intact[1:], f"Other files as without the damage: {rule} ({where})"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    what = "bounds" if field in ("lower", "upper", "type") else field
    assert len(warnings) == 1, f"one warning per lookup and (column, {what}): {warnings}"
    assert f"1 corrupt {what} payload(s) of column {column}" in warnings[0] and paths[0] in warnings[0], warnings


def test_several_damaged_files_of_one_column_give_one_warning_counting_them(indexed, caplog):
    paths, entries = indexed
    damaged = _damaged(entries, 0, "id", "upper", lambda b: b[:3])
    damaged = _damaged(damaged, 2, "id", "lower", lambda b: b[:5])
    with caplog.at_level(logging.WARNING, logger="indexlib.statistics.provider"):
        answers = _answers(paths, damaged, "id >= 100 AND id < 200")
    assert answers == [(True, False), (True, True), (True, False)], "damaged files kept; the intact one still proven"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "2 corrupt bounds payload(s) of column id" in warnings[0], warnings


def test_every_file_damaged_still_answers(indexed, caplog):
    paths, entries = indexed
    damaged = entries
    for k in range(3):
        damaged = _damaged(damaged, k, "name", "lower", lambda b: b"\xff")
        damaged = _damaged(damaged, k, "tag", "automaton", lambda b: b"null")
    with caplog.at_level(logging.WARNING, logger="indexlib.statistics.provider"):
        answers = _answers(paths, damaged, "name >= 'x' OR tag LIKE 'meta%'")
    assert answers == [(True, False)] * 3, "nothing readable: everything kept"
    assert len(caplog.records) == 2, [r.getMessage() for r in caplog.records]


# ---------------------------------------------------------------- property: random damage, brute-force truth
PROPERTY_SCHEMA = Schema(NestedField(1, "n", LongType()), NestedField(2, "s", StringType()))
WORDS = ["", "a", "ab", "abc", "b", "ba", "c", "é", "éa", "z"]


@pytest.fixture(scope="module")
def random_files(tmp_path_factory):
    """Five files of 40 rows: n sparse in a per-file window (with NULLs), s from a per-file subset of WORDS."""
    rng = random.Random(11)
    tables = []
    for k in range(5):
        words = rng.sample(WORDS, rng.randint(1, 4))
        rows = [
            {
                "n": None if rng.random() < 0.2 else 10 * k + rng.randrange(0, 30, 2),
                "s": None if rng.random() < 0.15 else rng.choice(words),
            }
            for _ in range(40)
        ]
        tables.append(pa.Table.from_pylist(rows, schema=PROPERTY_SCHEMA.as_arrow()))
    paths, entries = write_and_index(tmp_path_factory.mktemp("random"), tables, PROPERTY_SCHEMA, BOTH_KINDS)
    return paths, entries, tables


LITERAL_N = st.integers(-2, 75)
LITERAL_S = st.sampled_from([*WORDS, "aa", "bb", "y"])
PREDICATES = st.one_of(
    st.builds(lambda v: (f"n = {v}", lambda c: pc.equal(c["n"], v)), LITERAL_N),
    st.builds(lambda v: (f"n < {v}", lambda c: pc.less(c["n"], v)), LITERAL_N),
    st.builds(
        lambda vs: (f"n IN ({', '.join(map(str, vs))})", lambda c: pc.is_in(c["n"], pa.array(vs, pa.int64()))),
        st.lists(LITERAL_N, min_size=1, max_size=3),
    ),
    st.builds(lambda v: (f"s = '{v}'", lambda c: pc.equal(c["s"], v)), LITERAL_S),
    st.builds(lambda v: (f"s < '{v}'", lambda c: pc.less(c["s"], v)), LITERAL_S),
    st.builds(
        lambda vs: (f"s IN ({', '.join(repr(v) for v in vs)})", lambda c: pc.is_in(c["s"], pa.array(vs))),
        st.lists(LITERAL_S, min_size=1, max_size=3),
    ),
    st.builds(
        lambda p: (f"s LIKE '{p}'", lambda c: pc.match_like(c["s"], p)),
        st.sampled_from(["a%", "%a", "%b%", "_", "é%", "%", "b_", "ab%"]),
    ),
)
DAMAGE = st.tuples(st.sampled_from(["flip", "truncate", "extend"]), st.integers(0, 10**6), st.binary(min_size=1))


def _apply(kind: str, position: int, extra: bytes, value: bytes) -> bytes:
    if kind == "truncate":
        return value[: position % len(value)]
    if kind == "extend":
        return value + extra
    at = position % len(value)
    return value[:at] + bytes([value[at] ^ (extra[0] or 1)]) + value[at + 1 :]


def _detectable_or_harmless(column: str, field: str, kind: str, position: int, value: bytes, damaged: bytes) -> bool:
    """Damage whose form the reader must notice, or that cannot change an answer. The rest (a flip inside a
    well-formed value: an 8-byte bound, a Bloom bit array, a UTF-8 string, a regex) cannot be told from data without
    checksums: for it the property is only that nothing raises and the other files do not move."""
    if field in ("lower", "upper"):
        if column == "n":
            return kind != "flip"  # a long bound of another length than 8 bytes
        try:
            damaged.decode()
        except UnicodeDecodeError:
            return True
        return False
    if field == "bloom":
        header = len(value) % 32  # a split-block bitset is whole 32-byte blocks: what is left over is the header
        return kind != "flip" or position % len(value) < header  # the header is checked field by field
    return kind != "flip"  # automaton: a cut JSON object is not JSON; anything after it is not JSON or whitespace


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    predicate=PREDICATES,
    file=st.integers(0, 4),
    target=st.sampled_from([("n", "lower"), ("n", "upper"), ("n", "bloom"), ("s", "lower"), ("s", "upper"),
                            ("s", "bloom"), ("s", "automaton")]),
    damage=DAMAGE,
)  # fmt: skip
def test_random_damage_never_raises_and_never_drops_a_matching_file(random_files, predicate, file, target, damage):
    paths, entries, tables = random_files
    where, truth = predicate
    column, field = target
    stats = next(c for c in entries.to_pylist()[file]["columns"] if c["name"] == column)
    stored = (
        stats[field]
        if field in ("lower", "upper")
        else next((i["payload"] for i in stats["indexes"] if i["kind"] == field), None)
    )
    if not stored:
        event("nothing stored to damage")
        return  # no values, or the kind was not built
    kind, position, extra = damage
    damaged_value = _apply(kind, position, extra, stored)
    damaged = _damaged(entries, file, column, field, lambda _: damaged_value)

    checked = _detectable_or_harmless(column, field, kind, position, stored, damaged_value)
    event(f"{field} {kind}: {'damaged file checked against the truth' if checked else 'other files only'}")
    answers = _answers(paths, damaged, where, PROPERTY_SCHEMA)  # never raises
    intact = _answers(paths, entries, where, PROPERTY_SCHEMA)
    for k, table in enumerate(tables):
        matches = pc.fill_null(truth(table), False)
        some, every = pc.any(matches).as_py() or False, pc.all(matches).as_py()
        assert intact[k][0] or not some, f"the intact index drops matching file {k}: {where}"
        if k != file:
            assert answers[k] == intact[k], f"file {k} moved when file {file}'s {column} {field} was damaged"
        elif checked:
            kept, proven = answers[k]
            assert kept or not some, f"dropped matching file {k}: {where}, {kind} of {column} {field}"
            assert not proven or every, f"all-match without every row matching: {where}, {kind} of {column} {field}"
