"""Stateful property: random histories of real tables, and after every step every asker checked against the rows.

A hypothesis `RuleBasedStateMachine` runs a random history on a REAL table, Iceberg (pyiceberg, SQLite catalog in a
fresh directory per example) or Delta (delta-rs, a fresh directory per example): appends, deletes that remove whole
files or rewrite part of one, overwrites, compaction of the source, index builds (real Spark, with and without
`index_existing_files`), backfills, index compaction and expiry, an index written in format 3 that the next writer
upgrades; Iceberg rollbacks and set-current-snapshot to any earlier snapshot, schema changes (add, drop, rename, two
string columns swapping names, int -> long) and partition evolution; Delta restores, vacuum, a column added with
`schema_mode="merge"` and an overwrite that changes the schema.

After every step, for a fixed set of predicates over the columns the table has now, three askers are checked:
- "one-off lookup": `indexlib.lookup.lookup(config, name, where)`;
- "held handle": one `IndexHandle` made when the example starts (Iceberg: from the table object; Delta: from the
  path) and never remade, first asked after the first step;
- "handle made now": an `IndexHandle` made at the check, Iceberg: from the table object the test loaded before the
  step ran (what a planner holding a table object does); Delta: from the path (`for_delta` takes no table object).
Each answer must (a) hold every live file with a row where the predicate is TRUE, (b) hold only live files, (c) list
in `all_match` only files where every row is TRUE, (d) count every live file in `summary["files_total"]`, and, for
files with row-group entries, (e) leave no row group holding a TRUE row out of `row_groups` or out of what a reader
reads (`needed_row_groups`, KeptFile.row_groups), (f) list in the row groups' `all_match` only row groups where every
row is TRUE.

About half the examples run with the global key index on every column with keys (`start`'s `key_index`:
`[index] key_index = true`, key rows written, kept and dropped by every index operation), and about half with
row-group entries (`start`'s `row_groups`): `[index] row_groups = true`, and
source files written in row groups of ROW_GROUP_ROWS rows (Iceberg: the table property
`write.parquet.row-group-limit`; Delta: delta-rs `WriterProperties(max_row_group_size=...)` on every write).

The truth is DuckDB over in-memory Arrow: each live file's rows as the table's CURRENT schema reads them (Iceberg:
pyiceberg's `ArrowScan` per planned task, by field id; Delta: the Parquet file plus its partition values from the log,
by name), each predicate counted per (file, Parquet row group) as `count(*) FILTER (WHERE p)` against `count(*)`. A
row's row group comes from its position in the file and the footer's row-group sizes; the histories write no delete
files or deletion vectors (deletes rewrite files), and a file whose read rows are not its physical rows (deletes
applied) is checked at the file level only.

Failures are recorded, not raised at once: one bug often hides another (a handle's bug may show only after a one-off
lookup already went wrong), so the example runs to its end and `teardown` raises the most telling failure, each kind
as its own exception type so that hypothesis shrinks and reports each separately. The order: an index operation
(build, backfill, compact, expire) that raised; a held handle wrong at a later question where a one-off lookup at the
same check was right; a one-off lookup; a held handle's first question; a handle made now. A handle's failure that
the one-off lookup shows too at that check is counted as the lookup's.

One rule is aimed: `back_to_the_watermark` rolls back (Iceberg) or restores (Delta) to the index's watermark, where
the index's idea of which files are live is most at stake; `rollback` / `restore` go to any version written.

EXAMPLES examples of up to STEPS steps per format (about half of them with row-group entries): 2 of 12 in `make test`,
40 of 15 in `make test-long`; and KNOWN_HISTORIES, histories the machine found (and two with row-group entries and two
with the key index, one per format), replayed step by step in every run. Longer runs, by environment variable:
SKIPINDEX_LIFE_EXAMPLES, SKIPINDEX_LIFE_STEPS (e.g. 300 and 15); SKIPINDEX_LIFE_SEED (hypothesis's seed, printed with
every failure); SKIPINDEX_LIFE_FOCUS (only the named failure types fail an example: hypothesis stops looking 10 s after
its first failure, so a hunt for one bug names it; such a run keeps its examples in .hypothesis/table-life/ and goes
on shrinking when run again); SKIPINDEX_LIFE_RULES (only these rules); SKIPINDEX_LIFE_SHRINK_SECONDS (hypothesis's
300 s shrinking limit, raised through an internal); SKIPINDEX_LIFE_VERBOSE (each step and check as it runs).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import sweep
from deltalake import DeltaTable, WriterProperties, write_deltalake
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from lakes import write_format_3_index
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import DecimalType, IntegerType, LongType, NestedField, StringType

from indexlib.config import load_config
from indexlib.handle import IndexHandle
from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact, expire
from indexlib.lookup import LookupResult, lookup
from indexlib.query.sql import Clock
from indexlib.sources.registry import open_source
from indexlib.store.table import IndexTable

EXAMPLES = sweep("SKIPINDEX_LIFE_EXAMPLES", short=2, long=40)
STEPS = sweep("SKIPINDEX_LIFE_STEPS", short=12, long=15)
SEED = os.environ.get("SKIPINDEX_LIFE_SEED")
# hypothesis stops shrinking after 300 s per test; a long run that must print minimal examples may allow more
SHRINK_SECONDS = os.environ.get("SKIPINDEX_LIFE_SHRINK_SECONDS")
RULES = {name.strip() for name in os.environ.get("SKIPINDEX_LIFE_RULES", "").split(",") if name.strip()}
VERBOSE = bool(os.environ.get("SKIPINDEX_LIFE_VERBOSE"))  # print every example's history and check times
CLOCK = Clock()
ROWS = 10  # rows per appended batch: one partition each, so one data file
ROW_GROUP_ROWS = 3  # with row-group entries: the source writes row groups of this many rows (a batch: 3, 3, 3, 1)

S1_VALUES = ["auth", "billing", "search"]
S2_VALUES = ["mail", "queue", "web"]
PARTS = ["a", "b", "c"]
# (predicate, the columns it names): asked while every named column exists. s1 and s2 are written from different
# values, so after the two swap names a predicate on one finds the other's values in the older files.
PREDICATES = [
    ("id = 7", {"id"}),
    ("id BETWEEN 12 AND 30", {"id"}),
    ("id >= 40", {"id"}),  # every row of the files appended later
    ("part IN ('a', 'c')", {"part"}),  # every row of those partitions' files
    ("s1 = 'web'", {"s1"}),
    ("s1 IN ('billing', 'mail')", {"s1"}),
    ("s2 LIKE 'au%'", {"s2"}),
    ("s2 IS NULL", {"s2"}),
    ("n > 6 OR s2 = 'queue'", {"n", "s2"}),
    ("part = 'b' AND s1 LIKE 'se%'", {"part", "s1"}),
    ("num <= 2", {"num"}),
    ("extra >= 50", {"extra"}),
    ("amount > 2.50", {"amount"}),  # decimal(18, 8), holding 0: Arrow prints it '0E-8' (issue 25, item 6)
    ("id IN (3, 41, 77)", {"id"}),  # the global key index answers these where it is on
    ("extra IN (50, 51, 52)", {"extra"}),
]
# deletes: the first files whole (or part of a compacted one), whole partitions, part of files
DELETES = [*(f"id < {ROWS * n}" for n in (1, 2, 3)), *(f"part = '{p}'" for p in PARTS)]
DELETES += [f"s2 = '{value}'" for value in S2_VALUES]
# Iceberg schema changes (no snapshot): "change column"
SCHEMA_CHANGES = ["swap s1", "rename n", "promote n", "add n", "add extra", "add amount", "drop n", "drop extra"]
SCHEMA_CHANGES += ["drop amount"]
# columns a schema change may add (Iceberg type, Arrow type); n can come back after a drop, with a new field id
ADDABLE = {
    "n": (IntegerType(), pa.int32()),
    "extra": (LongType(), pa.int64()),
    "amount": (DecimalType(18, 8), pa.decimal128(18, 8)),
}

# What failed, in the order teardown raises it: (group, kind). An index operation that raised comes first (its kind
# is the rule and the exception), then the askers. Each (group, kind) is its own exception type, so that hypothesis
# tells the bugs apart (it keys a failure by its type and where it was raised) and shrinks each to its own example.
GROUPS = {
    "index operation": "",
    "held handle (later question)": "HeldHandle",
    "one-off lookup": "OneOffLookup",
    "held handle (first question)": "HeldHandleFirstQuestion",
    "handle made now": "HandleMadeNow",
}
KINDS = {
    "skipped": "SkippedAMatchingLiveFile",
    "not live": "ReturnedAFileNotLive",
    "all_match": "ClaimedAllMatchWrongly",
    "files_total": "CountedLiveFilesWrongly",
    "row group skipped": "SkippedAMatchingRowGroup",
    "row group all_match": "ClaimedAllMatchWronglyForARowGroup",
    "error": "Raised",
}
# A held handle's first question and a handle made now go wrong together, in as many kinds as there are, whenever a
# planner's table object is stale: one type per group, so that shrinking time is spent on the others.
BY_GROUP = {"held handle (first question)", "handle made now"}
# SKIPINDEX_LIFE_FOCUS: names of failure types (comma-separated, e.g. OneOffLookupSkippedAMatchingLiveFile); only
# those fail an example, the others are still shown in its message. Hypothesis stops looking for new failures 10 s
# after it found the first one, so a long run after one particular bug names it here.
FOCUS = {name.strip() for name in os.environ.get("SKIPINDEX_LIFE_FOCUS", "").split(",") if name.strip()}


def _asked(prefix: str) -> bool:
    """Whether a handle whose failure types start with `prefix` is asked: always, but in a focused run only when
    one of its types is in focus (a held handle's later question is judged against the one-off lookup's, so the
    one-off lookup is always asked)."""
    return not FOCUS or any(name.startswith(prefix) for name in FOCUS)


class LifeFailure(AssertionError):
    """A lookup broke the rule, or an index operation raised, at some step of a table's life."""


