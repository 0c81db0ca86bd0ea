"""Correctness of every system's skipping on adversarial values (issue 44 item 2), for bench_anchors.py.

One small table, the same rows per system, four files written one after another (as four commits), whose
statistics mislead a pruner that treats unknown as known:

- `x DOUBLE`: NaN beside ordinary values (Parquet and the formats' bounds leave NaN out; in Spark SQL NaN is larger
  than every number, so `x > 100` holds for NaN);
- `s STRING`: strings longer than the formats keep in their bounds (Iceberg truncates to 16 characters, Delta to 32,
  Parquet's column index to 64) and one longer than 4,096 bytes (pyarrow and parquet-mr write no min/max for it);
- `t STRING`: tags a LIKE prefix can be tricked by: `auth` and `auth-admin` in different files, `_` and `%` inside
  values and patterns;
- `y INT`: added after the first two files (schema evolution): `y IS NULL` holds for every older row.

Systems (bench_anchors.py's): Iceberg (files appended by pyiceberg, the column added with `update_schema`) read by
Spark's own Iceberg planning and through `skipindex serve`, and by `handle.scan(where).to_spark(spark)`; Delta
(each file appended by delta-spark, `mergeSchema`); Parquet with Bloom filters on `s` and `t` (each file appended by
Spark's writer, read with `mergeSchema`); Hudi on Spark 3.5 where its environment is there (bench_anchors_hudi.py
`--adversarial`: the same files bulk-inserted one commit each, the metadata table's column stats and record index,
a secondary index on `t`). Expected rows: the same files read by Spark with no filter pushed into the reader, then
filtered, cross-checked by DuckDB where its dialect has the query (DuckDB's own `read_parquet` drops the NaN rows by
row-group statistics: noted, not used). Per system and query the wrong rows (missing or extra, by count and
order-free checksum), with the SQL that shows them. Where rows come through Iceberg's reader in Spark (Spark's own
Iceberg planning, and skipindex through `skipindex serve`), the files the plan kept are compared with the files
truly holding a match, which tells a wrong skip (the planner's) from rows dropped by the reader inside kept files.
Hudi is also run with its data skipping off (a new path-based read, `hoodie.enable.data.skipping=false`): the
control that the rows are in the table. Wrong rows from skipindex (through `skipindex serve` or its scan API) fail
the run; an alternative's are the finding.

    python benchmarks/bench_anchors_adversarial.py     # alone (bench_anchors.py runs it at its end)
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

LONG_A = "k" * 300 + "A"
LONG_B = "k" * 300 + "B"
HUGE = "z" * 5_000 + "1"
NAME = "adv.t"

FILES: list[dict[str, list[Any]]] = [
    {  # file 0: NaN among small numbers, the first long string, auth
        "id": [0, 1, 2],
        "x": [1.0, math.nan, 3.0],
        "s": [LONG_A, "b", "c"],
        "t": ["auth", "a_b1", "billing"],
    },
    {  # file 1: big numbers, the other long string, auth-admin (sorts after every `auth` prefix bound)
        "id": [3, 4, 5],
        "x": [200.0, 300.0, -1.0],
        "s": [LONG_B, "d", HUGE],
        "t": ["auth-admin", "a%b2", "axb3"],
    },
    {  # files 2 and 3 have the added column y
        "id": [6, 7, 8],
        "x": [5.0, 6.0, 7.0],
        "s": ["e", "f", "g"],
        "t": ["orders", "search", "auth-x"],
        "y": [1, 2, None],
    },
    {
        "id": [9, 10, 11],
        "x": [math.nan, 50.0, 60.0],
        "s": ["h", LONG_A + "C", "i"],
        "t": ["writer", "reader", "a_c"],
        "y": [3, 4, 5],
    },
]

QUERIES: list[tuple[str, str]] = [
    ("NaN > bound", "x > 100.0"),
    ("NOT (x <= bound)", "NOT (x <= 100.0)"),
    ("long string =", f"s = '{LONG_B}'"),
    ("long string >", f"s > '{LONG_A}'"),
    ("string without statistics", f"s = '{HUGE}'"),
    ("long LIKE prefix", f"s LIKE '{'k' * 40}%'"),
    ("LIKE prefix auth%", "t LIKE 'auth%'"),
    ("LIKE with _", "t LIKE 'a_b%'"),
    ("LIKE with %", "t LIKE 'a%b%'"),
    ("added column IS NULL", "y IS NULL"),
    ("added column IS NOT NULL", "y IS NOT NULL"),
    ("added column <", "y < 3"),
]

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("s", pa.string()), ("t", pa.string()), ("y", pa.int32())])


def write_files(directory: Path) -> list[str]:
    """The four Parquet files (pyarrow), the first two without `y`."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, columns in enumerate(FILES):
        fields = [f for f in SCHEMA if f.name in columns]
        path = directory / f"part-{number}.parquet"
        pq.write_table(pa.table(columns, schema=pa.schema(fields)), path)
        paths.append(str(path))
    return paths


