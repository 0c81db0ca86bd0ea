"""Differential harness: the rows of every scan, on random table histories, against SQL over the table's live rows.

A hypothesis `RuleBasedStateMachine` runs a random history on a REAL table, Iceberg (pyiceberg, SQLite catalog) or
Delta (delta-rs), in a folder whose name holds a space, '%41' (Iceberg: delta-rs cannot open such a path), '+', '#' and non-ASCII, with columns named
as engines name their own virtual columns (`filename`, `file_row_number`, `_metadata`), a DOUBLE column of NaN,
+-inf, -0.0 and NULL, strings with '', '%', '_', backslashes and Unicode, and a `timestamptz`. The steps: appends
written in row groups of ROW_GROUP_ROWS rows, deletes (Iceberg: copy-on-write and merge-on-read position delete
files; Delta: delta-rs's rewrite and deletion vectors as Spark writes them), a column added after files were
written, and (Iceberg) a rename to a name with a space and an int -> long promotion; index builds with row-group
entries, so files are kept whole, in part (some row groups) or not indexed at all.

`ask` draws a WHERE (NaN, +-inf, -0.0, '', Unicode, LIKE patterns with `%`, `_`, backslashes and ESCAPE clauses,
isnan, IS NULL, != and NOT, AND / OR) in the example's dialect (ANSI, DuckDB or Spark: `[lookup] dialect`), and reads
it through all four scans: the pyiceberg scan (Iceberg; it may refuse a WHERE with no exact pyiceberg filter, with
one line), the DuckDB relation, the Polars LazyFrame and the Spark DataFrame. Each must return exactly the rows of
the oracle: the WHERE evaluated by its own dialect's engine (Spark SQL for "spark", DuckDB otherwise) over the live
rows, unfiltered, in memory (no Parquet statistics in play): pyiceberg's own full scan of the snapshot (Iceberg), the
brute-force rows of tests/delta_vectors.py (Delta). The lookup is checked through them: the scans read only the
files (and row groups) it keeps, so a skipped file with a matching row is a missing row.

EXAMPLES examples of up to STEPS steps per format: 2 of 8 in `make test`, 16 of 16 in `make test-long`; the rules these
histories found are cases of tests/test_scan_rules.py, which every run checks. Longer runs: SKIPINDEX_SCANS_EXAMPLES,
SKIPINDEX_SCANS_STEPS (e.g. 100 and 20), SKIPINDEX_SCANS_SEED (hypothesis's seed), SKIPINDEX_SCANS_VERBOSE (each step as it runs).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from conftest import sweep
from delta_vectors import brute_force, commit_deletion_vectors, live_adds
from deltalake import DeltaTable, WriterProperties, write_deltalake
from hypothesis import HealthCheck, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test
from iceberg_tables import commit_delete_files, position_delete_file
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestamptzType
from sqlglot import exp

from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.handle import open_handle
from indexlib.indexing.build import build_index
from indexlib.scans.spark import CONNECTOR, FILES
from indexlib.scans.spark_connectors import has_runtime

EXAMPLES = sweep("SKIPINDEX_SCANS_EXAMPLES", short=2, long=16)
STEPS = sweep("SKIPINDEX_SCANS_STEPS", short=8, long=16)
SEED = os.environ.get("SKIPINDEX_SCANS_SEED")
VERBOSE = bool(os.environ.get("SKIPINDEX_SCANS_VERBOSE"))  # print every step as it runs
HOSTILE = "lake dir %41 +#é"
# delta-rs 1.x percent-decodes a local path (and a file URI) once more: it cannot open a table whose path holds '%'
DELTA_HOSTILE = "lake dir +#é"
ROWS = 7  # rows per appended file
ROW_GROUP_ROWS = 3  # row groups of 3, 3 and 1 rows

X_VALUES = [None, math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, 4.0, 5.0, -2.5]
S_VALUES = [None, "", "a", "ab", "a_b", "a%b", "a\\b", "a\\_", "A", "é", "😀", "b_"]
F_VALUES = [None, "f", "data.parquet"]
P_VALUES = ["a", " ", "%", "/", "é", None]  # Delta partition values ('' is NULL in Delta)
TS_VALUES = [None, *(dt.datetime(2024, 1, d, h, tzinfo=dt.UTC) for d in (1, 2) for h in (0, 23))]
X_LITERALS = [-2.5, 0, -0.0, 1.5, 4, 5.0, 1e308]
LIKE_ALPHABET = ["a", "b", "%", "_", "\\", "é", "!"]
DIALECTS = [None, "duckdb", "spark"]


def _row(rng: random.Random, i: int, columns: dict[str, str]) -> dict[str, Any]:
    values = {
        "id": i,
        "x": rng.choice(X_VALUES),
        "s": rng.choice(S_VALUES),
        "n": rng.choice([None, 1, 2, 3]),
        "ts": rng.choice(TS_VALUES),
        "filename": rng.choice(F_VALUES),
        "file_row_number": rng.choice([None, 0, 7]),
        "_metadata": rng.choice([None, 1]),
        "c": rng.choice([None, "x", "y"]),
    }
    return {name: values[role] for name, role in columns.items() if role in values}


def normalized(table: pa.Table) -> list[tuple[Any, ...]]:
    """A table's rows as a sorted multiset, columns by name, NaN comparable, instants in UTC."""

    def value(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.UTC).isoformat() if v.tzinfo else v.isoformat()
        return v

    names = sorted(table.column_names)
    return sorted(
        (tuple((name, value(row[name])) for name in names) for row in table.to_pylist()),
        key=repr,
    )


