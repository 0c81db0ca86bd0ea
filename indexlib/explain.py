"""What `skipindex explain` shows of a lookup's answer: the report (`report`: the predicate as parsed and
rewritten, what each leaf reads, each stage's files and parts in and out, the kept files), its summary and JSON
object (docs/reference/cli.md), and the notes on columns the index answers with min/max only (`min_max_notes`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from indexlib.index_kinds.registry import registry
from indexlib.query.model import BoundCompare, BoundIn, Pattern
from indexlib.query.normalize import leaves
from indexlib.query.value_set import value_set
from indexlib.store.table import build_hint

if TYPE_CHECKING:
    from indexlib.index_kinds.base import KindLeaf
    from indexlib.pruning.answers import KeptParts, Stage
    from indexlib.query.model import Expr
    from indexlib.store.key_rows import KeyReads
    from indexlib.store.snapshot import IndexRows


class Answer(Protocol):
    """What explain reads of a lookup's answer (`lookup.LookupResult`)."""

    @property
    def table(self) -> str: ...
    @property
    def where(self) -> str: ...
    @property
    def files(self) -> list[str]: ...
    @property
    def files_total(self) -> int: ...
    @property
    def files_unindexed(self) -> int: ...
    @property
    def all_match(self) -> list[str]: ...
    @property
    def stages(self) -> list[Stage]: ...
    @property
    def unused(self) -> list[str]: ...
    @property
    def partition_fields(self) -> list[str]: ...
    @property
    def has_index(self) -> bool: ...
    @property
    def parts(self) -> dict[str, KeptParts]: ...
    @property
    def key_reads(self) -> KeyReads | None: ...
    @property
    def bound(self) -> Expr | None: ...
    @property
    def parsed(self) -> str: ...
    @property
    def predicate(self) -> str: ...
    @property
    def leaves(self) -> list[tuple[str, str]]: ...
    @property
    def min_max_only(self) -> list[str]: ...
    def kept_parts(self, key: str) -> KeptParts: ...


def report(result: Answer) -> str:
    """What `skipindex explain` prints: the predicate as parsed and rewritten, what each leaf reads, each stage's
    files (and parts: row groups, ...) in and out, and the kept files."""
    out: list[str] = []
    counts = summary(result)
    out.append(f"table      {result.table}")
    if not result.has_index:
        hint = build_hint(result.table)
        out.append(f"index      none: {result.table} was never indexed, so the index stages keep every file; {hint}")
    out.append(f"where      {result.where}")
    out.append(f"parsed     {result.parsed}")
    out.append(f"rewritten  {result.predicate}")
    for note in result.unused or ["(every part of the predicate was used)"]:
        out.append(f"unused     {note}")
    out.append("")
    out.append("leaves (what the min/max and index stages read)")
    for leaf, statistics in result.leaves:
        out.append(f"  {leaf}\n      uses {statistics}")
    for note in result.min_max_only:
        out.append(f"  note: {note}")
    out.append("partition fields (partition stage)")
    for line in result.partition_fields or ["(none: no partition field can prune this predicate)"]:
        out.append(f"  {line}")
    out.append("")
    judged = [kept for kept in result.parts.values() if kept.total]
    unit = judged[0].name if len(judged) == 1 else "parts"  # one kind: its name heads its columns
    width = max(12, *(len(stage.name) + 2 for stage in result.stages))
    header = f"{'stage':<{width}}{'files in':>10}{'files out':>11}"
    out.append(header + (f"{unit + ' in':>{len(unit) + 5}}{unit + ' out':>{len(unit) + 6}}" if judged else ""))
    for stage in result.stages:
        line = f"{stage.name:<{width}}{stage.files_in:>10}{stage.files_out:>11}"
        if stage.parts_in is not None:
            line += f"{stage.parts_in:>{len(unit) + 5}}{stage.parts_out:>{len(unit) + 6}}"
        out.append(line)
    out.append("")
    if result.key_reads is not None:
        read = result.key_reads
        out.append(
            f"key index  read {read.row_groups} row groups ({read.rows} key rows, {read.bytes / 1024:.1f} KiB) "
            f"of {read.data_files} index data files"
        )
    out.append(
        f"files kept {counts['files_kept']} of {counts['files_total']} "
        f"({counts['files_unindexed']} unindexed, {counts['files_all_match']} proven to match on every row)"
    )
    for kept in judged:
        out.append(
            f"{kept.name} kept {sum(map(len, kept.kept.values()))} of {kept.total} in the files judged by them "
            f"({sum(map(len, kept.all_match.values()))} proven to match on every row)"
        )
    for path in result.files:
        listed = [(kept.name, kept.kept[path]) for kept in judged if path in kept.kept]
        out.append(f"  {path}" + "".join(f"  {name} {', '.join(map(str, parts))}" for name, parts in listed))
    return "\n".join(out)


