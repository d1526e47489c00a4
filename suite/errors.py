"""Exceptions the suite raises for bad input.

Every error a user can cause (a bad config, dataset, file or argument) is a :class:`SuiteError`; the CLI prints
its message as one line and exits with status 2. The message always names the file or field at fault.
"""


class SuiteError(Exception):
    """Base class of all user-facing errors; ``str(err)`` is one line naming the file or field."""


class DataError(SuiteError):
    """A dataset, store or raw file is missing, malformed or inconsistent."""


class ConfigError(SuiteError):
    """A configuration value or command-line argument is invalid."""


class LockedError(SuiteError):
    """Another process is writing the same run folder, store or dataset cache entry (the message names its pid)."""


class MemoryLimitError(SuiteError):
    """A run's estimated peak memory exceeds the memory available: it stops before training (``suite.memory``)."""


class DivergedError(SuiteError):
    """The training loss became non-finite (NaN or infinite): the run stops with status ``diverged``.

    Attributes:
        epoch: the epoch in which it happened.
        batch: the batch index within the epoch (None when only the epoch's mean loss was seen).
        loss: the non-finite value, as a string (``"nan"``, ``"inf"``, ``"-inf"``).
    """

    def __init__(self, message: str, *, epoch: int | None = None, batch: int | None = None, loss: str = "nan"):
        super().__init__(message)
        self.epoch = epoch
        self.batch = batch
        self.loss = loss


def describe_os_error(err: OSError) -> str:
    """The cause of an operating-system error in words with its errno name: ``no space left on device (ENOSPC)``,
    ``input/output error (EIO)``; the message itself when it has no errno."""
    import errno

    text = (err.strerror or str(err)).strip()
    text = text[:1].lower() + text[1:]
    name = errno.errorcode.get(err.errno) if err.errno is not None else None
    return f"{text} ({name})" if name else text


def os_error_line(err: OSError) -> str:
    """One line for an operating-system error: ``<file>: <cause> (<ERRNO>)`` (the file is left out when the error
    names none)."""
    where = err.filename if err.filename is not None else None
    if err.filename2 is not None:
        where = f"{err.filename} -> {err.filename2}"
    return f"{where}: {describe_os_error(err)}" if where is not None else describe_os_error(err)
