"""Apache Hudi's side of bench_anchors.py, on Spark 3.5 (no Hudi bundle for Spark 4.x is served).

Run by bench_anchors.py as a subprocess in .venv-hudi (pyspark 3.5, `make hudi-env`), with the bundle of
jvm/hudi/pom.xml (.jars-hudi) as `spark.jars`; self-contained (no indexlib, which needs Spark 4.1):

    .venv-hudi/bin/python benchmarks/bench_anchors_hudi.py REQUEST.json ANSWER.json

REQUEST: {"root": dir, "runs": n, "datasets": {name: {"paths": [parquet files], "queries": [[label, where], ...],
"commit": {"path": a Parquet file, "check": where} (optional)}}}.
Per data set: the Parquet files written as one copy-on-write Hudi table (bulk_insert, no sort, one file per input
file: each input file is its own read partition), non-partitioned, with the metadata table's column stats (every
column), Bloom filters (of the record keys), the record-level index (record key: `l_orderkey, l_linenumber` for
lineitem, `trace_id` for the service log) and, with `CREATE INDEX ... USING secondary_index`, a secondary index on
lineitem's `l_orderkey` and the log's `service` (where this Hudi version makes one: the answer says). Then per query,
as bench_anchors.py measures the others: `SELECT <the data set's columns> FROM hudi_table WHERE ...` with
`hoodie.enable.data.skipping` (and the metadata table's indexes) on, to Spark's noop sink, median of `runs` after a
warm-up; files read (the `FileSourceScanExec`'s `numFiles` / `filesSize` over Hudi's file index), Spark's input
bytes, rows and the order-free checksum (sum of `xxhash64` over the columns). ANSWER: those, the write and index
seconds and bytes (`.hoodie/metadata`); with "commit", what one more commit of that file costs (an `insert`, every
index of the metadata table updated in it: seconds, bytes added) and the rows its point query `check` returns then.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
KEYS = {"lineitem": "l_orderkey,l_linenumber", "events": "trace_id"}
ORDERING = {"lineitem": "l_shipdate", "events": "ts"}
SECONDARY = {"lineitem": "l_orderkey", "events": "service"}
LOCKS = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"  # CREATE INDEX asks for one
READ_CONF = {
    "hoodie.enable.data.skipping": "true",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.secondary.enable": "true",
    "hoodie.write.lock.provider": LOCKS,
}


def _why(error: Exception) -> str:
    """The Java exception's own line of a py4j error (its first line names only the call)."""
    lines = [line.strip() for line in str(error).splitlines()]
    causes = [line for line in lines if ("Exception:" in line or "Error:" in line) and not line.startswith("at ")]
    return (causes[-1] if causes else lines[0])[:400]


