"""A plan request's `filter` (the REST specification's expression JSON) as two things:

- the residual sent back with every task: the client's own filter, unchanged. pyiceberg's model of it where
  pyiceberg parses the whole filter; otherwise the JSON the client sent, as it sent it (`Opaque`): the
  specification's residual is an expression, and the client's own filter is always a valid one;
- the pruning filter: a pyiceberg expression TRUE for at least every row the client's filter keeps, naming the
  columns of the table's current schema (what the index's lookup and pyiceberg's planning bind to). Every leaf
  pyiceberg parses and binds is kept as it is (the index then prunes with it as with a pyiceberg scan's filter,
  query/from_iceberg.py); any other subexpression is unknown and becomes TRUE ("might match"): a transform term
  other than `identity` (`{"type": "transform", "transform": "day", "term": "ts"}`), a literal pyiceberg cannot
  convert to the column's type (a binary column's hex, `{"type": "literal", ...}` objects), the newer `child` /
  `left` / `right` forms, an expression type the specification may add later, a column dropped since the schema the
  filter was written for. TRUE is sound inside AND and OR but not under NOT (NOT TRUE would drop every file), so NOT
  is pushed down to the leaves first (De Morgan, Kleene logic: NOT (a AND b) is TRUE exactly where a or b is FALSE),
  and an unknown leaf is TRUE whether negated or not.

Malformed filters are refused (a 400): not an object or boolean, an object without a string `type`, an `and` / `or`
without `left` and `right`, a `not` without `child`, and a leaf naming a column the schema does not have (as
pyiceberg's and Java's binding refuse it). Columns bind to the snapshot's schema when the request says
`use-snapshot-schema` (the planner chooses the schema), by name as `case-sensitive` says, and are renamed by field id
to the current schema's names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    LiteralPredicate,
    Not,
    Or,
    Reference,
    SetPredicate,
    UnaryPredicate,
    UnboundPredicate,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema

LEAVES = frozenset(
    {
        *("lt", "lt-eq", "gt", "gt-eq", "eq", "not-eq", "starts-with", "not-starts-with"),
        *("in", "not-in", "is-null", "not-null", "is-nan", "not-nan"),
    }
)
MAX_DEPTH = 200  # deeper subtrees are unknown (might match) rather than a recursion error
OUTLINE_CHARS = 300  # the longest filter outline a plan's log line holds


class FilterError(ValueError):
    """A filter that is not an expression at all (a 400)."""


class Opaque(BooleanExpression):
    """The client's filter JSON where pyiceberg cannot model it (or its model cannot be written: pydantic stops at a
    nesting depth engines' long OR chains reach), written back exactly as it came (wire.py writes it with the
    standard library, whatever its depth). Residuals only: never evaluated or negated here."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    raw: Any

    def __invert__(self) -> BooleanExpression:
        raise TypeError("an opaque residual is never negated")

    def __str__(self) -> str:
        return json.dumps(self.raw)[:200]


@dataclass
class Pruning:
    """The pruning filter and the parts of the client's filter it could not use (for the log)."""

    expression: BooleanExpression
    unknown: list[str] = field(default_factory=list)
    # `expression` bound in the planning schema, where the binding schema is that very schema: each leaf as
    # checking it bound it (`_Converter._leaf`), so the lookup does not bind an IN of 1,000 literals again. None
    # where the schemas differ (a leaf bound in the snapshot's schema is not bound in the current one)
    bound: BooleanExpression | None = None


