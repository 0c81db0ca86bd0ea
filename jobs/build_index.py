"""`spark-submit jobs/build_index.py ...` in a checkout: the job is indexlib/jobs/build_index.py, which the package ships."""

import sys

from indexlib.jobs.build_index import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