_TYPES: dict[str, type[LifeFailure]] = {}


def failure_type(group: str, kind: str) -> type[LifeFailure]:
    if group == "index operation":  # kind: "<rule> raised <exception type>"
        name = "".join(word[:1].upper() + word[1:] for word in kind.replace("_", " ").split())
    else:
        name = GROUPS[group] + ("BrokeTheRule" if group in BY_GROUP else KINDS[kind])
    return _TYPES.setdefault(name, type(name, (LifeFailure,), {}))


@dataclass
class Failure:
    group: str
    kind: str
    asker: str
    step: int
    where: str
    detail: str

    @property
    def rank(self) -> tuple[int, int]:
        return list(GROUPS).index(self.group), list(KINDS).index(self.kind) if self.kind in KINDS else 0

    @property
    def counts(self) -> bool:
        return not FOCUS or failure_type(self.group, self.kind).__name__ in FOCUS


@dataclass
class Truth:
    """The live files and, per predicate, each file's (rows, rows where it is TRUE), and the same per Parquet row
    group of each file whose rows map to its row groups."""

    live: set[str]
    counts: dict[str, dict[str, tuple[int, int]]]
    group_counts: dict[str, dict[str, list[tuple[int, int]]]]

    def matching(self, where: str) -> set[str]:
        return {path for path, (_, matched) in self.counts[where].items() if matched}


