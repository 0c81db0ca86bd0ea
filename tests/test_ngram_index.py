"""Rules of the n-gram index kind (free text by the automatic choice, or `kinds = ["ngram"]`): which literal
fragments a LIKE pattern requires, which columns the automatic choice gives it, which files the kind rules out
(LIKE and ILIKE), how values are case-folded, and a property test against DuckDB's LIKE / ILIKE and Python's lower
case over the real rows: a file holding a match is never dropped, and a rare fragment drops the files without it.

Each case writes real Parquet files, indexes them with the build's per-file code and asks the lookup's index stages,
as tests/test_index_kinds.py does for the other kinds. A SKIP case also checks that min/max alone keeps the file, so
the skip is the n-gram filter's doing.
"""

from __future__ import annotations

import random
import re
import string
from unittest.mock import patch

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import sweep, write_and_index
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from indexlib.config import load_config
from indexlib.index_kinds import ngram, split_block
from indexlib.index_kinds.ngram import (
    FOLDED,
    NgramIndex,
    fold,
    fold_text,
    gram_hashes,
    required_grams,
    value_gram_hashes,
)
from indexlib.index_kinds.registry import registry
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.build import build_index
from indexlib.lookup import lookup
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.query.patterns import literal_fragments
from indexlib.query.sql import Clock
from indexlib.statistics.canonical import distinct_keys

NGRAM = IndexSettings(kinds=("ngram",), ngram_size=3)  # the rules below are read with 3-grams unless said
SCHEMA = Schema(NestedField(1, "c", StringType()))
KEEP, SKIP = "keep", "skip"

# (rule, kind, pattern, escape, fragments every match holds; None: the pattern is not read)
FRAGMENT_CASES = [
    ("a prefix is one fragment", "like", "abc%", None, ["abc"]),
    ("a suffix is one fragment", "like", "%abc", None, ["abc"]),
    ("an infix is one fragment", "like", "%abc%", None, ["abc"]),
    ("a pattern without wildcards is its own fragment", "like", "abc", None, ["abc"]),
    ("% splits fragments", "like", "a%bc%def", None, ["a", "bc", "def"]),
    ("_ splits fragments (one character of any value)", "like", "ab_cd", None, ["ab", "cd"]),
    ("adjacent wildcards leave no empty fragment", "like", "%%ab__%cd%_", None, ["ab", "cd"]),
    ("only wildcards: nothing required", "like", "%_%", None, []),
    ("the empty pattern requires nothing", "like", "", None, []),
    ("an escaped % is literal", "like", "50!%off", "!", ["50%off"]),
    ("an escaped _ is literal", "like", "%a!_b%", "!", ["a_b"]),
    ("an escaped escape is literal", "like", "a!!b", "!", ["a!b"]),
    ("an explicit backslash escape", "like", "a\\%b%", "\\", ["a%b"]),
    ("a dangling escape character breaks the fragment", "like", "ab!", "!", ["ab"]),
    ("an escape character that is a wildcard is not read", "like", "a%%b", "%", None),
    ("without ESCAPE a backslash and what follows break (Spark escapes, DuckDB not)", "like", "ab\\%cd", None,
     ["ab", "cd"]),
    ("without ESCAPE a backslash before a letter breaks too", "like", "ab\\xcd", None, ["ab", "cd"]),
    ("a doubled backslash without ESCAPE breaks", "like", "ab\\\\cd", None, ["ab", "cd"]),
    ("Unicode fragments are code points", "like", "%日本語%", None, ["日本語"]),
    ("_ is one code point, even a non-ASCII one", "like", "é_ü%ß", None, ["é", "ü", "ß"]),
    ("starts_with is its literal prefix", "starts_with", "a%_b", None, ["a%_b"]),
    ("starts_with of nothing requires nothing", "starts_with", "", None, []),
    ("regexes are not read", "regexp", "abc", None, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "kind", "pattern", "escape", "expected"), FRAGMENT_CASES, ids=[c[0] for c in FRAGMENT_CASES]
)
def test_literal_fragments(rule, kind, pattern, escape, expected):
    assert literal_fragments(kind, pattern, escape) == expected, f"{rule}: {pattern!r} ESCAPE {escape!r}"


