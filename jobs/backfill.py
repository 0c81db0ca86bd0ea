"""Backfill of old partitions, for spark-submit or `python -m jobs.backfill`.

    spark-submit jobs/backfill.py --conf conf/local.toml --table tpch.lineitem --where "l_shipdate < DATE '1995-01-01'"

Same as `skipindex backfill`; rerun it after a crash and it continues where the last commit left off.
"""

import sys

from indexlib.cli import main

if __name__ == "__main__":
    sys.exit(main(["backfill", *sys.argv[1:]]))
