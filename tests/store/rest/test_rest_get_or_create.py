"""The store contract's ``test_get_or_create`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_get_or_create import *  # noqa: F403
