"""Incremental index build, for spark-submit or `python -m jobs.build_index`.

    spark-submit jobs/build_index.py --conf conf/local.toml --table tpch.lineitem

Same as `skipindex build`; under spark-submit the cluster's master and options win over `[spark]`.
"""

import sys

from indexlib.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
