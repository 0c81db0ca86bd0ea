"""The "Deploying on Airflow" steps of docs/how-to/airflow.md, run as written under a real Airflow 3: the api-server, the
dag-processor and the scheduler (LocalExecutor, SQLite) started on 127.0.0.1 with free ports, an interval build
DAG unpaused, its first scheduled run waited for, then a second run with nothing new; everything stopped by pid.

The commands come from that page's block between the `airflow-deploy` markers, with this test's paths and ports
substituted, so the docs cannot drift from what was run. The metadata database is read with sqlite3 (runs,
Asset events), the task log from the file the scheduler's task process wrote."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lakes import Lake, checked_answers, live_rows, partitioned_events
from servers import Process, free_port

from indexlib.config import load_config
from indexlib.store.table import IndexTable, index_asset_uri

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.servers]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BUILD_DAG = "skipindex_build__db__events"
DOWNSTREAM = """
from datetime import datetime
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset

with DAG(
    "downstream_of_index",
    schedule=[Asset("{uri}")],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    is_paused_upon_creation=False,  # paused, it would queue nothing
):
    EmptyOperator(task_id="read_the_index")
"""


def readme_steps() -> list[str]:
    """The lines of the Airflow deployment block in docs/how-to/airflow.md."""
    text = (REPO / "docs" / "how-to" / "airflow.md").read_text()
    block = re.search(r"<!-- airflow-deploy: begin.*?-->\n(.*?)<!-- airflow-deploy: end -->", text, re.S)
    assert block, "docs/how-to/airflow.md has the airflow-deploy block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


class Deployment:
    """The page's steps run one by one: exports set the environment, `... &` starts a process (stopped by pid at
    the end), `airflow dags list` waits until the dag-processor has stored the build DAG, the rest must exit 0."""

    def __init__(self, root: Path, conf: Path) -> None:
        self.root, self.home = root, root / "airflow_home"
        self.api_port, self.log_port = free_port(), free_port()
        self.substitutions = {
            "/srv/airflow": str(self.home),
            "/srv/skipindex/airflow_dags": str(REPO / "airflow_dags"),
            "/srv/skipindex/prod.toml": str(conf),
            ":8080": f":{self.api_port}",
            "--port 8080": f"--port {self.api_port}",
            "=8793": f"={self.log_port}",
            "tpch__lineitem": "db__events",
        }
        env = {k: v for k, v in os.environ.items() if k != "SKIPINDEX_CONF" and not k.startswith("AIRFLOW")}
        self.env = env | {
            "PATH": f"{BIN}{os.pathsep}{env['PATH']}",  # `airflow` of this environment (the install's stand-in)
            "PYTHONPATH": str(REPO),  # this checkout's indexlib, in every component
            "PYSPARK_PYTHON": sys.executable,
        }
        self.cwd = root / "cwd"  # empty: nothing can fall back to a conf/local.toml found there
        self.cwd.mkdir()
        self.processes: list[Process] = []
        self.ran: list[str] = []
        self.timings: list[tuple[str, float]] = []

    def line(self, step: str) -> list[str]:
        for old, new in self.substitutions.items():
            step = step.replace(old, new)
        return shlex.split(step, comments=True)

    def run(self, step: str) -> None:
        words = self.line(step)
        self.ran.append(shlex.join(words))
        if words[:2] == ["pip", "install"]:
            return  # the dev environment stands in for the install
        if words[0] == "export":
            name, value = words[1].split("=", 1)
            self.env[name] = value
        elif words[-1] == "&":
            name = " ".join(words[1:3]) if words[1] == "dags" else words[1]
            log = self.root / f"{name.replace(' ', '_')}.log"
            self.processes.append(Process(name, [str(BIN / words[0]), *words[1:-1]], log, self.env))
        elif words[:3] == ["airflow", "dags", "list"] and len(words) == 3:
            self.wait(lambda: BUILD_DAG in self.airflow("dags", "list").stdout, 120, "the DAGs listed")
        else:
            done = subprocess.run(words, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"`{shlex.join(words)}` failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"

    def airflow(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["airflow", *args], cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=120
        )

    def wait(self, ready, timeout: float, what: str) -> float:
        """Seconds until `ready()`; fails with the servers' logs if a server exits or `timeout` passes."""
        start = time.monotonic()
        while not ready():
            for process in self.processes:
                assert process.popen.poll() is None, f"{process.name} exited before {what}:\n{self.logs()}"
            assert time.monotonic() - start < timeout, f"no {what} after {timeout} s:\n{self.logs()}"
            time.sleep(0.5)
        return time.monotonic() - start

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name} ({p.log}):\n{p.log.read_text(errors='replace')[-2500:]}" for p in self.processes
        )

    def query(self, sql: str, *args) -> list[tuple]:
        with sqlite3.connect(self.home / "airflow.db", timeout=30) as db:
            return db.execute(sql, args).fetchall()

    def runs(self, dag_id: str) -> list[tuple[str, str]]:
        return self.query("SELECT run_id, state FROM dag_run WHERE dag_id = ? ORDER BY id", dag_id)

    def asset_events(self, uri: str) -> list[dict]:
        rows = self.query(
            "SELECT e.extra FROM asset_event e JOIN asset a ON e.asset_id = a.id WHERE a.uri = ? ORDER BY e.id", uri
        )
        return [json.loads(extra) if extra else {} for (extra,) in rows]

    def task_log(self, dag_id: str, run_id: str, task_id: str) -> list[dict]:
        [path] = (self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}").glob("*.log")
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


