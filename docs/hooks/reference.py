"""mkdocs hook: the CLI and configuration references, generated from the code at build time.

A page holding `<!-- skipindex:cli-reference -->` gets every `skipindex` command with its usage and options, read
from `indexlib.cli.build_parser()`; one holding `<!-- skipindex:config-reference -->` gets every section and setting
of `indexlib.config.config_schema()`, each with its default (`indexlib.config.setting_defaults()`, read off the
configuration's section models, and the index kinds' `Setting`s) and its one line of help (its field's
`description`, `indexlib.config.setting_help()`; an index kind's setting: its `Setting.help`). A setting without help fails the build, so a new command or setting
cannot ship undocumented.
"""

from __future__ import annotations

import argparse
from typing import Any

CLI_MARKER = "<!-- skipindex:cli-reference -->"
CONFIG_MARKER = "<!-- skipindex:config-reference -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, config_reference())
    return markdown


def _cell(text: str) -> str:
    """Text as one Markdown table cell: pipes escaped, lines joined."""
    return " ".join(text.split()).replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_row(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.dest}`"
    if action.nargs != 0 and action.option_strings:
        names += f" `{action.metavar or action.dest.upper()}`"
    help_text = action.help % {"default": action.default, "prog": parser.prog} if action.help else ""
    if action.required:
        help_text += " (required)"
    if isinstance(action, argparse._AppendAction) and "repeatable" not in help_text:
        help_text += " (repeatable)"
    return f"| {names} | {_cell(help_text)} |"


def cli_reference() -> str:
    """Markdown for every subcommand of `skipindex`: a heading, its description, its usage and an options table."""
    from indexlib.cli import build_parser

    parser = build_parser()
    out = [f"`skipindex` — {parser.description}", ""]
    for name, sub in _subcommands(parser).items():
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        out += [f"### `skipindex {name}`", "", sub.description or "", "", "```text", usage, "```", ""]
        out += ["| option | what it does |", "| --- | --- |"]
        out += [_option_row(a, sub) for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        out.append("")
    return "\n".join(out)


def _defaults() -> dict[str, Any]:
    """The default of each setting, by dotted key, as the loader fills it in when the file leaves the key out."""
    from indexlib.config import setting_defaults
    from indexlib.index_kinds.registry import declared_settings

    found = setting_defaults()  # read off the configuration's section models
    row_groups = found["index.row_groups"]  # as the TOML file writes it: true, false or "auto"
    found["index.row_groups"] = {"true": True, "false": False}.get(row_groups, row_groups)
    for name, setting in declared_settings().items():
        found[f"index.{name}"] = setting.default
    return found


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _help(dotted: str) -> str:
    from indexlib.config import setting_help

    text = setting_help().get(dotted)
    if not text:
        raise ValueError(
            f"configuration reference: {dotted} has no help (its field's description in indexlib/config.py)"
        )
    return text


def config_reference() -> str:
    """Markdown for every section of the configuration: its TOML header, its help, and a table of its settings."""
    from indexlib.config import config_schema

    defaults = _defaults()
    out: list[str] = []

    def section(path: tuple[str, ...], shape: Any) -> None:
        dotted = ".".join(path)
        rows = [key for key, value in shape.items() if value is None] if isinstance(shape, dict) else []
        if shape == "properties" or rows:
            out.extend([f"### `[{_toml_header(path)}]`", "", _help(dotted.removesuffix(".*")), ""])
        if shape == "properties":
            out.extend(["An open table of properties: any key, passed on unchanged (quote keys with dots).", ""])
            return
        if rows:
            out.extend(["| setting | default | what it sets |", "| --- | --- | --- |"])
            for key in rows:
                full = f"{dotted}.{key}"
                if ".tables.*" in full:
                    default = "as in the enclosing section"
                elif ".builds.*" in full:
                    default = "unset"
                else:
                    default = _shown(defaults.get(full))
                out.append(f"| `{key}` | {default} | {_cell(_help(full))} |")
            out.append("")
        for key, value in shape.items():
            if value is not None:
                section((*path, key), value)

    for key, value in config_schema().items():
        section((key,), value)
    return "\n".join(out)


def _toml_header(path: tuple[str, ...]) -> str:
    """A section's TOML header, a name written as a placeholder: `index.tables."<table>".columns.<column>`."""
    parts, names = [], iter(("<table>", "<column>"))
    for i, part in enumerate(path):
        if part != "*":
            parts.append(part)
        elif path[i - 1] == "builds":
            parts.append('"<table>"')
        else:
            parts.append(f'"{next(names)}"' if path[i - 1] == "tables" else next(names))
    return ".".join(parts)
