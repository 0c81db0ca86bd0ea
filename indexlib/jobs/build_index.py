"""Incremental index build, for spark-submit or `python -m indexlib.jobs.build_index`.

    spark-submit jobs/build_index.py --conf conf/local.toml --table tpch.lineitem

(`jobs/build_index.py` in a checkout; from an installed wheel, this file: `python -c "import indexlib.jobs.build_index as j;
print(j.__file__)"`.) Same as `skipindex build`; under spark-submit the cluster's master and options win over `[spark]`.
"""

import sys
from collections.abc import Sequence

from indexlib.cli import main as cli_main


def main(argv: Sequence[str]) -> int:
    return cli_main(["build", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
