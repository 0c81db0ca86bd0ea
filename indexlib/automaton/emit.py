r"""DFA -> regex text that Python `re` and Java `Pattern` read the same way.

State elimination, cheapest state first (in-degree x out-degree), over syntax trees built by simplifying
constructors: character unions become classes, common prefixes (and a common suffix) are factored out, and when
printing, `x x*` becomes `x+` and runs become `x{n}`. The text uses a syntax subset checked against both engines:
- `^(?:...)$` with non-capturing groups only. "Any character" is `[\s\S]`, never `.` (Java's `.` excludes
  `\r \u0085 \u2028 \u2029` too, Python's only `\n`); the empty language is `^[^\s\S]$`.
- Outside classes only `\.^$|?*+()[]{}` are escaped; inside classes every ASCII punctuation character is (Java
  reads `[a[b]]` and `&&`). Controls print as `\xhh`, other non-printable BMP characters as `\uhhhh`, astral
  characters literally (Python reads `\ud83d\ude00` as two lone surrogates, Java as one character).
- No `?` or `+` right after another quantifier: Java reads `a??` as lazy and `a?+` as possessive.
Full match is meant (`re.fullmatch`, `Matcher.matches`); with find, `$` also admits one final line terminator,
a superset, so still safe for pruning.
"""

from __future__ import annotations

from functools import reduce

from indexlib.automaton.dfa import Accept, Dfa
from indexlib.automaton.limits import MAX_NESTING, TooComplex
from indexlib.automaton.ranges import ANY_CHAR, Ranges, union
from indexlib.automaton.syntax import EMPTY_STRING, Chars, Concat, Node, Repeat, Union

EMPTY_LANGUAGE_REGEX = r"^[^\s\S]$"
ANY_STRING_REGEX = r"^[\s\S]*$"

_META = frozenset("\\.^$|?*+()[]{}")


def emit_regex(dfa: Dfa) -> str:
    """Raises TooComplex when the expression would nest deeper than MAX_NESTING (it could not be parsed back)."""
    count = dfa.num_states
    source, sink = count, count + 1
    outgoing: dict[int, dict[int, Node]] = {state: {} for state in range(count + 2)}
    incoming: dict[int, dict[int, Node]] = {state: {} for state in range(count + 2)}

    def connect(start: int, end: int, expression: Node) -> None:
        outgoing[start][end] = incoming[end][start] = expression

    connect(source, 0, EMPTY_STRING)
    for state in range(count):
        if dfa.accept[state] == Accept.ANY_SUFFIX:
            connect(state, state, Chars(ANY_CHAR))
        if dfa.accept[state] != Accept.NO:
            connect(state, sink, EMPTY_STRING)
        for target, chars in dfa.edges[state].items():
            connect(state, target, Chars(chars))

    def cost(state: int) -> int:
        loops = state in outgoing[state]
        return (len(incoming[state]) - loops) * (len(outgoing[state]) - loops)

    remaining = set(range(count))
    while remaining:
        state = min(remaining, key=lambda candidate: (cost(candidate), candidate))
        remaining.remove(state)
        loop = outgoing[state].pop(state, None)
        incoming[state].pop(state, None)
        middle = EMPTY_STRING if loop is None else _star(loop)
        for before, head in incoming[state].items():
            del outgoing[before][state]
            for after, tail in outgoing[state].items():
                expression = _union(outgoing[before].get(after), _concat(head, middle, tail))
                if expression.depth > MAX_NESTING:
                    raise TooComplex(f"regex nested deeper than {MAX_NESTING}")
                connect(before, after, expression)
        for after in outgoing[state]:
            del incoming[after][state]
    whole = outgoing[source].get(sink)
    if whole is None:
        return EMPTY_LANGUAGE_REGEX
    return "^" + (_group(whole) if isinstance(whole, Union) else _render(whole)) + "$"


# ---------------------------------------------------------------- simplifying constructors


def _concat(*parts: Node) -> Node:
    items: list[Node] = []
    for part in parts:
        items.extend(part.items if isinstance(part, Concat) else (part,))
    return items[0] if len(items) == 1 else Concat(tuple(items))


def _star(node: Node) -> Node:
    if node == EMPTY_STRING:
        return node
    if isinstance(node, Repeat) and node.low == 0:  # (x?)* = (x*)* = x*
        return Repeat(node.item, 0, None)
    return Repeat(node, 0, None)


