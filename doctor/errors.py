"""Errors that end a run with a one-line message."""


class UsageError(Exception):
    """Bad input from the user (flag, hostfile, capture folder): exit 2, one line, no traceback."""


class NodeUnavailable(Exception):
    """This node's facts could not be had (the probe failed): exit 3 with the reason."""
