"""The store contract's ``test_heartbeats`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_heartbeats import *  # noqa: F403
