"""Pruning: one framework (`evaluator`: evidence answers leaves, one evaluator combines them over the predicate tree)
and its evidence: partition values (`partitions`, with the translation to pyiceberg row filters in `iceberg_filter`),
min/max and counts (`minmax`), the payloads of each index kind (`kinds`). Every rule keeps a container unless it proves
no row matches."""