# -- predicates ---------------------------------------------------------------------------------------------------


@st.composite
def like_pattern(draw: Any) -> tuple[str, str | None]:
    pattern = "".join(draw(st.lists(st.sampled_from(LIKE_ALPHABET), max_size=4)))
    return pattern, draw(st.sampled_from([None, None, "!", "\\"]))


@st.composite
def leaf(draw: Any, columns: dict[str, str]) -> exp.Expression:
    """One leaf over the table's current columns (name -> role)."""
    name = draw(st.sampled_from(sorted(columns)))
    role = columns[name]
    column = exp.column(name, quoted=True)
    if draw(st.integers(0, 5)) == 0:
        return exp.Is(this=column, expression=exp.null()) if draw(st.booleans()) else exp.not_(column.is_(exp.null()))
    if role == "x":
        shape = draw(st.sampled_from(["compare", "compare", "in", "isnan"]))
        if shape == "isnan":
            return exp.IsNan(this=column)
        if shape == "in":
            values = draw(st.lists(st.sampled_from(X_LITERALS), min_size=1, max_size=3))
            return column.isin(*(exp.Literal.number(v) for v in values))
        return _compare(draw, column, exp.Literal.number(draw(st.sampled_from(X_LITERALS))))
    if role in ("s", "filename", "c"):
        shape = draw(st.sampled_from(["compare", "like", "like", "in"]))
        if shape == "like":
            pattern, escape = draw(like_pattern())
            like: exp.Expression = exp.Like(this=column, expression=exp.Literal.string(pattern))
            if escape is not None:
                like = exp.Escape(this=like, expression=exp.Literal.string(escape))
            return like
        pool = S_VALUES[1:] if role == "s" else ["x", "f", "data.parquet", ""]
        if shape == "in":
            return column.isin(*(exp.Literal.string(v) for v in draw(st.lists(st.sampled_from(pool), min_size=1))))
        return _compare(draw, column, exp.Literal.string(draw(st.sampled_from(pool))))
    if role == "ts":
        return exp.Is(this=column, expression=exp.null())
    if role == "p":
        return _compare(draw, column, exp.Literal.string(draw(st.sampled_from(["a", " ", "%", "/", "é", ""]))))
    return _compare(draw, column, exp.Literal.number(draw(st.integers(-1, 40))))


def _compare(draw: Any, column: exp.Expression, literal: exp.Expression) -> exp.Expression:
    op = draw(st.sampled_from([exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE]))
    return op(this=column, expression=literal)


@st.composite
def where(draw: Any, columns: dict[str, str], depth: int = 2) -> exp.Expression:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        node = draw(leaf(columns))
    else:
        left, right = draw(where(columns, depth - 1)), draw(where(columns, depth - 1))
        node = exp.and_(left, right) if draw(st.booleans()) else exp.or_(left, right)
        node = exp.Paren(this=node)
    return exp.not_(node) if draw(st.integers(0, 3)) == 0 else node


# -- the machine --------------------------------------------------------------------------------------------------


