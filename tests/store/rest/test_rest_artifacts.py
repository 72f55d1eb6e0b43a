"""The store contract's ``test_artifacts`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_artifacts import *  # noqa: F403
