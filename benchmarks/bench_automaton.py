"""Trimmed-automaton tag index: build cost, regex size and query latency on realistic tag universes.

Not a test: prints Markdown tables. Each file holds N rows drawn from a universe (service names, hostnames, UUIDs,
HTTP status codes; the first three without repeats). "false positives" is the share of 500 other values of the
same universe that the stored regex accepts. Query times are per file (one stored regex), over every regex built
in the first table: "first" includes compiling the pattern, "per file" reuses the compiled pattern as a query
over many files does. All times are the best of 3 runs (one for builds of 1,000+ values), to leave out
garbage-collector pauses.

    .venv/bin/python benchmarks/bench_automaton.py
"""

from __future__ import annotations

import random
import statistics
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from timing import best_of

from indexlib.automaton import TagAutomaton, build_tag_regex
from indexlib.automaton.query import _pattern_nfa, _stored_automaton

SIZES = (10, 100, 1_000, 10_000)
BUDGETS = (64, 256)
TEAMS = [
    "billing",
    "auth",
    "search",
    "checkout",
    "cart",
    "payment",
    "user",
    "inventory",
    "shipping",
    "ledger",
    "fraud",
    "pricing",
    "catalog",
    "media",
]
PARTS = [
    "api",
    "worker",
    "consumer",
    "producer",
    "indexer",
    "compactor",
    "reader",
    "writer",
    "scheduler",
    "cron",
    "proxy",
    "cache",
    "frontend",
]
ROLES = ["web", "db", "cache", "kafka", "api", "worker", "search", "batch"]
ENVS = ["prod", "staging", "dev", "qa"]
REGIONS = ["eu-west-1", "us-east-1", "us-west-2", "ap-south-1"]
STATUS_CODES = [str(code) for code in (*range(200, 209), *range(300, 309), *range(400, 432), *range(500, 512))]


def services(rng: random.Random, count: int) -> list[str]:
    found: set[str] = set()
    while len(found) < count:
        suffix = rng.choice(["", "", "-v2", "-canary", f"-{rng.choice(TEAMS)}", f"-{rng.randrange(100)}"])
        found.add(f"{rng.choice(TEAMS)}-{rng.choice(PARTS)}{suffix}")
    return sorted(found)


def hostnames(rng: random.Random, count: int) -> list[str]:
    found: set[str] = set()
    while len(found) < count:
        found.add(f"{rng.choice(ROLES)}-{rng.randrange(1000):03d}.{rng.choice(ENVS)}.{rng.choice(REGIONS)}")
    return sorted(found)


def uuids(rng: random.Random, count: int) -> list[str]:
    return sorted(str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count))


def status_codes(rng: random.Random, count: int) -> list[str]:
    return list(STATUS_CODES)


UNIVERSES: dict[str, Callable[[random.Random, int], list[str]]] = {
    "service": services,
    "hostname": hostnames,
    "uuid": uuids,
    "status code": status_codes,
}


@dataclass
class Stored:
    values: list[str]
    others: list[str]
    auto: TagAutomaton


def best_ms(runs: int, function: Callable[..., object], *arguments: object) -> float:
    return best_of(runs, lambda: function(*arguments)) * 1e3


def parse_cold(regex: str) -> TagAutomaton:
    _stored_automaton.cache_clear()
    return TagAutomaton.from_regex(regex)


