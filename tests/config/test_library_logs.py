"""Which third-party loggers a Wharf process holds back (``quiet_library_loggers``): their
INFO lines (one per HTTP request, botocore finding its credentials) never reach a step's log,
their warnings do."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from wharf.config.library_logs import QUIET_LIBRARY_LOGGERS, quiet_library_loggers


@pytest.fixture
def restored_levels() -> Iterator[None]:
    levels = {name: logging.getLogger(name).level for name in QUIET_LIBRARY_LOGGERS}
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restored_levels")
@pytest.mark.parametrize("name", ["httpx", "urllib3.connectionpool", "aiobotocore.credentials"])
def test_info_is_held_back_and_warnings_show(name: str) -> None:
    quiet_library_loggers()
    logger = logging.getLogger(name)
    assert not logger.isEnabledFor(logging.INFO)
    assert logger.isEnabledFor(logging.WARNING)
