"""`explain`'s note on a column left at min/max says where the setting that buys the structure back goes (the
configuration's `[index.tables."<table>".columns.<column>]` section), and counts files in plain English."""

from __future__ import annotations

import pyarrow as pa
import pytest

from indexlib.config import load_config
from indexlib.indexing.build import build_index
from indexlib.lookup import lookup

ROWS_PER_FILE = 600  # distinct sentences per file: free text (more than 256): n-gram filters, no Bloom filter
NO_KINDS = '[index.tables."db.notes".columns.note]\nkinds = []\n'  # min/max only: nothing answers LIKE either


@pytest.mark.parametrize(
    ("files", "where", "configured", "counted", "rule"),
    [
        (1, "note = 'the report number 7 was filed late'", "", "(the 1 kept indexed file)", "one file: singular"),
        (2, "note = 'the report number 7 was filed late'", "", "(the 2 kept indexed files)", "two files: plural"),
        (1, "note LIKE '%number 7 %'", NO_KINDS, "(the 1 kept indexed file)", "a LIKE names the n-grams' place too"),
    ],
)
def test_the_min_max_note_names_the_section_of_its_setting(conf_path, catalog, files, where, configured, counted, rule):
    data = pa.table({"note": [f"the report number {i} was filed late" for i in range(ROWS_PER_FILE * files)]})
    table = catalog.create_table("db.notes", schema=data.schema)
    for n in range(files):
        table.append(data.slice(n * ROWS_PER_FILE, ROWS_PER_FILE))
    conf_path.write_text(conf_path.read_text() + configured)
    config = load_config(conf_path)
    build_index(config, "db.notes")
    (note,) = lookup(config, "db.notes", where).min_max_only
    assert counted in note, f"{rule}: {note}"
    assert 'kinds = ["' in note and '[index.tables."db.notes".columns.note]' in note, f"{rule}: where it goes: {note}"
    assert "LIKE" not in where or 'kinds = ["ngram"]' in note, f"{rule}: n-gram filters answer LIKE on prose: {note}"
