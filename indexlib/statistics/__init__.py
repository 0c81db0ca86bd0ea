"""Statistics: what is known about each data file's columns, behind one interface the pruning rules read.

`provider.StatisticsProvider` is the interface (as DataFusion's PruningStatistics); `verdict.Verdict` is the answer
every rule gives. Providers: the index entries (`indexlib.store.entries`) and a source's partition values
(`partition_values`). `column_stats` computes and serialises per-file bounds and counts, `canonical` the keys that
Bloom filters and sketches hash, `sketches` the NDV sketches, `temporal` the one conversion of date/time units.
"""
