"""The store contract's ``test_run_liveness`` over REST (see ``conftest.py``).

Recording a step's process differs on purpose: only the step's own process may, with a run
token of its run (``tests/server/test_step_process.py``); the store's own key is refused.
"""

import pytest

from tests.store.contract.test_run_liveness import *  # noqa: F403
from tests.store.contract.test_run_liveness import World
from wharf.store.models import StepRunUpdate
from wharf.store.rest.errors import PermissionDeniedError


def test_a_step_pid_is_recorded_with_its_host_and_start(world: World) -> None:
    step = world.step()
    with pytest.raises(PermissionDeniedError):
        world.store.steps.update(step.id, StepRunUpdate(pid=99, pid_host="here", pid_start="b:5"))
    assert world.store.steps.get(step.id).pid is None
