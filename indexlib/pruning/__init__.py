"""Pruning: the min/max rules and the combination of index kinds (`minmax`), the partition stage (`partitions`) and
the translation to pyiceberg row filters (`iceberg_filter`). Every rule keeps a file unless it proves no row matches."""
