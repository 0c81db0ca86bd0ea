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
    # Under spark-submit (which started this Python and left PYSPARK_GATEWAY_PORT) the cluster's master wins. SparkConf()
    # alone cannot tell: before a SparkContext exists it is an empty Python dict, not spark-submit's properties.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted and not SparkConf().contains("spark.master"):
        builder = builder.master(config.spark_master)
    for key, value in config.spark_options.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
