"""The store contract's ``test_metadata_schedules`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_metadata_schedules import *  # noqa: F403