def session() -> Any:
    from pyspark.sql import SparkSession

    # planning an IN of 1,000 keys with Hudi's data skipping overflows the JVM's default thread stack
    # (java.lang.StackOverflowError, measured); with 64 MB it plans and answers
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Xss64m pyspark-shell")
    jars = sorted(str(j) for j in (REPO / ".jars-hudi").glob("*.jar"))
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-anchors-hudi")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", os.environ.get("HUDI_DRIVER_MEMORY", "6g"))
        .config("spark.jars", ",".join(jars))
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(Path.cwd() / "hudi-warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _median_of(runs: int, action: Callable[[], object]) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


def _options(dataset: str, parallelism: int, operation: str) -> dict[str, str]:
    """The writer's options: a non-partitioned COW table with the metadata table's column stats, Bloom filters and
    record-level index kept by every commit."""
    return {
        "hoodie.table.name": f"anchors_{dataset}",
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": operation,
        "hoodie.bulkinsert.sort.mode": "NONE",
        "hoodie.bulkinsert.shuffle.parallelism": str(parallelism),
        "hoodie.insert.shuffle.parallelism": str(parallelism),
        "hoodie.datasource.write.recordkey.field": KEYS[dataset],
        "hoodie.datasource.write.partitionpath.field": "",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        "hoodie.datasource.write.precombine.field": ORDERING[dataset],
        "hoodie.table.ordering.fields": ORDERING[dataset],
        "hoodie.datasource.write.hive_style_partitioning": "false",
        "hoodie.parquet.small.file.limit": "0",
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.populate.meta.fields": "true",
        "hoodie.write.lock.provider": LOCKS,
    }


def _frame(spark: Any, paths: list[str]) -> Any:
    """The Parquet files read one partition per file, as Hudi's writer takes them."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 40))
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 40))
    frame = spark.read.parquet(*paths)
    for column, kind in frame.dtypes:
        if kind == "timestamp_ntz":  # Hudi 1.x's writer has no TIMESTAMP_NTZ: the same instants, in UTC
            frame = frame.withColumn(column, F.col(column).cast("timestamp"))
    return frame


def _reset(spark: Any) -> None:
    spark.conf.unset("spark.sql.files.openCostInBytes")
    spark.conf.unset("spark.sql.files.maxPartitionBytes")


def write(spark: Any, dataset: str, paths: list[str], target: Path, names: list[str]) -> dict[str, Any]:
    """The Hudi table of `paths` (bulk_insert, one file per input file) and its secondary index; seconds, bytes."""
    frame = _frame(spark, paths)
    options = _options(dataset, len(paths), "bulk_insert")
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    frame.write.format("hudi").options(**options).mode("overwrite").save(str(target))
    seconds = time.perf_counter() - started
    _reset(spark)
    table = f"anchors_{dataset}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} USING hudi LOCATION '{target}'")
    note = "COW, bulk_insert; metadata table: column stats, Bloom filters (record keys), record index"
    index_seconds = 0.0
    started = time.perf_counter()
    try:
        spark.sql(f"CREATE INDEX idx_{SECONDARY[dataset]} ON {table} ({SECONDARY[dataset]})")
        index_seconds = time.perf_counter() - started
        note += f", secondary index on {SECONDARY[dataset]} ({index_seconds:.1f} s of the total)"
    except Exception as error:  # noqa: BLE001 - said in the answer, the rest still measured
        note += f"; secondary index failed: {_why(error)}"
    data_files = [p for p in target.rglob("*.parquet") if ".hoodie" not in p.parts]
    return {
        "seconds": seconds + index_seconds,
        "index_bytes": _tree_bytes(target / ".hoodie" / "metadata"),
        "data_bytes": sum(p.stat().st_size for p in data_files),
        "files": len(data_files),
        "note": note,
        "table": table,
    }


def commit(spark: Any, dataset: str, new: str, target: Path, table: str, check: str, names: list[str]) -> dict:
    """One more commit of the file `new` (Hudi's `insert`: every index of the metadata table, the secondary index
    included, updated in the commit); its seconds, the metadata table's bytes it added, then the rows of `check`."""
    frame = _frame(spark, [new])
    before = _tree_bytes(target / ".hoodie" / "metadata")
    started = time.perf_counter()
    frame.write.format("hudi").options(**_options(dataset, 1, "insert")).mode("append").save(str(target))
    seconds = time.perf_counter() - started
    _reset(spark)
    spark.sql(f"REFRESH TABLE {table}")
    rows, _ = checksum(spark.sql(f"SELECT {', '.join(names)} FROM {table} WHERE {check}"), names)
    return {
        "seconds": seconds,
        "index_bytes": _tree_bytes(target / ".hoodie" / "metadata") - before,
        "data_bytes": Path(new).stat().st_size,
        "rows": rows,
        "note": "insert of the file; the metadata table's indexes updated in the commit",
    }


def _leaves(plan: Any) -> list[Any]:
    out = []
    leaves = plan.collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            out += _leaves(leaf.executedPlan())
        else:
            out.append(leaf)
    return out


def files_read(frame: Any) -> tuple[int, int]:
    """The scan's `numFiles` / `filesSize` after its plan ran (Hudi's file index prunes before the scan lists)."""
    plan = frame._jdf.queryExecution().executedPlan()
    plan.execute().count()
    files = size = 0
    for leaf in _leaves(plan):
        if leaf.getClass().getSimpleName() == "FileSourceScanExec":
            metrics = leaf.metrics()
            files += int(metrics.apply("numFiles").value())
            size += int(metrics.apply("filesSize").value())
    return files, size


def input_bytes(spark: Any, group: str, action: Callable[[], object]) -> int:
    """Spark's task input bytes of the jobs of `action` (status store; parquet-mr's vectored reads off for this
    untimed run, as bench_anchors.InputBytes)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    spark.conf.set("parquet.hadoop.vectored.io.enabled", "false")
    try:
        action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        spark.conf.unset("parquet.hadoop.vectored.io.enabled")
    store = context._jsc.sc().statusStore()
    time.sleep(0.5)
    total = 0
    jobs = store.jobsList(None).iterator()
    while jobs.hasNext():
        job = jobs.next()
        if job.jobGroup().isDefined() and job.jobGroup().get() == group:
            ids = job.stageIds().iterator()
            while ids.hasNext():
                stage = int(ids.next())
                no_tasks = spark._jvm.java.util.ArrayList()
                no_quantiles = context._gateway.new_array(spark._jvm.double, 0)
                attempts = store.stageData(stage, False, no_tasks, False, no_quantiles).iterator()
                while attempts.hasNext():
                    total += int(attempts.next().inputBytes())
    return total


def checksum(frame: Any, names: list[str]) -> tuple[int, int]:
    from pyspark.sql import functions as F

    out = frame.agg(F.count(F.lit(1)), F.sum(F.xxhash64(*names).cast("decimal(38,0)"))).collect()[0]
    return int(out[0]), int(out[1] or 0)


def adversarial(request_path: str, answer_path: str) -> None:
    """bench_anchors_adversarial.py's table in Hudi: each file bulk-inserted as its own commit (the third adds the
    column `y`), record key `id`, the metadata table's column stats, Bloom filters and record index, a secondary
    index on `t`; each query's rows and checksum (or its error)."""
    request = json.loads(Path(request_path).read_text())
    target = Path(request["root"])
    spark = session()
    answer: dict[str, Any] = {"spark": f"Spark {spark.version}", "queries": {}}
    names = ["id", "x", "s", "t", "y"]
    try:
        for key, value in READ_CONF.items():
            spark.conf.set(key, value)
        options = {
            "hoodie.table.name": "anchors_adversarial",
            "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
            "hoodie.datasource.write.operation": "bulk_insert",
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
            "hoodie.datasource.write.precombine.field": "id",
            "hoodie.table.ordering.fields": "id",
            "hoodie.parquet.small.file.limit": "0",
            "hoodie.metadata.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.bloom.filter.enable": "true",
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.write.lock.provider": LOCKS,
        }
        for number, path in enumerate(request["paths"]):
            frame = spark.read.parquet(path).coalesce(1)
            mode = "overwrite" if number == 0 else "append"
            frame.write.format("hudi").options(**options).mode(mode).save(str(target))
        spark.sql("DROP TABLE IF EXISTS anchors_adversarial")
        spark.sql(f"CREATE TABLE anchors_adversarial USING hudi LOCATION '{target}'")
        try:
            spark.sql("CREATE INDEX idx_t ON anchors_adversarial (t)")
            answer["secondary_index"] = "on t"
        except Exception as error:  # noqa: BLE001
            answer["secondary_index"] = f"failed: {_why(error)}"
        # the control: the same queries over a new path-based read with Hudi's data skipping off (the catalog
        # table's relation, and its file index, are cached by the session: a conf change alone does not reach it)
        plain = spark.read.format("hudi").option("hoodie.enable.data.skipping", "false").load(str(target))
        plain.createOrReplaceTempView("anchors_adversarial_no_skipping")
        answer["control"] = {}
        for table, out in (
            ("anchors_adversarial", answer["queries"]),
            ("anchors_adversarial_no_skipping", answer["control"]),
        ):
            for label, where in request["queries"]:
                sql = f"SELECT {', '.join(names)} FROM {table} WHERE {where}"
                try:
                    rows, check = checksum(spark.sql(sql), names)
                    out[label] = {"sql": sql, "rows": rows, "checksum": check}
                except Exception as error:  # noqa: BLE001
                    out[label] = {"sql": sql, "error": _why(error)}
                print(f"hudi adversarial {table} {label}: {out[label]}"[:300], flush=True)
    finally:
        spark.stop()
    Path(answer_path).write_text(json.dumps(answer))


