"""`spark-submit jobs/verify.py ...` in a checkout: the job is indexlib/jobs/verify.py, which the package ships."""

import sys

from indexlib.jobs.verify import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
