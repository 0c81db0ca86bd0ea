"""The local SQLite section of docs/getting-started/iceberg.md, run as printed in an empty folder: its Python
blocks in one namespace, its TOML block saved under the name its first line gives, its shell lines run by a shell
with the `skipindex` console script on PATH. The page promises that one of the three files holds the match.
(tests/test_serve_local.py runs the service pages' local sections the same way, in this section's folder.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGE = DOCS / "getting-started" / "iceberg.md"
SECTION = "## 2. Try it on a local catalog"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def section_blocks(page: Path, section: str) -> list[tuple[str, str]]:
    """The fenced blocks of `section` of `page`, as (language, text), in order."""
    text = page.read_text()
    assert section in text, f"{page.name} has the section {section!r}"
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    return BLOCK.findall(body)


def shell_env() -> dict[str, str]:
    """The environment of a reader's shell: this venv's console scripts (`skipindex`, `python`) first on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SKIPINDEX_CONF", None)
    return env


def run_local_catalog_section(folder: Path, namespace: dict) -> list[str]:
    """The getting-started local section, block by block, in `folder` (the working directory); the blocks' languages."""
    ran = []
    for language, body in section_blocks(PAGE, SECTION):
        if language == "python":
            exec(compile(body, f"{PAGE.name} (python)", "exec"), namespace)  # noqa: S102 (the page's own example)
        elif language == "toml":
            name = body.splitlines()[0].removeprefix("#").strip()
            assert name.endswith(".toml"), f"a TOML block's first line names its file: {body.splitlines()[0]}"
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(body)
        elif language == "shell":
            for line in body.strip().splitlines():
                done = subprocess.run(line, shell=True, cwd=folder, env=shell_env(), capture_output=True, text=True)
                assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
                if " explain " in line:
                    assert re.search(r"^files kept 1 of 3 ", done.stdout, re.M), f"{line}: {done.stdout}"
        ran.append(language)
    return ran


def test_the_local_catalog_section_runs_as_printed_in_an_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    ran = run_local_catalog_section(tmp_path, namespace)
    assert ran == ["python", "toml", "shell", "python"], f"the section's blocks, in order: {ran}"
    result = namespace["local_result"]
    assert (len(result.files), result.summary["files_total"]) == (1, 3), "the one file holding 'abc' is kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf", "lake"], "everything stays in the user's folder"
