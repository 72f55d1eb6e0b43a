"""The store contract's ``test_steps`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_steps import *  # noqa: F403
