"""Exceptions the suite raises for bad input.

Every error a user can cause (a bad config, dataset, file or argument) is a :class:`SuiteError`; the CLI prints
its message as one line and exits non-zero. The message always names the file or field at fault.
"""


class SuiteError(Exception):
    """Base class of all user-facing errors; ``str(err)`` is one line naming the file or field."""


class DataError(SuiteError):
    """A dataset, store or raw file is missing, malformed or inconsistent."""


class ConfigError(SuiteError):
    """A configuration value or command-line argument is invalid."""
