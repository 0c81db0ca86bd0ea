"""The connectors' jars handed to Spark (indexlib/jars.py): an artifact is its file name without the version, and a
jar whose artifact Spark ships itself is never handed over again (Spark's own copy wins, and two copies of one
library on a classpath are a conflict waiting for the class that differs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexlib.jars import STAMP, artifact, has_connector, jar_dir, spark_jars


@pytest.mark.parametrize(
    "jar, expected",
    [
        ("delta-spark_4.1_2.13-4.3.0.jar", "delta-spark_4.1_2.13"),
        ("iceberg-spark-runtime-4.1_2.13-1.12.0.jar", "iceberg-spark-runtime-4.1_2.13"),  # its name holds "-4.1_"
        ("hadoop-client-api-3.4.2.jar", "hadoop-client-api"),
        ("zstd-jni-1.5.7-3.jar", "zstd-jni"),  # a version with a dash
        ("jackson-datatype-jdk8-2.13.5.jar", "jackson-datatype-jdk8"),  # a name part ending in a digit
        ("json4s-jackson-core_2.13-4.0.7.jar", "json4s-jackson-core_2.13"),
        ("unversioned.jar", "unversioned"),
    ],
)
def test_an_artifact_is_the_file_name_without_its_version(jar, expected):
    assert artifact(jar) == expected, f"{jar}: the artifact is {expected}"


def test_jars_spark_ships_are_left_out(tmp_path: Path):
    import pyspark

    shipped = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert shipped, "pyspark ships Hadoop's client"
    names = ["delta-spark_4.1_2.13-4.3.0.jar", "delta-storage-4.3.0.jar", "hadoop-client-api-3.3.0.jar"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    got = [j.name for j in spark_jars(tmp_path)]
    assert got == names[:2], "another version of an artifact Spark ships is not handed over"
    assert has_connector("delta", spark_jars(tmp_path)) and not has_connector("iceberg", spark_jars(tmp_path))


def test_a_folder_without_the_stamp_is_not_used(tmp_path: Path, monkeypatch):
    (tmp_path / "delta-spark_4.1_2.13-4.3.0.jar").write_bytes(b"")
    monkeypatch.setenv("SKIPINDEX_JARS", str(tmp_path))
    assert jar_dir() is None and spark_jars() == [], "a copy that stopped half-way is not handed to Spark"
    (tmp_path / STAMP).write_text("")
    assert jar_dir() == tmp_path and [j.name for j in spark_jars()] == ["delta-spark_4.1_2.13-4.3.0.jar"]
