"""The store contract's ``test_runs`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_runs import *  # noqa: F403
