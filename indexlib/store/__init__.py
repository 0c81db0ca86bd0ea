"""The index store: the index-table layout declared once (`schema`), the table and its commit protocol (`table`), and
the reader that turns entries into statistics (`entries`)."""
