"""Rules and properties of the trimmed-automaton tag index (indexlib.automaton).

The rule under test: the index never claims "cannot match" when some value of the file matches, and never claims
"all match" unless every value matches. Ground truth is brute force over the file's real values: Python `re` for
RLIKE (found anywhere), LIKE translated to Python regexes (both engines' readings when a backslash has no
ESCAPE), str methods for the rest; and the JVM through Spark for Java's reading of stored regexes and patterns.
Adversarial patterns, which make Python's and Java's backtracking engines run for hours, are checked with RE2
(DuckDB's regexp_matches) instead, and pinned to the work cap that stops each one.
Set SKIPINDEX_AUTOMATON_EXAMPLES to run more hypothesis examples per property (default 400).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexlib.automaton import TagAutomaton, TooComplex, build_tag_regex
from indexlib.automaton.emit import ANY_STRING_REGEX
from indexlib.automaton.limits import (
    MAX_PATTERN_CHARS,
    MAX_PATTERN_CLOSURE_WORK,
    MAX_PATTERN_NFA_STATES,
    MAX_PRODUCT_WORK,
    MAX_STORED_CLOSURE_WORK,
    MAX_STORED_NFA_STATES,
    WorkMeter,
)
from indexlib.automaton.nfa import compile_nfa, included, intersects
from indexlib.automaton.parse import _PYTHON_SPACE, Reading, parse_stored_regex, pattern_language

# Regex metacharacters, LIKE wildcards, line terminators of every engine, controls, non-ASCII letters, emoji.
ALPHABET = [*".*+?()[]{}|\\^$-%_ abcAZ09", "\n", "\r", "\x00", "\x0b", "\x1c", "\x85", "é", "ß", "😀", "😁", "\u2028"]
LINE_TERMINATORS = "\n\r\x85\u2028\u2029"
REGEX_ATOMS = [
    *"abcé😀ß%_- ",
    *[r"\.", r"\*", r"\(", r"\|", r"\$", r"\^", "\\\\", r"\[", r"\{", r"\n", r"\t", r"\x41", r"\u00e9"],
    *[".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S"],
    *["[a-c]", "[^a]", "[😀-😁]", "[.*]", r"[^\s]", r"[\w.]", r"[^\d\s]", r"[\s\S]", r"[^\n]", r"[\x00-\x1f]"],
]
QUANTIFIERS = ["*", "+", "?", "{2}", "{0,2}", "{1,}", "*?", "+?", "??"]
BUDGETS = [2, 3, 4, 6, 8, 16, 32, 64, 256]

Choose = Callable[[Sequence[Any]], Any]


def random_regex(choose: Choose, depth: int) -> str:
    """A regex in the syntax Java, Python and RE2 all accept (so Spark can run it)."""
    kind = choose(["atom", "concat", "union", "repeat"]) if depth > 0 else "atom"
    if kind == "atom":
        return choose(REGEX_ATOMS)
    parts = [random_regex(choose, depth - 1) for _ in range(choose([2, 3]))]
    if kind == "concat":
        return "".join(parts)
    if kind == "union":
        return "(?:" + "|".join(parts) + ")"
    return "(?:" + parts[0] + ")" + choose(QUANTIFIERS)


def random_find_pattern(choose: Choose) -> str:
    """One or two top-level branches, each maybe anchored with ^ and $."""
    branches = [choose(["", "^"]) + random_regex(choose, choose([0, 1, 2, 3])) + choose(["", "$"])]
    if choose([False, False, True]):
        branches.append(choose(["", "^"]) + random_regex(choose, 1) + choose(["", "$"]))
    return "|".join(branches)


def random_like(choose: Choose, escape: str | None, spark_valid: bool = False) -> str:
    """LIKE pattern. With `escape` None, backslashes are ambiguous; `spark_valid` keeps them before %, _, \\ only."""
    parts = []
    for _ in range(choose(range(8))):
        token = choose([*ALPHABET, "%", "_", "%", "_"])
        if escape is not None and (token == escape or (token in "%_" and choose([False, True]))):
            parts.append(escape + token)
        elif escape is None and token == "\\":
            parts.append("\\" + choose("%_\\" if spark_valid else "%_\\ab"))
        else:
            parts.append(token)
    return "".join(parts)


def like_readings(pattern: str, escape: str | None) -> list[re.Pattern[str]]:
    """Each engine's reading of a LIKE pattern as a Python regex (full match). Without ESCAPE, a backslash escapes
    in Spark and is literal in DuckDB: two readings. A reading whose pattern ends in its escape is an error."""
    escapes = [escape] if escape is not None or "\\" not in pattern else ["\\", None]
    readings = []
    for reading_escape in escapes:
        parts, position = [], 0
        while position < len(pattern):
            char = pattern[position]
            if char == reading_escape:
                if position + 1 == len(pattern):
                    break
                parts.append(re.escape(pattern[position + 1]))
                position += 2
                continue
            parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
            position += 1
        else:
            readings.append(re.compile("".join(parts), re.DOTALL))
    return readings


def random_values(rng: random.Random, most: int) -> list[str]:
    return ["".join(rng.choices(ALPHABET, k=rng.randrange(9))) for _ in range(rng.randrange(1, most))]


def automaton(values: Sequence[str], max_states: int = 256, max_bytes: int = 2048) -> TagAutomaton:
    return TagAutomaton.from_regex(build_tag_regex(values, max_states, max_bytes).regex)


def hostnames(rng: random.Random, count: int) -> list[str]:
    found: set[str] = set()
    while len(found) < count:
        role = rng.choice(["web", "db", "cache", "kafka", "api", "worker", "search", "batch"])
        env = rng.choice(["prod", "staging", "dev", "qa"])
        region = rng.choice(["eu-west-1", "us-east-1", "us-west-2", "ap-south-1"])
        found.add(f"{role}-{rng.randrange(1000):03d}.{env}.{region}")
    return sorted(found)


def services(rng: random.Random, count: int) -> list[str]:
    teams = ["billing", "auth", "search", "checkout", "payment", "ledger", "fraud", "pricing", "catalog", "media"]
    parts = ["api", "worker", "consumer", "indexer", "compactor", "reader", "writer", "scheduler", "proxy", "cache"]
    found: set[str] = set()
    while len(found) < count:
        found.add(
            f"{rng.choice(teams)}-{rng.choice(parts)}{rng.choice(['', '-v2', '-canary', f'-{rng.randrange(9)}'])}"
        )
    return sorted(found)


# ---------------------------------------------------------------- the Husky reference case


def test_husky_reference_case() -> None:
    built = build_tag_regex(["compactor", "reader", "writer"])
    auto = TagAutomaton.from_regex(built.regex)
    assert built.exact, f"{built.regex} must be exact: 3 tags need {built.states} states, within the default 256"
    assert not auto.accepts("metadata"), f"regex {built.regex} must reject 'metadata' (the Husky reference case)"
    assert all(auto.accepts(tag) for tag in ["compactor", "reader", "writer"]), "every tag of the file is accepted"
    assert auto.accepts_prefix("comp"), "starts_with 'comp' might match: 'compactor' starts with it"
    assert not auto.accepts_prefix("x"), "starts_with 'x' cannot match: no tag starts with 'x'"
    assert auto.subset_of({"compactor", "reader", "writer", "x"}), "every tag is in the list: NOT IN matches no row"
    assert not auto.subset_of({"compactor", "reader"}), "'writer' is not in the list: NOT IN may match"
    assert not auto.subset_of([]), "NOT IN () keeps every non-null row"
    assert not auto.might_match("like", "meta%"), "LIKE 'meta%' cannot match any of the three tags"
    assert auto.all_match("regexp", "^[a-z]+$"), "RLIKE '^[a-z]+$' matches all three tags"


# ---------------------------------------------------------------- build rules

BUILD_RULES = [
    ([], r"^[^\s\S]$", True, "no values: the empty language"),
    ([""], "^$", True, "the empty string is a value like any other"),
    (["a.b", "a*b"], r"^a[\*\.]b$", True, "metacharacters are escaped; inside classes every ASCII punctuation is"),
    (["x\ny", "\x00"], r"^(?:\x00|x\x0ay)$", True, "controls are written as \\xhh"),
    (["\u2028", "😀"], "^[\\u2028😀]$", True, "non-printable BMP characters as \\uhhhh, emoji literally"),
    (["a\ud800"], r"^[\s\S]*$", False, "a lone surrogate (not from UTF-8 data) gives up: any string"),
    (["b", "a", "b", "a"], "^[ab]$", True, "duplicates and order do not matter"),
]


@pytest.mark.parametrize(("values", "regex", "exact", "rule"), BUILD_RULES)
def test_build_rules(values: list[str], regex: str, exact: bool, rule: str) -> None:
    built = build_tag_regex(values)
    assert (built.regex, built.exact) == (regex, exact), f"{rule}: expected {regex!r}, got {built.regex!r}"


def test_build_generalises_only_by_growing_the_language() -> None:
    values = hostnames(random.Random(1), 200)
    built = build_tag_regex(values, max_states=16)
    auto = TagAutomaton.from_regex(built.regex)
    assert not built.exact and built.states <= 16, f"200 hostnames do not fit 16 states exactly: {built}"
    assert all(auto.accepts(value) for value in values), f"a generalised regex still accepts every value: {built}"
    assert not auto.accepts("metadata"), f"generalising keeps the shape of hostnames: {built.regex} rejects 'metadata'"


def test_budget_must_fit_the_last_resort_regex() -> None:
    with pytest.raises(ValueError, match="budget too small"):
        build_tag_regex(["a"], max_states=0)
    with pytest.raises(ValueError, match="budget too small"):
        build_tag_regex(["a"], max_bytes=8)


@pytest.mark.slow
def test_build_is_deterministic_across_processes() -> None:
    rng = random.Random(7)
    cases = [(services(rng, 300), 64), (hostnames(rng, 500), 256), ([str(rng.random()) for _ in range(50)], 16)]
    here = [build_tag_regex(values, budget).regex for values, budget in cases]
    shuffled = [build_tag_regex(rng.sample(values, len(values)) + values[:5], budget).regex for values, budget in cases]
    assert shuffled == here, "the same value set in another order, with duplicates, gives the same regex"
    script = (
        "import json, sys\nfrom indexlib.automaton import build_tag_regex\n"
        "print(json.dumps([build_tag_regex(values, budget).regex for values, budget in json.load(sys.stdin)]))"
    )
    for seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert json.loads(result.stdout) == here, f"PYTHONHASHSEED={seed} must not change any regex (seeded ranking)"


# ---------------------------------------------------------------- query rules

QUERY_RULES = [
    # (values, kind, pattern, escape, might, all, rule)
    (["a\u2028"], "regexp", "a$", None, True, False, "Java's $ also matches before a final \\u2028; RE2's does not"),
    (["a\n"], "regexp", "^a.$", None, False, False, "'.' matches \\n in no engine"),
    (["a\r"], "regexp", "^a.$", None, True, False, "'.' matches \\r in Python and RE2, not in Java"),
    (["é"], "regexp", r"\w", None, True, False, "\\w matches 'é' in Python only"),
    (["é"], "regexp", r"[^\s]", None, True, True, "[^\\s] matches 'é' in every engine"),
    (["é"], "regexp", r"[^\w]", None, True, False, "[^\\w] matches 'é' in Java and RE2, not in Python"),
    (["\x0b"], "regexp", r"\s", None, True, False, "\\s matches \\x0b in Java and Python, not in RE2"),
    (["\x1c"], "regexp", r"\s", None, True, False, "\\s matches \\x1c in Python only"),
    (["٣"], "regexp", r"^\d$", None, True, False, "\\d matches Arabic-Indic digits in Python only"),
    (["abc"], "regexp", "(?i)ABC", None, True, False, "inline flags are unsupported: might match"),
    (["aa"], "regexp", r"(a)\1", None, True, False, "backreferences are unsupported: might match"),
    (["ab"], "regexp", "a(?=b)", None, True, False, "lookaround is unsupported: might match"),
    (["a b"], "regexp", r"\bb", None, True, False, "\\b is unsupported: might match"),
    (["S"], "regexp", r"^\0123$", None, True, False, "\\0123 is 'S' in Java, '\\n3' in Python: unsupported"),
    (["a]"], "regexp", "[]a]", None, True, False, "']' first in a class is unsupported"),
    (["b"], "regexp", "[a-c&&b]", None, True, False, "Java's class intersection is unsupported"),
    (["ab"], "regexp", "a++b", None, True, False, "possessive quantifiers are unsupported"),
    (["a{,2}"], "regexp", "a{,2}", None, True, False, "a '{' that is not a repetition is unsupported"),
    (["abc"], "regexp", "^abc$|^x", None, True, True, "^ and $ anchor each top-level branch"),
    (["xabcx"], "regexp", "abc", None, True, True, "RLIKE finds the regex anywhere in the value"),
    (["a\\b"], "like", "a\\b", None, True, False, "LIKE 'a\\b' without ESCAPE is literal in DuckDB"),
    (["ab"], "like", "a\\b", None, True, False, "LIKE 'a\\b' without ESCAPE escapes in Spark"),
    (["ab"], "like", "a\\b", "\\", True, True, "with ESCAPE '\\' the backslash escapes, unambiguously"),
    (["a\\b"], "like", "a\\b", "\\", False, False, "with ESCAPE '\\' the backslash is no literal"),
    (["100%"], "like", "100!%", "!", True, True, "an escaped % is a literal %"),
    (["1000"], "like", "100!%", "!", False, False, "an escaped % matches only %"),
    (["😀"], "like", "_", None, True, True, "_ is one code point, also an astral one"),
    (["é"], "like", "__", None, False, False, "_ is one code point, not one byte"),
    (["a\nb"], "like", "a%", None, True, True, "% spans line terminators"),
    (["compactor"], "starts_with", "comp", None, True, True, "starts_with is a literal prefix"),
    (["compactor"], "starts_with", "comp.*", None, False, False, "starts_with has no metacharacters"),
]


@pytest.mark.parametrize(("values", "kind", "pattern", "escape", "might", "all_", "rule"), QUERY_RULES)
def test_query_rules(
    values: list[str], kind: str, pattern: str, escape: str | None, might: bool, all_: bool, rule: str
) -> None:
    auto = automaton(values)
    assert auto.might_match(kind, pattern, escape) == might, f"might_match {pattern!r} on {values}: {rule}"
    assert auto.all_match(kind, pattern, escape) == all_, f"all_match {pattern!r} on {values}: {rule}"


def test_empty_language() -> None:
    auto = automaton([])
    assert auto.is_empty(), "no non-null value: the language is empty"
    assert not auto.accepts("") and not auto.accepts_prefix(""), "the empty language has no string, not even ''"
    assert not auto.might_match("like", "%"), "LIKE '%' cannot match a file without non-null values"
    assert auto.all_match("like", "x") and auto.subset_of([]), "every string of the empty language matches: vacuous"


def test_a_regex_we_cannot_read_might_hold_any_value() -> None:
    auto = TagAutomaton.from_regex("(?i)abc")
    assert auto.accepts("anything") and auto.might_match("like", "zz%"), "an unreadable regex might hold any value"
    assert not auto.subset_of(["abc"]) and not auto.all_match("like", "abc"), "and proves nothing"


def test_parsed_regexes_are_shared() -> None:
    regex = build_tag_regex(["compactor", "reader", "writer"]).regex
    assert TagAutomaton.from_regex(regex) is TagAutomaton.from_regex(regex), "files sharing a regex share its parse"


def test_unknown_pattern_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown pattern kind"):
        automaton(["a"]).might_match("glob", "a*")


def test_python_whitespace_model_is_str_isspace() -> None:
    modelled = {code for low, high in _PYTHON_SPACE for code in range(low, high + 1)}
    actual = {code for code in range(0x110000) if chr(code).isspace()}
    assert modelled == actual, "the WIDEST reading of \\s must include all of Python's \\s (str.isspace)"


# ---------------------------------------------------------------- properties against brute force

EXAMPLES = int(os.environ.get("SKIPINDEX_AUTOMATON_EXAMPLES", "400"))
PROPERTY_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
values_strategy = st.lists(st.text(st.sampled_from(ALPHABET), max_size=8), min_size=1, max_size=25)
budget_strategy = st.sampled_from(BUDGETS)
bytes_strategy = st.sampled_from([16, 64, 256, 2048])


@st.composite
def like_patterns(draw: st.DrawFn) -> tuple[str, str | None]:
    escape = draw(st.sampled_from([None, "!", "\\"]))
    return random_like(lambda options: draw(st.sampled_from(options)), escape), escape


@st.composite
def find_patterns(draw: st.DrawFn) -> str:
    return random_find_pattern(lambda options: draw(st.sampled_from(options)))


def mutations(values: list[str]) -> set[str]:
    """Strings near the values: each with a character dropped, doubled or replaced, or one appended."""
    near = {"", "a", "😀", "\n"}
    for value in values:
        near.update(value + extra for extra in ("a", "\n", "😀"))
        for position in range(len(value)):
            near.add(value[:position] + value[position + 1 :])
            near.add(value[:position] + value[position] + value[position:])
            near.add(value[:position] + "b" + value[position + 1 :])
    return near


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(values_strategy, budget_strategy, bytes_strategy)
def test_stored_regex_holds_every_value_within_budget(values: list[str], max_states: int, max_bytes: int) -> None:
    built = build_tag_regex(values, max_states, max_bytes)
    auto = TagAutomaton.from_regex(built.regex)
    assert built.states <= max_states, f"{built} is over the state budget {max_states}"
    assert len(built.regex.encode()) <= max_bytes, f"{built} is over the byte budget {max_bytes}"
    for value in values:
        assert re.fullmatch(built.regex, value), f"Python re must accept value {value!r} with {built.regex!r}"
        assert auto.accepts(value), f"the automaton must accept value {value!r} with {built.regex!r}"
        assert auto.accepts_prefix(value[:2]), f"starts_with {value[:2]!r} might match value {value!r}"
    for probe in mutations(values):
        assert auto.accepts(probe) == bool(re.fullmatch(built.regex, probe)), (
            f"our parser reads {built.regex!r} as Python does, on {probe!r}"
        )
        if built.exact:
            assert auto.accepts(probe) == (probe in values), f"exact {built.regex!r} accepts exactly the values"
    if built.exact:
        assert auto.subset_of(values), f"exact {built.regex!r} holds only the values"


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(values_strategy, budget_strategy, st.lists(st.text(st.sampled_from(ALPHABET), max_size=8), max_size=6))
def test_subset_of_never_overclaims(values: list[str], max_states: int, extra: list[str]) -> None:
    auto = automaton(values, max_states)
    listed = set(values[: len(values) // 2] + extra)
    if auto.subset_of(listed):
        assert set(values) <= listed, f"subset_of({listed}) claimed with values {values} outside the list"


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(values_strategy, budget_strategy, like_patterns())
def test_like_answers_are_sound(values: list[str], max_states: int, like: tuple[str, str | None]) -> None:
    pattern, escape = like
    built = build_tag_regex(values, max_states)
    auto = TagAutomaton.from_regex(built.regex)
    readings = like_readings(pattern, escape)
    some_match = any(reading.fullmatch(value) for reading in readings for value in values)
    every_match = bool(readings) and all(reading.fullmatch(value) for reading in readings for value in values)
    might, all_ = auto.might_match("like", pattern, escape), auto.all_match("like", pattern, escape)
    if some_match:
        assert might, f"LIKE {pattern!r} ESCAPE {escape!r} matches a value of {values}: must not be pruned"
    if all_:
        assert every_match, f"all_match LIKE {pattern!r} ESCAPE {escape!r} claimed, but not every value matches"
    unambiguous = escape is not None or "\\" not in pattern
    if built.exact and unambiguous and readings:
        assert might == some_match, f"exact {built.regex!r}: might_match LIKE {pattern!r} is exact"
        assert all_ == every_match, f"exact {built.regex!r}: all_match LIKE {pattern!r} is exact"


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(values_strategy, budget_strategy, find_patterns())
def test_regexp_answers_are_sound(values: list[str], max_states: int, pattern: str) -> None:
    auto = automaton(values, max_states)
    matches = [re.search(pattern, value) is not None for value in values]
    if any(matches):
        assert auto.might_match("regexp", pattern), f"RLIKE {pattern!r} matches a value of {values}: keep the file"
    if auto.all_match("regexp", pattern):
        assert all(matches), f"all_match RLIKE {pattern!r} claimed but a value of {values} does not match"


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(values_strategy, budget_strategy, st.text(st.sampled_from(ALPHABET), max_size=3))
def test_starts_with_answers_are_sound(values: list[str], max_states: int, prefix: str) -> None:
    auto = automaton(values, max_states)
    if any(value.startswith(prefix) for value in values):
        assert auto.might_match("starts_with", prefix), f"a value of {values} starts with {prefix!r}"
    if auto.all_match("starts_with", prefix):
        assert all(value.startswith(prefix) for value in values), f"all_match starts_with {prefix!r} overclaims"


# ---------------------------------------------------------------- Java agreement (one Spark query per test)


def test_java_accepts_every_value_and_reads_regexes_as_we_do(spark: Any) -> None:
    rng = random.Random(20240601)
    value_sets = [["compactor", "reader", "writer"], hostnames(rng, 300), services(rng, 100)]
    value_sets += [random_values(rng, 25) for _ in range(300)]
    rows = []
    for number, values in enumerate(value_sets):
        regex = build_tag_regex(values, BUDGETS[number % len(BUDGETS)]).regex
        auto = TagAutomaton.from_regex(regex)
        rows += [(value, regex, True) for value in set(values)]
        # Anchored find equals full match unless the string ends with a line terminator (Java's and Python's $).
        probes = sorted(probe for probe in mutations(values[:4]) if not probe.endswith(tuple(LINE_TERMINATORS)))
        rows += [(probe, regex, auto.accepts(probe)) for probe in probes[:20]]
    frame = spark.createDataFrame(rows, "value string, regex string, expected boolean")
    disagreements = frame.where("(value RLIKE regex) != expected").limit(5).collect()
    assert not disagreements, f"Java must accept every value and agree with our reading: {disagreements}"
    assert len(rows) > 5000


def test_java_pattern_matches_are_never_pruned(spark: Any) -> None:
    rng = random.Random(42)
    cases = []  # (case id, kind, pattern, values)
    for number in range(400):
        values = random_values(rng, 8)
        if number % 2:
            cases.append((number, "regexp", random_find_pattern(rng.choice), values))
        else:
            cases.append((number, "like", random_like(rng.choice, None, spark_valid=True), values))
    rows = [(number, kind, pattern, value) for number, kind, pattern, values in cases for value in values]
    frame = spark.createDataFrame(rows, "number int, kind string, pattern string, value string")
    java = frame.selectExpr(
        "number", "CASE WHEN kind = 'like' THEN value LIKE pattern ELSE value RLIKE pattern END AS matched"
    ).collect()
    matched: dict[int, list[bool]] = {}
    for row in java:
        matched.setdefault(row.number, []).append(row.matched)
    for number, kind, pattern, values in cases:
        auto = automaton(values, BUDGETS[number % len(BUDGETS)])
        if any(matched[number]):
            assert auto.might_match(kind, pattern), f"Java matches {kind} {pattern!r} on {values}: must not prune"
        if auto.all_match(kind, pattern):
            assert all(matched[number]), f"all_match {kind} {pattern!r} on {values}, but Java disagrees"


# ---------------------------------------------------------------- adversarial patterns and work caps

ADVERSARIAL = [
    # patterns that blow up backtracking engines, or would blow up our automata without the caps
    ("regexp", "(.*a){20}"),
    ("regexp", "(a?){1000}q"),  # (a?){1000} alone matches every string: the q gives all_match something to get wrong
    ("regexp", "[^x]{0,1000}z"),
    ("regexp", "(.{0,30}){30}q"),
    ("regexp", "(x+x+)+y"),
    ("regexp", "((a|b)?){300}c"),
    ("regexp", "(?:[0-9a-f]{1,8}-){1,40}z"),
    ("regexp", "(" * 3000 + "a" + ")" * 3000),
    ("regexp", "a" * 1001),
    ("like", "%a%a%a%a%a%a%a%a%b"),
    ("like", "%" + "_%" * 200 + "q"),
    # small patterns whose product with a large stored automaton is over MAX_PRODUCT_WORK
    ("regexp", "(?:[acegikmoqsuwy02468.-]|[bdfhjlnprtvxz13579]){0,40}#"),
    ("regexp", "[a-z0-9.-]{0,150}$"),
]

ADVERSARIAL_IDS = [f"{kind} {pattern[:24]}" for kind, pattern in ADVERSARIAL]


def brute_force(kind: str, pattern: str, values: Sequence[str]) -> list[bool]:
    """Which values match: every LIKE reading as a Python regex; RLIKE with RE2 (through DuckDB), which reads these
    patterns as Java does on values without line terminators and, unlike Java and Python `re`, never backtracks."""
    if kind == "like":
        readings = like_readings(pattern, None)
        return [any(reading.fullmatch(value) for reading in readings) for value in values]
    rows = duckdb.execute(
        "SELECT regexp_matches(v, $pattern) FROM (SELECT unnest($values) AS v, generate_subscripts($values, 1) AS i) "
        "ORDER BY i",
        {"values": list(values), "pattern": pattern},
    ).fetchall()
    return [matched for (matched,) in rows]


@pytest.fixture(scope="module")
def large_stores() -> dict[str, tuple[list[str], TagAutomaton]]:
    rng = random.Random(5)
    stores = {
        "1,000 hostnames": hostnames(rng, 1000),
        "100 hostnames": hostnames(rng, 100),
        "60 services": services(rng, 60),
    }
    return {name: (values, automaton(values, 256)) for name, values in stores.items()}


@pytest.mark.parametrize(("kind", "pattern"), ADVERSARIAL, ids=ADVERSARIAL_IDS)
def test_adversarial_patterns_answer_soundly_without_raising(
    large_stores: dict[str, tuple[list[str], TagAutomaton]], kind: str, pattern: str
) -> None:
    for name, (values, auto) in large_stores.items():
        matches = brute_force(kind, pattern, values)
        might, all_ = auto.might_match(kind, pattern), auto.all_match(kind, pattern)
        assert might or not any(matches), f"{kind} {pattern[:40]!r} matches a value of {name}: keep"
        assert not all_ or all(matches), f"all_match {kind} {pattern[:40]!r} overclaims on {name}"


def test_adversarial_ground_truth_has_both_answers(large_stores: dict[str, tuple[list[str], TagAutomaton]]) -> None:
    answers = set()
    for kind, pattern in ADVERSARIAL:
        for values, _ in large_stores.values():
            matches = brute_force(kind, pattern, values)
            answers.add((any(matches), all(matches)))
    assert answers >= {(True, False), (False, False)}, (
        "some adversarial pattern must match some values of a store but not all (so neither check above is only "
        f"vacuous), and some must match none: (some, every) seen {answers}"
    )


class RecordingMeter(WorkMeter):
    """A WorkMeter that remembers itself and its largest single step."""

    __slots__ = ("largest",)
    made: list[RecordingMeter] = []

    def __init__(self, cap: int, what: str) -> None:
        super().__init__(cap, what)
        self.largest = 0
        RecordingMeter.made.append(self)

    def spend(self, amount: int) -> None:
        self.largest = max(self.largest, amount)
        super().spend(amount)


# What stops each pattern on every large store: "length" (refused before parsing), "states" (Thompson construction
# refused, before any closure or product work), "closure" (epsilon removal stopped mid-way), "product" (the
# intersection or inclusion check stopped mid-way), None (finished under every cap). Per pattern: the WIDEST
# reading's intersection, then the NARROWEST reading's inclusion.
WORK_STOPPED_BY: dict[str, tuple[str | None, str | None]] = {
    "(.*a){20}": (None, None),
    "(a?){1000}q": ("states", "states"),
    "[^x]{0,1000}z": ("states", "states"),
    "(.{0,30}){30}q": ("closure", "closure"),
    "(x+x+)+y": (None, None),
    "((a|b)?){300}c": ("states", "states"),
    "(?:[0-9a-f]{1,8}-){1,40}z": (None, None),
    "(" * 3000 + "a" + ")" * 3000: ("length", "length"),
    "a" * 1001: ("length", "length"),
    "%a%a%a%a%a%a%a%a%b": (None, None),
    "%" + "_%" * 200 + "q": (None, None),
    "(?:[acegikmoqsuwy02468.-]|[bdfhjlnprtvxz13579]){0,40}#": ("product", "product"),
    "[a-z0-9.-]{0,150}$": (None, "product"),
}


@pytest.mark.parametrize(("kind", "pattern"), ADVERSARIAL, ids=ADVERSARIAL_IDS)
def test_work_caps_bound_the_work(
    large_stores: dict[str, tuple[list[str], TagAutomaton]],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    pattern: str,
) -> None:
    monkeypatch.setattr("indexlib.automaton.nfa.WorkMeter", RecordingMeter)  # the epsilon-closure meter
    for name, (_, auto) in large_stores.items():
        stored = compile_nfa(parse_stored_regex(auto.regex), MAX_STORED_NFA_STATES, MAX_STORED_CLOSURE_WORK)
        for reading, check, expected in zip(
            (Reading.WIDEST, Reading.NARROWEST), (intersects, included), WORK_STOPPED_BY[pattern], strict=True
        ):
            where = f"{check.__name__} of {pattern[:30]!r} with {name}"
            RecordingMeter.made.clear()
            try:
                language = pattern_language(kind, pattern, None, reading)
            except TooComplex:
                assert len(pattern) > MAX_PATTERN_CHARS, f"{where}: refused up front, but the pattern is short"
                assert expected == "length", f"{where}: refused for its length, expected {expected}"
                continue
            try:
                compiled = compile_nfa(language, MAX_PATTERN_NFA_STATES, MAX_PATTERN_CLOSURE_WORK)
            except TooComplex:
                stopped = RecordingMeter.made[0] if RecordingMeter.made else None
                if stopped is None:  # Thompson construction stopped at MAX_PATTERN_NFA_STATES, before any closure
                    assert expected == "states", (
                        f"{where}: refused at {MAX_PATTERN_NFA_STATES} states, expected {expected}"
                    )
                    continue
                assert stopped.used > stopped.cap == MAX_PATTERN_CLOSURE_WORK, f"{where}: TooComplex under the cap"
                assert stopped.used <= stopped.cap + stopped.largest and stopped.largest < stopped.cap // 2, (
                    f"{where}: {stopped.used} closure steps, over the cap by more than one closure"
                )
                assert expected == "closure", f"{where}: epsilon removal stopped at its cap, expected {expected}"
                continue
            assert len(compiled.accepting) <= MAX_PATTERN_NFA_STATES
            meter = RecordingMeter(MAX_PRODUCT_WORK, "test")
            try:
                check(stored, compiled, meter)
            except TooComplex:
                # one step: one pass over a pattern state's edges (intersects), or a set of them (included)
                one_step = sum(len(edges) for edges in compiled.edges)
                assert MAX_PRODUCT_WORK < meter.used <= MAX_PRODUCT_WORK + meter.largest, f"{where}: {meter.used}"
                assert meter.largest <= one_step, f"{where}: one step of {meter.largest} edge tests, over {one_step}"
                assert expected == "product", f"{where}: stopped at {meter.used} edge tests, expected {expected}"
                if check is intersects:
                    assert auto.might_match(kind, pattern), f"{where}: over the cap, might_match cannot prune"
                else:
                    assert not auto.all_match(kind, pattern), f"{where}: over the cap, all_match cannot claim"
                continue
            assert expected is None, f"{where}: finished in {meter.used} edge tests, expected the {expected} cap"


def test_large_stores_are_large(large_stores: dict[str, tuple[list[str], TagAutomaton]]) -> None:
    sizes = {
        name: len(compile_nfa(parse_stored_regex(auto.regex), MAX_STORED_NFA_STATES, MAX_STORED_CLOSURE_WORK).accepting)
        for name, (_, auto) in large_stores.items()
    }
    assert max(sizes.values()) > 500, f"the adversarial tests must meet a large stored automaton: NFA states {sizes}"


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    tags=st.lists(st.text(st.sampled_from(ALPHABET), max_size=6), min_size=1, max_size=12),
    queried=st.lists(st.text(st.sampled_from(ALPHABET), max_size=7), max_size=60),
    budget=st.sampled_from(BUDGETS),
    take=st.integers(0, 3),
)
def test_an_in_list_is_read_as_a_trie_with_the_answer_of_each_value_alone(tags, queried, budget, take):
    automaton = TagAutomaton.from_regex(build_tag_regex(tags, max_states=budget).regex)
    values = sorted(set(queried + tags[:take]))
    assert automaton.accepts_any(values) == any(automaton.accepts(v) for v in values), (
        "an IN list is in the language exactly when one of its values is (trimmed automata and prefixes of values "
        f"included): tags {tags}, values {values}"
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_class_ladder_alone_also_only_grows_the_language(seed: int) -> None:
    """`trim="classes"` (the automatic choice's bounded build): the exact regex, else the first symbol-class rung
    that fits whole; every value is accepted, within the budget, and the result is deterministic."""
    rng = random.Random(seed)
    values = (hostnames, services)[seed % 2](rng, rng.randrange(20, 256))
    budget = rng.choice([64, 128, 256])
    built = build_tag_regex(values, max_states=budget, trim="classes")
    auto = TagAutomaton.from_regex(built.regex)
    assert built.regex != ANY_STRING_REGEX, f"a class rung fits these {len(values)} names: {built}"
    assert all(auto.accepts(value) for value in values), f"the ladder's regex accepts every value: {built.regex}"
    assert built.states <= budget and len(built.regex.encode()) <= 2048, f"within the budget: {built}"
    assert build_tag_regex(list(reversed(values)), max_states=budget, trim="classes") == built, "deterministic"
    assert built.exact == build_tag_regex(values, max_states=budget, trim=False).exact, "exact when it fits"
