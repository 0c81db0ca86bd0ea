"""The kinds of failure skipindex raises on purpose, and what each means to a caller, said once here: the command
line's exit code (cli.py), the REST service's status and ErrorModel type (service/errors.py), and whether running
the same thing again can succeed (the Airflow tasks retry only those). Every message is a single line that names
the table, column, file or setting at fault.

Anything else that escapes is a bug or an outage: the command line prints its traceback and exits 1, the service
answers 500 "internal error".
"""

from __future__ import annotations

from typing import ClassVar


class SkipIndexError(Exception):
    """A failure of a known kind (the subclasses); not raised itself."""

    exit_code: ClassVar[int] = 1
    http_status: ClassVar[int] = 500
    rest_type: ClassVar[str] = "InternalServerError"
    retryable: ClassVar[bool] = False


class UserError(SkipIndexError):
    """Bad input the user can fix: an unknown table or column, an unparsable WHERE, a bad setting or argument, a
    path that holds no table."""

    exit_code = 2
    http_status = 400
    rest_type = "BadRequestException"


class UnsupportedFeature(UserError):
    """The table uses something this reader cannot read exactly (an equality delete on a nested column, deletion
    vectors of a table delta-rs cannot list, a LIKE no engine here evaluates as asked): refused rather than answered
    wrongly. The fix is on the table (compact it) or the choice of reader, which the message names."""

    exit_code = 3
    http_status = 501
    rest_type = "NotImplementedException"


class BuildFailed(SkipIndexError):
    """A build could not index a data file (unreadable, corrupt, missing) with `on_unreadable_file = "fail"`.
    Nothing was committed; the message names the file."""

    exit_code = 4


class JobFailed(SkipIndexError):
    """The build's Spark job (or the same task run in this process) failed as a whole, not on one file: an executor
    lost, a worker killed, the cluster gone. Nothing was committed; running it again may succeed."""

    exit_code = 5
    retryable = True


class CommitConflict(SkipIndexError):
    """Other writers kept committing to the index table (or kept moving its watermark) through every retry: nothing
    of this run was committed, and running it again later is safe."""

    exit_code = 75  # EX_TEMPFAIL (sysexits.h): a temporary failure, the caller is invited to retry
    http_status = 409
    rest_type = "CommitFailedException"
    retryable = True


class Unavailable(SkipIndexError):
    """The catalog or the storage kept failing through every retry (an outage: refused connections, a catalog held
    locked, I/O errors); nothing of this run was committed, and running it again once they are back is safe."""

    exit_code = 69  # EX_UNAVAILABLE (sysexits.h): a service this needs is unavailable
    http_status = 503
    rest_type = "ServiceUnavailableException"
    retryable = True
