"""Random histories of an Iceberg table written by Spark's own Iceberg runtime (issue 43 item 4), checked after every
step against Spark's read of the same snapshot.

A hypothesis `RuleBasedStateMachine` creates a table of format version 2 or 3 (merge-on-read DELETE, UPDATE and
MERGE: position delete files on 2, deletion vectors on 3), partitioned or not, in a JDBC (SQLite) catalog that
pyiceberg reads too, and runs: inserts, DELETE, UPDATE, MERGE, a rename of the string column (to a name with a
space, and back), int -> long and float -> double promotions, a partition field added, the upgrade from version 2 to
3 (vectors beside the older position deletes), compaction by Spark (`rewrite_data_files`, `rewrite_position_delete_files`),
equality deletes as Flink's upserts and CDC pipelines write them (Iceberg Java's own writer, committed by a
`RowDelta`: tests/equality_deletes.py), on `id` or on `k` (NULL included), in one partition of the current spec or,
unpartitioned, everywhere, and index builds. After every step, one handle held since the start answers fixed WHEREs through every scan
(pyiceberg, DuckDB, Polars, jar-free Spark, Spark's Iceberg reader over the kept files); each must return exactly
Spark's own rows (the pyiceberg scan may refuse, in one line, a WHERE it has no exact row filter for).
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import sweep
from equality_deletes import java_table, write_equality_deletes
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from test_spark_sql import MERGE_ON_READ, batch_sql, configure, every_scan

from indexlib.config import load_config
from indexlib.errors import UnsupportedFeature
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index

CATALOG = "life"  # the Spark catalog's name, and the SQLite catalog's (the JDBC rows carry it)
RENAMED = "the name"
CHECKED = [  # {k}, {f} and {name}: the columns under their current names
    "{k} = 3",
    "{name} = 'ab' OR {k} IS NULL",
    "id BETWEEN 50 AND 130 AND {f} > 0",
    "{name} LIKE 'a%'",
    "g = 1 AND id % 7 = 0",
    "{k} <> 5",
]
_TABLES = itertools.count()


class SparkIcebergLife(RuleBasedStateMachine):
    def __init__(self, spark: Any, config: Any) -> None:
        super().__init__()
        self.spark, self.config = spark, config
        self.name = ""
        self.handle: IndexHandle | None = None
        self.next_id = 0
        self.string_column = "name"
        self.promoted: set[str] = set()
        self.version = 2
        self.partitioned_by_id = False
        self.partitioned = False
        self.steps: list[str] = []

    @initialize(version=st.sampled_from([2, 3]), partitioned=st.booleans())
    def create(self, version: int, partitioned: bool) -> None:
        self.name, self.version, self.partitioned = f"db.life_{next(_TABLES)}", version, partitioned
        self.spark.sql(
            f"CREATE TABLE {self.t} (id BIGINT, g INT, k INT, f FLOAT, name STRING) USING iceberg "
            + ("PARTITIONED BY (g) " if partitioned else "")
            + f"TBLPROPERTIES ('format-version'='{version}', {MERGE_ON_READ})"
        )
        self.steps.append(f"create (version {version}{', partitioned by g' if partitioned else ''})")
        self.insert()
        self.handle = IndexHandle.for_iceberg(self.config.load_catalog().load_table(self.name))

    @property
    def t(self) -> str:
        """The table, as Spark SQL names it."""
        return f"{CATALOG}.{self.name}"

    @property
    def s(self) -> str:
        """The string column under its current name, quoted for Spark SQL."""
        return f"`{self.string_column}`"

    @rule()
    def insert(self) -> None:
        self.spark.sql(f"INSERT INTO {self.t} " + batch_sql(self.next_id, 60, "id % 2"))
        self.next_id += 60
        self.steps.append("insert")

    @rule(remainder=st.integers(0, 9))
    def delete(self, remainder: int) -> None:
        self.spark.sql(f"DELETE FROM {self.t} WHERE id % 10 = {remainder}")
        self.steps.append(f"delete id % 10 = {remainder}")

    @rule(remainder=st.integers(0, 6))
    def update(self, remainder: int) -> None:
        self.spark.sql(f"UPDATE {self.t} SET k = k + 1, {self.s} = 'zz' WHERE id % 7 = {remainder}")
        self.steps.append(f"update id % 7 = {remainder}")

    @rule()
    def merge(self) -> None:
        source = batch_sql(max(self.next_id - 30, 0), 60, "id % 2", "n")
        self.spark.sql(
            f"MERGE INTO {self.t} AS t USING ({source}) AS u ON t.id = u.id "
            "WHEN MATCHED AND u.id % 3 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.k = -1 "
            f"WHEN NOT MATCHED THEN INSERT (id, g, k, f, {self.s}) VALUES (u.id, u.g, u.k, u.f, u.n)"
        )
        self.next_id += 30
        self.steps.append("merge")

    @rule(column=st.sampled_from(["id", "k"]), value=st.integers(0, 4), where=st.integers(0, 5))
    def equality_delete(self, column: str, value: int, where: int) -> None:
        """On `id`: the ids with id % 10 = value; on `k`: k = value, or k IS NULL for 0. Written in the current spec's
        partition that `where` picks (g = where % 2, id_bucket = where % 3), or everywhere when it is unpartitioned."""
        rows = [{"id": i} for i in range(value, self.next_id, 10)] if column == "id" else [{"k": value or None}]
        # the current spec's fields by the names Iceberg gave them (`id_bucket`, or `id_bucket_3` when added to a
        # table created unpartitioned): identity(g) and bucket(3, id)
        fields = java_table(self.spark, self.t).spec().fields()
        partition = {
            field.name(): where % 3 if str(field.transform()).startswith("bucket") else where % 2 for field in fields
        }
        write_equality_deletes(self.spark, self.t, rows, [column], partition or None)
        scope = f" in {partition}" if partition else ""
        self.steps.append(f"equality delete on {column} ({len(rows)} rows{scope})")

    @rule()
    def rename(self) -> None:
        new = RENAMED if self.string_column == "name" else "name"
        self.spark.sql(f"ALTER TABLE {self.t} RENAME COLUMN {self.s} TO `{new}`")
        self.steps.append(f"rename {self.string_column!r} to {new!r}")
        self.string_column = new

    @rule(column=st.sampled_from(["k", "f"]))
    def promote(self, column: str) -> None:
        if column in self.promoted:
            return
        self.spark.sql(f"ALTER TABLE {self.t} ALTER COLUMN {column} TYPE {'BIGINT' if column == 'k' else 'DOUBLE'}")
        self.promoted.add(column)
        self.steps.append(f"promote {column}")

    @precondition(lambda self: not self.partitioned_by_id)
    @rule()
    def partition_by_id(self) -> None:
        self.spark.sql(f"ALTER TABLE {self.t} ADD PARTITION FIELD bucket(3, id)")
        self.partitioned_by_id = True
        self.steps.append("add partition field bucket(3, id)")

    @precondition(lambda self: self.version == 2)
    @rule()
    def upgrade(self) -> None:
        self.spark.sql(f"ALTER TABLE {self.t} SET TBLPROPERTIES ('format-version'='3')")
        self.version = 3
        self.steps.append("upgrade to version 3")

    @rule(what=st.sampled_from(["rewrite_data_files", "rewrite_position_delete_files"]))
    def compact(self, what: str) -> None:
        self.spark.sql(f"CALL {CATALOG}.system.{what}(table => '{self.name}', options => map('rewrite-all', 'true'))")
        self.steps.append(what)

    @rule()
    def build(self) -> None:
        build_index(self.config, self.name)
        self.steps.append("build")

    @invariant()
    def every_scan_returns_sparks_rows(self) -> None:
        if self.handle is None:
            return
        for template in CHECKED:
            where = template.format(k="k", f="f", name=f'"{self.string_column}"')  # ANSI, the scans' dialect
            spark_where = template.format(k="k", f="f", name=f"`{self.string_column}`")
            own = Counter(
                tuple(r) for r in self.spark.sql(f"SELECT * FROM {CATALOG}.{self.name} WHERE {spark_where}").collect()
            )
            for scan, read in every_scan(self.spark, self.handle, where).items():
                try:
                    got = Counter(tuple(r.values()) for r in read().to_pylist())
                except UnsupportedFeature as exc:
                    assert scan == "pyiceberg" and "\n" not in str(exc), f"{scan} refuses {where}: {exc}"
                    continue
                assert got == own, (
                    f"{scan} returns Spark's own rows for {where!r}: {sum(got.values())} rows, Spark "
                    f"{sum(own.values())}; missing {list((own - got).elements())[:3]}, extra "
                    f"{list((got - own).elements())[:3]}; history: {' -> '.join(self.steps)}"
                )


@pytest.mark.slow
def test_random_histories_of_a_table_spark_writes(connectors, tmp_path: Path) -> None:
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "{CATALOG}"\ntype = "sql"\nuri = "sqlite:///{tmp_path / "catalog.db"}"\n'
        f'warehouse = "file://{tmp_path / "warehouse"}"\n'
    )
    config = load_config(conf)
    config.load_catalog().create_namespace("db")
    configure(
        connectors,
        CATALOG,
        {
            "": "org.apache.iceberg.spark.SparkCatalog",
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "warehouse": f"file:{tmp_path / 'warehouse'}",
        },
    )
    run_state_machine_as_test(
        lambda: SparkIcebergLife(connectors, config),
        settings=settings(
            max_examples=sweep("SKIPINDEX_SPARK_LIFE_EXAMPLES", short=1, long=12),
            stateful_step_count=7,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
