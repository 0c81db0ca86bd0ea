"""Index verification, for spark-submit or `python -m indexlib.jobs.verify`.

    spark-submit jobs/verify.py --conf conf/local.toml --table tpch.lineitem --sample 20

(`jobs/verify.py` in a checkout; from an installed wheel, this file: `python -c "import indexlib.jobs.verify as j;
print(j.__file__)"`.) Same as `skipindex verify`: exits 1 when a sampled entry is stale, so a scheduler's task fails.
"""

import sys
from collections.abc import Sequence

from indexlib.cli import main as cli_main


def main(argv: Sequence[str]) -> int:
    return cli_main(["verify", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