def build_table(rng: random.Random) -> tuple[list[str], list[Stored]]:
    lines = [
        "| universe | rows | distinct | budget | exact | states | regex bytes | build ms | parse ms | false positives |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    stored: list[Stored] = []
    for name, generate in UNIVERSES.items():
        universe = generate(rng, 20_000)
        for size in SIZES:
            values = rng.choices(universe, k=size) if name == "status code" else rng.sample(universe, size)
            distinct = set(values)
            others = [value for value in rng.sample(universe, min(len(universe), 2_000)) if value not in distinct][:500]
            for budget in BUDGETS:
                built = build_tag_regex(values, budget)
                build_ms = best_ms(1 if size >= 1_000 else 3, build_tag_regex, values, budget)
                parse_ms = best_ms(3, parse_cold, built.regex)
                auto = TagAutomaton.from_regex(built.regex)
                false_positives = sum(map(auto.accepts, others)) / len(others) if others else 0.0
                stored.append(Stored(values, others, auto))
                lines.append(
                    f"| {name} | {size:,} | {len(distinct):,} | {budget} | {'yes' if built.exact else 'no'} "
                    f"| {built.states} | {len(built.regex.encode()):,} | {build_ms:.1f} | {parse_ms:.2f} "
                    f"| {false_positives:.2f} |"
                )
    return lines, stored


Query = Callable[[Stored], object]

QUERIES: list[tuple[str, Query]] = [
    ("= (present)", lambda file: file.auto.accepts(file.values[0])),
    ("= (absent)", lambda file: file.auto.accepts(file.others[0] if file.others else "absent")),
    ("IN (10 values)", lambda file: any(map(file.auto.accepts, [*file.others[:9], file.values[0]]))),
    ("NOT IN (the file's values)", lambda file: file.auto.subset_of(file.values)),
    ("starts_with (4 chars)", lambda file: file.auto.accepts_prefix(file.values[0][:4])),
]
PATTERNS = [
    ("like", "%prod%", None),
    ("like", "web-0_2.%", None),
    ("like", "%-canary", None),
    ("like", "40!%%", "!"),
    ("like", "a\\_b%", None),
    ("regexp", "^web-\\d+\\.prod", None),
    ("regexp", "^[0-9a-f]{8}-", None),
    ("regexp", "^5\\d\\d$", None),
    ("regexp", "(a|aa)*b", None),
    ("regexp", ".*a.{20}$", None),
]
ADVERSARIAL = [
    ("regexp", "(.*a){20}", None),
    ("regexp", "(a?){1000}", None),
    ("regexp", "[^x]{0,1000}z", None),
    ("regexp", "(.{0,30}){30}q", None),
    ("regexp", "(x+x+)+y", None),
    ("like", "%a%a%a%a%a%a%a%a%b", None),
    ("regexp", "(" * 3_000 + "a" + ")" * 3_000, None),
    ("regexp", "a" * 1_001, None),
]


def pattern_queries(patterns: list[tuple[str, str, str | None]]) -> list[tuple[str, Query]]:
    queries: list[tuple[str, Query]] = []
    for kind, pattern, escape in patterns:
        shown = ("LIKE" if kind == "like" else "RLIKE") + f" `{pattern[:24]}{'...' if len(pattern) > 24 else ''}`"
        shown += f" ESCAPE `{escape}`" if escape else ""
        queries.append((shown, lambda file, k=kind, p=pattern, e=escape: file.auto.might_match(k, p, e)))
        queries.append((f"all: {shown}", lambda file, k=kind, p=pattern, e=escape: file.auto.all_match(k, p, e)))
    return queries


def query_cold(query: Query, file: Stored) -> object:
    _pattern_nfa.cache_clear()
    return query(file)


def query_table(stored: list[Stored]) -> list[str]:
    lines = [
        "| query | first ms (max) | per file ms (median) | per file ms (max) |",
        "|---|---:|---:|---:|",
    ]
    for name, query in QUERIES + pattern_queries(PATTERNS) + pattern_queries(ADVERSARIAL):
        first, warm = [], []
        for file in stored:
            first.append(best_ms(3, query_cold, query, file))
            warm.append(best_ms(3, query, file))
        lines.append(f"| {name} | {max(first):.3f} | {statistics.median(warm):.3f} | {max(warm):.3f} |")
    return lines


def main() -> None:
    rng = random.Random(7)
    build_lines, stored = build_table(rng)
    print("### Build (per file and column)\n")
    print("\n".join(build_lines))
    print(f"\n### Queries (over the {len(stored)} stored regexes above)\n")
    print("\n".join(query_table(stored)))


if __name__ == "__main__":
    main()
