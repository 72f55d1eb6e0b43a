"""The store contract's ``test_run_create_by_id`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_run_create_by_id import *  # noqa: F403