def _rows(schema: pa.Schema, rng: random.Random, start: int, part: str) -> pa.Table:
    """ROWS rows of one partition in `schema` (by column name): ids from `start`, each string column clustered on
    two of its values, some NULLs."""
    s1, s2 = rng.sample(S1_VALUES, 2), rng.sample(S2_VALUES, 2)

    def value(name: str, i: int) -> Any:
        if name == "id":
            return start + i
        if name == "part":
            return part
        if name == "s1":
            return None if rng.random() < 0.1 else rng.choice(s1)
        if name == "s2":
            return None if rng.random() < 0.1 else rng.choice(s2)
        if name in ("n", "num"):
            return rng.randrange(10)
        if name == "extra":
            return None if rng.random() < 0.2 else rng.randrange(100)
        if name == "amount":
            return Decimal(rng.randrange(500)).scaleb(-2).quantize(Decimal("1E-8"))  # 0 among them
        raise AssertionError(f"no values for column {name}")

    return pa.Table.from_pylist(
        [{f.name: value(f.name, i) for f in schema} for i in range(ROWS)], schema=pa.schema(list(schema))
    )


def _short(paths: set[str] | list[str]) -> str:
    return ", ".join(sorted(p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1][:13] for p in paths))


class TableLife(RuleBasedStateMachine):
    """The rules and the check both formats share; IcebergLife and DeltaLife add their own."""

    kind = ""

    def __init__(self, spark: Any, base: Path) -> None:
        super().__init__()
        self.spark = spark
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.kind}-", dir=base))
        self.configure(row_groups=False, key_index=False)
        self.catalog = self.config.load_catalog()
        self.next_id = 0
        self.history: list[str] = []
        self.versions: list[int | None] = []  # every source version written: rollbacks and restores go there
        self.failures: list[Failure] = []
        self.index_written = False
        self.held: IndexHandle | None = None
        self.held_asked = False
        self.duck = duckdb.connect()
        self.started = time.monotonic()

    def configure(self, row_groups: bool, key_index: bool) -> None:
        """The configurations builds use (one catalog): `config`, and `late_config`, whose first build leaves
        existing files to backfill; with `row_groups`, both build row-group entries; with `key_index`, every
        column with keys goes into the global key index (`[index] key_index = true`)."""
        self.row_groups = row_groups
        settings = ("row_groups = true\n" if row_groups else "") + ("key_index = true\n" if key_index else "")
        conf = self.dir / "conf.toml"
        conf.write_text(
            f'[catalog]\nname = "life"\ntype = "sql"\nuri = "sqlite:///{self.dir}/catalog.db"\n'
            f'warehouse = "file://{self.dir}/warehouse"\n[spark]\nmaster = "local[2]"\n'
            + (f"[index]\n{settings}" if settings else "")
        )
        self.config = load_config(conf)
        late = self.dir / "late.toml"  # the same catalog; a first build leaves existing files to backfill
        late.write_text(conf.read_text() + "[build]\nindex_existing_files = false\nbackfill_files_per_commit = 2\n")
        self.late_config = load_config(late)

    # ---- what the formats provide -------------------------------------------------------------------------------

    name: str

    def create(self) -> None:
        raise NotImplementedError

    def arrow_schema(self) -> pa.Schema:
        raise NotImplementedError

    def write(self, batch: pa.Table) -> None:
        raise NotImplementedError

    def version(self) -> int | None:
        raise NotImplementedError

    def live_tables(self) -> dict[str, pa.Table]:
        """Each live file's rows as the current schema reads them."""
        raise NotImplementedError

    def columns(self) -> set[str]:
        return set(self.arrow_schema().names)

    def handle_now(self) -> IndexHandle:
        raise NotImplementedError

    def held_handle(self) -> IndexHandle:
        raise NotImplementedError

    def remember_table(self) -> None:
        """Load what a planner holds between steps (Iceberg: the table object)."""

    # ---- helpers ------------------------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        self.history.append(f"{len(self.history) + 1}. {text}")
        if VERBOSE:
            print(f"  [{time.monotonic() - self.started:6.1f}s] {self.history[-1]}", flush=True)

    def batch(self, seed: int, part: str) -> pa.Table:
        batch = _rows(self.arrow_schema(), random.Random(seed), self.next_id, part)
        self.next_id += ROWS
        return batch

    def index(self) -> IndexTable:
        return IndexTable(self.catalog, self.config.index_namespace, open_source(self.config, self.name).name)

    def watermark(self) -> int | None:
        return self.index().watermark()

    # ---- rules of both formats ----------------------------------------------------------------------------------

    # Hypothesis orders rules by their number of arguments and favours the first: every rule takes at most one.

    @initialize(seed=st.integers(0, 1000), files=st.integers(2, 3), row_groups=st.booleans(), key_index=st.booleans())
    def start(self, seed: int, files: int, row_groups: bool = False, key_index: bool = False) -> None:
        self.configure(row_groups, key_index)
        self.create()
        for n in range(files):
            self.write(self.batch(seed + n, PARTS[n % 3]))
        self.held = self.held_handle()  # made now, first asked after the first step
        shown = f", row groups of {ROW_GROUP_ROWS} rows with row-group entries" if row_groups else ""
        shown += ", the global key index on every column" if key_index else ""
        self.wrote(f"start: {files} appended files{shown}; held handle made")

    def wrote(self, what: str) -> None:
        self.versions.append(self.version())
        self.note(f"{what} -> version {self.versions[-1]}")

    @rule(part=st.sampled_from(PARTS))
    def append(self, part: str) -> None:
        self.write(self.batch(self.next_id, part))
        self.wrote(f"append one file of part {part!r}")

    @rule(where=st.sampled_from(DELETES))
    def delete(self, where: str) -> None:
        self.delete_rows(where)
        self.wrote(f"delete where {where}")

    def delete_rows(self, where: str) -> None:
        raise NotImplementedError

    @rule(where=st.sampled_from([None, *(f"part = '{part}'" for part in PARTS)]))
    def overwrite(self, where: str | None) -> None:
        """Overwrite the table (None) or one partition with one file."""
        part = where.split("'")[1] if where else "a"
        self.overwrite_rows(self.batch(self.next_id, part), where)
        self.wrote(f"overwrite {where or 'the table'} with one file")

    def overwrite_rows(self, batch: pa.Table, where: str | None) -> None:
        raise NotImplementedError

    @rule()
    def compact_source(self) -> None:
        self.rewrite_source()
        self.wrote("compact the source (rewrite its files)")

    def rewrite_source(self) -> None:
        raise NotImplementedError

    @rule()
    def build(self) -> None:
        self.build_with(existing=True)

    @rule()
    def build_from_now(self) -> None:
        """A build with `index_existing_files = false`: the first one leaves the files live now to backfill."""
        self.build_with(existing=False)

    def build_with(self, existing: bool) -> None:
        config = self.config if existing else self.late_config
        what = f"build (index_existing_files = {str(existing).lower()})"
        result = self.index_operation(what, lambda: build_index(config, self.name, self.spark))
        if result is not None:
            done = f"{result.files_indexed} files indexed, watermark {result.source_version}"
            self.note(f"{what}: {done if result.committed else 'up to date'}")

    @rule()
    def backfill_index(self) -> None:
        result = self.index_operation("backfill", lambda: backfill(self.late_config, self.name, None, self.spark))
        if result is not None:
            self.note(
                f"backfill: {result.files_indexed} indexed, {result.files_rebuilt} rebuilt, {result.commits} commits "
                f"(watermark {self.watermark()})"
            )

    @rule()
    def compact_index(self) -> None:
        result = self.index_operation("compact the index", lambda: compact(self.config, self.name))
        if result is not None:
            self.note(
                f"compact the index: {result.entries} entries kept, {result.removed_dropped} of removed files dropped, "
                f"{result.payloads_resized} outgrown filters of {result.files_resized} files rebuilt"
            )

    @rule()
    def expire_index(self) -> None:
        result = self.index_operation(
            "expire the index", lambda: expire(self.config, self.name, timedelta(0), retain_last=1)
        )
        if result is not None:
            expired = result.expiry.snapshots_expired if result.expiry else 0
            self.note(f"expire the index's old snapshots: {expired} expired")

    def index_operation(self, what: str, operation: Any) -> Any:
        """Run one of skipindex's index operations; one that raises is recorded as a failure (the example goes on:
        a failed commit leaves the index as it was)."""
        self.index_written = True
        try:
            return operation()
        except Exception as exc:
            line = (str(exc).strip().splitlines() or [""])[0][:300]
            self.note(f"{what}: RAISED {type(exc).__name__}: {line}")
            kind = f"{what.split(' (')[0]} raised {type(exc).__name__}"
            detail = traceback.format_exc(limit=-6)
            self.failures.append(Failure("index operation", kind, what, len(self.history), "", detail))
            return None

    @rule()
    def back_to_the_watermark(self) -> None:
        """Undo every source commit since the index's watermark (Iceberg rollback, Delta restore): going back in
        history, aimed where the index's idea of the live files is most at stake."""
        watermark = self.watermark()
        if watermark is None or watermark == self.version():
            self.note(f"back to the watermark ({watermark}): nothing to undo")
            return
        self.go_back(watermark)

    def go_back(self, to: int) -> list[int]:
        raise NotImplementedError

    @precondition(lambda self: not self.index_written)
    @rule(unindexed=st.integers(0, 2))
    def format_3_index(self, unindexed: int) -> None:
        """An index table as skipindex wrote format 3, with entries (no statistics) of the live files but the last
        `unindexed`, at the current version; the next build, backfill or compact upgrades it."""
        source = open_source(self.config, self.name)
        version = source.current_version()
        live = sorted(source.live_files(), key=lambda f: f.path)
        kept = live[: max(0, len(live) - unindexed)]
        files = [(f.path, f.file_size_in_bytes, f.record_count) for f in kept]
        write_format_3_index(self.catalog, self.config.index_namespace, source.name, files, version)
        self.index_written = True
        self.note(f"index written in format 3: {len(kept)} of {len(live)} live files, watermark {version}")

    # ---- the check ----------------------------------------------------------------------------------------------

    def truth(self, wheres: list[str]) -> Truth:
        tables = self.live_tables()
        schema = self.arrow_schema()
        parts, sizes = [], {}  # sizes: the row-group sizes of each file whose rows are its physical rows, in order
        for number, (path, table) in enumerate(tables.items()):
            groups = pq.ParquetFile(unquote(path.removeprefix("file://"))).metadata
            group_sizes = [groups.row_group(g).num_rows for g in range(groups.num_row_groups)]
            if sum(group_sizes) == table.num_rows:
                sizes[path] = group_sizes
            group_of = [g for g, size in enumerate(group_sizes) for _ in range(size)] if path in sizes else None
            table = table.append_column("__file", pa.array([number] * table.num_rows, pa.int32()))
            parts.append(table.append_column("__rg", pa.array(group_of or [-1] * table.num_rows, pa.int32())))
        empty = schema.empty_table().append_column("__file", pa.array([], pa.int32()))
        rows = pa.concat_tables(parts) if parts else empty.append_column("__rg", pa.array([], pa.int32()))
        paths = list(tables)
        self.duck.register("t", rows)
        try:
            filters = ", ".join(f"count(*) FILTER (WHERE {where})" for where in wheres)
            query = f"SELECT __file, __rg, count(*), {filters} FROM t GROUP BY __file, __rg"
            found = self.duck.execute(query).fetchall()
        finally:
            self.duck.unregister("t")
        counts: dict[str, dict[str, tuple[int, int]]] = {where: {} for where in wheres}
        group_counts: dict[str, dict[str, list[tuple[int, int]]]] = {where: {} for where in wheres}
        for n, where in enumerate(wheres):
            for path in paths:
                counts[where][path] = (0, 0)
                if path in sizes:
                    group_counts[where][path] = [(0, 0)] * len(sizes[path])
            for number, group, total, *matched in found:
                path = paths[number]
                rows_so_far, matched_so_far = counts[where][path]
                counts[where][path] = (rows_so_far + total, matched_so_far + matched[n])
                if group >= 0:
                    group_counts[where][path][group] = (total, matched[n])
        return Truth(set(paths), counts, group_counts)

    @invariant()
    def check(self) -> None:
        columns = self.columns()
        wheres = [where for where, named in PREDICATES if named <= columns]
        truth = self.truth(wheres)
        step = len(self.history)
        last = self.history[-1]
        askers: list[tuple[str, Any]] = [("one-off lookup", lambda w: lookup(self.config, self.name, w, CLOCK))]
        if step > 1 and _asked("HeldHandle"):  # not right after `start`: first asked after a step ran
            first = not self.held_asked
            self.held_asked = True
            held = self.held
            askers.append(
                (f"held handle ({'first' if first else 'later'} question)", lambda w, h=held: h.lookup(w, CLOCK))
            )
        if step > 1 and _asked("HandleMadeNow"):
            now = self.handle_now()
            askers.append(("handle made now", lambda w, h=now: h.lookup(w, CLOCK)))
        lookup_kinds: dict[str, set[str]] = {}  # what the one-off lookup got wrong, per predicate
        for asker, ask in askers:
            for where in wheres:
                found = self.judge(asker, ask, where, truth)
                if asker == "one-off lookup":
                    lookup_kinds[where] = set(found)
                elif found:  # a handle's fault only where a one-off lookup at this check got it right
                    found = {k: v for k, v in found.items() if k not in lookup_kinds.get(where, set())}
                for kind, detail in found.items():
                    self.failures.append(Failure(asker, kind, asker, step, where, f"{last}: {detail}"))
        self.remember_table()
        if VERBOSE:
            print(f"  [{time.monotonic() - self.started:6.1f}s] checked {len(wheres)} predicates", flush=True)

    def judge(self, asker: str, ask: Any, where: str, truth: Truth) -> dict[str, str]:
        """What is wrong with one answer (kind -> detail); empty when it keeps the rule."""
        try:
            result: LookupResult = ask(where)
        except Exception:
            return {"error": traceback.format_exc(limit=-4)}
        files, wrong = set(result.files), {}
        skipped = truth.matching(where) - files
        if skipped:
            wrong["skipped"] = f"skipped {len(skipped)} live files holding matching rows: {_short(skipped)}"
        dead = files - truth.live
        if dead:
            wrong["not live"] = f"returned {len(dead)} files that are not live: {_short(dead)}"
        counts = truth.counts[where]
        false_all = [p for p in result.all_match if p in counts and counts[p][1] != counts[p][0]]
        if false_all:
            shown = ", ".join(f"{_short([p])} ({counts[p][1]}/{counts[p][0]} rows match)" for p in false_all)
            wrong["all_match"] = f"all_match lists files where not every row matches: {shown}"
        if result.summary["files_total"] != len(truth.live):
            wrong["files_total"] = f"files_total {result.summary['files_total']}, but {len(truth.live)} files are live"
        left_out, overclaimed = [], []
        for path, groups in truth.group_counts[where].items():
            if path not in files:
                continue
            listed, needed = result.kept_parts("row_groups").kept.get(path), result.needed_row_groups(path)
            proven = result.kept_parts("row_groups").all_match.get(path, ())
            for group, (total, matched) in enumerate(groups):
                if matched and (
                    (listed is not None and group not in listed) or (needed is not None and group not in needed)
                ):
                    left_out.append(
                        f"{_short([path])} row group {group} ({matched} TRUE rows; kept {listed}, read {needed})"
                    )
                if group in proven and matched != total:
                    overclaimed.append(f"{_short([path])} row group {group} ({matched}/{total} rows TRUE)")
        if left_out:
            wrong["row group skipped"] = "left out row groups holding TRUE rows: " + ", ".join(left_out)
        if overclaimed:
            wrong["row group all_match"] = "the row groups' all_match lists row groups not all TRUE: " + ", ".join(
                overclaimed
            )
        return wrong

    def teardown(self) -> None:
        if VERBOSE:
            print(f"  example done: {len(self.failures)} failures", flush=True)
        self.duck.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if not self.failures:
            return
        raised = sys.exc_info()[1]  # a step raised: that is the failure; the recorded ones go along as a note
        worst = min(self.failures, key=lambda f: (not f.counts, f.rank, f.step))
        others = sorted({(f.group, f.kind) for f in self.failures} - {(worst.group, worst.kind)})
        what = f"the {worst.asker} broke the rule ({worst.kind}) for {worst.where!r}"
        if worst.group == "index operation":
            what = f"{worst.asker} raised"
        message = f"{self.kind}: after step {worst.step}, {what}\n  {worst.detail}\nhistory:\n  " + "\n  ".join(
            self.history
        )
        if others:
            message += "\nalso seen in this example: " + "; ".join(f"{g}: {k}" for g, k in others)
        if raised is not None:
            raised.add_note(f"before it failed, the checks had found:\n{message}")
            return
        if worst.counts:
            raise failure_type(worst.group, worst.kind)(message)
        if VERBOSE:
            print(f"  not in SKIPINDEX_LIFE_FOCUS: {message}", flush=True)


