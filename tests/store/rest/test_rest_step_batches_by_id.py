"""The store contract's ``test_step_batches_by_id`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_step_batches_by_id import *  # noqa: F403
