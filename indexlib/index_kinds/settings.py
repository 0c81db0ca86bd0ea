"""Index settings (conf `[index]`, per table, per column): `kinds`, which overrides the automatic choice (`["bloom"]`,
`["automaton"]`, both, or `[]` for min/max only), plus the settings each kind declares for itself (`Setting`).

Min/max, null and NaN counts, the exact distinct count and an NDV sketch are kept for every column whatever the
settings; each kind decides on its own whether a column of a file gets it (`IndexKind.wanted`, in the kind's module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One setting a kind declares: its TOML name, default, and a check returning the value or raising ValueError
    (the message says what was expected; the caller names where)."""

    name: str
    default: Any
    check: Callable[[Any], Any]


def fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"expected a number between 0 and 1, got {value!r}")
    return float(value)


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected an integer >= 1, got {value!r}")
    return value


class IndexSettings:
    """The settings of one column: `kinds` (None: each kind's automatic choice) and the values set for the kinds'
    settings; a kind reads its own with `value(setting)`, which falls back to the setting's default."""

    def __init__(self, kinds: Iterable[str] | None = None, **values: Any) -> None:
        self.kinds = None if kinds is None else tuple(kinds)
        self.values = dict(values)

    def value(self, setting: Setting) -> Any:
        return self.values.get(setting.name, setting.default)

    def updated(self, kinds: Iterable[str] | None = None, **values: Any) -> IndexSettings:
        return IndexSettings(self.kinds if kinds is None else kinds, **{**self.values, **values})

    def to_json(self, declared: Iterable[Setting]) -> dict[str, Any]:
        """Every declared setting with its value (defaults included), so equal settings give equal text."""
        return {"kinds": None if self.kinds is None else list(self.kinds), **{s.name: self.value(s) for s in declared}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexSettings:
        return cls(**data)

    def _key(self) -> tuple[Any, ...]:
        return self.kinds, tuple(sorted(self.values.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexSettings) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        values = "".join(f", {k}={v!r}" for k, v in sorted(self.values.items()))
        return f"IndexSettings(kinds={self.kinds!r}{values})"
