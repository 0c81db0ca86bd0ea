"""What a string pattern (LIKE, starts_with, REGEXP_LIKE) says about the values it can match.

The statistics can use a pattern through the literal prefix every match must start with: the matching strings lie
in the interval of strings with that prefix. Prefixes are read conservatively, so that the reading is right for every
engine: a LIKE pattern with a backslash and no ESCAPE clause means different things in Spark (backslash escapes)
and in DuckDB / the SQL standard (no escape character), so its prefix stops before the backslash. A regular
expression is only read when it is anchored with `^`, has no alternation, and its prefix characters are plain
(letters, digits, or escaped punctuation), which Java, Python and RE2 all read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

_REGEX_META = set(".^$*+?{}[]()|\\")
_QUANTIFIERS = set("*+?{")


@dataclass(frozen=True)
class PatternShape:
    """`prefix`: every match starts with it. `exact`: the pattern matches exactly the strings with that prefix
    (for LIKE 'abc%': "prefix"), exactly the prefix itself (LIKE 'abc': "equal"), or something narrower ("")."""

    prefix: str
    exact: str = ""


def pattern_shape(kind: str, pattern: str, escape: str | None = None) -> PatternShape:
    if kind == "ilike":  # case-insensitive: a match's first characters are any case of the pattern's, no prefix
        return PatternShape("")
    if kind == "starts_with":
        return PatternShape(pattern, "prefix")
    if kind == "like":
        return like_shape(pattern, escape)
    return PatternShape(regex_prefix(pattern))


def like_shape(pattern: str, escape: str | None) -> PatternShape:
    prefix: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if escape is not None and char == escape:
            if i + 1 == len(pattern):  # a dangling escape: engines reject or differ
                return PatternShape("".join(prefix))
            prefix.append(pattern[i + 1])
            i += 2
            continue
        if char in "%_" or (escape is None and char == "\\"):
            break
        prefix.append(char)
        i += 1
    rest = pattern[i:]
    if not rest:
        return PatternShape("".join(prefix), "equal")
    if set(rest) == {"%"}:
        return PatternShape("".join(prefix), "prefix")
    return PatternShape("".join(prefix))


def regex_prefix(pattern: str) -> str:
    """The literal text a find-anywhere regex match must start the value with ("" when unknown)."""
    if not pattern.startswith("^") or "|" in pattern:
        return ""
    prefix: list[str] = []
    i = 1
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum() and pattern[i + 1].isascii():
            literal, width = pattern[i + 1], 2
        elif char not in _REGEX_META and char.isprintable():
            literal, width = char, 1
        else:
            break
        if pattern[i + width : i + width + 1] in _QUANTIFIERS and i + width < len(pattern):
            break  # `ab*`: the quantified character is optional or repeated
        prefix.append(literal)
        i += width
    return "".join(prefix)


def literal_fragments(kind: str, pattern: str, escape: str | None = None) -> list[str] | None:
    """The literal texts every match of a LIKE or starts_with pattern holds as substrings: the runs of literal
    characters between wildcards (`%`, `_`), with ESCAPE honoured. None for patterns not read here (regexes), and for
    an ESCAPE character that is itself a wildcard (engines differ on it). ILIKE patterns are read as LIKE ones: the
    fragments as written, which a match holds in some case (the caller folds them).

    Breaking a run only drops information (every substring of a required text is required), so ambiguous spots break
    the run instead of guessing: a dangling ESCAPE character, and, without an ESCAPE clause, a backslash with the
    character after it (Spark reads the backslash as an escape, DuckDB and the SQL standard as a literal; both read the
    characters around the pair as literal). Empty fragments are left out."""
    if kind == "starts_with":
        return [pattern] if pattern else []
    if kind not in ("like", "ilike") or (escape is not None and escape in "%_"):
        return None
    fragments: list[str] = []
    run: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if escape is not None and char == escape and i + 1 < len(pattern):
            run.append(pattern[i + 1])
            i += 2
            continue
        if char in "%_" or char == escape or (escape is None and char == "\\"):
            if run:
                fragments.append("".join(run))
                run = []
            i += 2 if escape is None and char == "\\" else 1  # the backslash and the character it may escape
            continue
        run.append(char)
        i += 1
    if run:
        fragments.append("".join(run))
    return fragments