def main() -> None:
    if sys.argv[1] == "--adversarial":
        adversarial(sys.argv[2], sys.argv[3])
        return
    request = json.loads(Path(sys.argv[1]).read_text())
    spark = session()
    answer: dict[str, Any] = {"spark": f"Spark {spark.version}", "datasets": {}}
    try:
        for key, value in READ_CONF.items():
            spark.conf.set(key, value)
        for dataset, spec in request["datasets"].items():
            paths = spec["paths"]
            names = pq.read_schema(paths[0]).names
            written = write(spark, dataset, paths, Path(request["root"]) / dataset, names)
            print(f"hudi {dataset}: written {written}", flush=True)
            table = written["table"]
            queries: dict[str, Any] = {}
            for number, (label, where) in enumerate(spec["queries"]):

                def frame(where: str = where, table: str = table, names: list[str] = names) -> Any:
                    return spark.sql(f"SELECT {', '.join(names)} FROM {table} WHERE {where}")

                def noop(where: str = where) -> None:
                    frame(where).write.format("noop").mode("overwrite").save()

                try:
                    files, size = files_read(frame())
                    read = input_bytes(spark, f"hudi-{dataset}-{number}", noop)
                    rows, check = checksum(frame(), names)
                    seconds, runs = _median_of(request["runs"], noop)
                    queries[label] = {
                        "seconds": seconds,
                        "runs": runs,
                        "files": files,
                        "bytes": size,
                        "input_bytes": read,
                        "rows": rows,
                        "checksum": check,
                    }
                except Exception as error:  # noqa: BLE001 - one query failing is a result too
                    queries[label] = {"error": _why(error)}
                    print(f"hudi {dataset} {label} failed:\n{error}", file=sys.stderr, flush=True)
                print(f"hudi {dataset} {label}: {queries[label]}", flush=True)
            answer["datasets"][dataset] = {"written": written, "queries": queries}
            if spec.get("commit"):
                try:
                    answer["datasets"][dataset]["commit"] = commit(
                        spark,
                        dataset,
                        spec["commit"]["path"],
                        Path(request["root"]) / dataset,
                        table,
                        spec["commit"]["check"],
                        names,
                    )
                except Exception as error:  # noqa: BLE001 - said in the answer
                    answer["datasets"][dataset]["commit"] = {"error": _why(error)}
                print(f"hudi {dataset} commit: {answer['datasets'][dataset]['commit']}", flush=True)
    finally:
        spark.stop()
    Path(sys.argv[2]).write_text(json.dumps(answer))


if __name__ == "__main__":
    main()
