"""User-facing errors: one clear line, exit code 2, never a traceback."""

from __future__ import annotations


class CascadeUsageError(Exception):
    """Bad input from the user (file, key, row, flag). The CLI prints the message and exits with 2."""

    exit_code = 2


class CascadeRunError(Exception):
    """A run failed for a reason that is not a usage mistake (a job died, a stage failed). Exit code 1."""

    exit_code = 1
