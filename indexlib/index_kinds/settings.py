"""Index settings (conf `[index]`, per table, per column): `kinds`, which overrides the automatic choice (`["bloom"]`,
`["automaton"]`, both, or `[]` for min/max only), `row_group_kinds`, the same for the payloads of row-group entries
(default: as `kinds`), `key_index` (true / false; unset: the automatic choice, indexing/key_index.py), whether the
column's values go into the table's global key index, plus the settings each kind declares for itself (`Setting`).

Min/max, null and NaN counts, the exact distinct count and an NDV sketch are kept for every column whatever the
settings; each kind decides on its own whether a column of a file gets it (`IndexKind.wanted`, in the kind's module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import FrozenInstanceError, dataclass
from types import MappingProxyType
from typing import Any

from indexlib.index_kinds.loading import loaded_kinds


@dataclass(frozen=True)
class Setting:
    """One setting a kind declares: its TOML name, default, a check returning the value or raising ValueError
    (the message says what was expected; the caller names where), and one line saying what it sets (the docs'
    configuration reference shows it; a setting without one fails the docs build)."""

    name: str
    default: Any
    check: Callable[[Any], Any]
    help: str = ""


def fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"expected a number between 0 and 1, got {value!r}")
    return float(value)


def positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:  # NaN is not > 0
        raise ValueError(f"expected a number > 0, got {value!r}")
    return float(value)


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected an integer >= 1, got {value!r}")
    return value


class IndexSettings:
    """The settings of one column: `kinds` (None: each kind's automatic choice) and the values set for the kinds'
    settings; a kind reads its own with `value(setting)`, which falls back to the setting's default. Immutable and
    hashable; equal when every registered setting reads the same (a value set to its default equals one not set).

    Values must name a setting some registered kind declares (TypeError otherwise, as a typo would be): checked
    against the registry, loaded on the first check, so do not build an IndexSettings with values while a kind's
    module is being imported."""

    __slots__ = ("key_index", "kinds", "row_group_kinds", "values")
    kinds: tuple[str, ...] | None
    row_group_kinds: tuple[str, ...] | None
    key_index: bool | None
    values: Mapping[str, Any]

    def __init__(
        self,
        kinds: Iterable[str] | None = None,
        row_group_kinds: Iterable[str] | None = None,
        key_index: bool | None = None,
        **values: Any,
    ) -> None:
        declared = declared_settings() if values else {}
        for name in values:
            if name not in declared:
                raise TypeError(f"IndexSettings.__init__() got an unexpected keyword argument {name!r}")
        object.__setattr__(self, "kinds", None if kinds is None else tuple(kinds))
        object.__setattr__(self, "row_group_kinds", None if row_group_kinds is None else tuple(row_group_kinds))
        object.__setattr__(self, "key_index", key_index)
        object.__setattr__(self, "values", MappingProxyType(dict(values)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def value(self, setting: Setting) -> Any:
        return self.values.get(setting.name, setting.default)

    def updated(
        self,
        kinds: Iterable[str] | None = None,
        row_group_kinds: Iterable[str] | None = None,
        key_index: bool | None = None,
        **values: Any,
    ) -> IndexSettings:
        return IndexSettings(
            self.kinds if kinds is None else kinds,
            self.row_group_kinds if row_group_kinds is None else row_group_kinds,
            self.key_index if key_index is None else key_index,
            **{**self.values, **values},
        )

    def for_row_groups(self) -> IndexSettings:
        """The settings row-group payloads are chosen and built with: `row_group_kinds` as their `kinds`."""
        if self.row_group_kinds is None:
            return self
        return IndexSettings(self.row_group_kinds, key_index=self.key_index, **self.values)

    def to_json(self) -> dict[str, Any]:
        """`kinds` and every registered setting with its value (defaults included), so equal settings give equal
        text: `{"kinds": null, "bloom_fpp": 0.01, "automaton_max_ndv": 256, ...}` (part of the configuration
        version, see indexing/file_indexer.py `config_version`); `row_group_kinds` and `key_index` only when set,
        so settings written before they existed keep their text. The settings of an opt-in or late kind
        (`IndexKind.opt_in`, `IndexKind.late`) only where the column may get the kind (`IndexKind.may_build`) or these
        settings set one of them, so registering such a kind leaves the text of other columns' settings as it was."""
        kinds = None if self.kinds is None else list(self.kinds)
        counted = {
            setting.name: setting for kind in loaded_kinds() if kind.may_build(self) for setting in kind.settings
        }
        counted |= {name: setting for name, setting in declared_settings().items() if name in self.values}
        shown = {"kinds": kinds, **{name: self.value(setting) for name, setting in sorted(counted.items())}}
        if self.row_group_kinds is not None:
            shown["row_group_kinds"] = list(self.row_group_kinds)
        if self.key_index is not None:
            shown["key_index"] = self.key_index
        return shown

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexSettings:
        return cls(**data)

    def _key(self) -> tuple[Any, ...]:
        return (
            self.kinds,
            self.row_group_kinds,
            self.key_index,
            tuple(sorted((name, self.value(setting)) for name, setting in declared_settings().items())),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexSettings) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, ...]:  # pickle and copy: the frozen attributes are set by __init__ only
        return _restore, (self.kinds, self.row_group_kinds, self.key_index, dict(self.values))

    def __repr__(self) -> str:
        values = "".join(f", {name}={value!r}" for name, value in sorted(self.values.items()))
        groups = "" if self.row_group_kinds is None else f", row_group_kinds={self.row_group_kinds!r}"
        keyed = "" if self.key_index is None else f", key_index={self.key_index!r}"
        return f"IndexSettings(kinds={self.kinds!r}{groups}{keyed}{values})"


def _restore(
    kinds: tuple[str, ...] | None,
    row_group_kinds: tuple[str, ...] | None,
    key_index: bool | None,
    values: dict[str, Any],
) -> IndexSettings:
    return IndexSettings(kinds, row_group_kinds, key_index, **values)


def declared_settings() -> dict[str, Setting]:
    """Every setting a registered kind declares, by name."""
    return {setting.name: setting for kind in loaded_kinds() for setting in kind.settings}