def test_required_grams_leave_out_fragments_shorter_than_n():
    assert required_grams(["ab", "abcd", "日本語"], 3) == ["abc", "bcd", "日本語"], "'ab' is shorter than 3: no gram"
    assert required_grams(["ab"], 3) == [], "a fragment shorter than n requires nothing"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.text(max_size=30) | st.text(alphabet="ab \x00", max_size=30) | st.text("aé日😀", max_size=30), max_size=20
    ),
    st.integers(1, 9),
)
@example(["ab", "éabc", "日本語"], 2)  # a value starting beyond ASCII after an ASCII one: each takes its own way
def test_the_build_hashes_every_gram_of_every_value_as_the_lookup_hashes_it(values, n):
    """The vectorised gram cut over the values' UTF-8 bytes agrees with Python's code-point slices: ASCII values
    (one byte a code point), grams of at most 8 bytes (read as words) and longer ones (cut out), NUL bytes, and
    files mixing ASCII values with others (each part its own way), in one pass and in passes of a few grams."""
    keys = distinct_keys(pa.array(values, pa.string()), StringType())
    grams = sorted({value[i : i + n] for value in set(values) for i in range(len(value) - n + 1)})
    expected = np.unique(gram_hashes(grams)) if grams else np.zeros(0, np.uint64)
    assert np.array_equal(value_gram_hashes(keys.blobs, n), expected), "grams never cross two values"
    with patch.object(ngram, "GRAMS_PER_PASS", 5):
        assert np.array_equal(value_gram_hashes(keys.blobs, n), expected), "passes of 5 grams find the same grams"


def _file(values) -> pa.Table:
    field = pa.field("c", pa.string(), metadata={b"PARQUET:field_id": b"1"})
    return pa.Table.from_arrays([pa.array(values, pa.string())], schema=pa.schema([field]))


def _stages(tmp_path, values, where, index_settings=NGRAM):
    paths, entries = write_and_index(tmp_path, [_file(values)], SCHEMA, index_settings)
    verdicts = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries)
    return {name: bool(kept[0]) for name, kept, _ in verdicts.stages}


