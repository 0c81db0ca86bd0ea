"""The one exception type that means "the user's input is wrong" (exit code 2, one line on stderr)."""


class UserError(Exception):
    """Bad input that the user can fix: unknown table or column, unparsable WHERE, bad config.

    The message is a single line that names the table, column, file or setting at fault.
    """
