"""The store contract's ``test_steps`` over REST (see ``conftest.py``).

Recording a step's process differs on purpose: only the step's own process may, with a run
token of its run (``tests/server/test_step_process.py``); the store's own key is refused.
"""

import pytest

from tests.store.contract.test_steps import *  # noqa: F403
from tests.store.contract.test_steps import FakeClock, World
from wharf.store.models import StepRunUpdate
from wharf.store.rest.errors import PermissionDeniedError


def test_pid_round_trip(world: World, clock: FakeClock) -> None:
    step = world.step(name="train")
    with pytest.raises(PermissionDeniedError):
        world.store.steps.update(step.id, StepRunUpdate(pid=4242, pid_host="h", pid_start="1"))
    assert world.store.steps.get(step.id).pid is None
