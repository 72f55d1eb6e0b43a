"""The store contract's ``test_id_prefix`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_id_prefix import *  # noqa: F403
