"""The store contract's ``test_paging`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_paging import *  # noqa: F403