LOG = ["the request timed out after 30 s", "disk full on /var/log", None, ""]
FRUIT = ["apple pie", "zoo keeper"]
TEXT = ["Grüße aus Köln", "日本語のテキスト"]
LONG = ["x" * 5_000 + "needle" + "y" * 5_000, "short"]
# (rule, file values, WHERE, expected after the n-gram stage)
LIKE_CASES = [
    ("an infix whose grams are absent skips", LOG, "c LIKE '%timeout%'", SKIP),
    ("an infix held by a value keeps", LOG, "c LIKE '%timed out%'", KEEP),
    ("an infix split by _ keeps when both halves are held", LOG, "c LIKE '%timed_out%'", KEEP),
    ("a fragment shorter than n proves nothing", LOG, "c LIKE '%zq%'", KEEP),
    ("short fragments beside a long absent one: the long one skips", LOG, "c LIKE '%z%qqqq%'", SKIP),
    ("fragments held by different values keep: the filter is per file", LOG, "c LIKE '%disk%request%'", KEEP),
    (
        "grams are case-folded: LIKE of another case keeps (the engine's LIKE drops its rows)",
        LOG,
        "c LIKE '%Timed Out%'",
        KEEP,
    ),
    ("LIKE of another case whose folded grams are absent skips", LOG, "c LIKE '%Time Out%'", SKIP),
    (
        "a capital sigma inside a value is held at a fragment's end (each code point folds alone)",
        ["ΑΑΣΑ"],
        "c LIKE '%ΑΑΣ%'",
        KEEP,
    ),
    ("ILIKE of a text held in another case keeps", LOG, "c ILIKE '%TIMED OUT%'", KEEP),
    ("ILIKE of an absent text skips", LOG, "c ILIKE '%TIMEOUT%'", SKIP),
    ("ILIKE honours ESCAPE", ["50% OFF today", "none"], "c ILIKE '%50!% off%' ESCAPE '!'", KEEP),
    ("ILIKE with an escaped wildcard absent skips", ["50% OFF today", "none"], "c ILIKE '%60!% off%' ESCAPE '!'", SKIP),
    ("NOT ILIKE is never decided by n-grams", LOG, "c NOT ILIKE '%TIMEOUT%'", KEEP),
    (
        "lower(c) LIKE an ASCII pattern without capitals is c ILIKE it: absent skips",
        LOG,
        "lower(c) LIKE '%timeout%'",
        SKIP,
    ),
    ("lower(c) LIKE a text held in another case keeps", ["The Request TIMED OUT"], "lower(c) LIKE '%timed out%'", KEEP),
    (
        "ILIKE of a pattern beyond ASCII is not read (engines' case tables differ there)",
        TEXT,
        "c ILIKE '%KÖLSCH%'",
        KEEP,
    ),
    (
        "ILIKE with an escape character that has case is not read (Spark lowers the pattern, not the escape)",
        LOG,
        "c ILIKE '%TIMEOUTA%%' ESCAPE 'A'",
        KEEP,
    ),
    ("the Kelvin sign lowers to k: ILIKE keeps", ["\u212aelvin scale"], "c ILIKE '%KELVIN%'", KEEP),
    (
        "U+0130 lowers to i (with U+0307 in full case mapping): ILIKE keeps",
        ["\u0130STANBUL"],
        "c ILIKE '%istanbul%'",
        KEEP,
    ),
    ("I with U+0307 is i in Java's Turkish lower case: ILIKE keeps", ["XI\u0307STANBUL"], "c ILIKE '%istanbul%'", KEEP),
    (
        "U+00CC is i, U+0307 and an accent in Java's Lithuanian lower case: ILIKE keeps",
        ["ax\u00cc"],
        "c ILIKE '%axi%'",
        KEEP,
    ),
    ("NOT LIKE is never decided by n-grams", LOG, "c NOT LIKE '%timed out%'", KEEP),
    ("NOT LIKE of an absent text is never decided either", LOG, "c NOT LIKE '%timeout%'", KEEP),
    ("a bare % keeps", LOG, "c LIKE '%'", KEEP),
    ("NULL never matches, the empty string holds no gram", [None, ""], "c LIKE '%abc%'", SKIP),
    ("a gram across two values is not held", ["xab", "cdy"], "c LIKE '%abc%'", SKIP),
    ("values shorter than n hold no gram", ["a", "bc"], "c LIKE '%abc%'", SKIP),
    ("a prefix inside the bounds whose grams are absent skips", FRUIT, "c LIKE 'kiwi%'", SKIP),
    ("starts_with inside the bounds whose grams are absent skips", FRUIT, "starts_with(c, 'kiwi')", SKIP),
    ("a held suffix keeps", FRUIT, "c LIKE '%pie'", KEEP),
    ("an absent suffix skips", FRUIT, "c LIKE '%tart'", SKIP),
    ("an escaped % held in the data keeps", ["50% off today", "none"], "c LIKE '%50!% off%' ESCAPE '!'", KEEP),
    ("an escaped % with an absent gram skips", ["50% off today", "none"], "c LIKE '%60!% off%' ESCAPE '!'", SKIP),
    ("a wildcard matches a % in the data", ["50% off today", "none"], "c LIKE '%50_ off%'", KEEP),
    ("a backslash without ESCAPE keeps under either engine's reading", ["a\\b%cd", "z"], "c LIKE '%a\\b%'", KEEP),
    ("Unicode text held keeps", TEXT, "c LIKE '%Köln%'", KEEP),
    ("Unicode grams absent skip", TEXT, "c LIKE '%Kölsch%'", SKIP),
    ("a CJK fragment held keeps", TEXT, "c LIKE '%テキスト%'", KEEP),
    ("a CJK fragment absent skips", TEXT, "c LIKE '%テスト%'", SKIP),
    ("a two-character CJK fragment is shorter than n", TEXT, "c LIKE '%本日%'", KEEP),
    ("every gram of a very long value is indexed", LONG, "c LIKE '%needle%'", KEEP),
    ("a text absent from a very long value skips", LONG, "c LIKE '%noodle%'", SKIP),
]


@pytest.mark.parametrize(("rule", "values", "where", "expected"), LIKE_CASES, ids=[c[0] for c in LIKE_CASES])
def test_ngram_rule(tmp_path, rule, values, where, expected):
    stages = _stages(tmp_path, values, where)
    if expected == KEEP:
        assert list(stages.values())[-1], f"Should keep: {rule} ({where} over {values})"
    else:
        assert stages["minmax"], f"min/max alone should keep the file for {where} (so the case tests the n-grams)"
        assert not stages["ngram"], f"Should skip: {rule} ({where} over {values})"