class ScanRows(RuleBasedStateMachine):
    kind = ""
    hostile = HOSTILE  # the folder the table lives in

    def __init__(self, spark: Any, base: Path) -> None:
        super().__init__()
        self.spark = spark
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.kind}-", dir=base)) / self.hostile
        self.dir.mkdir()
        self.next_id = 0
        self.history: list[str] = []
        self.asked = 0

    def configure(self, dialect: str | None) -> None:
        self.dialect = dialect
        conf = self.dir / "conf.toml"
        shown = "" if dialect is None else f'[lookup]\ndialect = "{dialect}"\n'
        catalog_db = self.dir.parent / "catalog.db"  # SQLAlchemy's URL: the hostile folder holds the warehouse
        conf.write_text(
            f'[catalog]\nname = "rows"\ntype = "sql"\nuri = "sqlite:///{catalog_db}"\n'
            f'warehouse = "{self.dir}/warehouse"\n[spark]\nmaster = "local[2]"\n[index]\nrow_groups = true\n' + shown
        )
        self.config = load_config(conf)

    def note(self, text: str) -> None:
        self.history.append(f"{len(self.history) + 1}. {text}")
        if VERBOSE:
            print(f"  {self.kind} {self.history[-1]}", flush=True)

    def batch(self, seed: int) -> pa.Table:
        rng = random.Random(seed)
        part = rng.choice(P_VALUES)  # one partition per file
        rows = [
            _row(rng, self.next_id + i, self.columns) | ({"p": part} if "p" in self.columns else {})
            for i in range(ROWS)
        ]
        self.next_id += ROWS
        return pa.Table.from_pylist(rows, schema=self.arrow_schema())

    # what the formats provide
    name: str
    columns: dict[str, str]  # current column name -> role

    def arrow_schema(self) -> pa.Schema:
        raise NotImplementedError

    def live_rows(self) -> pa.Table:
        raise NotImplementedError

    @initialize(seed=st.integers(0, 10_000), dialect=st.sampled_from(DIALECTS))
    def start(self, seed: int, dialect: str | None) -> None:
        self.configure(dialect)
        self.create()
        self.write(self.batch(seed))
        self.write(self.batch(seed + 1))
        self.note(f"created with two appends; dialect {dialect}")

    def create(self) -> None:
        raise NotImplementedError

    @rule(seed=st.integers(0, 10_000), data=st.data())
    def append(self, seed: int, data: Any) -> None:
        self.write(self.batch(seed))
        self.note("append one file")
        self.ask(data)

    def write(self, batch: pa.Table) -> None:
        raise NotImplementedError

    @rule(data=st.data())
    def build(self, data: Any) -> None:
        result = build_index(self.config, self.name)
        self.note(f"build: {result.files_indexed} files indexed")
        self.ask(data)

    @precondition(lambda self: "c" not in self.columns.values())
    @rule(data=st.data())
    def add_column(self, data: Any) -> None:
        self.add_c()
        self.columns["c"] = "c"
        self.note("add column c")
        self.ask(data)

    def add_c(self) -> None:
        raise NotImplementedError

    def ask(self, data: Any) -> None:
        """After every step: one drawn WHERE through every scan against the oracle."""
        tree = data.draw(where(dict(self.columns)))
        text = tree.sql(dialect=self.dialect)
        self.asked += 1
        self.note(f"ask: {text}")
        truth = self.live_rows()
        try:
            expected = normalized(self.oracle(truth, text))
        except Exception as exc:  # the dialect's own engine rejects it (a pattern Spark refuses): nothing to compare
            self.note(f"  the oracle refuses it: {str(exc).splitlines()[0][:100]}")
            return
        handle = open_handle(self.config, self.name)
        for scan, read in self.scans(handle, text):
            try:
                got = normalized(read())
            except UserError as exc:
                assert "\n" not in str(exc), f"{scan} refuses {text!r} in one line: {exc}"
                exact = "LIKE" in str(exc) or "ESCAPE" in str(exc) or "column named _metadata" in str(exc)
                assert scan == "pyiceberg" or exact, f"{scan} refuses only what it cannot read exactly: {exc}"
                self.note(f"  {scan} refuses: {exc}")
                continue
            if got != expected:
                missing = [r for r in expected if r not in got][:3]
                extra = [r for r in got if r not in expected][:3]
                raise AssertionError(
                    f"{scan} returns the rows of SQL over the live rows for {text!r} (dialect {self.dialect}): "
                    f"{len(got)} rows, truth {len(expected)}; missing {missing}, extra {extra}\n"
                    + "\n".join(self.history)
                )

    def oracle(self, truth: pa.Table, text: str) -> pa.Table:
        """The WHERE in its own dialect's engine over the live rows in memory."""
        if self.dialect == "spark":
            return self.spark.createDataFrame(truth).filter(text).toArrow()
        sql = sqlglot.transpile(text, read=self.dialect, write="duckdb")[0]
        return duckdb.connect().from_arrow(truth).query("t", f"SELECT * FROM t WHERE {sql}").to_arrow_table()

    def scans(self, handle: Any, text: str) -> list[tuple[str, Any]]:
        found = [
            ("duckdb", lambda: handle.scan(text).to_duckdb().to_arrow_table()),
            ("polars", lambda: handle.scan(text).to_polars().collect().to_arrow()),
            ("spark", lambda: handle.scan(text).to_spark(self.spark, FILES).toArrow()),
        ]
        if has_runtime(self.spark, self.kind):  # the format's own Spark reader over the kept files
            found.append(("spark connector", lambda: handle.scan(text).to_spark(self.spark, CONNECTOR).toArrow()))
        return found

    def teardown(self) -> None:
        shutil.rmtree(self.dir.parent, ignore_errors=True)