def _sql_names() -> str:
    return ", ".join(SCHEMA.names)


def truth(spark: Any, paths: list[str]) -> dict[str, tuple[int, int]]:
    """Rows and checksum per query: every row read with no filter pushed into Spark's reader, then filtered."""
    from bench_anchors import checksum

    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        frame = spark.read.option("mergeSchema", "true").parquet(*paths).select(*SCHEMA.names)
        frame.createOrReplaceTempView("adv_truth")
        return {label: checksum(spark.sql(f"SELECT * FROM adv_truth WHERE {w}"), SCHEMA.names) for label, w in QUERIES}
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")


def duckdb_counts(paths: list[str]) -> dict[str, int | None]:
    con = duckdb.connect()
    out: dict[str, int | None] = {}
    for label, where in QUERIES:
        try:
            sql = f"SELECT count(*) FROM read_parquet(?, union_by_name = true) WHERE {where}"
            out[label] = con.sql(sql, params=[paths]).fetchall()[0][0]
        except duckdb.Error:
            out[label] = None
    return out


def iceberg_table(directory: Path, paths: list[str]) -> Path:
    """The files appended by pyiceberg to `adv.t` (y added before the third), indexed; a conf for its catalog."""
    from indexlib.config import load_config
    from indexlib.indexing.build import build_index

    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "adv"\ntype = "sql"\nuri = "sqlite:///{directory}/catalog.db"\n'
        f'warehouse = "{directory}/warehouse"\n'
    )
    config = load_config(conf)
    catalog = config.load_catalog()
    catalog.create_namespace("adv")
    table = catalog.create_table(NAME, schema=pq.read_schema(paths[0]))
    for number, path in enumerate(paths):
        rows = pq.read_table(path)
        if number == 2:
            with table.update_schema() as update:
                update.add_column("y", pa_to_iceberg_int())
            table = catalog.load_table(NAME)
        table.append(rows)
    build_index(config, NAME)
    return conf


def true_files(config: Any, name: str) -> dict[str, set[str]]:
    """Per query, the Iceberg table's data files (by name) holding a matching row: each file's rows (pyarrow, the
    added column as NULL where the file predates it) filtered in DuckDB in memory, where no statistics are used."""
    table = config.load_catalog().load_table(name)
    con = duckdb.connect()
    out: dict[str, set[str]] = {label: set() for label, _ in QUERIES}
    for task in table.scan().plan_files():
        path = task.file.file_path.removeprefix("file://")
        rows = pq.read_table(path)
        for column in SCHEMA:
            if column.name not in rows.column_names:
                rows = rows.append_column(column.name, pa.nulls(rows.num_rows, column.type))
        con.register("one_file", rows)
        for label, where in QUERIES:
            if con.sql(f"SELECT count(*) FROM one_file WHERE {where}").fetchall()[0][0]:
                out[label].add(Path(path).name)
        con.unregister("one_file")
    return out


