"""Real servers on 127.0.0.1 for the end-to-end tests: a Spark standalone master and workers, PostgreSQL 15 and an
S3 server (moto). Each is a process this module starts, waits for until it answers, and stops by its pid.

A server that cannot start (a binary missing, no answer in time) raises ServerError with the command and the tail
of its log: CI must fail loudly here, never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

HOST = "127.0.0.1"
PG_BIN = Path(os.environ.get("SKIPINDEX_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
SPARK_HOME = Path(pyspark.__file__).parent
S3_ACCESS_KEY = "testing"  # moto accepts any key pair
S3_SECRET_KEY = "testing"
S3_REGION = "us-east-1"


class ServerError(RuntimeError):
    """A test server did not start; the message names it, its command and its log's tail."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return "(no log)"


@dataclass
class Process:
    """One server process in its own session, its output in `log`."""

    name: str
    command: list[str]
    log: Path
    env: dict[str, str] | None = None
    user: str | None = None
    popen: subprocess.Popen = field(init=False)

    def __post_init__(self) -> None:
        if not Path(self.command[0]).exists():
            raise ServerError(f"{self.name}: {self.command[0]} not found (install it; these tests do not skip)")
        with self.log.open("w") as out:
            self.popen = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                user=self.user,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.popen.poll() is not None:
                raise ServerError(
                    f"{self.name} exited with {self.popen.returncode} before {what}\n"
                    f"command: {' '.join(self.command)}\nlog {self.log}:\n{_tail(self.log)}"
                )
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(
                    f"{self.name}: no {what} after {timeout:.0f} s\ncommand: {' '.join(self.command)}\n"
                    f"log {self.log}:\n{_tail(self.log)}"
                )
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        """`sig` to the pid, SIGKILL to its process group if it is still there after `timeout`."""
        if self.popen.poll() is not None:
            return
        self.popen.send_signal(sig)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=2) as response:
        return json.load(response)


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