ICEBERG_COLUMNS = {"id": "id", "x": "x", "s": "s", "n": "n", "ts": "ts", "filename": "filename"}
ICEBERG_COLUMNS |= {"file_row_number": "file_row_number", "_metadata": "_metadata"}
ARROW = {
    "id": pa.int64(),
    "x": pa.float64(),
    "s": pa.string(),
    "n": pa.int32(),
    "ts": pa.timestamp("us", tz="UTC"),
    "filename": pa.string(),
    "file_row_number": pa.int64(),
    "_metadata": pa.int32(),
    "c": pa.string(),
    "p": pa.string(),
}


class IcebergRows(ScanRows):
    kind = "iceberg"
    name = "db.t"

    def create(self) -> None:
        self.columns = dict(ICEBERG_COLUMNS)
        self.catalog = self.config.load_catalog()
        self.catalog.create_namespace("db")
        schema = Schema(
            NestedField(1, "id", LongType()),
            NestedField(2, "x", DoubleType()),
            NestedField(3, "s", StringType()),
            NestedField(4, "n", IntegerType()),
            NestedField(5, "ts", TimestamptzType()),
            NestedField(6, "filename", StringType()),
            NestedField(7, "file_row_number", LongType()),
            NestedField(8, "_metadata", IntegerType()),
        )
        properties = {"format-version": "2", "write.parquet.row-group-limit": str(ROW_GROUP_ROWS)}
        self.table = self.catalog.create_table(self.name, schema, properties=properties)

    def arrow_schema(self) -> pa.Schema:
        types = {f.name: f.field_type for f in self.table.schema().fields}
        return pa.schema(
            [
                pa.field(name, pa.int64() if isinstance(types[name], LongType) else ARROW[role])
                for name, role in self.columns.items()
            ]
        )

    def write(self, batch: pa.Table) -> None:
        self.table.append(batch)

    def live_rows(self) -> pa.Table:
        self.table = self.catalog.load_table(self.name)
        return self.table.scan().to_arrow()

    def add_c(self) -> None:
        with self.table.update_schema() as update:
            update.add_column("c", StringType())

    @precondition(lambda self: "s" in self.columns)
    @rule(data=st.data())
    def rename(self, data: Any) -> None:
        with self.table.update_schema() as update:
            update.rename_column("s", "s t")
        self.columns["s t"] = self.columns.pop("s")
        self.note("rename s to 's t'")
        self.ask(data)

    @precondition(lambda self: "promoted" not in self.__dict__)
    @rule(data=st.data())
    def promote(self, data: Any) -> None:
        with self.table.update_schema() as update:
            update.update_column("n", LongType())
        self.promoted = True
        self.note("promote n to long")
        self.ask(data)

    @rule(low=st.integers(0, 30), data=st.data())
    def delete_rows(self, low: int, data: Any) -> None:
        """Copy-on-write: pyiceberg rewrites the files that keep rows."""
        self.table.delete(f"id >= {low} and id < {low + 4}")
        self.note(f"delete id in [{low}, {low + 4}) (copy-on-write)")
        self.ask(data)

    @rule(seed=st.integers(0, 10_000), data=st.data())
    def delete_positions(self, seed: int, data: Any) -> None:
        """Merge-on-read: a position delete file, as Spark writes one."""
        self.table = self.catalog.load_table(self.name)
        files = [task.file for task in self.table.scan().plan_files()]
        if not files:
            return
        rng = random.Random(seed)
        data_file = rng.choice(files)
        positions = sorted(rng.sample(range(data_file.record_count), min(2, data_file.record_count)))
        commit_delete_files(self.table, [position_delete_file(self.table, data_file, positions, file_scoped=True)])
        self.table = self.catalog.load_table(self.name)
        self.note(f"delete positions {positions} of {data_file.file_path.rsplit('/', 1)[-1][:12]} (merge-on-read)")
        self.ask(data)

    def scans(self, handle: Any, text: str) -> list[tuple[str, Any]]:
        return [("pyiceberg", lambda: handle.scan(text).to_arrow()), *super().scans(handle, text)]


