"""`skipindex` command line: build, backfill, explain, stats, compact, verify, expire, serve, jars, demo.

A failure of a known kind (indexlib/errors.py) prints one line on stderr and exits with its kind's code: 2 bad
input, 3 a table feature no reader here handles, 4 a data file a build cannot index, 5 the build's Spark job failed
(run again), 75 other writers kept winning the commit (run again later). `verify` exits 1 when it finds stale
entries; anything else prints its traceback and exits 1. No configured secret is
printed: error lines, log records and tracebacks go through `indexlib.redaction.redact_text` with the values the
configuration holds as secrets.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from indexlib.errors import SkipIndexError, UserError
from indexlib.indexing.spark import jvm_log_path, log_jvm_output, relaying_jvm_output
from indexlib.redaction import redact_text

if TYPE_CHECKING:
    from indexlib.config import Config

# The configuration (pydantic, the index kinds, and through them pyarrow and pyiceberg) and every command's modules
# are imported when a command runs, so `--help` and argument errors import none of them.
EXIT_STALE = 1
NO_CONFIG = ("jars",)  # commands that read no configuration file
CONF_HELP = (  # indexlib.config's CONF_ENV and LOCAL_CONF_PATH, written out (tests/test_cli_startup.py checks them)
    "TOML config (default: $SKIPINDEX_CONF, else ./conf/local.toml if present, else the packaged default)"
)


def build_parser() -> argparse.ArgumentParser:
    """The `skipindex` argument parser: every command and option (the docs' CLI reference is generated from it)."""
    parser = argparse.ArgumentParser(
        prog="skipindex", description="Enriched skip indexes for Iceberg and Delta tables."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--conf", help=CONF_HELP)
        p.add_argument(
            "--verbose", action="store_true", help="show Spark's and Java's output here (default: in a log file)"
        )
        return p

    table_help = "source table: namespace.name in the configured catalog, or the path/URI of a Delta table"
    build = command("build", "Index the data files committed to a table since the last build; drop removed ones.")
    build.add_argument(
        "--table",
        action="append",
        help=table_help + " (repeatable: each in turn; with --follow, default: [follow] tables)",
    )
    build.add_argument(
        "--follow",
        action="store_true",
        help="keep running: index each new commit within seconds, until SIGTERM / SIGINT (docs/how-to/follow.md)",
    )
    build.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="with --follow: seconds between polls of each table (default: [follow] interval_seconds, 1)",
    )
    build.add_argument(
        "--max-minutes",
        type=float,
        metavar="MINUTES",
        help="with --follow: stop (exit 0) at the first batch boundary after this many minutes (default: never)",
    )

    backfill = command(
        "backfill",
        "Index live files the builds never saw (older than the index, or skipped) and rebuild entries of an older "
        "index configuration, partition by partition; safe to rerun after a crash.",
    )
    backfill.add_argument("--table", required=True, help=table_help)
    backfill.add_argument(
        "--where",
        help="predicate on the columns the table is partitioned by (the source columns, not the partition field "
        "names), e.g. \"ts < DATE '2024-01-01'\" when partitioned by day(ts) (default: all)",
    )
    backfill.add_argument(
        "--partition",
        action="append",
        metavar="LABEL",
        help="only this partition, as `--plan` names it (repeatable)",
    )
    backfill.add_argument(
        "--plan",
        action="store_true",
        help="print the partitions to backfill, in batches of about [build] backfill_files_per_commit files, as "
        "JSON, and do nothing (a scheduler runs one batch per task)",
    )

    explain = command("explain", "Show the files a predicate might match, and how each stage pruned.")
    explain.add_argument("--table", required=True, help=table_help)
    explain.add_argument(
        "--where", required=True, help="SQL boolean expression, e.g. \"l_shipdate >= DATE '1995-01-01'\""
    )
    explain.add_argument("--json", action="store_true", help="print one JSON object (docs/reference/cli.md)")

    stats = command("stats", "Per column: NDV, the index kinds built, and index bytes.")
    stats.add_argument("--table", required=True, help=table_help)
    stats.add_argument("--where", help="count only the files this predicate keeps (e.g. one partition)")
    stats.add_argument("--json", action="store_true", help="print one JSON object")

    compact = command(
        "compact",
        "Rewrite index tables into few files: one entry per live data file; rebuild the Bloom filters a growing "
        "table has outgrown.",
    )
    compact.add_argument("--table", help=table_help + " (default: every indexed table)")

    verify = command("verify", "Recompute a sample of entries from the data; report stale, missing, orphaned ones.")
    verify.add_argument("--table", required=True, help=table_help)
    verify.add_argument("--sample", type=int, default=20, help="entries to recompute (default: %(default)s)")
    verify.add_argument("--seed", type=int, help="random seed of the sample (default: a new sample each run)")
    verify.add_argument("--json", action="store_true", help="print one JSON object")

    expire = command(
        "expire",
        "Expire old snapshots of index tables and delete the files no remaining snapshot references.",
    )
    expire.add_argument("--table", help=table_help + " (default: every indexed table)")
    expire.add_argument(
        "--older-than",
        type=float,
        default=72.0,
        metavar="HOURS",
        help="expire snapshots and delete unreferenced files older than this; more than the longest build or "
        "lookup may take (default: %(default)s)",
    )
    expire.add_argument(
        "--retain-last", type=int, default=1, help="newest snapshots always kept (default: %(default)s)"
    )

    serve = command(
        "serve",
        "Serve an Iceberg REST catalog in front of the configured one whose scan planning comes from the index "
        "(docs/how-to/serve.md).",
    )
    serve.add_argument("--host", help="address to bind (default: [serve] host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: [serve] port, 8181)")

    sub.add_parser(
        "jars",
        help="Print the spark.jars value of a Spark session that reads these tables: the fetched connector jars, "
        "comma-separated (docs/spark-sql.md).",
        description="Print the spark.jars value of a Spark session that reads these tables: the jars `make jars` "
        "fetched (or $SKIPINDEX_JARS holds) that Spark does not ship itself, as comma-separated absolute paths "
        "(docs/spark-sql.md).",
    )

    demo = command("demo", "Generate TPC-H lineitem as a multi-snapshot Iceberg table, index it, compare pruning.")
    demo.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (default: %(default)s)")
    demo.add_argument("--snapshots", type=int, default=4, help="append snapshots to commit (default: %(default)s)")
    demo.add_argument(
        "--files-per-snapshot", type=int, default=6, help="data files per snapshot (default: %(default)s)"
    )
    return parser


def run(args: argparse.Namespace, config: Config | None = None) -> int:
    if args.command == "jars":
        from indexlib.jars import spark_jars_value

        print(spark_jars_value())
        return 0
    from indexlib.config import load_config

    config = config if config is not None else load_config(args.conf)
    if args.command == "build":
        _build(config, args)
    elif args.command == "backfill":
        from indexlib.indexing.backfill import backfill, plan_backfill

        if args.plan:
            print(json.dumps(plan_backfill(config, args.table, args.where)))
        else:
            print(backfill(config, args.table, args.where, partitions=args.partition).message())
    elif args.command == "compact":
        from indexlib.indexing.upkeep import compact, indexed_sources

        for table in [args.table] if args.table else indexed_sources(config):
            print(compact(config, table).message())
    elif args.command == "expire":
        from datetime import timedelta

        from indexlib.indexing.upkeep import expire, indexed_sources

        if args.older_than < 0:
            raise UserError(f"--older-than must be >= 0 hours, got {args.older_than}")
        if args.retain_last < 1:
            raise UserError(f"--retain-last must be at least 1 (the current snapshot), got {args.retain_last}")
        for table in [args.table] if args.table else indexed_sources(config):
            print(expire(config, table, timedelta(hours=args.older_than), args.retain_last).message())
    elif args.command == "verify":
        from indexlib.indexing.upkeep import verify

        if args.sample < 0:
            raise UserError(f"--sample must be >= 0, got {args.sample}")
        report = verify(config, args.table, args.sample, args.seed)
        print(json.dumps(report.as_json()) if args.json else report.message())
        return 0 if report.ok else EXIT_STALE
    elif args.command == "explain":
        from indexlib.lookup import lookup

        result = lookup(config, args.table, args.where)
        if args.json:
            print(json.dumps(result.as_json()))
        else:
            print(result.explain())
    elif args.command == "stats":
        from indexlib.report import format_report, table_stats

        table_report = table_stats(config, args.table, args.where)
        print(json.dumps(table_report.as_json()) if args.json else format_report(table_report))
    elif args.command == "serve":
        _serve(config, args.host, args.port)
    elif args.command == "demo":
        from indexlib.demo import run_demo

        run_demo(config, scale=args.scale, snapshots=args.snapshots, files_per_snapshot=args.files_per_snapshot)
    return 0


def _build(config: Config, args: argparse.Namespace) -> None:
    """`build`: each table once, or with `--follow` every table until stopped (indexing/follow.py)."""
    if not args.follow:
        if args.interval is not None or args.max_minutes is not None:
            raise UserError("--interval and --max-minutes go with --follow")
        if not args.table:
            raise UserError("skipindex build needs --table T")
        from indexlib.indexing.build import build_index

        for table in args.table:
            print(build_index(config, table).message(), flush=True)
        return
    from dataclasses import replace

    from indexlib.indexing.follow import follow

    if args.interval is not None:
        if not args.interval > 0:
            raise UserError(f"--interval must be more than 0 seconds, got {args.interval}")
        config = replace(config, follow=config.follow.model_copy(update={"interval_seconds": args.interval}))
    if args.max_minutes is not None and not args.max_minutes >= 0:
        raise UserError(f"--max-minutes must be >= 0, got {args.max_minutes}")
    max_seconds = None if args.max_minutes is None else args.max_minutes * 60
    follow(
        config, args.table or config.follow.tables, max_seconds=max_seconds, out=lambda line: print(line, flush=True)
    )


def _serve(config: Config, host: str | None, port: int | None) -> None:
    """uvicorn in this process until SIGTERM / SIGINT (service/server.py); its log records go through the root
    logger's redaction."""
    from indexlib.service.app import create_app
    from indexlib.service.server import run as serve

    token = config.serve.resolve_token()
    for handler in logging.getLogger().handlers:  # the token read from the environment is a secret too
        for redacting in handler.filters:
            if isinstance(redacting, _RedactingFilter):
                redacting.secrets |= {token}
    port = config.serve.port if port is None else port
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be 0-65535, got {port}")
    app = create_app(config, token)
    serve(app, host or config.serve.host, port, config.serve)


class CommandFailed(RuntimeError):
    """A `skipindex` command run by `run_or_raise` failed; the message names the command and why. `retryable`:
    running it again may succeed (a lost commit race); otherwise the same input fails the same way."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def run_or_raise(argv: Sequence[str]) -> None:
    """Run one `skipindex` command in this process, for a scheduler's task: a failure (bad input, or stale entries
    found by `verify`) raises, so the task fails with a one-line reason.

    What it says reaches the task log at its level: the result on stdout and progress as log records, both INFO,
    and the output of a Spark JVM it starts, which would land on stderr (a scheduler's task log shows stderr as
    ERROR), relayed from the JVM's log file record by record, Spark's WARN lines as warnings (indexing/spark.py)."""
    args = build_parser().parse_args(list(argv))
    _quiet_libraries()
    log_jvm_output()
    secrets: set[str] = set()
    try:
        config = None
        if args.command not in NO_CONFIG:
            from indexlib.config import load_config

            config = load_config(args.conf)
            secrets = config.secrets()
        with relaying_jvm_output(logging.getLogger("spark.jvm")):
            code = run(args, config)
    except SkipIndexError as exc:
        raise CommandFailed(redact_text(f"skipindex {args.command}: {exc}", secrets), exc.retryable) from None
    if code == EXIT_STALE:
        raise CommandFailed(f"skipindex {args.command} {args.table}: the index has stale entries (listed above)")


def _quiet_libraries() -> None:
    """py4j logs every connection it opens and closes, pyiceberg every catalog it loads: warnings only."""
    for noisy in ("py4j", "pyiceberg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


LOG_MESSAGE_LIMIT = 16_384  # characters of one log message (a request path a client chose, echoed input), redacted
LOG_TRACEBACK_LIMIT = 65_536  # ... and of its traceback


class _RedactingFilter(logging.Filter):
    """Log records with the configured secrets (and any URI password) replaced by `***`, and bounded: what a client
    sends can reach a log line (the access log's request path), so a line is cut after redaction."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = redact_text(message, self.secrets, LOG_MESSAGE_LIMIT), None
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text, self.secrets, LOG_TRACEBACK_LIMIT)
        return True


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    redacting = _RedactingFilter()
    for handler in logging.getLogger().handlers:
        handler.addFilter(redacting)
    _quiet_libraries()
    try:
        config = None
        if args.command not in NO_CONFIG:
            log_jvm_output(not args.verbose)
            from indexlib.config import load_config

            config = load_config(args.conf)
            redacting.secrets = config.secrets()
        code = run(args, config)
    except SkipIndexError as exc:
        line = " ".join(str(exc).split())  # one line, whatever a library's message spans
        print(redact_text(f"skipindex: error: {line}", redacting.secrets), file=sys.stderr)
        _name_jvm_log()
        return exc.exit_code
    except Exception as exc:  # a bug or an outage: the traceback, as Python prints it, without the secrets
        print(redact_text("".join(traceback.format_exception(exc)), redacting.secrets), file=sys.stderr, end="")
        _name_jvm_log()
        return 1
    if (log := jvm_log_path()) is not None:
        log.unlink(missing_ok=True)  # nothing failed: the JVM's warnings are not worth a file per run
    return code


def _name_jvm_log() -> None:
    """After the error: where Spark's and Java's output went, if this command started Spark."""
    if (log := jvm_log_path()) is not None:
        print(f"skipindex: Spark's output is in {log} (--verbose shows it here)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