def summary(result: Answer) -> dict[str, Any]:
    return {
        "has_index": result.has_index,
        "files_total": result.files_total,
        "files_kept": len(result.files),
        "files_unindexed": result.files_unindexed,
        "files_all_match": len(result.all_match),
        **{
            name: count
            for key, kept in result.parts.items()
            if kept.total
            for name, count in (
                (f"{key}_total", kept.total),
                (f"{key}_kept", sum(map(len, kept.kept.values()))),
                (f"{key}_all_match", sum(map(len, kept.all_match.values()))),
            )
        },
        "stages": [stage.as_dict() for stage in result.stages],
        **({"key_index_read": asdict(result.key_reads)} if result.key_reads is not None else {}),
    }


def as_json(result: Answer) -> dict[str, Any]:
    """The `explain --json` object (its shape is documented in docs/reference/cli.md)."""
    shown = {"table": result.table, "where": result.where, "files": result.files, "summary": summary(result)}
    row_groups = result.kept_parts("row_groups").kept
    if row_groups:
        shown["row_groups"] = {path: list(groups) for path, groups in row_groups.items()}
    return shown


def min_max_notes(result: Answer, rows: IndexRows | None) -> list[str]:
    """For explain: per column an `=`, `IN` or pattern leaf of the predicate names, where no kept indexed file
    holds a structure that answers it (no payload of a kind that answers the leaf, and, for `=`, not keyed), one
    line saying so and what buys it (docs/index-kinds.md, "What each rule gives up"). Reads only what the lookup
    read: the bounds of the named columns and the payloads of the kept files (the payload stages read them for files
    that reached them)."""
    if rows is None or result.bound is None or not result.files:
        return []
    named: dict[int, tuple[Any, dict[str, list[KindLeaf]]]] = {}  # field id -> (column, {"=" / "LIKE": leaves})
    for leaf in leaves(result.bound):
        asks = isinstance(leaf, (BoundIn, Pattern)) or (isinstance(leaf, BoundCompare) and leaf.op in ("=", "!="))
        # (a Pattern of a computed value names no column)
        if asks and isinstance(leaf, (BoundIn, Pattern, BoundCompare)) and hasattr(leaf.column, "field_id"):
            kind_leaf = leaf if isinstance(leaf, Pattern) else value_set(leaf)  # as the kinds are asked
            what = "LIKE" if isinstance(leaf, Pattern) else "="
            named.setdefault(leaf.column.field_id, (leaf.column, {}))[1].setdefault(what, []).append(kind_leaf or leaf)
    kinds = registry()
    notes = []
    kept = pa.array(result.files, pa.string())
    for field_id, (column, asked) in named.items():
        bounds = rows.columns([field_id])
        bounds = bounds.filter(pc.is_in(bounds.column("file_path"), value_set=kept))
        if not bounds.num_rows:
            continue  # no kept file is indexed: "unindexed" says it
        keyed = "keyed" in bounds.column_names and pc.any(pc.fill_null(bounds.column("keyed"), False)).as_py()
        payloads = pc.list_flatten(rows.payloads(field_id, kept).column("indexes"))
        held = {kinds[name] for name in pc.unique(pc.struct_field(payloads, "kind")).to_pylist() if name in kinds}
        unanswered = {
            what
            for what, asked_leaves in asked.items()
            if not (keyed and what == "=") and not any(kind.answers(leaf) for kind in held for leaf in asked_leaves)
        }
        if not unanswered:
            continue
        what = _GIVEN_UP.get(type(column.type).__name__, "no keys indexed")
        section = f'[index.tables."{result.table}".columns.{column.name}]'  # in the configuration file
        advice = []
        if "=" in unanswered:
            named_kinds = ", ".join(f'"{name}"' for name in sorted({"bloom", *(kind.name for kind in held)}))
            advice.append(f"set kinds = [{named_kinds}] in {section} of the configuration to answer `=`")
        if "LIKE" in unanswered:
            advice.append(
                f'n-gram filters answer LIKE on free text (kinds = ["ngram"] in {section}; the automatic choice '
                "gives them to prose, and skipindex backfill rebuilds entries built before it did), an automaton "
                'answers it on tags (kinds = ["automaton"])'
            )
        n = bounds.num_rows
        notes.append(
            f"{column.name}: min/max only: {what} (the {n} kept indexed file{'s' * (n != 1)}); {'; '.join(advice)}"
        )
    return notes


_GIVEN_UP = {  # why the automatic choice leaves a column of this type at min/max (docs/index-kinds.md)
    "StringType": "free text, or one value per file",
    "IntegerType": "values fill over half their span, or one value per file",
    "LongType": "values fill over half their span, or one value per file",
    "DateType": "values fill over half their span, or one value per file",
    "FloatType": "a measure",
    "DoubleType": "a measure",
    "DecimalType": "a measure, or values fill over half their span",
    "BooleanType": "min/max answers it",
}
