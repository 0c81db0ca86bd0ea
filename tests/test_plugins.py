"""One rule for every entry-point group (indexlib/plugins.py): the built-in entries first, then the plug-ins by name;
a plug-in may not replace a built-in; one name registered twice with two values is one error naming both
distributions. Each group's reader (`formats()`, `targets()`, `part_kinds()`, `loaded_kinds()`) follows it.

Plug-ins here are real installed distributions: a `.dist-info` folder (METADATA and entry_points.txt) on sys.path,
found by importlib.metadata as pip's installs are, whose entry points name the test suite's toy format, container,
index kind and scan target.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from indexlib import plugins
from indexlib.errors import UserError
from indexlib.index_kinds import loading
from indexlib.scans import scan as scan_module
from indexlib.sources import registry
from indexlib.store import containers


def kept_count(scan: Any) -> int:
    """A toy scan target."""
    return len(scan.plan_files())


# (group, the built-in entries, the group's reader: the names it has, a plug-in there as `name = value`)
GROUPS: list[tuple[str, dict[str, str], Callable[[], list[str]], str]] = [
    ("skipindex.formats", registry.BUILT_IN, lambda: list(registry.formats()), "toy = toy_format:FORMAT"),
    (
        "skipindex.scan_targets",
        scan_module.BUILT_IN,
        lambda: list(scan_module.targets()),
        f"paths = {__name__}:kept_count",
    ),
    (
        "skipindex.containers",
        containers.BUILT_IN,
        lambda: list(containers.part_kinds()),
        "footer_row_groups = toy_container:FOOTER_ROW_GROUPS",
    ),
    (
        "skipindex.index_kinds",
        loading.BUILT_IN,
        lambda: [kind.name for kind in loading.loaded_kinds()],
        "toy = test_kind_registry:ToyIndex",
    ),
]
READERS = (registry.formats, scan_module.targets, containers.part_kinds, loading.loaded_kinds)


@pytest.fixture(autouse=True)
def _fresh_readers():
    for reader in READERS:
        reader.cache_clear()
    yield
    for reader in READERS:
        reader.cache_clear()


@pytest.fixture
def install(tmp_path: Path, monkeypatch) -> Callable[[str, str, str, str], None]:
    """Installs a distribution `dist` whose entry point `name = value` is in `group` (a .dist-info on sys.path)."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def installed(dist: str, group: str, name: str, value: str) -> None:
        info = tmp_path / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")

    return installed


def test_every_group_is_registered_by_the_package_and_names_its_readers() -> None:
    assert tuple(group for group, *_ in GROUPS) == plugins.GROUPS, "every group the package reads is tested here"
    from importlib.metadata import entry_points

    for group, built_in, _, _ in GROUPS:
        registered = {point.name: point.value for point in entry_points(group=group)}
        assert registered == built_in, f"{group}: pyproject.toml registers exactly the built-in entries (reinstall)"


@pytest.mark.parametrize(("group", "built_in", "names", "value"), GROUPS, ids=[g for g, *_ in GROUPS])
def test_the_built_in_entries_are_there_without_package_metadata(monkeypatch, group, built_in, names, value) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])  # a checkout on sys.path, not installed
    assert sorted(names()) == sorted(built_in), f"{group}: the built-in entries, loaded from the package itself"
    assert list(plugins.load(group, built_in)) == list(built_in), f"{group}: in their order"


@pytest.mark.parametrize(("group", "built_in", "names", "value"), GROUPS, ids=[g for g, *_ in GROUPS])
def test_a_plugin_comes_after_the_built_in_entries(install, group, built_in, names, value) -> None:
    name, value = value.split(" = ")
    install("acme-plugins", group, name, value)
    loaded = plugins.load(group, built_in)
    assert list(loaded) == [*built_in, name], f"{group}: the built-in entries first, then the plug-in"
    assert sorted(names()) == sorted([*built_in, name]), f"{group}: its reader has the built-in entries and the plug-in"


@pytest.mark.parametrize(("group", "built_in", "names", "value"), GROUPS, ids=[g for g, *_ in GROUPS])
def test_a_plugin_may_not_replace_a_built_in_entry(install, group, built_in, names, value) -> None:
    taken = next(iter(built_in))
    install("acme-plugins", group, taken, value.split(" = ")[1])
    expected = rf"^plug-in '{taken}' of distribution 'acme-plugins' in {group}: a plug-in may not replace the built-in"
    with pytest.raises(UserError, match=expected):
        names()


@pytest.mark.parametrize(("group", "built_in", "names", "value"), GROUPS, ids=[g for g, *_ in GROUPS])
def test_one_name_registered_twice_is_one_error_naming_both_distributions(
    install, group, built_in, names, value
) -> None:
    name, value = value.split(" = ")
    install("acme-plugins", group, name, value)
    install(
        "other-plugins", group, name, "toy_format:FORMAT" if value != "toy_format:FORMAT" else f"{__name__}:kept_count"
    )
    with pytest.raises(UserError) as raised:
        names()
    message = str(raised.value)
    assert "\n" not in message and f"plug-in '{name}' in {group} is registered twice" in message, message
    assert "'acme-plugins'" in message and "'other-plugins'" in message, f"both distributions named: {message}"


@pytest.mark.parametrize(("group", "built_in", "names", "value"), GROUPS, ids=[g for g, *_ in GROUPS])
def test_the_same_entry_registered_twice_is_one_entry(install, group, built_in, names, value) -> None:
    name, value = value.split(" = ")
    install("acme-plugins", group, name, value)
    install("acme-plugins-copy", group, name, value)
    assert list(plugins.load(group, built_in)) == [*built_in, name], f"{group}: one entry"


def test_a_plugin_that_cannot_be_imported_is_one_line_naming_it(install) -> None:
    install("acme-plugins", "skipindex.scan_targets", "broken", "no_such_module_here:target")
    match = r"^skipindex\.scan_targets entry 'broken' of distribution 'acme-plugins': cannot load no_such_module_here"
    with pytest.raises(UserError, match=match):
        scan_module.targets()
