"""Index verification, for spark-submit or `python -m jobs.verify`.

    spark-submit jobs/verify.py --conf conf/local.toml --table tpch.lineitem --sample 20

Same as `skipindex verify`: exits 1 when a sampled entry is stale, so a scheduler's task fails.
"""

import sys

from indexlib.cli import main

if __name__ == "__main__":
    sys.exit(main(["verify", *sys.argv[1:]]))
