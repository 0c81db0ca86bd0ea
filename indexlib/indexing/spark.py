"""One SparkSession per process, configured from `[spark]` unless spark-submit already chose a master.

Where the JVM's output goes: the JVM pyspark starts inherits this process's stdout and stderr, so log4j's WARN
lines, the JVM's own notices ("Using incubator modules") and, when a task fails, its stack (and the Python worker's
traceback, which the JVM relays) would reach the terminal before our one-line reason, and could even land in the
stdout of a `--json` command. After `log_jvm_output()` (what the CLI does unless `--verbose`), a JVM this process
starts writes both streams to a log file instead (`jvm_log_path()`), which the CLI names when a command fails.
A scheduler's task, whose stderr its log shows as errors, has the file's records relayed into Python logging at
their own level instead (`relay_jvm_output`). Under spark-submit the JVM already runs, with the output and log4j
settings the cluster gave it: nothing changes.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from indexlib.jars import spark_jars

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    from indexlib.config import SparkSettings


@dataclass
class _JvmOutput:
    to_log: bool = False  # a JVM this process starts writes to a log file, not the terminal
    log_path: Path | None = None  # that file, once the JVM is started
    relayed: int | None = None  # bytes of it already relayed to Python logging (None: never relayed)


_JVM = _JvmOutput()


def log_jvm_output(enabled: bool = True) -> None:
    """Send the output of the JVM this process will start to a new log file (False: to the terminal, inherited)."""
    _JVM.to_log = enabled


def jvm_log_path() -> Path | None:
    """The log file the JVM this process started writes to (None: no JVM started, or its output is inherited)."""
    return _JVM.log_path


# A log4j record starts "26/11/24 02:16:38 WARN Utils: ..." (Spark's default pattern); the JVM's own notices start
# "WARNING: ...". Other lines continue the record before them (a stack trace), or are notices of their own.
_LOG4J_RECORD = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_JVM_NOTICE = re.compile(r"^(WARNING|ERROR): ")
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING}
_LEVELS |= {"WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}


def jvm_records(text: str) -> list[tuple[int, str]]:
    """(level, message) of each record in the JVM's output: a log4j line or a JVM notice at its own level, with
    the lines that continue it (a Java stack, the Python worker's traceback after an ERROR); any other line is a
    record at INFO (Spark's start-up notices)."""
    records: list[tuple[int, list[str]]] = []
    for line in text.splitlines():
        if match := _LOG4J_RECORD.match(line) or _JVM_NOTICE.match(line):
            records.append((_LEVELS[match.group(1)], [line]))
        elif records and (line[:1].isspace() or records[-1][0] >= logging.ERROR or not line.strip()):
            records[-1][1].append(line)
        else:
            records.append((logging.INFO, [line]))
    return [(level, "\n".join(lines).rstrip()) for level, lines in records if "".join(lines).strip()]


@contextlib.contextmanager
def relaying_jvm_output(logger: logging.Logger, every: float = 2.0) -> Iterator[None]:
    """While the block runs, and once more at its end, `relay_jvm_output` every `every` seconds: Spark's records
    reach the log among the command's own, in the order they happened, not all after it."""
    done = threading.Event()

    def relay() -> None:
        while not done.wait(every):
            relay_jvm_output(logger, final=False)

    thread = threading.Thread(target=relay, name="skipindex-jvm-relay", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        relay_jvm_output(logger)


def relay_jvm_output(logger: logging.Logger, final: bool = True) -> None:
    """Log, at their own levels, the records the JVM this process started wrote to its log file since the last
    call: Spark's WARN lines as warnings, not as the errors a task log makes of anything on stderr. Not `final`:
    the last record waits, since lines may still be added to it."""
    if _JVM.log_path is None:
        return
    if _JVM.relayed is None:  # everything in it reaches the log: the file goes when this process ends
        _JVM.relayed = 0
        atexit.register(_JVM.log_path.unlink, missing_ok=True)
    with open(_JVM.log_path, "rb") as log:
        log.seek(_JVM.relayed)
        data = log.read()
    lines = data[: data.rfind(b"\n") + 1].splitlines(keepends=True)  # a line being written waits
    if not final:  # the last record may go on (a stack being written): it waits for a record after it
        starts = [n for n, line in enumerate(lines) if _starts_record(line.decode(errors="replace"))]
        lines = lines[: starts[-1]] if starts else []
    text = b"".join(lines)
    _JVM.relayed += len(text)
    for level, message in jvm_records(text.decode(errors="replace")):
        logger.log(level, "%s", message)


def _starts_record(line: str) -> bool:
    return bool(_LOG4J_RECORD.match(line) or _JVM_NOTICE.match(line))


def get_spark(settings: SparkSettings) -> SparkSession:
    """The process's SparkSession, started with `[spark]`'s settings unless it runs already."""
    # Executors must run the same interpreter as the driver, or they import a different (or no) pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf().setAppName(settings.app_name)
    # Under spark-submit (which started this Python and left PYSPARK_GATEWAY_PORT) the cluster's master wins. SparkConf()
    # alone cannot tell: before a SparkContext exists it is an empty Python dict, not spark-submit's properties.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted and not conf.contains("spark.master"):
        conf.setMaster(settings.master)
    for key, value in settings.options.items():
        conf.set(key, value)
    if not submitted and not conf.contains("spark.jars") and (fetched := spark_jars()):
        conf.set("spark.jars", ",".join(str(j) for j in fetched))  # the connectors `make jars` fetched (jars.py)
    if _JVM.to_log and not submitted:
        _start_logging_jvm(conf)
    return SparkSession.builder.config(conf=conf).getOrCreate()


def _start_logging_jvm(conf: SparkConf) -> None:
    """Start the JVM (and the SparkContext on it) with stdout and stderr going to a new log file, unless this
    process already has one: pyspark launches at most one JVM per process and reuses it (`SparkContext._gateway`)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # noqa: SLF001 (pyspark's one record of the JVM it started)
        return
    conf.setIfMissing("spark.ui.showConsoleProgress", "false")  # the "[Stage 0:>" bar only garbles a log file
    descriptor, name = tempfile.mkstemp(prefix="skipindex-spark-", suffix=".log")  # mode 0600: it may name paths
    with os.fdopen(descriptor, "ab") as log:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})  # the JVM keeps its own copy
    _JVM.log_path = Path(name)
    SparkContext(conf=conf, gateway=gateway)