def pa_to_iceberg_int() -> Any:
    from pyiceberg.types import IntegerType

    return IntegerType()


def spark_copies(spark: Any, paths: list[str], directory: Path) -> dict[str, str]:
    """Delta and Parquet with Bloom filters: each file appended by Spark, one commit / one file each."""
    delta, bloom = directory / "delta", directory / "bloom"
    options = {f"parquet.bloom.filter.enabled#{c}": "true" for c in ("s", "t")}
    for path in paths:
        frame = spark.read.parquet(path).coalesce(1)
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(str(delta))
        frame.write.options(**options).mode("append").parquet(str(bloom))
    return {"delta": str(delta), "bloom": str(bloom)}


def run_adversarial(spark: Any, directory: Path, hudi_missing: str, alternatives: bool = True) -> list[dict[str, Any]]:
    """Every system's rows for every query against the expected rows: one dict per (system, query). Without
    `alternatives`, skipindex's two ways only (no Iceberg, Delta or Parquet copy is queried or written)."""
    from bench_anchors import HUDI_PYTHON, REPO, checksum
    from bench_serve import Server
    from bench_spark_sql import catalog, configure, scanned

    from indexlib.config import load_config
    from indexlib.handle import open_handle

    directory.mkdir(parents=True, exist_ok=True)
    paths = write_files(directory / "files")
    expected = truth(spark, paths)
    duck = duckdb_counts(paths)
    for label, count in duck.items():
        if count is not None and count != expected[label][0]:
            print(
                f"note: adversarial {label}: DuckDB's own read_parquet returns {count} rows, Spark's unfiltered read "
                f"{expected[label][0]} (DuckDB's reader prunes NaN by row-group statistics; Spark's is the oracle)",
                file=sys.stderr,
            )
    conf = iceberg_table(directory / "iceberg", paths)
    server = Server(conf)
    tables = {"skipindex": f"{catalog('served', server)}.{NAME}"}
    if alternatives:
        copies = spark_copies(spark, paths, directory)
        tables = {
            "iceberg": f"{catalog('own', server)}.{NAME}",
            **tables,
            "delta": f"delta.`{copies['delta']}`",
            "parquet+bloom": f"parquet.`{copies['bloom']}`",
        }
    handle = open_handle(load_config(conf), NAME)
    holding = true_files(load_config(conf), NAME)
    out: list[dict[str, Any]] = []
    try:
        configure(spark, server)
        spark.conf.set("spark.sql.parquet.mergeSchema", "true")
        for label, where in QUERIES:
            for system in [*tables, "skipindex scan API"]:
                if system == "skipindex scan API":
                    frame = handle.scan(where).to_spark(spark)
                    sql = f"handle.scan({where!r}).to_spark(spark)"
                else:
                    sql = f"SELECT {_sql_names()} FROM {tables[system]} WHERE {where}"
                    frame = spark.sql(sql)
                try:
                    got = checksum(frame, SCHEMA.names)
                    error = ""
                except Exception as failure:  # noqa: BLE001 - a failing query is reported, not fatal
                    got, error = (-1, 0), str(failure).splitlines()[0][:300]
                result = _result(system, label, where, sql, got, expected[label], error)
                if system in ("iceberg", "skipindex"):  # which files the plan kept: the planner's part alone
                    kept = {Path(p.removeprefix("file:")).name for p in scanned(spark.sql(sql))}
                    missed = sorted(holding[label] - kept)
                    result["plan_missed_files"] = len(missed)
                    if result["wrong"] and not missed:
                        result["why"] = "the plan kept every file holding a match: Iceberg's Spark reader dropped rows"
                out.append(result)
    finally:
        spark.conf.unset("spark.sql.parquet.mergeSchema")
        server.stop()
    if alternatives and not hudi_missing:
        out += _hudi(directory, paths, expected, HUDI_PYTHON, REPO)
    return out


