"""Substring search on free text: what n-gram filters buy `LIKE '%x%'`, and what they cost to build and store.

Two Iceberg tables (SQLite catalog, files registered with `add_files`), each indexed twice by the same build in one
process (`[build] local_max_files` above the file count: the per-file task Spark maps, run in the driver): with the
packaged defaults (the automatic choice gives the free-text column n-gram filters) and as before they did (the
free-text column's `kinds = []`: min/max only, what the automatic choice gave it until then):

- a service log of `--files` files (an hour each) of `--rows` rows: a timestamp, a service and a level (tags), and a
  message: an English sentence drawn from that hour's window of sentences, followed by a request id unique to the
  row (`request_id=` 16 hex digits). The sentences are the descriptions of the packages installed in this venv
  (their `*.dist-info/METADATA`), split into sentences and kept where they read as prose: text nobody here wrote,
  the same on every machine with the same pinned packages (ordered and drawn with fixed seeds);
- TPC-H lineitem at `--lineitem-scale` in `--lineitem-files` files by `l_shipdate` (bench_build.py's layout), whose
  `l_comment` is the free-text column.

Per table: the build's CPU per file (`index_file`, the per-file task, best of `--runs`, alternating), index bytes per
kind against the data files' bytes, and per query class the files the lookup keeps against the files that truly hold
a match (every file's rows searched with Arrow), median and maximum of the ratio, and the wall time of
`handle.scan(where).to_arrow()` (the scan API) with and without the filters (rows asserted equal). Query classes:
rare substrings (a word of 5+ letters held by at most 5 % of the files), common ones (held by 25-75 %), unique ones
(a request id; on lineitem, a whole comment held by one file), all drawn with a fixed seed, and the rare ones again
in upper case with ILIKE (against the files holding them in any case).

With `--spark`, per table also Spark SQL through the planning service (bench_spark_sql.py: Spark's own Iceberg
planning against plans from the index, one Spark session, one `skipindex serve`): two queries of each class and two
prefixes. Spark hands Iceberg a prefix (`LIKE 'x%'`) as `startsWith` but no infix (`LIKE '%x%'`), so the service is
asked to plan an infix query with no filter at all.

    python benchmarks/bench_free_text.py --spark                         # 200 x 2,000 log rows, lineitem SF 1
    python benchmarks/bench_free_text.py --files 20 --lineitem-scale 0.05 --lineitem-files 20 --runs 1  # toy

Prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import email
import glob
import os
import random
import re
import statistics
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from bench_build import _lineitem_table, _registered
from timing import best_of

TABLE = "bench.small"
RARE_SHARE, COMMON_SHARE = 0.05, (0.25, 0.75)
QUERIES_PER_CLASS = 20


def sentences() -> list[str]:
    """English sentences from the descriptions of the installed packages, in a fixed order."""
    site = sysconfig.get_paths()["purelib"]
    texts = []
    for path in sorted(glob.glob(os.path.join(site, "*.dist-info", "METADATA"))):
        with open(path, encoding="utf-8", errors="replace") as handle:
            body = email.message_from_file(handle).get_payload()
        texts.append(body if isinstance(body, str) else "")
    text = re.sub(r"```.*?```", " ", "\n".join(texts), flags=re.S)
    text = re.sub(r"<[^>]+>|https?://\S+|[`*#|>\[\]()_=~^]", " ", text)
    found = {re.sub(r"\s+", " ", s).strip() for s in re.split(r"(?<=[.!?])\s+|\n\s*\n", text)}
    prose = [
        s
        for s in found
        if 5 <= len(s.split()) <= 40
        and s[0].isupper()
        and s[-1] in ".!?"
        and sum(c.isalnum() or c in " ,.;:'\"-/" for c in s) >= 0.95 * len(s)
    ]
    return sorted(prose)


def log_files(directory: Path, files: int, rows: int) -> tuple[Path, list[str]]:
    """The service log (module docstring) as an Iceberg table; its conf and file paths."""
    pool = sentences()
    rng = random.Random(60)
    rng.shuffle(pool)
    window = max(1, len(pool) // 40)  # an hour's messages come from its own 2.5 % of the sentences
    services = ["api", "auth", "billing", "search", "storage", "worker"]
    levels = ["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"]
    data = directory / "data"
    data.mkdir()
    paths = []
    hour0 = np.datetime64("2026-01-01T00:00:00", "us")
    for n in range(files):
        first = rng.randrange(len(pool))
        picks = [pool[(first + rng.randrange(window)) % len(pool)] for _ in range(rows)]
        messages = [f"{p} request_id={rng.getrandbits(64):016x}" for p in picks]
        offsets = np.sort(np.array([rng.randrange(3_600_000_000) for _ in range(rows)], dtype=np.int64))
        table = pa.table(
            {
                "ts": pa.array(hour0 + np.timedelta64(n, "h") + offsets.astype("timedelta64[us]")),
                "service": pa.array([rng.choice(services) for _ in range(rows)]),
                "level": pa.array([rng.choice(levels) for _ in range(rows)]),
                "msg": pa.array(messages),
            }
        )
        path = data / f"hour-{n:04d}.parquet"
        pq.write_table(table, path)
        paths.append(str(path))
    return _registered(directory, paths), paths


def lineitem_files(directory: Path, scale: float, files: int) -> tuple[Path, list[str]]:
    """TPC-H lineitem by `l_shipdate` (bench_build.py's layout) as an Iceberg table; its conf and file paths."""
    return _lineitem_table(directory, scale, files, order_by="l_shipdate")


@dataclass
class Query:
    label: str  # rare, common, unique; "rare, ILIKE": a rare fragment in upper case, asked with ILIKE
    fragment: str
    true_files: int
    any_case: bool = False  # ILIKE
    kept: dict[str, int] = field(default_factory=dict)  # per index variant
    scan_s: dict[str, float] = field(default_factory=dict)


def _holders(paths: list[str], column: str, fragments: list[str], any_case: bool = False) -> dict[str, set[int]]:
    """Per fragment, the files holding a value that contains it (Arrow's substring search over every row; in any
    case with `any_case`, for ASCII fragments)."""
    found: dict[str, set[int]] = {f: set() for f in fragments}
    for n, path in enumerate(paths):
        values = pq.read_table(path, columns=[column]).column(column)
        for fragment in fragments:
            if pc.any(pc.match_substring(values, fragment, ignore_case=any_case)).as_py():
                found[fragment].add(n)
    return found


def _log_candidates(paths: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    """Words of 5+ letters from a sample of messages (rare and common candidates), and request ids (unique)."""
    words, ids = set(), []
    for path in rng.sample(paths, min(len(paths), 20)):
        messages = pq.read_table(path, columns=["msg"]).column("msg").to_pylist()
        for message in rng.sample(messages, min(len(messages), 50)):
            text, _, request = message.rpartition(" request_id=")
            words.update(re.findall(r"[A-Za-z]{5,}", text))
            ids.append(request)
    return sorted(words), ids


def _lineitem_candidates(paths: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    """Runs of 2-4 words of sampled comments (rare and common candidates), and whole comments (unique)."""
    runs, whole = set(), []
    for path in rng.sample(paths, min(len(paths), 20)):
        comments = pq.read_table(path, columns=["l_comment"]).column("l_comment").to_pylist()
        for comment in rng.sample(comments, min(len(comments), 50)):
            words = comment.split()
            for size in (2, 3, 4):
                if len(words) >= size:
                    first = rng.randrange(len(words) - size + 1)
                    runs.add(" ".join(words[first : first + size]))
            whole.append(comment)
    return sorted(runs), whole


def queries(paths: list[str], column: str, candidates: tuple[list[str], list[str]], rng: random.Random) -> list[Query]:
    """Up to QUERIES_PER_CLASS fragments per class, each with the number of files that truly hold it."""
    pool, unique_pool = candidates
    picked = rng.sample(pool, min(len(pool), 12 * QUERIES_PER_CLASS))
    held = _holders(paths, column, picked + unique_pool[: 4 * QUERIES_PER_CLASS])
    rare = [f for f in picked if 1 <= len(held[f]) <= RARE_SHARE * len(paths)]
    common = [f for f in picked if COMMON_SHARE[0] * len(paths) <= len(held[f]) <= COMMON_SHARE[1] * len(paths)]
    unique = [f for f in unique_pool[: 4 * QUERIES_PER_CLASS] if len(held[f]) == 1]
    upper = [f.upper() for f in rare[:QUERIES_PER_CLASS] if f.isascii()]
    held_any_case = _holders(paths, column, upper, any_case=True)
    return [
        Query(label, fragment, len(held[fragment]))
        for label, chosen in (("rare", rare), ("common", common), ("unique", unique))
        for fragment in chosen[:QUERIES_PER_CLASS]
    ] + [Query("rare, ILIKE", f, len(held_any_case[f]), any_case=True) for f in upper]


def _conf(directory: Path, data_conf: Path, namespace: str, column: str, without: bool, fpp: float | None) -> Path:
    """A conf for the table's catalog with its own index namespace; `without`: the free-text column at min/max;
    `fpp`: `ngram_fpp` (None: the packaged default)."""
    text = data_conf.read_text() + f'[index]\nnamespace = "{namespace}"\n'
    if fpp is not None:
        text += f"ngram_fpp = {fpp}\n"
    if without:
        text += f'[index.tables."{TABLE}".columns.{column}]\nkinds = []\n'
    text += "[build]\nlocal_max_files = 100000\nlocal_max_bytes = 100000000000\n"
    path = directory / f"{namespace}.toml"
    path.write_text(text)
    return path


def cpu_per_file(conf: Path, paths: list[str], column: str, runs: int, fpp: float | None) -> dict[str, float]:
    """CPU ms per file of `index_file` (the build's per-file task), with the packaged defaults and with the free-text
    column at min/max (what the automatic choice gave it before), alternating runs, best of `runs` each."""
    from indexlib.config import load_config
    from indexlib.index_kinds.settings import IndexSettings
    from indexlib.indexing.file_indexer import IndexTask, index_file

    table = load_config(conf).load_catalog().load_table(TABLE)
    schema = table.schema()
    mapping = table.name_mapping().model_dump_json() if table.name_mapping() else None
    field_id = schema.find_field(column).field_id
    tasks = {
        "with n-gram filters (defaults)": IndexTask(
            schema, {}, mapping, 1, {field_id: IndexSettings(ngram_fpp=fpp)} if fpp else {}, table_files=len(paths)
        ),
        "without (column at min/max)": IndexTask(
            schema, {}, mapping, 1, {field_id: IndexSettings(kinds=())}, table_files=len(paths)
        ),
    }
    index_file(paths[0], "PARQUET", next(iter(tasks.values())))  # warm-up: imports, caches
    best = dict.fromkeys(tasks, float("inf"))
    for _ in range(runs):
        for name, task in tasks.items():
            started = time.process_time()
            for path in paths:
                index_file(path, "PARQUET", task)
            best[name] = min(best[name], (time.process_time() - started) / len(paths))
    return best


def build_seconds(conf: Path) -> float:
    """Wall seconds of the whole build (`build_index` in this process: plan, per-file tasks, one commit)."""
    from indexlib.config import load_config
    from indexlib.indexing.build import build_index

    started = time.perf_counter()
    build_index(load_config(conf), TABLE)
    return time.perf_counter() - started


def index_bytes(conf: Path) -> tuple[int, dict[str, int]]:
    """The index table's stored bytes (its data files), and its payload bytes per kind (before compression)."""
    from bench_build import _bytes_by_kind

    from indexlib.config import load_config

    config = load_config(conf)
    index = config.load_catalog().load_table(f"{config.index_namespace}.bench__small")
    stored = sum(index.inspect.files().column("file_size_in_bytes").to_pylist())
    totals, _ = _bytes_by_kind(config)
    return stored, totals


def measure_queries(confs: dict[str, Path], column: str, found: list[Query], runs: int) -> None:
    """Files kept and the scan API's wall time per query and index variant; rows asserted equal across variants."""
    from indexlib.config import load_config
    from indexlib.handle import open_handle

    handles = {name: open_handle(load_config(conf), TABLE) for name, conf in confs.items()}
    for query in found:
        where = _where(column, query)
        rows = {}
        for name, handle in handles.items():
            result = handle.lookup(where)
            query.kept[name] = len(result.files)
            assert query.kept[name] >= query.true_files, f"{name} {where}: a file holding a match was skipped"
            rows[name] = handle.scan(where).to_arrow().num_rows  # warm-up, and the rows
            query.scan_s[name] = best_of(runs, lambda h=handle, w=where: h.scan(w).to_arrow())
        assert len(set(rows.values())) == 1, f"{where}: rows differ across variants: {rows}"


def _where(column: str, query: Query) -> str:
    return f"{column} {'ILIKE' if query.any_case else 'LIKE'} '%{query.fragment.replace(chr(39), chr(39) * 2)}%'"


def spark_sql(conf: Path, column: str, found: list[Query], paths: list[str], runs: int, title: str) -> None:
    """Spark SQL through the planning service (bench_spark_sql.py's two REST catalogs at one `skipindex serve`:
    Spark's own Iceberg planning against plans from the index): two queries of each class, and two prefixes (the
    first 24 characters of a value of a file; Spark hands Iceberg a prefix as `startsWith`, an infix not at all):
    files read, plan and query time, rows compared."""
    from bench_serve import Server
    from bench_spark_sql import configure, measure, print_table, session

    chosen = [
        (q.label, _where(column, q))
        for label in ("rare", "common", "unique")
        for q in [q for q in found if q.label == label][:2]
    ]
    for path in (paths[len(paths) // 3], paths[2 * len(paths) // 3]):
        prefix = pq.read_table(path, columns=[column]).column(column)[0].as_py()[:24].replace("'", "''")
        chosen.append(("prefix", f"{column} LIKE '{prefix}%'"))
    spark, made = session("2g")
    try:
        server = Server(conf)
        try:
            configure(spark, server)
            rows = measure(spark, server, chosen, len(paths), runs, False)
        finally:
            server.stop()
        print_table(rows, title, 'write.format("noop")')
    finally:
        if made:
            spark.stop()


def _ratio(query: Query, name: str) -> float:
    return query.kept[name] / query.true_files


def report(title: str, found: list[Query], files: int, cpu: dict[str, float], builds: dict[str, float],
           sizes: dict[str, tuple[int, dict[str, int]]], data_bytes: int) -> None:  # fmt: skip
    with_name, without_name = list(sizes)
    print(f"\n### {title}\n")
    print(f"load average: {os.getloadavg()[0]:.2f}; {files} files, {data_bytes / 1e6:,.1f} MB of Parquet\n")
    print("| query class | queries | true files (median) | kept with n-gram filters: median, max (x true) | "
          "kept without: median | scan API with, median ms | scan API without, median ms |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label in ("rare", "common", "unique", "rare, ILIKE"):
        chosen = [q for q in found if q.label == label]
        if not chosen:
            print(f"| {label} | 0 | | | | | |")
            continue
        ratios = [_ratio(q, with_name) for q in chosen]
        print(
            f"| {label} | {len(chosen)} | {statistics.median(q.true_files for q in chosen):g} | "
            f"{statistics.median(q.kept[with_name] for q in chosen):g} files ({statistics.median(ratios):.2f}x), "
            f"max {max(q.kept[with_name] for q in chosen)} ({max(ratios):.2f}x) | "
            f"{statistics.median(q.kept[without_name] for q in chosen):g} | "
            f"{statistics.median(q.scan_s[with_name] for q in chosen) * 1e3:,.0f} | "
            f"{statistics.median(q.scan_s[without_name] for q in chosen) * 1e3:,.0f} |"
        )
    print("\n| index | stored (index table files) | of the data | payload bytes per kind (uncompressed) | "
          "build CPU per file (`index_file`) | whole build (in process) |")  # fmt: skip
    print("|---|---:|---:|---|---:|---:|")
    for name, (stored, kinds) in sizes.items():
        per_kind = ", ".join(f"{kind} {size / 1e6:,.2f} MB" for kind, size in sorted(kinds.items()) if size)
        print(
            f"| {name} | {stored / 1e6:,.2f} MB | {100 * stored / data_bytes:.1f} % | {per_kind} | "
            f"{cpu[name] * 1e3:.1f} ms | {builds[name]:.1f} s |"
        )
    print(
        f"\nbuild with / without: CPU per file {cpu[with_name] / cpu[without_name]:.2f}x, "
        f"whole build {builds[with_name] / builds[without_name]:.2f}x"
    )


def run(title: str, make, column: str, candidates, args: argparse.Namespace) -> list[Query]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        data_conf, paths = make(directory)
        data_bytes = sum(Path(p).stat().st_size for p in paths)
        rng = random.Random(5)
        found = queries(paths, column, candidates(paths, rng), rng)
        print(f"  {title}: {len(found)} queries", file=sys.stderr, flush=True)
        confs = {
            "with n-gram filters (defaults)": _conf(directory, data_conf, "with_ngrams", column, False, args.ngram_fpp),
            "without (column at min/max)": _conf(directory, data_conf, "without", column, True, None),
        }
        build_seconds(_conf(directory, data_conf, "warm_up", column, True, None))  # imports, first commit
        builds = {name: build_seconds(conf) for name, conf in confs.items()}
        cpu = cpu_per_file(data_conf, paths, column, args.runs, args.ngram_fpp)
        sizes = {name: index_bytes(conf) for name, conf in confs.items()}
        measure_queries(confs, column, found, args.runs)
        report(title, found, len(paths), cpu, builds, sizes, data_bytes)
        if args.spark:
            with_filters = next(iter(confs.values()))
            spark_sql(with_filters, column, found, paths, args.runs, f"{title}: Spark SQL through the service")
        return found


def main(argv: list[str] | None = None) -> dict[str, list[Query]]:
    """Per table ("log", "lineitem"), the queries with their true and kept files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200, help="service-log files (an hour each)")
    parser.add_argument("--rows", type=int, default=2_000, help="rows per service-log file")
    parser.add_argument("--lineitem-scale", type=float, default=1.0, help="TPC-H scale factor (0: skip lineitem)")
    parser.add_argument("--lineitem-files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="best of this many timings")
    parser.add_argument("--spark", action="store_true", help="also Spark SQL through the planning service")
    parser.add_argument("--ngram-fpp", type=float, help="ngram_fpp of the index with the filters (default: packaged)")
    args = parser.parse_args(argv)
    results = {}
    results["log"] = run(
        f"Service log: {args.files} files of {args.rows:,} rows, `msg LIKE '%x%'`",
        lambda d: log_files(d, args.files, args.rows),
        "msg",
        _log_candidates,
        args,
    )
    if args.lineitem_scale:
        results["lineitem"] = run(
            f"TPC-H lineitem SF {args.lineitem_scale:g}, {args.lineitem_files} files by l_shipdate, "
            "`l_comment LIKE '%x%'`",
            lambda d: lineitem_files(d, args.lineitem_scale, args.lineitem_files),
            "l_comment",
            _lineitem_candidates,
            args,
        )
    return results


if __name__ == "__main__":
    main()
