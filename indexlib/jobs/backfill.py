"""Backfill of old partitions, for spark-submit or `python -m indexlib.jobs.backfill`.

    spark-submit jobs/backfill.py --conf conf/local.toml --table tpch.lineitem --where "l_shipdate < DATE '1995-01-01'"

(`jobs/backfill.py` in a checkout; from an installed wheel, this file: `python -c "import indexlib.jobs.backfill as j;
print(j.__file__)"`.) Same as `skipindex backfill`; rerun it after a crash and it continues where the last commit left off.
"""

import sys
from collections.abc import Sequence

from indexlib.cli import main as cli_main


def main(argv: Sequence[str]) -> int:
    return cli_main(["backfill", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
