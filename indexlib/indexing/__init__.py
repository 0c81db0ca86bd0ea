"""The jobs that write the index: the incremental build (`build`), backfill (`backfill`), compaction and verification
(`upkeep`), the per-file indexer Spark tasks run (`file_indexer`), and the SparkSession (`spark`)."""
