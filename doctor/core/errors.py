"""How a run ends: the exit codes, and the errors that end it with a one-line message."""

# Exit codes (documented in the README): findings at or above --fail-on give EXIT_FINDINGS.
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input from the user (flag, hostfile, capture folder): exit 2, one line, no traceback."""


class NodeUnavailable(Exception):
    """This node's facts could not be had (the probe failed): exit 3 with the reason."""


class PluginError(Exception):
    """A check plugin could not be loaded or declares something invalid: exit 3, naming it."""
