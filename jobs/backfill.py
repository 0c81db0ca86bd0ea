"""`spark-submit jobs/backfill.py ...` in a checkout: the job is indexlib/jobs/backfill.py, which the package ships."""

import sys

from indexlib.jobs.backfill import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