def test_by_default_grams_are_four_code_points(tmp_path):
    configured = IndexSettings(kinds=("ngram",))
    stages = _stages(tmp_path, ["error 404 on /index", "ok"], "c LIKE '%503%'", configured)
    assert list(stages.values())[-1], "a three-character fragment is shorter than the default n = 4: keep"
    stages = _stages(tmp_path, ["error 404 on /index", "ok"], "c LIKE '%5030%'", configured)
    assert not stages["ngram"], "a four-character fragment absent from the file skips it"


def test_the_kind_never_claims_all_match(tmp_path):
    paths, entries = write_and_index(tmp_path, [_file(["abc", "abcd"])], SCHEMA, NGRAM)
    leaf = bound_predicate("c LIKE '%abc%'", SCHEMA, "db.t")
    (payload,) = [i["payload"] for c in entries.column("columns").to_pylist()[0] for i in c["indexes"] or []]
    verdict = NgramIndex().verdict(leaf, [payload], None)  # type: ignore[arg-type]
    assert verdict is not None and verdict.might.tolist() == [True] and verdict.all_match.tolist() == [False], (
        "every value holds 'abc', yet a filter proves presence of nothing: never all-match"
    )


_RNG = random.Random(60)
_PROSE = [f"message number {i} about the request that timed out" for i in range(400)]
_HEX_IDS = ["".join(_RNG.choice("0123456789abcdef") for _ in range(32)) for _ in range(400)]
_NAMES = [f"{_RNG.choice(['Mary', 'Wei', 'Ana'])} {chr(65 + i % 26)}. Chen{i}" for i in range(400)]
_URLS = [f"https://example.com/api/v1/items/{i}?page={i % 7}" for i in range(400)]

# (rule, values of the file, the column's settings (None: the automatic choice), whether it gets n-gram filters)
CHOICE_CASES = [
    ("prose: more than 256 distinct values, most of 3 words and 20 characters", _PROSE, None, True),
    ("identifiers are not prose (a Bloom filter answers them)", _HEX_IDS, None, False),
    ("names are not prose", _NAMES, None, False),
    ("URLs are not prose", _URLS, None, False),
    ("256 distinct sentences or fewer are not judged free text", _PROSE[:256], None, False),
    ("tags are not prose", ["api", "db", "web"] * 100, None, False),
    ("kinds = [] turns it off", _PROSE, IndexSettings(kinds=()), False),
    ("kinds without it turns it off", _PROSE, IndexSettings(kinds=("bloom",)), False),
    ("kinds naming it turns it on for any string column", _HEX_IDS, IndexSettings(kinds=("ngram",)), True),
    ("kinds naming it turns it on for a few values too", ["a timeout"], IndexSettings(kinds=("ngram",)), True),
]


@pytest.mark.parametrize(("rule", "values", "configured", "expected"), CHOICE_CASES, ids=[c[0] for c in CHOICE_CASES])
def test_the_automatic_choice_gives_free_text_ngrams(tmp_path, rule, values, configured, expected):
    paths, entries = write_and_index(tmp_path, [_file(values)], SCHEMA, configured)
    kinds = {i["kind"] for c in entries.column("columns").to_pylist()[0] for i in c["indexes"] or []}
    assert ("ngram" in kinds) == expected, f"{rule}: got {sorted(kinds)}"


def test_a_file_whose_strings_are_not_utf8_gets_no_filter():
    keys = distinct_keys(pa.array([b"ab\xffcd"], pa.binary()), StringType())
    assert NgramIndex().build(keys, StringType(), NGRAM) is None, "no code points, no grams: unknown keeps the file"


def test_a_damaged_payload_raises_rather_than_guess():
    leaf = bound_predicate("c LIKE '%abc%'", SCHEMA, "db.t")
    folded = [bytes([FOLDED]) + b"\x15", bytes([FOLDED | 3]), bytes([FOLDED | 3]) + b"\x15\x40garbage"]
    for damaged in (b"", b"\x00" + b"\x15", b"\x03" + b"\x15\x40garbage", *folded):
        with pytest.raises(ValueError):
            NgramIndex().verdict(leaf, [damaged], None)  # type: ignore[arg-type]


