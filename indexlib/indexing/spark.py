"""One SparkSession per process, configured from `[spark]` unless spark-submit already chose a master.

Where the JVM's output goes: the JVM pyspark starts inherits this process's stdout and stderr, so log4j's WARN
lines, the JVM's own notices ("Using incubator modules") and, when a task fails, its stack (and the Python worker's
traceback, which the JVM relays) would reach the terminal before our one-line reason, and could even land in the
stdout of a `--json` command. After `log_jvm_output()` (what the CLI does unless `--verbose`), a JVM this process
starts writes both streams to a log file instead (`jvm_log_path()`), which the CLI names when a command fails.
Under spark-submit the JVM already runs, with the output and log4j settings the cluster gave it: nothing changes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    from indexlib.config import Config


@dataclass
class _JvmOutput:
    to_log: bool = False  # a JVM this process starts writes to a log file, not the terminal
    log_path: Path | None = None  # that file, once the JVM is started


_JVM = _JvmOutput()


def log_jvm_output(enabled: bool = True) -> None:
    """Send the output of the JVM this process will start to a new log file (False: to the terminal, inherited)."""
    _JVM.to_log = enabled


def jvm_log_path() -> Path | None:
    """The log file the JVM this process started writes to (None: no JVM started, or its output is inherited)."""
    return _JVM.log_path


def get_spark(config: Config) -> SparkSession:
    # Executors must run the same interpreter as the driver, or they import a different (or no) pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf().setAppName(config.spark_app_name)
    # Under spark-submit (which started this Python and left PYSPARK_GATEWAY_PORT) the cluster's master wins. SparkConf()
    # alone cannot tell: before a SparkContext exists it is an empty Python dict, not spark-submit's properties.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted and not conf.contains("spark.master"):
        conf.setMaster(config.spark_master)
    for key, value in config.spark_options.items():
        conf.set(key, value)
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
