"""The spark-submit entry points: `build_index.py`, `backfill.py`, `verify.py`, each runnable as a file by
spark-submit and as `python -m indexlib.jobs.<name>`. They live in the package so that an installed wheel has them
(the Airflow DAGs submit these files) without a top-level `jobs` package; a checkout's `jobs/*.py` call them."""