def test_a_payload_records_its_gram_size(tmp_path):
    """Files built with n = 2 and n = 4 side by side: each is probed with its own grams."""
    files = [_file(["abcdef"]), _file(["xyz"])]
    settings_each = [IndexSettings(kinds=("ngram",), ngram_size=2), IndexSettings(kinds=("ngram",), ngram_size=4)]
    paths, entries = write_and_index(tmp_path, files, SCHEMA, settings_each)
    kept = dict(
        (where, prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries).kept.tolist())
        for where in ("c LIKE '%cd%'", "c LIKE '%xyz%'", "c LIKE '%bcde%'")
    )
    assert kept["c LIKE '%cd%'"] == [True, True], "the n = 2 file holds 'cd'; shorter than 4, the n = 4 file keeps"
    assert kept["c LIKE '%xyz%'"] == [False, True], "'xyz' is shorter than 4: the n = 4 file keeps, n = 2 rules out"
    assert kept["c LIKE '%bcde%'"] == [True, False], "the n = 4 file has no grams at all (its value is shorter)"


# The property: random files against DuckDB's LIKE / ILIKE and Python's lower case over the same rows.
ALPHABET = "abAB%_!\\ éÉ日Σσς\u212a\u0130\u0307"
values = st.one_of(
    st.none(),
    st.text(ALPHABET, max_size=8),
    st.builds(lambda a, b: a + "b" * 300 + b, st.text(ALPHABET, max_size=4), st.text(ALPHABET, max_size=4)),
)
patterns = st.text(ALPHABET, max_size=8)


def _duckdb_matches(con, rows: list, keyword: str, pattern: str, escape: str | None) -> bool | None:
    """Whether some row matches `pattern` by DuckDB's LIKE, ILIKE or `lower(c) LIKE` (None: DuckDB refuses it)."""
    candidates = pa.table({"c": pa.array(rows, pa.string())})  # noqa: F841 (read by DuckDB by name)
    clause = f"{_subject(keyword)} $p" + (" ESCAPE $e" if escape is not None else "")
    params = {"p": pattern, **({"e": escape} if escape is not None else {})}
    try:
        (count,) = con.execute(f"SELECT count(*) FROM candidates WHERE {clause}", params).fetchone()
    except duckdb.Error:
        return None
    return count > 0


def _subject(keyword: str) -> str:
    """The WHERE up to the pattern: `c LIKE`, `c ILIKE`, or `lower(c) LIKE` (read as ILIKE where it is one)."""
    return "lower(c) LIKE" if keyword == "lower LIKE" else f"c {keyword}"


def _python_ilike(rows: list, pattern: str, escape: str | None) -> bool:
    """Whether some row matches ILIKE read as Python reads it: both sides lowered whole (`str.lower`: full case
    mapping, final sigma by context, U+0130 to i and U+0307), then LIKE (a backslash without ESCAPE read as a
    character, as DuckDB and the SQL standard read it)."""
    pattern, regex, i = pattern.lower(), [], 0
    while i < len(pattern):
        char = pattern[i]
        if escape is not None and char == escape.lower():
            if i + 1 == len(pattern):
                return False  # a dangling escape matches nothing here (engines refuse it)
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        i += 1
    compiled = re.compile("".join(regex), re.DOTALL)
    return any(row is not None and compiled.fullmatch(row.lower()) for row in rows)


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