class IcebergLife(TableLife):
    kind = "iceberg"

    def create(self) -> None:
        self.catalog.create_namespace("db")
        schema = Schema(
            NestedField(1, "id", LongType()),
            NestedField(2, "s1", StringType()),
            NestedField(3, "s2", StringType()),
            NestedField(4, "n", IntegerType()),
            NestedField(5, "part", StringType()),
        )
        spec = PartitionSpec(PartitionField(5, 1000, IdentityTransform(), "part"))
        properties = {"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)} if self.row_groups else {}
        self.catalog.create_table("db.life", schema=schema, partition_spec=spec, properties=properties)
        self.name = "db.life"
        self.before = None

    def table(self) -> Any:
        return self.catalog.load_table(self.name)

    def arrow_schema(self) -> pa.Schema:
        return self.table().schema().as_arrow()

    def write(self, batch: pa.Table) -> None:
        self.table().append(batch)

    def version(self) -> int | None:
        snapshot = self.table().current_snapshot()
        return snapshot.snapshot_id if snapshot else None

    def delete_rows(self, where: str) -> None:
        self.table().delete(where)

    def overwrite_rows(self, batch: pa.Table, where: str | None) -> None:
        self.table().overwrite(batch, overwrite_filter=where if where else AlwaysTrue())

    def rewrite_source(self) -> None:
        table = self.table()
        rows = table.scan().to_arrow()
        if rows.num_rows:
            table.overwrite(rows)

    def live_tables(self) -> dict[str, pa.Table]:
        table = self.table()
        if table.current_snapshot() is None:
            return {}
        schema = table.schema()
        return {
            task.file.file_path: ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table([task])
            for task in table.scan().plan_files()
        }

    def held_handle(self) -> IndexHandle:
        return IndexHandle.for_iceberg(self.table())

    def handle_now(self) -> IndexHandle:
        return IndexHandle.for_iceberg(self.before)

    def remember_table(self) -> None:
        self.before = self.table()

    @rule(pick=st.integers(0, 15))
    def rollback(self, pick: int) -> None:
        """To any version written (the `pick`-th, modulo how many)."""
        self.go_back(self.versions[pick % len(self.versions)])

    def go_back(self, to: int) -> list[int]:
        """To any earlier snapshot: rollback_to_snapshot when it is an ancestor, else set_current_snapshot (no new
        snapshot either way)."""
        table = self.table()
        current = table.current_snapshot()
        if current is not None and current.snapshot_id == to:
            self.note(f"rollback to {to}: already current")
            return []
        ancestors = {s.snapshot_id for s in ancestors_of(current, table.metadata)} if current else set()
        if to in ancestors:
            table.manage_snapshots().rollback_to_snapshot(to).commit()
            self.note(f"rollback to ancestor {to}")
        else:
            table.manage_snapshots().set_current_snapshot(to).commit()
            self.note(f"set current snapshot {to} (not an ancestor)")
        return []

    @rule(change=st.sampled_from(SCHEMA_CHANGES))
    def evolve_schema(self, change: str) -> None:
        """Schema-only commits (no snapshot): s1 and s2 swap names (three renames), n <-> num, n int -> long, add
        or drop a column (n stands for num too)."""
        change, _, column = change.partition(" ")
        table = self.table()
        names = set(table.schema().column_names)
        n = "n" if "n" in names else "num" if "num" in names else None
        if change == "swap":
            for old, new in (("s1", "s1_was"), ("s2", "s1"), ("s1_was", "s2")):
                with table.update_schema() as update:
                    update.rename_column(old, new)
            self.note("swap the names of s1 and s2 (three renames)")
        elif change == "rename" and n:
            with table.update_schema() as update:
                update.rename_column(n, "num" if n == "n" else "n")
            self.note(f"rename {n} to {'num' if n == 'n' else 'n'}")
        elif change == "promote" and n and isinstance(table.schema().find_field(n).field_type, IntegerType):
            with table.update_schema() as update:
                update.update_column(n, LongType())
            self.note(f"promote {n} from int to long")
        elif change == "add" and column not in names and not (column == "n" and n):
            with table.update_schema() as update:
                update.add_column(column, ADDABLE[column][0])
            self.note(f"add column {column} ({ADDABLE[column][0]})")
        elif change == "drop" and (column in names or (column == "n" and n)):
            dropped = n if column == "n" else column
            with table.update_schema() as update:
                update.delete_column(dropped)
            self.note(f"drop column {dropped}")
        else:
            self.note(f"schema change {change} {column}: nothing to do")

    @rule(field=st.sampled_from(["bucket", "part"]))
    def evolve_spec(self, field: str) -> None:
        """Partition evolution: add or remove identity(part) or bucket[3](id)."""
        table = self.table()
        name = "id_bucket" if field == "bucket" else "part"
        present = any(f.name == name for f in table.spec().fields)
        with table.update_spec() as update:
            if present:
                update.remove_field(name)
            elif field == "bucket":
                update.add_field("id", BucketTransform(3), "id_bucket")
            else:
                update.add_field("part", IdentityTransform(), "part")
        self.note(f"partition spec: {'remove' if present else 'add'} {name} -> {table.refresh().spec()}")


class DeltaLife(TableLife):
    kind = "delta"

    def create(self) -> None:
        self.name = str(self.dir / "lake" / "life")
        self.schema = pa.schema(
            [("id", pa.int64()), ("s1", pa.string()), ("s2", pa.string()), ("n", pa.int32()), ("part", pa.string())]
        )

    def table(self) -> DeltaTable:
        return DeltaTable(self.name)

    def arrow_schema(self) -> pa.Schema:
        if not (Path(self.name) / "_delta_log").exists():
            return self.schema
        return pa.schema(self.table().schema().to_arrow())

    def writer(self) -> dict[str, Any]:
        """delta-rs's writer options of every write: row groups of ROW_GROUP_ROWS rows with row-group entries."""
        return {"writer_properties": WriterProperties(max_row_group_size=ROW_GROUP_ROWS)} if self.row_groups else {}

    def write(self, batch: pa.Table, **options: Any) -> None:
        write_deltalake(self.name, batch, mode="append", partition_by=["part"], **self.writer(), **options)

    def version(self) -> int | None:
        return self.table().version()

    def delete_rows(self, where: str) -> None:
        self.table().delete(where, **self.writer())

    def overwrite_rows(self, batch: pa.Table, where: str | None) -> None:
        write_deltalake(self.name, batch, mode="overwrite", partition_by=["part"], predicate=where, **self.writer())

    def rewrite_source(self) -> None:
        self.table().optimize.compact(**self.writer())

    def live_tables(self) -> dict[str, pa.Table]:
        table = self.table()
        schema = pa.schema(table.schema().to_arrow())
        actions = pa.table(table.get_add_actions(flatten=True))
        uris = table.file_uris()
        tables = {}
        for uri, path, part in zip(
            uris, actions.column("path").to_pylist(), actions.column("partition.part").to_pylist(), strict=True
        ):
            assert uri.endswith(unquote(path).rsplit("/", 1)[-1]), f"file_uris() and the add actions disagree: {uri}"
            data = pq.read_table(uri)
            columns = []
            for field in schema:
                if field.name == "part":
                    columns.append(pa.array([part] * data.num_rows, field.type))
                elif field.name in data.column_names:
                    columns.append(data.column(field.name).cast(field.type))
                else:
                    columns.append(pa.nulls(data.num_rows, field.type))
            tables[uri] = pa.Table.from_arrays(columns, schema=schema)
        return tables

    def held_handle(self) -> IndexHandle:
        return IndexHandle.for_delta(self.name, index_catalog=self.catalog)

    def handle_now(self) -> IndexHandle:
        return IndexHandle.for_delta(self.name, index_catalog=self.config.load_catalog())

    @rule(pick=st.integers(0, 15))
    def restore(self, pick: int) -> None:
        """To any version written (the `pick`-th, modulo how many)."""
        self.go_back(self.versions[pick % len(self.versions)])

    def go_back(self, to: int) -> list[int]:
        table = self.table()
        if table.version() == to:
            self.note(f"restore version {to}: already current")
            return []
        try:
            table.restore(to)
        except Exception as exc:
            if "missing file" not in str(exc).lower():
                raise
            self.note(f"restore version {to}: refused, its files were vacuumed")
            return []
        self.wrote(f"restore version {to}")
        return [self.version()]

    @rule()
    def vacuum(self) -> None:
        removed = self.table().vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        self.note(f"vacuum (retention 0): {len(removed)} files deleted -> version {self.version()}")

    @rule(column=st.sampled_from(["s1", *sorted(ADDABLE)]))
    def add_column(self, column: str) -> None:
        """Append a file with one more column (schema_mode="merge"; Delta adds it at the end)."""
        schema = self.arrow_schema()
        if column in schema.names:
            self.note(f"add column {column}: already there")
            return
        kind = pa.string() if column == "s1" else ADDABLE[column][1]
        seed = self.next_id
        added = _rows(pa.schema([(column, kind)]), random.Random(seed), 0, "a").column(0)
        self.write(self.batch(seed, "a").append_column(column, added), schema_mode="merge")
        self.wrote(f"append a file with a new column {column} (schema_mode merge)")

    @rule(change=st.sampled_from(["drop n", "drop s1", "promote n"]))
    def overwrite_schema(self, change: str) -> None:
        """Overwrite the table with its own rows in a changed schema (schema_mode="overwrite")."""
        rows = self.table().to_pyarrow_table()
        column = change.split()[1]
        if column not in rows.column_names or (change == "promote n" and rows.schema.field("n").type != pa.int32()):
            self.note(f"overwrite with schema change {change}: nothing to do")
            return
        if change.startswith("drop"):
            rows = rows.drop_columns([column])
        else:
            rows = rows.set_column(rows.schema.get_field_index("n"), "n", rows.column("n").cast(pa.int64()))
        write_deltalake(
            self.name, rows, mode="overwrite", partition_by=["part"], schema_mode="overwrite", **self.writer()
        )
        self.wrote(f"overwrite the table's rows with schema change {change}")


def _settings() -> settings:
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],  # no explain: slow steps
        print_blob=True,
        # a focused run keeps its own examples, so that running it again goes on shrinking where it stopped
        database=DirectoryBasedExampleDatabase(f".hypothesis/table-life/{'-'.join(sorted(FOCUS))}")
        if FOCUS
        else settings.default.database,
    )


