"""The store contract's ``test_defaults`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_defaults import *  # noqa: F403
