"""The query language: the predicate model (`model`), one visitor base (`visitor`), NOT push-down and NULL folding
(`normalize`), the SQL front end (`sql`), exact arithmetic against floating point (`approximate`), binding to a table
schema (`binding`), string patterns (`patterns`) and the equality shapes index kinds answer (`value_set`)."""
