"""The JVM jars of the table formats' Spark connectors (Iceberg's runtime, delta-spark), as `make jars` fetched them
with Maven from jvm/pom.xml, handed to Spark as `spark.jars`.

Where they are: `$SKIPINDEX_JARS`, else the checkout's `.jars/` (an editable install: the folder beside jvm/pom.xml).
A folder without the stamp `make jars` writes last is not used (a copy that stopped half-way). A jar whose artifact
Spark itself ships (pyspark/jars: Hadoop's client, Jackson, Parquet, log4j, ...) is not handed over again: Spark's own
copy is the one its classes were built against, and a second, older copy on the classpath is a conflict waiting for
the class that differs. The index and the lookup never need any of this (docs/spark-sql.md).

`spark_jars_value()` (and `skipindex jars`, which prints it) is the public way to get them: the comma-separated
absolute paths a Spark session takes as `spark.jars` (or `spark-submit --jars`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from indexlib.errors import UserError

STAMP = ".fetched"  # written by `make jars` after Maven copied every jar
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[^_]*\.jar$")  # a version has no "_" (Scala suffixes do)
CONNECTORS = {  # what each connector needs in spark.jars, by artifact prefix
    "iceberg": ("iceberg-spark-runtime-",),
    "delta": ("delta-spark_", "delta-storage-"),
}


def jar_dir() -> Path | None:
    """The folder of fetched jars (module docstring), or None when there is none."""
    given = os.environ.get("SKIPINDEX_JARS")
    if given:
        folder = Path(given)
    else:
        checkout = Path(__file__).resolve().parents[1]
        if not (checkout / "jvm" / "pom.xml").is_file():
            return None
        folder = checkout / ".jars"
    return folder if (folder / STAMP).is_file() else None


def artifact(jar: str) -> str:
    """`delta-spark_4.1_2.13-4.3.0.jar` -> `delta-spark_4.1_2.13`: the name without its version."""
    found = _VERSIONED.match(jar)
    return found.group("artifact") if found else jar.removesuffix(".jar")


def spark_jars(folder: Path | None = None) -> list[Path]:
    """The fetched jars Spark does not ship itself, sorted (module docstring); [] without a folder."""
    folder = folder if folder is not None else jar_dir()
    if folder is None:
        return []
    shipped = {artifact(p.name) for p in _pyspark_jars().glob("*.jar")}
    return sorted(p for p in folder.glob("*.jar") if artifact(p.name) not in shipped)


def spark_jars_value(folder: Path | None = None) -> str:
    """The `spark.jars` value of a session that reads these tables: the jars of `spark_jars`, as comma-separated
    absolute paths. A UserError saying how to fetch them when there are none."""
    jars = spark_jars(folder)
    if not jars:
        raise UserError(
            "no fetched jars: run `make jars` in the checkout (it fetches them into .jars/), or set $SKIPINDEX_JARS "
            f"to a folder of them holding the stamp {STAMP} (docs/spark-sql.md)"
        )
    return ",".join(str(jar.resolve()) for jar in jars)


def has_connector(name: str, jars: list[Path]) -> bool:
    """Whether `jars` hold connector `name` ("iceberg" or "delta")."""
    return all(any(j.name.startswith(prefix) for j in jars) for prefix in CONNECTORS[name])


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"
