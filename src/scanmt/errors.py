"""User-facing errors.

Anything raised as :class:`ScanmtError` is caught by the CLI and printed as one
line (``scanmt: error: ...``) without a traceback.  Messages must name the
problem precisely: a file and line, a config key, a shape or a value.
"""

from __future__ import annotations


class ScanmtError(Exception):
    """A problem with the user's input, config or files (not a bug)."""


class DataError(ScanmtError, ValueError):
    """Bad corpus / vocabulary / alignment / fertility file contents."""


class ConfigError(ScanmtError, ValueError):
    """Unknown or badly typed config key, or incompatible checkpoint."""


class BusyError(ScanmtError):
    """Another process is writing into the folder a command would write into (its lock names it)."""
