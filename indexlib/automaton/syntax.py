"""The regular-expression tree shared by the emitter, the parsers and the NFA compiler.

Four node kinds express every language handled here (the parser resolves anchors before building nodes). Each node
records its depth, so the code that recurses over trees can refuse deep ones up front (see limits.MAX_NESTING).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from indexlib.automaton.ranges import ANY_CHAR, Ranges, from_code_points


@dataclass(frozen=True, slots=True)
class Chars:
    """One character from a set."""

    ranges: Ranges
    depth: ClassVar[int] = 1


@dataclass(frozen=True, slots=True)
class Concat:
    items: tuple[Node, ...]
    depth: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", 1 + max((item.depth for item in self.items), default=0))


@dataclass(frozen=True, slots=True)
class Union:
    options: tuple[Node, ...]
    depth: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", 1 + max((option.depth for option in self.options), default=0))


@dataclass(frozen=True, slots=True)
class Repeat:
    """`item` repeated `low` to `high` times (`high` None: unbounded)."""

    item: Node
    low: int
    high: int | None
    depth: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", 1 + self.item.depth)


Node = Chars | Concat | Union | Repeat

EMPTY_STRING = Concat(())
ANY_STRING = Repeat(Chars(ANY_CHAR), 0, None)


def literal(text: str) -> Concat:
    return Concat(tuple(Chars(from_code_points((ord(char),))) for char in text))
