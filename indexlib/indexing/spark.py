"""One SparkSession per process, configured from `[spark]` unless spark-submit already chose a master."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.config import Config


def get_spark(config: Config) -> SparkSession:
    # Executors must run the same interpreter as the driver, or they import a different (or no) pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(config.spark_app_name)
    if not SparkConf().contains("spark.master"):  # spark-submit sets it; then the cluster's choice wins
        builder = builder.master(config.spark_master)
    for key, value in config.spark_options.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
