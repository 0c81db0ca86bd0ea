"""The "Try it locally" sections of docs/how-to/serve.md and docs/spark-sql.md, run as printed in the folder the
getting-started local section makes (tests/test_getting_started_local.py): the shell block starts a real
`skipindex serve` on 127.0.0.1 in the background, the Python blocks plan through it (pyiceberg's REST client, and a
Spark session with Iceberg's runtime: this run's shared one, which `getOrCreate` returns with the block's catalog
settings), and the service is stopped by its pid with SIGTERM. Two things differ from the page, both checked to be
there: the port (a free one instead of the default 8181, which another service on this machine may hold) and the
Spark catalog's name (Spark keeps a catalog once a query made it, so each page's is its own in this run).

The pages promise: the rows of `trace_id = 'abc'`; one plan log line per plan, with the index keeping 1 of the 3
files; the same in `/metrics`; and a stop that finishes cleanly (no "leaked semaphore" warning on stderr). The
table of docs/spark-sql.md (which WHERE clauses reach the index) is checked through that page's own catalog and
service, by the plan log lines: the filter Spark pushed (its outline: operators and columns, never values) and the
files the index kept."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from servers import HOST, free_port
from test_getting_started_local import DOCS, run_local_catalog_section, section_blocks, shell_env

from indexlib.service.filters import OUTLINE_CHARS, RequestFilter

pytestmark = pytest.mark.servers

SECTION = "## Try it locally"
START = "skipindex serve --conf conf/lake.toml &"
PAGES = {  # page: (its blocks' languages, its Spark catalog's name in this run)
    "how-to/serve.md": (["shell", "python", "python"], "docs_serve_lake"),
    "spark-sql.md": (["shell", "python"], "docs_spark_sql_lake"),
}


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except OSError:
        return 0, ""


def _gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


class Started:
    """The page's shell block run by bash in its own session, its output (and the service's) in `log`; bash then
    writes the background job's pid and the token it exported, and waits for the job."""

    def __init__(self, block: str, folder: Path, port: int) -> None:
        assert START in block, f"the shell block starts the service as the page says: {START}"
        script = block.replace(START, START.replace(" &", f" --port {port} &"))
        script += '\nprintf "%s %s" "$!" "$SKIPINDEX_SERVE_TOKEN" > started.tmp && mv started.tmp started\nwait\n'
        self.log = folder / "serve.log"
        with self.log.open("w") as out:
            self.bash = subprocess.Popen(
                ["bash", "-c", script], cwd=folder, env=shell_env(), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 90
        while not (folder / "started").exists() or _get(f"http://{HOST}:{port}/health")[0] != 200:
            assert self.bash.poll() is None, f"the shell block exited: {self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no answer on /health: {self.log.read_text()[-3000:]}"
            time.sleep(0.2)
        pid, self.token = (folder / "started").read_text().split(" ", 1)
        self.pid = int(pid)

    def stop(self) -> str:
        """SIGTERM to the service's pid (as `kill %1`); the log once every process of the session has exited."""
        if self.bash.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            self.bash.wait(30)
        deadline = time.monotonic() + 30
        while not _gone(self.bash.pid):  # the plan workers and Python's resource tracker write last
            if time.monotonic() > deadline:
                os.killpg(self.bash.pid, signal.SIGKILL)
                pytest.fail(f"processes of the service outlived it: {self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        return self.log.read_text()


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_try_it_locally_section_runs_as_printed(page, connectors, tmp_path, monkeypatch):
    languages, spark_catalog = PAGES[page]
    monkeypatch.chdir(tmp_path)
    run_local_catalog_section(tmp_path, {})
    blocks = section_blocks(DOCS / page, SECTION)
    assert [language for language, _ in blocks] == languages, f"{page}: the section's blocks, in order"
    port = free_port()
    server = Started(blocks[0][1], tmp_path, port)
    try:
        monkeypatch.setenv("SKIPINDEX_SERVE_TOKEN", server.token)  # the shell's export, as its Python would see it
        namespace: dict = {}
        for _, block in blocks[1:]:
            assert "127.0.0.1:8181" in block, f"{page}: the clients name the service's default address"
            code = block.replace("127.0.0.1:8181", f"{HOST}:{port}")
            if "SparkSession" in code:
                assert re.search(r"\blake\b", code), f"{page}: the Spark catalog is named `lake`"
                code = re.sub(r"\blake\b", spark_catalog, code)
            exec(compile(code, f"{page} (python)", "exec"), namespace)  # noqa: S102 (the page's own example)
        status, metrics = _get(f"http://{HOST}:{port}/metrics", server.token)
        plans = _plans(server.log)
        if page == "spark-sql.md":  # the page's table of what reaches the index, through the page's own catalog
            _check_pushed(namespace["spark"], spark_catalog)
    finally:
        log = server.stop()
    if "served_rows" in namespace:
        assert namespace["served_rows"].to_pylist() == [{"trace_id": "abc", "id": 15}], f"{page}: pyiceberg's rows"
    assert [row.asDict() for row in namespace["spark_rows"]] == [{"id": 15, "trace_id": "abc"}], f"{page}: Spark's"
    assert plans and {kept for kept, _ in plans} == {"1 file(s) of 3"}, f"{page}: the index kept 1 of 3: {log}"
    assert status == 200, f"{page}: /metrics answers with the token"
    kept = re.search(r"^skipindex_plan_files_kept_total (\d+)$", metrics, re.M)
    total = re.search(r"^skipindex_plan_files_total (\d+)$", metrics, re.M)
    assert kept and total and (int(kept[1]), int(total[1])) == (len(plans), 3 * len(plans)), metrics
    assert "leaked semaphore" not in log, f"{page}: the service stops without leaking its semaphores: {log}"
    assert server.token not in log, "the token reaches no log line"
    lines = [line for line in log.splitlines() if "plan db.events" in line]
    assert not [line for line in lines if "abc" in line or "'" in line], f"no value reaches a plan's log line: {lines}"


# (WHERE, the filter Spark 4.1 with Iceberg 1.12 sends the service, files the index keeps of the three): the table of
# docs/spark-sql.md, "Which predicates reach the index". File n holds ids 10n..10n+9, 'abc' only at id 15.
PUSHED = [
    ("id = 15", "not-null(id) and eq(id)", 1),
    ("id IN (3, 15)", "in(id)", 2),
    ("id BETWEEN 12 AND 17", "not-null(id) and gt-eq(id) and lt-eq(id)", 1),
    ("id = 15 OR id = 25", "eq(id) or eq(id)", 2),
    ("id != 15", "not-null(id) and not eq(id)", 3),
    ("id NOT IN (1, 2)", "not-null(id) and not-in(id)", 3),
    ("trace_id IS NULL", "is-null(trace_id)", 0),
    ("id <=> 15", "eq(id)", 1),
    ("trace_id LIKE 'ab%'", "not-null(trace_id) and starts-with(trace_id)", 1),
    ("trace_id LIKE 'abc'", "not-null(trace_id) and eq(trace_id)", 1),
    ("trace_id LIKE 'a%c'", "not-null(trace_id) and starts-with(trace_id)", 1),
    ("trace_id = 'abc' AND id > 10", "not-null(trace_id) and not-null(id) and eq(trace_id) and gt(id)", 1),
    ("trace_id LIKE '%bc%' AND id > 20", "not-null(trace_id) and not-null(id) and gt(id)", 1),
    ("trace_id LIKE '%bc%'", "not-null(trace_id)", 3),
    ("trace_id LIKE '%bc'", "not-null(trace_id)", 3),
    ("trace_id LIKE 'a_c'", "not-null(trace_id)", 3),
    ("lower(trace_id) = 'abc'", "not-null(trace_id)", 3),
    ("id + 1 = 16", "not-null(id)", 3),
    ("CAST(id AS STRING) = '15'", "not-null(id)", 3),
    ("id = 15 OR trace_id LIKE '%bc%'", "true", 3),
]


def _check_pushed(spark: Any, catalog: str) -> None:
    """Each WHERE of PUSHED through the page's Spark catalog: Spark's rows are SQL's over the same rows in memory (no
    reader or statistic consulted), and the service's log line for the plan says which parts of the WHERE Spark
    pushed into its scan (operators and columns, never a value) and the files the index kept: a predicate Spark does
    not push (a LIKE that does not start with its text, a function of a column) leaves every file to read."""
    rows = [(f"t{i:04d}" if i != 15 else "abc", i) for i in range(30)]  # the local section's table
    spark.createDataFrame(rows, "trace_id string, id long").createOrReplaceTempView("local_events_rows")
    log = Path("serve.log")
    for where, outline, kept in PUSHED:
        before = len(_plans(log))
        got = spark.sql(f"SELECT id FROM {catalog}.db.events WHERE {where}").collect()
        expected = spark.sql(f"SELECT id FROM local_events_rows WHERE {where}").collect()
        assert sorted(got) == sorted(expected), f"{where}: the rows through the service are SQL's"
        deadline = time.monotonic() + 10
        while len(plans := _plans(log)) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(plans) == before + 1, f"{where}: one plan, one log line"
        assert plans[-1] == (f"{kept} file(s) of 3", outline), f"{where}: what Spark pushed, what the index kept"


def _plans(log: Path) -> list[tuple[str, str]]:
    """The plan log lines' (files kept of the live ones, filter outline), in order."""
    return re.findall(
        r"plan db\.events: index, snapshot \d+, (\d+ file\(s\) of \d+); filter (.*)$", log.read_text(), re.M
    )


OUTLINES = [  # (the request's filter JSON, its outline in the plan's log line)
    (None, "none"),
    (True, "true"),
    ({"type": "eq", "term": "id", "value": 15}, "eq(id)"),
    ({"type": "in", "term": "id", "values": list(range(1000))}, "in(id)"),
    ({"type": "lt", "term": {"type": "transform", "transform": "day", "term": "ts"}, "value": 3}, "lt(day(ts))"),
    (
        {"type": "and", "left": {"type": "is-null", "term": "a"}, "right": {"type": "not-nan", "term": "f"}},
        "is-null(a) and not-nan(f)",
    ),
    (
        {
            "type": "or",
            "left": {"type": "and", "left": {"type": "eq", "term": "a", "value": "x"}, "right": True},
            "right": {"type": "not", "child": {"type": "or", "left": False, "right": {"type": "is-nan", "term": "f"}}},
        },
        "(eq(a) and true) or not (false or is-nan(f))",
    ),
    ({"type": "starts-with", "term": "s", "value": "secret-prefix"}, "starts-with(s)"),
]


def test_a_filter_outline_names_operators_and_columns_never_values():
    for raw, outline in OUTLINES:
        assert RequestFilter.parse(raw).outline == outline, f"{raw}: the outline names operators and columns"
    deep: dict = {"type": "eq", "term": "c0", "value": "v"}
    for n in range(1, 100):
        deep = {"type": "and", "left": deep, "right": {"type": "eq", "term": f"c{n}", "value": "v"}}
    long = RequestFilter.parse(deep).outline
    assert len(long) == OUTLINE_CHARS and long.endswith("..."), "a long outline is cut to OUTLINE_CHARS"