@settings(max_examples=sweep("NGRAM_EXAMPLES", 200, 2_000), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    files=st.lists(st.lists(values, min_size=1, max_size=6), min_size=1, max_size=4),
    keyword=st.sampled_from(["LIKE", "ILIKE", "lower LIKE"]),
    pattern=patterns,
    escape=st.sampled_from([None, "!"]),
    n=st.sampled_from([2, 3]),
    fpp=st.sampled_from([0.01, 0.3]),
)
@example(files=[["ab"], ["a"]], keyword="LIKE", pattern="%ab%", escape=None, n=3, fpp=0.01)  # shorter than n keeps
@example(files=[["é日é"], ["ab"]], keyword="LIKE", pattern="%é日é%", escape=None, n=3, fpp=0.01)
@example(files=[["a%b"], ["ab"]], keyword="LIKE", pattern="%a!%b%", escape="!", n=2, fpp=0.01)
@example(files=[["ΑΣΑ"], ["ab"]], keyword="LIKE", pattern="%ΑΣ%", escape=None, n=2, fpp=0.01)  # sigma mid-value
@example(files=[["B\u212aA"], ["ab"]], keyword="ILIKE", pattern="%bka%", escape=None, n=3, fpp=0.01)  # Kelvin
@example(files=[["A\u0130B"], ["ab"]], keyword="ILIKE", pattern="%ai%", escape=None, n=2, fpp=0.01)  # U+0130
def test_a_file_holding_a_match_is_never_dropped(tmp_path_factory, duck, files, keyword, pattern, escape, n, fpp):
    directory = tmp_path_factory.mktemp("ngram")
    index_settings = IndexSettings(kinds=("ngram",), ngram_size=n, ngram_fpp=fpp)
    paths, entries = write_and_index(directory, [_file(rows) for rows in files], SCHEMA, index_settings)
    literal = pattern.replace("'", "''")
    where = f"{_subject(keyword)} '{literal}'" + (" ESCAPE '!'" if escape else "")
    kept = prune(bound_predicate(where, SCHEMA, "db.t"), paths, entries).kept
    for number, rows in enumerate(files):
        matches = _duckdb_matches(duck, rows, keyword, pattern, escape)
        if keyword == "ILIKE" and (escape is not None or "\\" not in pattern):
            matches = matches or _python_ilike(rows, pattern, escape)
        event("a file holds a match" if matches else "a file holds none, dropped" if not kept[number] else "kept")
        if matches:
            assert kept[number], f"file {number} {rows!r} holds a match of {where} (n = {n}) but was dropped"


def _ascii_runs(text: str) -> list[str]:
    return re.findall(r"[\x00-\x7f]+", text)


def _covers(lowered: str, folded: str) -> bool:
    """Whether ASCII text found in a lowered value through code point `c` (lowered: `c`'s lower case in some
    engine) is found in the folded value: an ASCII lowering is the fold itself; otherwise each ASCII run of it is
    in the fold, the first one leading it and the last one ending it where the lowering does."""
    if lowered.isascii():
        return lowered == folded
    runs = _ascii_runs(lowered)
    return (
        all(run in folded for run in runs)
        and (not lowered[:1].isascii() or folded.startswith(runs[0]))
        and (not lowered[-1:].isascii() or folded.endswith(runs[-1]))
    )


# Lower cases beyond Unicode's default, by Java's locale (Spark lowers with the JVM's default locale): text, lowered
LOCALE_LOWERINGS = [
    ("\u0130", "i"),  # Turkish, Azeri
    ("I\u0307", "i"),  # Turkish, Azeri: I followed by a combining dot above
    ("I", "\u0131"),  # Turkish, Azeri
    ("I", "i\u0307"),  # Lithuanian, before an accent above
    ("J", "j\u0307"),  # Lithuanian
    ("\u012e", "\u012f\u0307"),  # Lithuanian
    ("\u00cc", "i\u0307\u0300"),  # Lithuanian
    ("\u00cd", "i\u0307\u0301"),  # Lithuanian
    ("\u0128", "i\u0307\u0303"),  # Lithuanian
]