@pytest.fixture
def lake(catalog, tmp_path) -> Lake:
    return partitioned_events(catalog, tmp_path, "events", seed=31)


def _succeeded(deployment: Deployment, dag_id: str, count: int):
    def ready() -> bool:
        runs = deployment.runs(dag_id)
        assert not [r for r in runs if r[1] == "failed"], f"{dag_id} runs: {runs}\n{deployment.logs()}"
        return sum(state == "success" for _, state in runs) >= count

    return ready


def test_the_readme_deployment_runs_the_interval_build_and_tells_downstream_only_when_the_index_changed(
    tmp_path, conf_path, lake
):
    conf_path.write_text(
        conf_path.read_text()
        + "[build]\nlocal_max_files = 0\n"  # on Spark: the task log must read right with a JVM in it
        + '[airflow]\nretries = 0\npool = "skipindex"\n[airflow.builds."db.events"]\nevery_minutes = 60\n'
    )
    config = load_config(conf_path)
    uri = index_asset_uri(config.catalog_name, config.index_namespace, lake.name)
    deployment = Deployment(tmp_path, conf_path)
    started = time.monotonic()
    try:
        steps = readme_steps()
        for step in steps:
            if "dags unpause" in step:
                unpaused = time.monotonic()
            deployment.run(step)
            if step.startswith("ln -s"):  # a DAG scheduled on the index's Asset, beside ours
                (deployment.home / "dags" / "downstream.py").write_text(DOWNSTREAM.format(uri=uri))
            deployment.timings.append((step.split("#")[0].strip(), time.monotonic() - started))
        assert any(w.startswith("airflow dags unpause") for w in deployment.ran), "the docs unpause the build"

        deployment.wait(_succeeded(deployment, BUILD_DAG, 1), 150, "successful first build run")
        first = time.monotonic() - unpaused
        index = IndexTable(config.load_catalog(), config.index_namespace, lake.name)
        assert index.indexed_paths() == set(live_rows(config, lake.name)), "the scheduled run indexed every file"
        checked_answers(config, lake.name)  # the index answering, against the rows
        [event] = deployment.asset_events(uri)
        assert (event["files_indexed"], event["files_removed"]) == (3, 0), "the event says what the build did"
        deployment.wait(_succeeded(deployment, "downstream_of_index", 1), 60, "the downstream DAG's run")

        [(run_id, _)] = deployment.runs(BUILD_DAG)
        assert deployment.query("SELECT pool FROM task_instance WHERE dag_id = ?", BUILD_DAG) == [("skipindex",)]
        log = deployment.task_log(BUILD_DAG, run_id, "build")
        errors = [r for r in log if r.get("level") in ("error", "critical")]
        assert not errors, f"a healthy build's task log has no ERROR lines: {errors}"
        messages = [(r.get("level"), r.get("logger"), str(r.get("event"))) for r in log]
        assert any(lvl == "info" and "indexed 3 new files" in m for lvl, _, m in messages), messages
        assert any(lgr == "spark.jvm" and lvl == "warning" for lvl, lgr, m in messages), "Spark's WARN lines, as such"

        triggered = deployment.airflow("dags", "trigger", BUILD_DAG)  # the same DAG, nothing new in the table
        assert triggered.returncode == 0, triggered.stderr[-3000:]
        deployment.wait(_succeeded(deployment, BUILD_DAG, 2), 120, "successful second build run")
        assert len(deployment.asset_events(uri)) == 1, "a run with nothing new emits no event of the index's Asset"
        time.sleep(3)  # the scheduler would have queued the downstream run by now
        assert len(deployment.runs("downstream_of_index")) == 1, "so nothing downstream runs for nothing"
    finally:
        deployment.stop()
    elapsed = time.monotonic() - started
    for step, at in deployment.timings:
        print(f"{at:6.1f} s  {step}")
    print(f"first build run succeeded {first:.0f} s after unpause; whole deployment {elapsed:.0f} s")
    assert all(p.popen.poll() is not None for p in deployment.processes), "every component stopped"
