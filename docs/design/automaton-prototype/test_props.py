"""Property tests: soundness (never a false "cannot match"), exactness when untrimmed, regex round trip."""
import json
import re
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, "/tmp/automaton_spike")
from tagauto import TagIndex, build_regex  # noqa: E402

ALPHA = list("abc.*+?()[]{}|\\^$-%_ \n") + ["é", "ß", "😀", "😁", "\u2028", "\x00", "Z", "0", "9"]
chars = st.sampled_from(ALPHA)
value = st.text(chars, max_size=8)
values = st.lists(value, min_size=1, max_size=25)
budget = st.sampled_from([2, 3, 4, 6, 8, 16, 32, 256])
SAMPLES = []  # (regex, values) for the Java check


def like_to_re(p, esc):
    out, i = [], 0
    while i < len(p):
        c = p[i]
        if esc is not None and c == esc:
            out.append(re.escape(p[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return "".join(out)


@st.composite
def like_pattern(draw):
    esc = draw(st.sampled_from([None, "!", "\\"]))
    toks = draw(st.lists(st.one_of(chars, st.sampled_from(["%", "_", "%", "_"])), max_size=8))
    out = []
    for t in toks:
        if esc is not None and (t == esc or (t in "%_" and draw(st.booleans()))):
            out.append(esc + t)                       # escaped literal
        elif esc is None and t == "\\":
            out.append("x")                           # ambiguous backslash tested separately
        else:
            out.append(t)
    return "".join(out), esc


def regex_ast(draw, depth):
    lit = st.sampled_from(["a", "b", "c", "é", "😀", "\\.", "\\*", "\\(", "\\|", "\\$", "\\^", "\\\\", "\\n", "Z", "0"])
    if depth <= 0:
        return draw(st.one_of(lit, st.sampled_from(["[a-c]", "[^a]", ".", "[😀-😁]", "\\d", "\\w", "\\s", "[.*]"])))
    kind = draw(st.sampled_from(["lit", "cat", "alt", "star", "plus", "opt", "rep"]))
    if kind == "lit":
        return regex_ast(draw, 0)
    if kind in ("cat", "alt"):
        parts = [regex_ast(draw, depth - 1) for _ in range(draw(st.integers(2, 3)))]
        return "".join(parts) if kind == "cat" else "(?:" + "|".join(parts) + ")"
    inner = "(?:" + regex_ast(draw, depth - 1) + ")"
    if kind == "rep":
        lo = draw(st.integers(0, 3))
        return inner + "{%d,%d}" % (lo, lo + draw(st.integers(0, 2)))
    return inner + {"star": "*", "plus": "+", "opt": "?"}[kind]


@st.composite
def regex_pattern(draw):
    body = regex_ast(draw, draw(st.integers(0, 3)))
    return draw(st.sampled_from(["", "^"])) + body + draw(st.sampled_from(["", "$"]))


def exact(rx_step):
    return rx_step[1] == 0


CFG = settings(max_examples=int(sys.argv[1]) if len(sys.argv) > 1 else 1500, deadline=None, suppress_health_check=list(HealthCheck))


@CFG
@given(values, budget, st.lists(value, max_size=4))
def test_roundtrip(vals, b, extra):
    rx, step, states = build_regex(vals, b)
    assert states <= b, (rx, states)
    ix0 = TagIndex(rx)
    xs = set(vals[: len(vals) // 2] + extra)
    if ix0.only_values_in(xs):
        assert set(vals) <= xs, (rx, xs)
    SAMPLES.append((rx, sorted(set(vals))))
    ix = TagIndex(rx)
    for v in vals:
        assert re.fullmatch(rx, v), (rx, v)
        assert ix.might_equal(v)
        assert ix.might_start_with(v[:2])
    if step == (0, False, None):
        assert ix.only_values_in(vals)
        assert all(ix.might_equal(v) == (v in vals) for v in ["", "a", "ab", "abc", "😀", "a\n", "xyz"])


@CFG
@given(values, budget, st.lists(value, max_size=6))
def test_parser_agrees_with_python(vals, b, probes):
    rx, _, _ = build_regex(vals, b)
    ix = TagIndex(rx)
    for p in probes + vals:
        assert bool(re.fullmatch(rx, p)) == ix.might_equal(p), (rx, p)


@CFG
@given(values, budget, like_pattern())
def test_like(vals, b, pat):
    p, esc = pat
    rx, step, _ = build_regex(vals, b)
    ix = TagIndex(rx)
    truth = re.compile(like_to_re(p, esc), re.S)
    any_match = any(truth.fullmatch(v) for v in vals)
    got = ix.might_match("like", p, esc)
    if any_match:
        assert got, (rx, p, esc)
    if step == (0, False, None):
        assert got == any_match, (rx, p, esc)       # untrimmed: exact answer
        assert ix.all_match("like", p, esc) == all(truth.fullmatch(v) for v in vals), (rx, p)
    if ix.all_match("like", p, esc):
        assert all(truth.fullmatch(v) for v in vals), (rx, p)


@CFG
@given(values, budget, st.text(st.sampled_from("ab%_\\"), max_size=6))
def test_like_ambiguous_backslash(vals, b, p):
    rx, _, _ = build_regex(vals, b)
    ix = TagIndex(rx)
    readings = [like_to_re(p, None)]
    if not p.endswith("\\") or p.endswith("\\\\"):
        try:
            readings.append(like_to_re(p, "\\"))
        except IndexError:
            pass
    if any(re.fullmatch(r, v, re.S) for r in readings for v in vals):
        assert ix.might_match("like", p)


@CFG
@given(values, budget, regex_pattern())
def test_regexp(vals, b, pat):
    rx, step, _ = build_regex(vals, b)
    ix = TagIndex(rx)
    truth = re.compile(pat, re.S)
    any_match = any(truth.search(v) for v in vals)
    got = ix.might_match("regexp", pat)
    if any_match:
        assert got, (rx, pat)
    if ix.all_match("regexp", pat):
        assert all(truth.search(v) for v in vals), (rx, pat)
    clean = all(not re.search("[\n\r\u2028\u2029\x85]", v) for v in vals)
    if step == (0, False, None) and clean and "\\s" not in pat and "\\w" not in pat and "\\d" not in pat:
        assert got == any_match, (rx, pat)


if __name__ == "__main__":
    for t in (test_roundtrip, test_parser_agrees_with_python, test_like, test_like_ambiguous_backslash,
              test_regexp):
        t()
        print("ok", t.__name__)
    with open("/tmp/automaton_spike/java_samples.json", "w") as f:
        json.dump(SAMPLES, f)
    print("samples", len(SAMPLES))