def _only_rules(machine: type[TableLife]) -> type[TableLife]:
    """`machine` with only the rules SKIPINDEX_LIFE_RULES names (comma-separated; all when unset): a long run after
    one bug spends its examples on the rules that bug needs."""
    if not RULES:
        return machine
    hidden = {
        name: None
        for name, member in [*vars(TableLife).items(), *vars(machine).items()]
        if hasattr(member, "hypothesis_stateful_rule") and name not in RULES
    }
    return type(machine.__name__, (machine,), hidden)


def _run(machine: type[TableLife], spark: Any, base: Path) -> None:
    """Random histories of `machine`'s format; on failure the seed goes into the report (SKIPINDEX_LIFE_SEED runs
    the same histories again, after any failing ones hypothesis's example database replays first)."""
    machine = _only_rules(machine)

    def factory() -> TableLife:
        return machine(spark, base)

    run_seed = int(SEED) if SEED is not None else random.randrange(2**32)
    if SHRINK_SECONDS is not None:
        from hypothesis.internal.conjecture import engine  # an internal: the shrinking time limit, for long runs

        engine.MAX_SHRINKING_SECONDS = int(SHRINK_SECONDS)
    try:
        run_state_machine_as_test(hypothesis_seed(run_seed)(factory), settings=_settings())
    except BaseException as exc:
        exc.add_note(f"{machine.kind}: SKIPINDEX_LIFE_SEED={run_seed} runs these histories again")
        raise


