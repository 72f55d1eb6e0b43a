"""The store contract's ``test_users_projects`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_users_projects import *  # noqa: F403
