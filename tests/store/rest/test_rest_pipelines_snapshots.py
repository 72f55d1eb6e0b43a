"""The store contract's ``test_pipelines_snapshots`` over REST (see ``conftest.py``)."""

from tests.store.contract.test_pipelines_snapshots import *  # noqa: F403