class DeltaRows(ScanRows):
    kind = "delta"
    hostile = DELTA_HOSTILE

    def create(self) -> None:
        self.columns = {name: role for name, role in ICEBERG_COLUMNS.items()} | {"p": "p"}
        self.name = str(self.dir / "table")
        self.config.load_catalog()  # the index's catalog, empty: lookups open it read-only, never create it

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(name, ARROW[role]) for name, role in self.columns.items()])

    def write(self, batch: pa.Table) -> None:
        first = not (Path(self.name) / "_delta_log").exists()
        write_deltalake(
            self.name,
            batch,
            mode="append",
            partition_by=["p"],
            schema_mode="merge",
            writer_properties=WriterProperties(max_row_group_size=ROW_GROUP_ROWS),
            configuration={"delta.enableDeletionVectors": "true"} if first else None,
        )

    def live_rows(self) -> pa.Table:
        schema = pa.schema(DeltaTable(self.name).schema().to_arrow())
        return brute_force(self.name, schema, {"p": str})

    def add_c(self) -> None:
        """A column added by the next write (`schema_mode = "merge"`): one file with it now."""
        self.columns["c"] = "c"
        self.write(self.batch(self.next_id))

    @rule(low=st.integers(0, 30), data=st.data())
    def delete_rows(self, low: int, data: Any) -> None:
        """delta-rs rewrites the files that keep rows."""
        DeltaTable(self.name).delete(f"id >= {low} and id < {low + 4}")
        self.note(f"delete id in [{low}, {low + 4}) (delta-rs rewrite)")
        self.ask(data)

    @rule(seed=st.integers(0, 10_000), data=st.data())
    def delete_by_vector(self, seed: int, data: Any) -> None:
        """Deletion vectors, as Spark's DELETE writes them."""
        adds = live_adds(self.name)
        if not adds:
            return
        rng = random.Random(seed)
        path = rng.choice(sorted(adds))
        count = pq.ParquetFile(Path(self.name) / unquote(path)).metadata.num_rows
        positions = set(rng.sample(range(count), min(2, count)))
        commit_deletion_vectors(self.name, {path: positions}, storage=rng.choice(["i", "u"]))
        self.note(f"deletion vector {sorted(positions)} on {unquote(path)[:20]}")
        self.ask(data)


def _run(machine: type[ScanRows], spark: Any, base: Path) -> None:
    """Random histories of `machine`'s format; on failure the seed goes into the report (SKIPINDEX_SCANS_SEED runs
    the same histories again)."""
    run_seed = int(SEED) if SEED is not None else random.randrange(2**32)
    try:
        run_state_machine_as_test(
            hypothesis_seed(run_seed)(lambda: machine(spark, base)),
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
            ),
        )
    except BaseException as exc:
        exc.add_note(f"{machine.kind}: SKIPINDEX_SCANS_SEED={run_seed} runs these histories again")
        raise


@pytest.mark.slow
@pytest.mark.parametrize("machine", [IcebergRows, DeltaRows], ids=["iceberg", "delta"])
def test_every_scan_returns_the_rows_of_sql_over_the_live_rows(machine, spark, tmp_path) -> None:
    _run(machine, spark, tmp_path)
