"""The docs site (mkdocs.yml) builds strict, and its generated references cover the code: every `skipindex`
subcommand of the argument parser has its section on the CLI page, and every section of the configuration's schema
has its own on the configuration page. A new command or setting without docs fails here, as does a broken link.
What a reader pastes is checked against the code: every TOML block is a configuration the loader accepts, every
`skipindex` command line one the parser accepts, every Python block parses and its imports of indexlib resolve
(tests/test_docs_examples.py runs the Python blocks against real tables)."""

from __future__ import annotations

import ast
import html
import os
import re
import shlex
import subprocess
import sys
import textwrap
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
    from indexlib.config import BuildSettings

    monkeypatch.setattr(BuildSettings.model_fields["split_bytes"], "description", None)
    with pytest.raises(ValueError, match="build.split_bytes has no help"):
        reference.config_reference()


# What a reader pastes from the docs ------------------------------------------------------------------------------

PAGES = sorted((REPO / "docs").rglob("*.md"))
COMMAND = re.compile(
    r"^\s*(?:\S*/)?skipindex ((?:build|backfill|explain|stats|compact|verify|expire|serve|demo)\b.*)$", re.M
)


def _blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, text) of every fenced code block in `language` on the site's pages."""
    fence = re.compile(rf"^ *```{language}\n(.*?)^ *```", re.M | re.S)
    return [
        (f"{page.relative_to(REPO)}:{page.read_text()[: m.start()].count(chr(10)) + 1}", textwrap.dedent(m.group(1)))
        for page in PAGES
        for m in fence.finditer(page.read_text())
    ]


def test_every_toml_block_is_a_configuration_the_loader_accepts(tmp_path: Path) -> None:
    """A block showing part of a configuration is read with a minimal [catalog] added: every key and value in it
    must be one `load_config` accepts (a renamed or removed setting fails here)."""
    from indexlib.config import load_config

    blocks = [(where, text) for where, text in _blocks("toml") if not re.search(r"^\[(project|tool)\b", text, re.M)]
    assert len(blocks) >= 10, "the docs show their configurations in ```toml blocks (pyproject.toml's aside)"
    for where, text in blocks:
        conf = tmp_path / "block.toml"
        catalog = "" if re.search(r"^\[catalog\]", text, re.M) else '[catalog]\nname = "c"\nuri = "sqlite://"\n'
        conf.write_text(catalog + text)
        try:
            load_config(conf)
        except Exception as exc:  # the message names the block
            pytest.fail(f"{where}: the configuration shown is refused: {exc}")


def test_every_command_line_shown_is_one_the_parser_accepts() -> None:
    parser = build_parser()
    lines = [(page, m.group(1)) for page in PAGES for m in COMMAND.finditer(page.read_text())]
    assert len(lines) >= 5, "the getting-started pages show skipindex command lines"
    for page, line in lines:
        command = re.sub(r"\s*&\s*$", "", re.split(r"\s+#\s", line)[0])  # a trailing `&` runs it in the background
        try:
            parser.parse_args(shlex.split(command))
        except SystemExit:
            pytest.fail(f"{page.relative_to(REPO)}: `skipindex {command}` is refused by the argument parser")


def test_every_python_block_compiles_and_its_imports_of_indexlib_resolve() -> None:
    """The imports are run: a documented module or name that moved fails here (the rest needs the reader's tables)."""
    blocks = _blocks("python")
    assert len(blocks) >= 5, "the docs show Python in ```python blocks"
    for where, text in blocks:
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            pytest.fail(f"{where}: a Python block that does not parse: {exc}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(name.split(".")[0] == "indexlib" for name in names):
                    try:
                        exec(compile(ast.Module([node], []), where, "exec"), {})  # noqa: S102 (the docs' own import)
                    except ImportError as exc:
                        pytest.fail(f"{where}: {ast.unparse(node)} fails: {exc}")