def _result(
    system: str, label: str, where: str, sql: str, got: tuple[int, int], want: tuple[int, int], error: str
) -> dict[str, Any]:
    wrong = not error and got != want
    if wrong:
        print(
            f"\n!!! WRONG ROWS on {system}: {label}: {got[0]} rows, expected {want[0]} (checksums differ: "
            f"{got[1] != want[1]}): {sql}\n",
            file=sys.stderr,
            flush=True,
        )
    return {
        "system": system,
        "case": label,
        "where": where,
        "sql": sql,
        "rows": got[0],
        "expected": want[0],
        "wrong": wrong,
        "wrong_skipindex": wrong and system.startswith("skipindex"),
        "error": error,
    }


def _hudi(
    directory: Path, paths: list[str], expected: dict[str, tuple[int, int]], python: Path, repo: Path
) -> list[dict[str, Any]]:
    request, answer = directory / "hudi-adv-request.json", directory / "hudi-adv-answer.json"
    request.write_text(json.dumps({"root": str(directory / "hudi"), "paths": paths, "queries": QUERIES}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_HOME", "PYTHONPATH"))}
    log = directory / "hudi-adv.log"
    with log.open("w") as out:
        subprocess.run(
            [
                str(python),
                str(repo / "benchmarks" / "bench_anchors_hudi.py"),
                "--adversarial",
                str(request),
                str(answer),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
        )
    if not answer.exists():
        print(f"\n!!! Hudi adversarial run failed:\n{log.read_text()[-3000:]}", file=sys.stderr)
        return [_result("hudi (Spark 3.5)", "all", "", "", (-1, 0), (0, 0), f"failed: see {log}")]
    got = json.loads(answer.read_text())
    out = []
    for system, key in (("hudi (Spark 3.5)", "queries"), ("hudi, data skipping off", "control")):
        for label, where in QUERIES:
            cell = got[key][label]
            out.append(
                _result(
                    system,
                    label,
                    where,
                    cell["sql"],
                    (cell.get("rows", -1), cell.get("checksum", 0)),
                    expected[label],
                    cell.get("error", ""),
                )
            )
    return out


def print_adversarial(results: list[dict[str, Any]]) -> None:
    systems = list(dict.fromkeys(r["system"] for r in results))
    cases = list(dict.fromkeys(r["case"] for r in results))
    cell = {(r["system"], r["case"]): r for r in results}
    print("\n#### Adversarial values: rows returned / expected (WRONG where they differ)\n")
    print("| case | WHERE | " + " | ".join(systems) + " |")
    print("|---|---|" + "---:|" * len(systems))
    for case in cases:
        where = next(r["where"] for r in results if r["case"] == case)
        shown = where if len(where) < 50 else where[:40] + f"...' ({len(where)} chars)"
        cells = []
        for system in systems:
            r = cell.get((system, case))
            if r is None:
                cells.append("-")
            elif r["error"]:
                cells.append("failed")
            else:
                cells.append(f"{r['rows']} / {r['expected']}" + (" **WRONG**" if r["wrong"] else ""))
        shown = shown.replace("|", "\\|")
        print(f"| {case} | `{shown}` | " + " | ".join(cells) + " |")
    for r in results:
        if r["wrong"] or r["error"]:
            what = "WRONG ROWS" if r["wrong"] else "failed"
            why = f" ({r['why']})" if r.get("why") else ""
            print(f"\n- {what} on {r['system']}, {r['case']}: `{r['sql'][:300]}` {r['error']}{why}")


def main() -> None:
    from bench_anchors import hudi_available, session

    spark = session("2g")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-anchors-adv-") as tmp:
            results = run_adversarial(spark, Path(tmp), hudi_available())
    finally:
        spark.stop()
    print_adversarial(results)
    assert not [r for r in results if r["wrong_skipindex"]], "skipindex returned wrong rows"


if __name__ == "__main__":
    main()
