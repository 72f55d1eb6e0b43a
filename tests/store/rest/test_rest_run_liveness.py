"""The store contract's ``test_run_liveness`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_run_liveness import *  # noqa: F403