def _union(first: Node | None, second: Node) -> Node:
    if first is None:
        return second
    options: list[Node] = []
    chars: list[Ranges] = []
    has_empty = False
    stack = [second, first]
    while stack:
        node = stack.pop()
        if node == EMPTY_STRING:
            has_empty = True
        elif isinstance(node, Union):
            stack.extend(reversed(node.options))
        elif isinstance(node, Repeat) and (node.low, node.high) == (0, 1):
            has_empty = True
            stack.append(node.item)
        elif isinstance(node, Chars):
            chars.append(node.ranges)
        elif node not in options:
            options.append(node)
    if chars:
        options.insert(0, Chars(union(*chars)))
    options = _factor_prefixes(options)
    if not has_empty:
        options = _factor_suffix(options)
    if not options:
        return EMPTY_STRING
    node = options[0] if len(options) == 1 else Union(tuple(options))
    if has_empty and not (isinstance(node, Repeat) and node.low == 0):
        node = Repeat(node, 0, 1)
    return node


def _factor_prefixes(options: list[Node]) -> list[Node]:
    """ab|ac|d -> a(?:b|c)|d"""
    groups: dict[Node, list[Node]] = {}
    for option in options:
        groups.setdefault(_first(option), []).append(option)
    if len(groups) == len(options):
        return options
    return [
        members[0] if len(members) == 1 else _concat(head, reduce(_union, map(_after_first, members)))
        for head, members in groups.items()
    ]


def _factor_suffix(options: list[Node]) -> list[Node]:
    """ax|bx -> (?:a|b)x, when every option ends with the same item."""
    if len(options) < 2 or len({_last(option) for option in options}) > 1:
        return options
    return [_concat(reduce(_union, map(_before_last, options)), _last(options[0]))]


def _first(node: Node) -> Node:
    return node.items[0] if isinstance(node, Concat) else node


def _after_first(node: Node) -> Node:
    return _concat(*node.items[1:]) if isinstance(node, Concat) else EMPTY_STRING


def _last(node: Node) -> Node:
    return node.items[-1] if isinstance(node, Concat) else node


def _before_last(node: Node) -> Node:
    return _concat(*node.items[:-1]) if isinstance(node, Concat) else EMPTY_STRING


# ---------------------------------------------------------------- printing


def _render(node: Node) -> str:
    if isinstance(node, Chars):
        return _render_chars(node.ranges)
    if isinstance(node, Union):
        return "|".join(_render(option) for option in node.options)
    if isinstance(node, Repeat):
        return _atom(node.item) + _quantifier(node.low, node.high)
    return _render_sequence(node.items)


def _render_sequence(items: tuple[Node, ...]) -> str:
    parts: list[str] = []
    index = 0
    while index < len(items):
        item = items[index]
        run = 1
        while index + run < len(items) and items[index + run] == item:
            run += 1
        if run == 1 and index + 1 < len(items) and items[index + 1] == Repeat(item, 0, None):
            parts.append(_atom(item) + "+")
            index += 2
            continue
        once = _group(item) if isinstance(item, Union) else _render(item)
        if run > 1:
            counted = _atom(item) + _quantifier(run, run)
            once = counted if len(counted) < len(once) * run else once * run
        parts.append(once)
        index += run
    return "".join(parts)


def _atom(node: Node) -> str:
    """`node` as something a quantifier may follow: one character or class, else a group."""
    return _render(node) if isinstance(node, Chars) else _group(node)


def _group(node: Node) -> str:
    return "(?:" + _render(node) + ")"


def _quantifier(low: int, high: int | None) -> str:
    if high is None:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    if (low, high) == (0, 1):
        return "?"
    return f"{{{low}}}" if low == high else f"{{{low},{high}}}"


def _render_chars(ranges: Ranges) -> str:
    if ranges == ANY_CHAR:
        return r"[\s\S]"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _escape(ranges[0][0], in_class=False)
    parts: list[str] = []
    for low, high in ranges:
        parts.append(_escape(low, in_class=True))
        if high > low:
            parts.append(("-" if high > low + 1 else "") + _escape(high, in_class=True))
    return "[" + "".join(parts) + "]"


def _escape(code_point: int, in_class: bool) -> str:
    char = chr(code_point)
    if code_point < 0x80:
        if char.isalnum() or (0x20 <= code_point < 0x7F and not in_class and char not in _META):
            return char
        return "\\" + char if 0x20 <= code_point < 0x7F else f"\\x{code_point:02x}"
    if char.isprintable() or code_point > 0xFFFF:
        return char
    return f"\\x{code_point:02x}" if code_point < 0x100 else f"\\u{code_point:04x}"