@dataclass(frozen=True)
class RequestFilter:
    raw: Any  # the JSON the client sent; None: no filter
    residual: BooleanExpression
    # pyiceberg's model of raw leaves (by id of the JSON object) where the residual's tree follows the JSON's, so a
    # leaf (an IN of 1,000 literals) is not parsed again for the pruning filter
    parsed_leaves: dict[int, BooleanExpression] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, raw: Any) -> RequestFilter:
        """The request's `filter` JSON, checked for shape (FilterError: module docstring)."""
        if raw is None:
            return cls(None, AlwaysTrue())
        _check(raw, "filter", 0)
        try:
            residual = BooleanExpression.model_validate(raw)
            residual.model_dump_json(serialize_as_any=True)
        except Exception:  # pyiceberg cannot model it, or write its model: sent back as it came
            residual = Opaque(raw=raw)
        parsed: dict[int, BooleanExpression] = {}
        _leaves_of(raw, residual, parsed, 0)
        return cls(raw, residual, parsed)

    @property
    def modelled(self) -> bool:
        return not isinstance(self.residual, Opaque)

    @property
    def outline(self) -> str:
        """The filter's operators and the columns they name, never its values, for the plan's log line: what the
        client pushed into its scan (`not-null(id) and gt(id)`; an IN of any length is `in(id)`); `none` without a
        filter. A term other than a column reads as its transform (`day(ts)`); past OUTLINE_CHARS it is cut."""
        if self.raw is None:
            return "none"
        text = _outline(self.raw, 0)
        return text if len(text) <= OUTLINE_CHARS else text[: OUTLINE_CHARS - 3] + "..."

    def pruning(self, binding: Schema, planning: Schema, case_sensitive: bool) -> Pruning:
        """The pruning filter (module docstring): columns bound in `binding` by name, named as in `planning`."""
        result = Pruning(AlwaysTrue(), bound=AlwaysTrue())
        if self.raw is not None:
            converter = _Converter(binding, planning, case_sensitive, result.unknown, self.parsed_leaves)
            result.expression = converter.convert(self.raw)
            result.bound = converter.bound_tree(result.expression, 0) if binding is planning else None
        return result


def _outline(node: Any, depth: int) -> str:
    if isinstance(node, bool):
        return str(node).lower()
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return "..."
    kind = str(node.get("type"))
    if kind in ("and", "or", "not"):
        children = [node.get(side) for side in (("child",) if kind == "not" else ("left", "right"))]
        # a child of another kind is parenthesised: `a and (b or c)`, `not (a and b)`
        parts = [
            f"({_outline(child, depth + 1)})" if _compound(child, kind) else _outline(child, depth + 1)
            for child in children
        ]
        return f"not {parts[0]}" if kind == "not" else f" {kind} ".join(parts)
    return f"{kind}({_term(node.get('term'))})" if "term" in node else kind


def _compound(node: Any, parent: str) -> bool:
    return isinstance(node, dict) and node.get("type") in ("and", "or") and node["type"] != parent


def _term(term: Any) -> str:
    if isinstance(term, str):
        return term
    if isinstance(term, dict) and "term" in term:
        inner = _term(term["term"])
        return f"{term['transform']}({inner})" if isinstance(term.get("transform"), str) else inner
    return "?"


def _leaves_of(raw: Any, parsed: BooleanExpression, found: dict[int, BooleanExpression], depth: int) -> None:
    """Records in `found` the model of each leaf of `raw` while `parsed` has the same shape (pyiceberg's constructors
    fold some trees, NOT NOT x or x AND TRUE: below such a node nothing is recorded, and the leaf is parsed alone)."""
    if depth > MAX_DEPTH or not isinstance(raw, dict):
        return
    kind = raw.get("type")
    if kind in ("and", "or") and isinstance(parsed, And if kind == "and" else Or):
        _leaves_of(raw.get("left"), parsed.left, found, depth + 1)
        _leaves_of(raw.get("right"), parsed.right, found, depth + 1)
    elif kind == "not" and isinstance(parsed, Not):
        _leaves_of(raw.get("child"), parsed.child, found, depth + 1)
    elif (
        kind in LEAVES
        and isinstance(parsed, UnboundPredicate)
        and isinstance(parsed.term, Reference)  # (pyiceberg's one kind of unbound term)
        and raw.get("term") == parsed.term.name
    ):
        found[id(raw)] = parsed