class SparkCluster:
    """A standalone master and its workers, started with the pyspark wheel's `spark-class`."""

    def __init__(self, root: Path, worker_cores: int = 2, worker_memory: str = "2g") -> None:
        self.root = root
        self.port, self.webui = free_port(), free_port()
        self.url = f"spark://{HOST}:{self.port}"
        self.worker_cores, self.worker_memory = worker_cores, worker_memory
        self.env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": HOST, "SPARK_NO_DAEMONIZE": "1"}
        self.env.pop("SPARK_CONF_DIR", None)
        self.master = Process(
            "spark master",
            [self._spark_class(), "org.apache.spark.deploy.master.Master", "--host", HOST]
            + ["--port", str(self.port), "--webui-port", str(self.webui)],
            root / "master.log",
            self.env,
        )
        self.workers: list[Process] = []
        try:
            self.master.wait_until(lambda: _get_json(self.json_url)["status"] == "ALIVE", 60, "ALIVE master")
            self.add_worker()
        except BaseException:
            self.stop()
            raise

    @property
    def json_url(self) -> str:
        return f"http://{HOST}:{self.webui}/json/"

    @staticmethod
    def _spark_class() -> str:
        return str(SPARK_HOME / "bin" / "spark-class")

    def alive_workers(self) -> list[dict]:
        return [w for w in _get_json(self.json_url)["workers"] if w["state"] == "ALIVE"]

    def add_worker(self) -> Process:
        """A worker registered with the master: ALIVE in the master's JSON before this returns."""
        n = len(self.workers)
        work_dir = self.root / f"worker-{n}"
        work_dir.mkdir()
        before = len(self.alive_workers())
        worker = Process(
            f"spark worker {n}",
            [self._spark_class(), "org.apache.spark.deploy.worker.Worker", self.url, "--host", HOST]
            + ["--cores", str(self.worker_cores), "--memory", self.worker_memory, "--webui-port", str(free_port())]
            + ["--work-dir", str(work_dir)],
            self.root / f"worker-{n}.log",
            self.env,
        )
        self.workers.append(worker)
        worker.wait_until(lambda: len(self.alive_workers()) > before, 60, "ALIVE worker in the master's JSON")
        return worker

    def submit_args(self, events: Path) -> list[str]:
        """spark-submit and its options for an application on this cluster: the driver on loopback, one executor
        core (two applications run at once), the event log written under `events`."""
        events.mkdir(exist_ok=True)
        conf = {
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.executor.memory": "512m",
            "spark.cores.max": "1",  # two applications at once each get an executor
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{events}",
            "spark.eventLog.compress": "false",  # plain JSON lines, one file per application
            "spark.eventLog.rolling.enabled": "false",
        }
        args = [str(Path(sys.executable).parent / "spark-submit"), "--master", self.url]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    @staticmethod
    def events(events: Path) -> list[dict]:
        """The events of every application that logged under `events` (Spark's JSON lines)."""
        logs = sorted(path for path in events.rglob("*") if path.is_file() and not path.name.startswith("."))
        return [json.loads(line) for log in logs for line in log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        for process in [*self.workers, self.master]:
            process.stop()


class Postgres:
    """A PostgreSQL 15 cluster in a temporary directory, trust authentication on 127.0.0.1 only."""

    def __init__(self) -> None:
        self.port = free_port()
        # the postgres user must own the data directory (and reach it: pytest's tmp dirs are root-only)
        self.dir = Path(tempfile.mkdtemp(prefix="skipindex-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            shutil.chown(self.dir, self.user, self.user)
        data, self.log = self.dir / "data", self.dir / "postgres.log"
        initdb = [str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]
        if not Path(initdb[0]).exists():
            raise ServerError(f"postgres: {initdb[0]} not found (install PostgreSQL 15; these tests do not skip)")
        done = subprocess.run(initdb, user=self.user, capture_output=True, text=True)
        if done.returncode != 0:
            raise ServerError(
                f"postgres: initdb failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        self.server = Process(
            "postgres",
            [str(PG_BIN / "postgres"), "-D", str(data), "-k", str(self.dir), "-h", HOST, "-p", str(self.port)]
            + ["-c", "fsync=off", "-c", "max_connections=200"],
            self.log,
            user=self.user,
        )
        self.server.wait_until(self._ready, 30, "connection accepted")

    def _ready(self) -> bool:
        import psycopg2

        try:
            psycopg2.connect(host=HOST, port=self.port, user="postgres", dbname="postgres").close()
            return True
        except psycopg2.OperationalError:
            return False

    def create_database(self, name: str) -> str:
        """A new database; its SQLAlchemy URI for pyiceberg's SQL catalog."""
        import psycopg2

        connection = psycopg2.connect(host=HOST, port=self.port, user="postgres", dbname="postgres")
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        connection.close()
        return f"postgresql+psycopg2://postgres@{HOST}:{self.port}/{name}"

    def stop(self) -> None:
        self.server.stop(signal.SIGINT)  # fast shutdown: clients still connected are disconnected
        shutil.rmtree(self.dir, ignore_errors=True)


class S3Server:
    """moto's S3 HTTP server."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://{HOST}:{self.port}"
        self.server = Process(
            "s3 server (moto)",
            [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self.port)],
            root / "moto.log",
            {**os.environ, "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY},
        )
        self.server.wait_until(lambda: _accepts(self.port), 30, "HTTP on its port")

    def create_bucket(self, name: str) -> None:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=S3_ACCESS_KEY,
            aws_secret_access_key=S3_SECRET_KEY,
            region_name=S3_REGION,
        )
        client.create_bucket(Bucket=name)

    def catalog_properties(self) -> dict[str, str]:
        """The `[catalog]` keys pyiceberg's FileIO reads S3 with."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": S3_ACCESS_KEY,
            "s3.secret-access-key": S3_SECRET_KEY,
            "s3.region": S3_REGION,
        }

    def delta_storage_options(self) -> dict[str, str]:
        """delta-rs storage options for the same server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "AWS_REGION": S3_REGION,
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }

    def stop(self) -> None:
        self.server.stop()
