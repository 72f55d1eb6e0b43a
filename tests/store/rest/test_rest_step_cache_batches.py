"""The store contract's ``test_step_cache_batches`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_step_cache_batches import *  # noqa: F403