def test_every_engines_lower_case_puts_ascii_only_where_the_fold_does():
    """ILIKE is answered for ASCII patterns by the folded grams: sound when, for every code point, the ASCII text
    any engine's lower case makes of it is where the fold puts the same text. Checked for all code points against
    Python's lower case (full case mapping, Java's in the root locale) and DuckDB's, and for the locale rules Java
    applies (Turkish, Azeri, Lithuanian)."""
    texts = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    code_points = pa.table({"t": pa.array(texts, pa.large_string())})  # noqa: F841 (read by DuckDB by name)
    with duckdb.connect() as con:
        duck_lower = con.sql("SELECT lower(t) FROM code_points").to_arrow_table().column(0)
    readings = {"python": pa.array([t.lower() for t in texts], pa.large_string()), "duckdb": duck_lower}
    beyond_ascii = np.arange(len(texts)) >= 128
    for engine, lowered in readings.items():
        holds_ascii = pc.match_substring_regex(lowered, r"[\x00-\x7f]").to_numpy(zero_copy_only=False)
        touched = np.flatnonzero(holds_ascii & beyond_ascii).tolist()
        assert {texts[i] for i in touched} == {"\u0130", "\u212a"}, f"{engine}: only U+0130 and U+212A lower to ASCII"
        chosen = [*touched, *range(128)]
        folded = fold_text([texts[i] for i in chosen])
        for i, text_folded in zip(chosen, folded, strict=True):
            low = lowered[i].as_py()
            assert _covers(low, text_folded), f"{engine} lowers {texts[i]!r} to {low!r}, fold: {text_folded!r}"
    for text, lowered in LOCALE_LOWERINGS:
        (text_folded,) = fold_text([text])
        assert _covers(lowered, text_folded), f"a locale lowers {text!r} to {lowered!r}, fold: {text_folded!r}"


@settings(max_examples=sweep("NGRAM_EXAMPLES", 100, 1_000), deadline=None)
@given(st.text(max_size=12), st.text(max_size=12), st.text(string.ascii_letters + string.digits + " %_", max_size=12))
@example("Α", "Σ", "")  # a final sigma by context: whole-string lowering reads it differently alone and inside text
@example("\u0130", "x", "X")
def test_the_fold_maps_each_code_point_alone(a, b, ascii_text):
    """The fold of a concatenation is the concatenation of the folds (what makes folded grams answer LIKE), ASCII
    text folds as ASCII lower case (the byte-by-byte way), and the byte way and the code-point way agree."""
    assert fold_text([a + b]) == [fold_text([a])[0] + fold_text([b])[0]], "each code point folds alone"
    assert fold_text([ascii_text]) == [ascii_text.lower()], "ASCII folds byte by byte to lower case"
    mixed = fold(pa.array([ascii_text, a + "é"], pa.large_string())).to_pylist()
    assert mixed[0].decode() == ascii_text.lower(), "an ASCII value among others folds the same"
    texts = pa.array([a, ascii_text, b], pa.large_string())
    assert fold(texts.slice(1)).to_pylist() == fold(texts).to_pylist()[1:], "a slice folds as its values do"


def test_a_version_1_payload_answers_like_as_written_and_never_ilike():
    """Filters built before grams were folded (payload version 1: the first byte is n alone) hold the grams as
    written: LIKE is probed with the fragments as written, ILIKE keeps (their grams cannot tell another case)."""
    keys = distinct_keys(pa.array(["Timeout after 30 s"], pa.string()), StringType())
    hashes = value_gram_hashes(keys.blobs, 3)
    old = bytes([3]) + split_block.build(hashes, split_block.optimal_bytes(len(hashes), 0.01))
    new = NgramIndex().build(keys, StringType(), NGRAM)
    assert new is not None and new.payload[0] == FOLDED | 3, "version 2 payloads say their grams are folded"
    kept = {}
    for where in ("c LIKE '%Timeout%'", "c LIKE '%timeout%'", "c ILIKE '%TIMEOUT%'", "c ILIKE '%deadlock%'"):
        leaf = bound_predicate(where, SCHEMA, "db.t")
        verdict = NgramIndex().verdict(leaf, [old, new.payload], None)  # type: ignore[arg-type]
        assert verdict is not None
        kept[where] = verdict.might.tolist()
    assert kept["c LIKE '%Timeout%'"] == [True, True], "both hold the text as written"
    assert kept["c LIKE '%timeout%'"] == [False, True], "version 1 is case-sensitive; version 2 folds (keeps)"
    assert kept["c ILIKE '%TIMEOUT%'"] == [True, True], "version 1 keeps for ILIKE; version 2 holds it folded"
    assert kept["c ILIKE '%deadlock%'"] == [True, False], "version 1 never answers ILIKE; version 2 rules it out"


