"""The docs site (mkdocs.yml) builds strict, and its generated references cover the code: every `skipindex`
subcommand of the argument parser has its section on the CLI page, and every section of the configuration's schema
has its own on the configuration page. A new command or setting without docs fails here, as does a broken link."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from indexlib.cli import build_parser
from indexlib.config import config_schema

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs" / "hooks"))
import reference  # noqa: E402 (docs/hooks/reference.py, the mkdocs hook)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")  # not --quiet: mkdocs 1.6 then counts no warnings and exits 0
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_cli_reference_lists_every_subcommand(site: Path) -> None:
    text = _text(site / "reference" / "cli" / "index.html")
    parser = build_parser()
    commands = next(a.choices for a in parser._actions if a.choices and "build" in a.choices)
    for name, sub in commands.items():
        assert f"skipindex {name}" in text, f"the CLI reference has no section for `skipindex {name}`"
        for action in sub._actions:
            for option in action.option_strings:
                if option != "-h" and option != "--help":
                    assert option in text, f"the CLI reference lacks {option} of `skipindex {name}`"
    assert reference.CLI_MARKER not in (site / "reference" / "cli" / "index.html").read_text()


def test_config_reference_lists_every_section(site: Path) -> None:
    text = _text(site / "reference" / "configuration" / "index.html")
    for section in config_schema():
        assert f"[{section}" in text, f"the configuration reference has no [{section}...] section"
    for key in config_schema()["build"]:
        assert key in text, f"the configuration reference lacks build.{key}"


def test_a_setting_without_help_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    import indexlib.config

    helps = dict(indexlib.config.SETTING_HELP)
    del helps["build.split_bytes"]
    monkeypatch.setattr(indexlib.config, "SETTING_HELP", helps)
    with pytest.raises(ValueError, match="build.split_bytes has no help"):
        reference.config_reference()
