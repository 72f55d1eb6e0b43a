"""The store contract's ``test_concurrency`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_concurrency import *  # noqa: F403
