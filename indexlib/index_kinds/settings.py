"""Which index kinds a column gets in one file: the settings (conf `[index]`, per table, per column) and the
automatic choice.

Min/max, null and NaN counts, the exact distinct count and an NDV sketch are kept for every column. On top:

* automaton: string columns with at most `automaton_max_ndv` distinct values in the file (tags: service, host,
  status). The automaton is exact when it fits its budget; trimmed (a superset) otherwise.
* bloom: every other column with keys (canonical.py), except where it cannot prune more than what is stored anyway:
  - booleans, and files where the column has fewer than 2 distinct values (min = max already answers `=` exactly);
  - integer, date and decimal columns whose distinct values fill the whole [min, max] range (every value in range is
    present, so no absent value can be found inside the bounds);
  - string columns whose automaton is exact (it answers `=` and IN exactly, and much more).

`kinds` set for a column overrides the choice: `["bloom"]`, `["automaton"]`, both, or `[]` for min/max only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pyiceberg.types import BooleanType, DateType, DecimalType, IcebergType, IntegerType, LongType, StringType

from indexlib.statistics.canonical import has_keys

KIND_NAMES = ("bloom", "automaton")


@dataclass(frozen=True)
class IndexSettings:
    kinds: tuple[str, ...] | None = None  # None: automatic choice
    bloom_fpp: float = 0.01
    automaton_max_ndv: int = 256
    automaton_max_states: int = 256
    automaton_max_bytes: int = 2048

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexSettings:
        kinds = data.get("kinds")
        return cls(**{**data, "kinds": None if kinds is None else tuple(kinds)})


SETTING_NAMES = tuple(f.name for f in fields(IndexSettings))


def parse_settings(raw: dict[str, Any], base: IndexSettings, where: str) -> IndexSettings:
    """`base` updated with the settings in `raw`; ValueError naming `where` and the setting on bad input."""
    updates: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in SETTING_NAMES:
            raise ValueError(f"{where}.{name}: unknown setting (expected one of {', '.join(SETTING_NAMES)})")
        if name == "kinds":
            if not isinstance(value, list) or any(kind not in KIND_NAMES for kind in value):
                raise ValueError(f"{where}.kinds: expected a list of {KIND_NAMES}, got {value!r}")
            updates[name] = tuple(dict.fromkeys(value))
        elif name == "bloom_fpp":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ValueError(f"{where}.bloom_fpp: expected a number between 0 and 1, got {value!r}")
            updates[name] = float(value)
        else:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}.{name}: expected an integer >= 1, got {value!r}")
            updates[name] = value
    return replace(base, **updates)


def can_build(kind: str, iceberg_type: IcebergType) -> bool:
    if kind == "automaton":
        return isinstance(iceberg_type, StringType)
    return has_keys(iceberg_type)


def wants_automaton(settings: IndexSettings, iceberg_type: IcebergType, distinct_count: int) -> bool:
    if settings.kinds is not None:
        return "automaton" in settings.kinds and can_build("automaton", iceberg_type) and distinct_count > 0
    return isinstance(iceberg_type, StringType) and 0 < distinct_count <= settings.automaton_max_ndv


def wants_bloom(settings: IndexSettings, iceberg_type: IcebergType, keys: list[str], exact_automaton: bool) -> bool:
    if settings.kinds is not None:
        return "bloom" in settings.kinds and can_build("bloom", iceberg_type) and len(keys) > 0
    if isinstance(iceberg_type, BooleanType) or len(keys) < 2 or exact_automaton:
        return False
    if isinstance(iceberg_type, (IntegerType, LongType, DateType, DecimalType)):
        integers = [int(key) for key in keys]
        return max(integers) - min(integers) + 1 > len(integers)  # some value inside the bounds is absent
    return True