def test_a_rare_fragment_drops_the_files_without_it(tmp_path):
    """40 files of 200 messages each, one request id per file: the id keeps its own file only, and a word held
    by two files keeps those two."""
    rng = random.Random(60)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 8))) for _ in range(300)]
    ids = ["req-" + "".join(rng.choices(string.hexdigits.lower(), k=12)) for _ in range(40)]
    files = []
    for number in range(40):
        messages = [" ".join(rng.choices(words, k=8)) for _ in range(200)]
        messages[rng.randrange(200)] += f" id={ids[number]}"
        if number in (7, 23):
            messages[0] += " quokka"
        files.append(_file(messages))
    paths, entries = write_and_index(tmp_path, files, SCHEMA, NGRAM)
    stages = prune(bound_predicate(f"c LIKE '%{ids[17]}%'", SCHEMA, "db.t"), paths, entries).stages
    by_name = {name: np.flatnonzero(kept).tolist() for name, kept, _ in stages}
    assert by_name["minmax"] == list(range(40)), "min/max keeps every file for an infix"
    assert by_name["ngram"] == [17], "a unique request id keeps only the file holding it"
    kept = prune(bound_predicate("c LIKE '%quokka%'", SCHEMA, "db.t"), paths, entries).kept
    assert np.flatnonzero(kept).tolist() == [7, 23], "a rare word keeps the files holding it"


def test_row_groups_get_their_own_filters_through_a_real_build(tmp_path):
    """A real Iceberg table built with `row_groups = true` and `kinds = ["ngram"]`: the lookup keeps only the row
    group whose messages hold the text."""
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "ng"\ntype = "sql"\nuri = "sqlite:///{tmp_path}/catalog.db"\n'
        f'warehouse = "file://{tmp_path}/wh"\n[index]\nrow_groups = true\nkinds = ["ngram"]\n'
    )
    config = load_config(conf)
    catalog = config.load_catalog()
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "msg", StringType()))
    catalog.create_table("db.logs", schema=schema)
    groups = [
        pa.table({"id": pa.array([1, 2]), "msg": ["connection reset by peer", "request accepted"]}),
        pa.table({"id": pa.array([3, 4]), "msg": ["upstream timeout after 30 s", None]}),
        pa.table({"id": pa.array([5, 6]), "msg": ["cache miss for key", "request accepted"]}),
    ]
    path = str(tmp_path / "logs.parquet")
    with pq.ParquetWriter(path, groups[0].schema) as writer:
        for group in groups:
            writer.write_table(group, row_group_size=2)
    catalog.load_table("db.logs").add_files([path])
    build_index(config, "db.logs")
    result = lookup(config, "db.logs", "msg LIKE '%timeout%'", Clock())
    assert result.files == [path], "the file holding the text is kept"
    assert result.kept_parts("row_groups").kept == {path: (1,)}, "only the row group holding 'timeout' is read"
    result = lookup(config, "db.logs", "msg LIKE '%deadlock%'", Clock())
    assert result.files == [], "no row group holds 'deadlock': the file is dropped"


def test_registering_the_kind_makes_stale_only_the_entries_of_tables_that_may_get_it(monkeypatch):
    """The configuration version stamps every entry; a backfill rebuilds entries whose version changed. The n-gram
    kind (a late kind) counts in it only where a column may get it: a table whose every column names kinds without
    it keeps the version it had before the kind existed (no rebuild after an upgrade); a table left to the automatic
    choice, which now gives free text n-gram filters, gets a new version (backfill builds them), and so does one
    that names it, when the kind changes."""
    from indexlib.index_kinds import settings as kind_settings
    from indexlib.indexing import file_indexer

    before = {name: kind for name, kind in registry().items() if name != "ngram"}  # the registry without the kind
    automatic, tagged = {1: IndexSettings()}, {1: IndexSettings(kinds=("bloom",))}
    now = {label: file_indexer.config_version(s) for label, s in (("automatic", automatic), ("tagged", tagged))}
    with_ngram = file_indexer.config_version({1: NGRAM})
    monkeypatch.setattr(file_indexer, "registry", lambda: before)
    monkeypatch.setattr(kind_settings, "loaded_kinds", lambda: tuple(before.values()))  # its settings too
    assert now["tagged"] == file_indexer.config_version(tagged), (
        "a table whose columns name kinds without ngram has the configuration version it had before the kind"
    )
    assert now["automatic"] != file_indexer.config_version(automatic), "a table left to the choice may get it: stale"
    assert with_ngram != file_indexer.config_version({1: NGRAM}), "a table that names it is versioned with it"
