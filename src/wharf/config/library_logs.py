"""Which third-party loggers a Wharf process holds back, and the call that does it.

Owns: :data:`QUIET_LIBRARY_LOGGERS` and :func:`quiet_library_loggers`. Called only at process
entry points (the ``wharf`` command, a step's own process), never by library code: a Wharf
process that prints, or captures into a step's log, never shows the one line per HTTP request
that httpx and httpcore log at INFO/DEBUG, nor the line botocore logs at INFO when it finds
the S3 credentials, whatever logging the process or the user's code set up. Their warnings and
errors still show.
"""

from __future__ import annotations

import logging

QUIET_LIBRARY_LOGGERS = ("httpx", "httpcore", "urllib3", "botocore", "aiobotocore")


def quiet_library_loggers() -> None:
    """Hold :data:`QUIET_LIBRARY_LOGGERS` at WARNING in this process."""
    for name in QUIET_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