def _check(node: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        return  # not looked into: unknown when converted
    if isinstance(node, bool):
        return
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise FilterError(f"invalid filter: {where} is not an expression (an object with a string 'type')")
    kind = node["type"]
    if kind in ("and", "or"):
        for side in ("left", "right"):
            if side not in node:
                raise FilterError(f"invalid filter: {where}: '{kind}' needs '{side}'")
            _check(node[side], f"{where}.{side}", depth + 1)
    elif kind == "not":
        if "child" not in node:
            raise FilterError(f"invalid filter: {where}: 'not' needs 'child'")
        _check(node["child"], f"{where}.child", depth + 1)


class _Converter:
    def __init__(
        self,
        binding: Schema,
        planning: Schema,
        case_sensitive: bool,
        unknown: list[str],
        parsed: dict[int, BooleanExpression],
    ) -> None:
        self.binding, self.planning, self.case_sensitive, self.unknown = binding, planning, case_sensitive, unknown
        self.parsed = parsed
        self.bound: dict[int, BooleanExpression] = {}  # each leaf `_leaf` returned, bound in `binding`, by id

    def bound_tree(self, node: BooleanExpression, depth: int) -> BooleanExpression | None:
        """`node` (what `convert` returned) with each leaf replaced by its binding; None where a leaf has none."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, AlwaysTrue | AlwaysFalse):
            return node
        if isinstance(node, And | Or):
            left, right = self.bound_tree(node.left, depth + 1), self.bound_tree(node.right, depth + 1)
            if left is None or right is None:
                return None
            return And(left, right) if isinstance(node, And) else Or(left, right)
        if isinstance(node, Not):
            child = self.bound_tree(node.child, depth + 1)
            return Not(child) if child is not None else None
        return self.bound.get(id(node))

    def convert(self, node: Any, negated: bool = False, depth: int = 0) -> BooleanExpression:
        """TRUE for at least the rows where `node` is TRUE (`negated`: where it is FALSE)."""
        if isinstance(node, bool):
            return AlwaysTrue() if node != negated else AlwaysFalse()
        if depth > MAX_DEPTH:
            return self._unknown(node, f"nested deeper than {MAX_DEPTH}")
        kind = node["type"]
        if kind in ("true", "false"):
            return AlwaysTrue() if (kind == "true") != negated else AlwaysFalse()
        if kind in ("and", "or"):
            left = self.convert(node["left"], negated, depth + 1)
            right = self.convert(node["right"], negated, depth + 1)
            return And(left, right) if (kind == "and") != negated else Or(left, right)
        if kind == "not":
            return self.convert(node["child"], not negated, depth + 1)
        leaf = self._leaf(node)
        if leaf is None:
            return AlwaysTrue()
        return Not(leaf) if negated else leaf

    def _unknown(self, node: Any, why: str) -> BooleanExpression:
        self.unknown.append(f"{json.dumps(node)[:200]}: {why}")
        return AlwaysTrue()

    def _leaf(self, node: dict[str, Any]) -> BooleanExpression | None:
        """The leaf as a pyiceberg predicate on the planning schema's column, or None (unknown, recorded)."""
        if node["type"] not in LEAVES:
            self._unknown(node, "an expression type pyiceberg does not know")
            return None
        term = node.get("term")
        if isinstance(term, dict) and term.get("type") == "transform" and isinstance(term.get("term"), str):
            self._column(term["term"])  # a transform of a column the table does not have is a bad request too
            if term.get("transform") != "identity":
                self._unknown(node, "a transform term")
                return None
            node = {**node, "term": term["term"]}  # identity(x) is x
        try:
            parsed = self.parsed.get(id(node)) or BooleanExpression.model_validate(node)
        except Exception:
            self._unknown(node, "pyiceberg cannot parse it")
            return None
        if not isinstance(parsed, UnboundPredicate) or not isinstance(parsed.term, Reference):
            self._unknown(node, "not a predicate on a column")
            return None
        self._column(parsed.term.name)
        try:
            bound = bind(self.binding, parsed, self.case_sensitive)
        except Exception as exc:  # a literal pyiceberg cannot convert to the column's type
            self._unknown(node, f"pyiceberg cannot bind it: {exc}")
            return None
        if isinstance(bound, AlwaysTrue | AlwaysFalse):  # pyiceberg's own reading of the literal's range
            return bound
        name = self.planning.find_column_name(bound.term.ref().field.field_id)  # type: ignore[attr-defined]
        if name is None:
            self._unknown(node, "the column is not in the table's current schema")
            return None
        renamed = _renamed(parsed, name)
        self.bound[id(renamed)] = bound
        return renamed

    def _column(self, name: str) -> None:
        try:
            self.binding.find_field(name, self.case_sensitive)
        except ValueError as exc:
            raise FilterError(f"invalid filter: {exc}") from None


def _renamed(predicate: UnboundPredicate, name: str) -> BooleanExpression:
    if predicate.term.name == name:  # type: ignore[attr-defined]
        return predicate
    reference = Reference(name)
    if isinstance(predicate, SetPredicate):
        return type(predicate)(reference, predicate.literals)
    if isinstance(predicate, LiteralPredicate):
        return type(predicate)(reference, predicate.literal)
    if isinstance(predicate, UnaryPredicate):
        return type(predicate)(reference)
    raise AssertionError(f"unexpected predicate {predicate!r}")
