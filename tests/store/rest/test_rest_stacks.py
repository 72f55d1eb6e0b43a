"""The store contract's ``test_stacks`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_stacks import *  # noqa: F403
