"""The pruning framework: evidence answers leaves, one evaluator combines the answers over the predicate tree.

A container is what a lookup may skip (a data file; a row group later). Each source of evidence (partition values,
min/max/null counts, each index kind's payloads, any later kind) is an `Evidence`: for one bound leaf of the
normalised predicate it answers, over all N containers at once, a `Verdict`: might some row match (False only when
proven that none can), does every row match (True only when proven); None means it says nothing about that leaf.
Evidence never sees AND / OR, constants or widened leaves: the evaluator owns the tree.

The evaluator takes the evidence as an ordered list of peers (cheap first) and reports one stage per entry (but an
evidence that is `quiet_when_idle` and judged no leaf: it changed nothing). Stage k's
verdict of a leaf is the leaf's verdict of stage k-1 narrowed by evidence k (kept only where both keep, proven where
either proves); the stage's verdict of the predicate combines the leaves over the tree. Safety, once for all kinds:
- each answer is sound for its leaf, so the narrowed leaf verdict is (a row matching the leaf is in every kept set;
  a container proven by one evidence matches on every row whatever the others say);
- the normalised tree is NOT-free (NOT is pushed into the leaves with SQL's three-valued logic, query/normalize.py),
  and AND / OR are monotone: a row is TRUE for `a AND b` only where it is TRUE for both, for `a OR b` where it is for
  either, so might(a AND b) = might(a) & might(b), all(a AND b) = all(a) & all(b), likewise with | for OR;
- unknown keeps: a leaf nobody answers, an `Unusable` leaf, a container outside an evidence's `covers` is (might, not
  proven); a widened leaf keeps its child's might and proves nothing.
Later stages only narrow leaves, so each stage keeps a subset of the previous one's containers and proves a superset.

Evidence k reads (payloads) only for its candidates: containers stage k-1 kept whose leaf verdict still might match.
The others may answer anything sound; the evaluator reads them as unknown, which changes no kept container.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from indexlib.query.model import And, Const, Expr, Or, Unusable, Widened
from indexlib.statistics.verdict import Verdict


class Evidence(ABC):
    """One source of evidence over N containers. `covers`: the containers it has data for (None: all); outside it
    the evaluator reads every answer as unknown, so an evidence need not special-case them."""

    name: str
    covers: np.ndarray | None = None
    # When set, a stage of this evidence that judged no leaf is left out of the report (it narrowed nothing): an
    # opt-in index kind no candidate file carries adds no line to every lookup of every table.
    quiet_when_idle: bool = False

    @abstractmethod
    def answer(self, leaf: Expr, candidates: np.ndarray) -> Verdict | None:
        """Per container, the verdict on one bound leaf (a comparison, IN, IS NULL, isnan, pattern, calendar field),
        or None when this evidence cannot judge the leaf. `candidates`: the containers still in play; an
        evidence may skip reading the others and answer "might match, not proven" for them."""

    def describe(self, leaf: Expr) -> str | None:
        """For explain: what this evidence reads for `leaf`, or None when it does not answer it."""
        return None


@dataclass(frozen=True)
class StageVerdict:
    """The predicate's verdict after one evidence (and every one before it)."""

    name: str
    verdict: Verdict


def evaluate(
    predicate: Expr, evidence: Sequence[Evidence], n: int, learnt: dict[int, Verdict] | None = None
) -> list[StageVerdict]:
    """One stage per evidence, in order (see the module docstring). With no evidence, one "none" stage of
    unknown (every container kept). `learnt`, if given, receives each judged leaf's final verdict, keyed by the
    leaf's id (pruning/containers.py hands it to the containers' parts)."""
    unique = {id(leaf): leaf for leaf in judged_leaves(predicate)}
    known = {key: Verdict.unknown(n) for key in unique}
    stages: list[StageVerdict] = []
    kept = np.ones(n, dtype=bool)
    for source in evidence:
        judged = False
        for key, leaf in unique.items():
            verdict = known[key]
            candidates = verdict.might & kept
            if not candidates.any():
                continue  # nothing left to learn about this leaf in play
            found = source.answer(leaf, candidates)
            if found is None:
                continue
            judged = True
            if source.covers is not None:
                found = Verdict(found.might | ~source.covers, found.all_match & source.covers)
            known[key] = verdict.narrowed_by(found)
        if judged or not source.quiet_when_idle:
            kept = _stage(stages, source.name, known, predicate, n)
    if not stages:
        _stage(stages, "none", known, predicate, n)
    if learnt is not None:
        learnt.update(known)
    return stages


def _stage(stages: list[StageVerdict], name: str, known: dict[int, Verdict], predicate: Expr, n: int) -> np.ndarray:
    """Append the predicate's verdict from the leaves' `known` ones; all-match only among the kept containers (an
    empty one may be both "cannot match" and "all match"). Returns what it keeps."""
    combined = _Combine(known, n).visit(predicate)
    stages.append(StageVerdict(name, Verdict(combined.might, combined.all_match & combined.might)))
    return combined.might


def judged_leaves(expr: Expr) -> list[Expr]:
    """The leaves evidence is asked about, left to right: every leaf, inside widened ones too, but constants and
    unusable parts (the evaluator decides those)."""
    found: list[Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (And, Or)):
            stack += [node.right, node.left]
        elif isinstance(node, Widened):
            stack.append(node.child)
        elif not isinstance(node, (Const, Unusable)):
            found.append(node)
    return found


class _Combine:
    """The predicate's verdict from its leaves' (three-valued AND / OR over containers, see the module docstring)."""

    def __init__(self, known: dict[int, Verdict], n: int) -> None:
        self.known, self.n = known, n

    def visit(self, expr: Expr) -> Verdict:
        if isinstance(expr, And):
            return self.visit(expr.left) & self.visit(expr.right)
        if isinstance(expr, Or):
            return self.visit(expr.left) | self.visit(expr.right)
        if isinstance(expr, Const):
            return Verdict.constant(self.n, bool(expr.value))
        if isinstance(expr, Widened):
            return self.visit(expr.child).never_proven()
        if isinstance(expr, Unusable):
            return Verdict.unknown(self.n)  # not evaluable: might match, unproven
        return self.known[id(expr)]


def describe(leaf: Expr, evidence: Sequence[Evidence]) -> str:
    """For explain: what each evidence reads for one leaf of the predicate."""
    target = leaf.child if isinstance(leaf, Widened) else leaf
    used = [said for source in evidence if (said := source.describe(target)) is not None]
    if isinstance(leaf, Widened):
        used = [f"{part} (literal widened: never proves all rows match)" for part in used[:1]] + used[1:]
    return "; ".join(used)
