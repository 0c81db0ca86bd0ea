r"""Patterns (RLIKE, LIKE, starts_with) and stored regexes -> syntax trees, with readings safe for every engine.

The same predicate may be evaluated by Java `Pattern` (Spark), RE2 (DuckDB, Trino) or Python `re` (our tests),
and they disagree on details: what `.`, `$`, `\d`, `\w`, `\s` match, and whether a LIKE backslash without ESCAPE
escapes (Spark) or is literal (DuckDB). So a pattern is read one of two ways:
- Reading.WIDEST, for "might match": a superset of what any engine matches. If the stored language (a superset of
  the file's values) does not intersect it, no engine matches any value, so skipping the file is safe.
- Reading.NARROWEST, for "all match": a subset of what every engine matches. If the stored language is included
  in it, every value matches whatever the engine.
Each engine's `\d \w \s` is modelled as a set known up to bounds (Python's `\d` is [0-9] plus some non-ASCII
digits); a class is evaluated per engine by interval arithmetic, then united (WIDEST) or intersected (NARROWEST)
across engines. So `[\s\S]` is any character and `[^\s\S]` none in both readings, which makes the readings of our
own stored regexes (emit.py) coincide and exact.
Syntax outside the subset the engines share raises Unsupported: backreferences, lookaround, inline flags,
possessive quantifiers, `\b \A \z \p{..} \v \h`, nested classes and `&&`, a `{` that is not a repetition, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from indexlib.automaton.limits import MAX_NESTING, MAX_PATTERN_CHARS, TooComplex, Unsupported
from indexlib.automaton.ranges import (
    ANY_CHAR,
    MAX_CODE_POINT,
    Ranges,
    complement,
    from_text,
    intersection,
    normalize,
    union,
)
from indexlib.automaton.syntax import ANY_STRING, EMPTY_STRING, Chars, Concat, Node, Repeat, Union, literal


class Reading(Enum):
    WIDEST = "widest"
    NARROWEST = "narrowest"


def pattern_language(kind: str, pattern: str, escape: str | None, reading: Reading) -> Node:
    """The strings a column value may hold for the leaf to be true: `kind` is "like", "starts_with" or "regexp"
    (find anywhere, as Java's Matcher.find). `escape` is LIKE's ESCAPE character."""
    if kind not in ("like", "starts_with", "regexp"):
        raise ValueError(f"unknown pattern kind {kind!r}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise TooComplex(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    if kind == "like":
        return parse_like(pattern, escape, reading)
    if kind == "starts_with":
        return Concat((*literal(pattern).items, ANY_STRING))
    return parse_regex(pattern, reading, find=True)


def parse_stored_regex(regex: str) -> Node:
    """A regex written by emit.py, matched in full."""
    return parse_regex(regex, Reading.WIDEST, find=False)


# ---------------------------------------------------------------- LIKE


def parse_like(pattern: str, escape: str | None, reading: Reading) -> Node:
    if escape is not None and len(escape) != 1:
        raise Unsupported("ESCAPE must be one character")
    if escape is None and "\\" in pattern:
        if reading is Reading.NARROWEST:
            raise Unsupported("a backslash without ESCAPE escapes in Spark and is literal in DuckDB")
        return Union((_like(pattern, "\\"), _like(pattern, None)))
    return _like(pattern, escape)


def _like(pattern: str, escape: str | None) -> Node:
    items: list[Node] = []
    position = 0
    while position < len(pattern):
        char = pattern[position]
        position += 1
        if char == escape:
            if position == len(pattern):
                raise Unsupported("LIKE pattern ends with its escape character")
            items.append(_char(pattern[position]))
            position += 1
        elif char == "%":
            if not items or items[-1] != ANY_STRING:  # %% is %
                items.append(ANY_STRING)
        elif char == "_" and items and items[-1] == ANY_STRING:
            items.insert(len(items) - 1, Chars(ANY_CHAR))  # %_ is _%: keeps runs of % and _ to one loop
        elif char == "_":
            items.append(Chars(ANY_CHAR))
        else:
            items.append(_char(char))
    return Concat(tuple(items))


# ---------------------------------------------------------------- what each engine's character sets mean


@dataclass(frozen=True)
class _Bounds:
    """A character set known up to bounds: it holds every character of `low` and none outside `high`."""

    low: Ranges
    high: Ranges

    def __or__(self, other: _Bounds) -> _Bounds:
        return _Bounds(union(self.low, other.low), union(self.high, other.high))

    def complement(self) -> _Bounds:
        return _Bounds(complement(self.high), complement(self.low))


def _exactly(ranges: Ranges) -> _Bounds:
    return _Bounds(ranges, ranges)


@dataclass(frozen=True)
class _Engine:
    shorthands: dict[str, _Bounds]  # "d", "w", "s"
    dot: Ranges

    def shorthand(self, letter: str) -> _Bounds:
        bounds = self.shorthands[letter.lower()]
        return bounds.complement() if letter.isupper() else bounds


_DIGIT = from_text("0123456789")
_WORD = normalize(((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)))
_NON_ASCII = ((0x80, MAX_CODE_POINT),)
_PYTHON_SPACE = union(
    from_text(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"), ((0x2000, 0x200A),)
)
_JAVA_LINE_TERMINATORS = from_text("\n\r\x85\u2028\u2029")
_ENGINES = (
    # Java Pattern, no flags (Spark RLIKE): ASCII classes, \s has \x0b; `.` stops at five line terminators.
    _Engine(
        {"d": _exactly(_DIGIT), "w": _exactly(_WORD), "s": _exactly(from_text(" \t\n\x0b\f\r"))},
        dot=complement(_JAVA_LINE_TERMINATORS),
    ),
    # Python re on str: Unicode classes; \s is exactly str.isspace().
    _Engine(
        {
            "d": _Bounds(_DIGIT, union(_DIGIT, _NON_ASCII)),
            "w": _Bounds(_WORD, union(_WORD, _NON_ASCII)),
            "s": _exactly(_PYTHON_SPACE),
        },
        dot=complement(from_text("\n")),
    ),
    # RE2 (DuckDB regexp_matches): ASCII classes, \s without \x0b.
    _Engine(
        {"d": _exactly(_DIGIT), "w": _exactly(_WORD), "s": _exactly(from_text(" \t\n\f\r"))},
        dot=complement(from_text("\n")),
    ),
)
_DOT = {
    Reading.WIDEST: union(*(engine.dot for engine in _ENGINES)),
    Reading.NARROWEST: intersection(*(engine.dot for engine in _ENGINES)),
}
# `$` (no MULTILINE) also matches before a final line terminator: "\r\n" or one of Java's five (Python: "\n").
_BEFORE_FINAL_LINE_TERMINATOR = Union((EMPTY_STRING, Chars(_JAVA_LINE_TERMINATORS), literal("\r\n")))

ClassItem = Ranges | str  # characters, or a shorthand letter such as "d" or "S"


def _class_chars(items: list[ClassItem], negated: bool, reading: Reading) -> Ranges:
    chars = union(*(item for item in items if not isinstance(item, str)))
    letters = [item for item in items if isinstance(item, str)]
    if not letters:  # the same in every engine
        return complement(chars) if negated else chars
    per_engine: list[_Bounds] = []
    for engine in _ENGINES:
        bounds = _exactly(chars)
        for letter in letters:
            bounds = bounds | engine.shorthand(letter)
        per_engine.append(bounds.complement() if negated else bounds)
    if reading is Reading.WIDEST:
        return union(*(bounds.high for bounds in per_engine))
    return intersection(*(bounds.low for bounds in per_engine))


# ---------------------------------------------------------------- regular expressions


class _Anchor(Enum):
    START = "^"
    END = "$"


_Item = Node | _Anchor

_REPETITION = re.compile(r"\{([0-9]{1,4})(?:(,)([0-9]{0,4}))?\}")
_GROUP_NAME = re.compile(r"\(\?P?<[A-Za-z][A-Za-z0-9]*>")
_HEX_ESCAPE = re.compile(r"\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{2})")
_UNICODE_ESCAPE = re.compile(r"[0-9a-fA-F]{4}")
_LOW_SURROGATE_ESCAPE = re.compile(r"\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)
_OCTAL_ESCAPE = re.compile(r"[0-7]{1,3}")
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "a": 0x07, "e": 0x1B}


def parse_regex(pattern: str, reading: Reading, find: bool) -> Node:
    """`find`: the regex may match anywhere unless anchored by `^` / `$` at the ends of a top-level branch;
    otherwise it must match the whole string."""
    options: list[Node] = []
    for items in _RegexParser(pattern, reading).parse():
        starts = bool(items) and items[0] is _Anchor.START
        ends = len(items) > starts and items[-1] is _Anchor.END
        body = _without_anchors(items[int(starts) : len(items) - int(ends)])
        head = [] if starts or not find else [ANY_STRING]
        if not find or (ends and reading is Reading.NARROWEST):
            tail: list[Node] = []
        else:
            tail = [_BEFORE_FINAL_LINE_TERMINATOR] if ends else [ANY_STRING]
        options.append(Concat((*head, *body, *tail)))
    return options[0] if len(options) == 1 else Union(tuple(options))


class _RegexParser:
    """Recursive descent over Java regex syntax; what Python `re` or RE2 would read differently is Unsupported."""

    def __init__(self, pattern: str, reading: Reading) -> None:
        self.pattern = pattern
        self.reading = reading
        self.position = 0
        self.nesting = 0

    def parse(self) -> list[list[_Item]]:
        branches = self._alternation()
        if self.position != len(self.pattern):
            raise Unsupported("unbalanced ')'")
        return branches

    def _peek(self, offset: int = 0) -> str | None:
        index = self.position + offset
        return self.pattern[index] if index < len(self.pattern) else None

    def _alternation(self) -> list[list[_Item]]:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.position += 1
            branches.append(self._sequence())
        return branches

    def _sequence(self) -> list[_Item]:
        items: list[_Item] = []
        while self._peek() not in (None, "|", ")"):
            items.append(self._quantified())
        return items

    def _quantified(self) -> _Item:
        atom = self._atom()
        bounds = self._quantifier()
        if bounds is None:
            return atom
        if isinstance(atom, _Anchor):
            raise Unsupported("quantified anchor")
        if self._peek() == "+":
            raise Unsupported("possessive quantifier")
        if self._peek() == "?":
            self.position += 1  # lazy: same language
        if self._peek() in ("*", "+", "?", "{"):
            raise Unsupported("quantifier after a quantifier")
        return Repeat(atom, *bounds)

    def _quantifier(self) -> tuple[int, int | None] | None:
        char = self._peek()
        if char in ("*", "+", "?"):
            self.position += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
        if char != "{":
            return None
        match = _REPETITION.match(self.pattern, self.position)
        if match is None:
            raise Unsupported("'{' that is not a repetition")
        self.position = match.end()
        low = int(match[1])
        high = low if match[2] is None else int(match[3]) if match[3] else None
        if high is not None and high < low:
            raise Unsupported("repetition {n,m} with m < n")
        return low, high

    def _atom(self) -> _Item:
        char = self.pattern[self.position]  # a sequence stops at the end of the pattern
        if char == "(":
            return self._group()
        if char == "[":
            return Chars(self._class())
        if char in ("*", "+", "?", "{"):
            raise Unsupported("quantifier without an operand")
        self.position += 1
        if char == ".":
            return Chars(_DOT[self.reading])
        if char == "^":
            return _Anchor.START
        if char == "$":
            return _Anchor.END
        if char == "\\":
            return self._escaped_atom()
        return _char(char)

    def _group(self) -> Node:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise TooComplex(f"groups nested deeper than {MAX_NESTING}")
        if self.pattern.startswith("(?:", self.position):
            self.position += 3
        elif match := _GROUP_NAME.match(self.pattern, self.position):
            self.position = match.end()
        elif self._peek(1) == "?":
            raise Unsupported("lookaround, inline flags or atomic group")
        else:
            self.position += 1
        branches = self._alternation()
        if self._peek() != ")":
            raise Unsupported("unbalanced '('")
        self.position += 1
        self.nesting -= 1
        options: list[Node] = []
        for items in branches:
            nodes = _without_anchors(items)
            options.append(nodes[0] if len(nodes) == 1 else Concat(nodes))
        return options[0] if len(options) == 1 else Union(tuple(options))

    def _escaped_atom(self) -> Node:
        if self._peek() == "Q":  # \Q...\E quotes literally (Java, RE2)
            end = self.pattern.find("\\E", self.position + 1)
            end = len(self.pattern) if end < 0 else end
            quoted = self.pattern[self.position + 1 : end]
            self.position = end + 2
            if self._peek() in ("*", "+", "?", "{"):
                raise Unsupported("quantifier after \\Q...\\E: Java repeats the last character, RE2 all of them")
            return literal(quoted)
        return Chars(_class_chars([self._escape()], negated=False, reading=self.reading))

    def _escape(self) -> ClassItem:
        """After a backslash: the characters it stands for, or a shorthand letter."""
        char = self._peek()
        if char is None:
            raise Unsupported("trailing backslash")
        self.position += 1
        if char in "dDwWsS":
            return char
        if char in _CONTROL_ESCAPES:
            return _code_point(_CONTROL_ESCAPES[char])
        if char == "x":
            match = _HEX_ESCAPE.match(self.pattern, self.position)
            if match is None:
                raise Unsupported("\\x without hex digits")
            self.position = match.end()
            code_point = int(match[1] or match[2], 16)
        elif char == "u":
            code_point = self._unicode_escape()
        elif char == "0":
            # Java reads up to three octal digits after \0, Python two: accept only where they agree.
            match = _OCTAL_ESCAPE.match(self.pattern, self.position)
            if match is None or len(match[0]) == 3:
                raise Unsupported("octal escape read differently by Java and Python")
            self.position = match.end()
            code_point = int(match[0], 8)
        elif char.isascii() and char.isalnum():
            raise Unsupported(f"escape \\{char}")  # backreferences, \b \B \A \z \Z \G \p \k \R \h \v \c ...
        else:
            code_point = ord(char)
        if code_point > MAX_CODE_POINT:
            raise Unsupported("code point above U+10FFFF")
        return _code_point(code_point)

    def _unicode_escape(self) -> int:
        match = _UNICODE_ESCAPE.match(self.pattern, self.position)
        if match is None:
            raise Unsupported("\\u without four hex digits")
        self.position = match.end()
        code_point = int(match[0], 16)
        low = _LOW_SURROGATE_ESCAPE.match(self.pattern, self.position)
        if 0xD800 <= code_point < 0xDC00 and low is not None:
            # Java reads an escaped surrogate pair as one character. Python reads two lone surrogates, which no
            # value holds (the build gives up on lone surrogates), so Java's reading is the only one that matters.
            self.position = low.end()
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + int(low[1], 16) - 0xDC00
        return code_point

    def _class(self) -> Ranges:
        self.position += 1
        negated = self._peek() == "^"
        self.position += negated
        if self._peek() == "]":
            raise Unsupported("']' first in a class")
        items: list[ClassItem] = []
        while True:
            char = self._peek()
            if char is None:
                raise Unsupported("unterminated class")
            if char == "[" or self.pattern.startswith("&&", self.position):
                raise Unsupported("nested class or class intersection")
            if char == "]":
                self.position += 1
                return _class_chars(items, negated, self.reading)
            low = self._class_atom()
            if self._peek() == "-" and self._peek(1) not in ("]", None):
                self.position += 1
                high = self._class_atom()
                if isinstance(low, str) or isinstance(high, str) or high[0][0] < low[0][0]:
                    raise Unsupported("invalid class range")
                items.append(((low[0][0], high[0][0]),))
            else:
                items.append(low)

    def _class_atom(self) -> ClassItem:
        char = self.pattern[self.position]  # the caller checked for the end of the pattern
        self.position += 1
        if char != "\\":
            return _code_point(ord(char))
        if self._peek() == "Q":
            raise Unsupported("\\Q inside a class")
        return self._escape()


def _without_anchors(items: list[_Item]) -> tuple[Node, ...]:
    nodes = tuple(item for item in items if not isinstance(item, _Anchor))
    if len(nodes) != len(items):
        raise Unsupported("anchor inside the pattern")
    return nodes


def _char(char: str) -> Chars:
    return Chars(_code_point(ord(char)))


def _code_point(code_point: int) -> Ranges:
    return ((code_point, code_point),)