@pytest.mark.slow
def test_iceberg_table_life(spark, tmp_path):
    _run(IcebergLife, spark, tmp_path)


@pytest.mark.slow
def test_delta_table_life(spark, tmp_path):
    _run(DeltaLife, spark, tmp_path)


# Histories the machine found on this code base, cut down by hand to the steps that matter, replayed step by step with
# the same checks (each one a rule a fix must keep; their names say what went wrong). Steps: (rule, arguments).
KNOWN_HISTORIES: dict[str, tuple[type[TableLife], list[tuple[str, dict[str, Any]]]]] = {
    # the index's compaction drops the row of a file the source deleted; a rollback to the watermark brings the file
    # back, but a lookup takes the live files from the index's rows (the watermark is current again)
    "compact-then-rollback-skips-a-live-file": (
        IcebergLife,
        [("build", {}), ("delete", {"where": "id < 10"}), ("compact_index", {}), ("back_to_the_watermark", {})],
    ),
    # a backfill indexes a file appended after the watermark and keeps the watermark; a rollback to it leaves the
    # file's row in the index, and a lookup returns the file and counts it live
    "backfill-then-rollback-returns-a-dead-file": (
        IcebergLife,
        [("build", {}), ("append", {"part": "b"}), ("backfill_index", {}), ("back_to_the_watermark", {})],
    ),
    # a handle made from a table object loaded before an append answers its first lookup for that object's snapshot
    "handle-made-now-from-an-old-table-object": (
        IcebergLife,
        [("build", {}), ("append", {"part": "b"})],
    ),
    # the same for the held handle: made at the start, first asked after an append
    "held-handle-first-asked-after-an-append": (IcebergLife, [("append", {"part": "b"})]),
    # renames commit no snapshot: a held handle keeps binding s1 and s2 to the old columns
    "held-handle-misses-a-swap-of-names": (
        IcebergLife,
        [("build", {}), ("evolve_schema", {"change": "swap s1"})],
    ),
    # after the index's compaction a one-off lookup is right again, a held handle keeps the live files it cached
    "held-handle-keeps-a-dead-file-after-compact": (
        IcebergLife,
        [
            ("build", {}),
            ("append", {"part": "b"}),
            ("backfill_index", {}),
            ("back_to_the_watermark", {}),
            ("compact_index", {}),
        ],
    ),
    # compaction of an index none of whose entries is live any more commits, then fails counting its files
    "compact-of-an-index-with-no-live-entry-raises": (
        IcebergLife,
        [("backfill_index", {}), ("compact_source", {}), ("compact_index", {})],
    ),
    # not found by the machine: row-group entries through appends, deletes that rewrite files, source compaction,
    # backfill and a rollback, checked row group by row group in every CI run
    "row-group-entries-through-a-life-iceberg": (
        IcebergLife,
        [
            ("start", {"row_groups": True}),
            ("build", {}),
            ("append", {"part": "b"}),
            ("delete", {"where": "s2 = 'mail'"}),
            ("build_from_now", {}),
            ("backfill_index", {}),
            ("compact_source", {}),
            ("build", {}),
            ("back_to_the_watermark", {}),
        ],
    ),
    "row-group-entries-through-a-life-delta": (
        DeltaLife,
        [
            ("start", {"row_groups": True}),
            ("build", {}),
            ("append", {"part": "b"}),
            ("delete", {"where": "s2 = 'mail'"}),
            ("build", {}),
            ("compact_source", {}),
            ("backfill_index", {}),
            ("build", {}),
        ],
    ),
    # key rows through deletes, a rebuild, compaction of the index, a type promotion and a rollback
    "key-index-through-a-life-iceberg": (
        IcebergLife,
        [
            ("start", {"key_index": True}),
            ("build", {}),
            ("append", {"part": "c"}),
            ("delete", {"where": "id < 10"}),
            ("build", {}),
            ("compact_index", {}),
            ("evolve_schema", {"change": "promote n"}),
            ("build_from_now", {}),
            ("backfill_index", {}),
            ("rollback", {"pick": 1}),
            ("build", {}),
        ],
    ),
    "key-index-through-a-life-delta": (
        DeltaLife,
        [
            ("start", {"key_index": True}),
            ("build", {}),
            ("append", {"part": "a"}),
            ("delete", {"where": "part = 'b'"}),
            ("build", {}),
            ("compact_index", {}),
            ("compact_source", {}),
            ("build", {}),
        ],
    ),
}


@pytest.mark.parametrize("history", list(KNOWN_HISTORIES))
def test_known_histories_keep_the_rule(spark, tmp_path, history):
    machine_type, steps = KNOWN_HISTORIES[history]
    machine = machine_type(spark, tmp_path)
    start = {"seed": 0, "files": 2}
    if steps and steps[0][0] == "start":  # a history that starts otherwise (e.g. with row-group entries)
        start |= steps[0][1]
        steps = steps[1:]
    machine.start(**start)
    machine.check()
    for name, arguments in steps:
        getattr(machine, name)(**arguments)
        machine.check()
    machine.teardown()  # raises what the checks found, as the property test does
