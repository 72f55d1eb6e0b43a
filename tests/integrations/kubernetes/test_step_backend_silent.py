"""A silent step's attempt on the Kubernetes step backend leaves no log file, as an inline one
(:mod:`.step_backend_bed`: the API emulator, the process kubelet and a stand-in entry point)."""

from __future__ import annotations

from tests.integrations.kubernetes.step_backend_bed import BackendFactory, launch, wait_all
from tests.store.conftest import World
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.backends import Ended
from wharf.execution.log_capture import read_log


def test_a_silent_attempt_costs_no_log_file_and_one_that_prints_has_its_log(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore
) -> None:
    backend = backend_for()
    silent, printing = launch(world, logs, STAND_IN="silent"), launch(world, logs, STAND_IN="ok")
    quiet, talking = backend.submit(silent, None), backend.submit(printing, None)
    assert wait_all(backend, [quiet, talking]) == {
        quiet: (Ended.SUCCEEDED, "exited with code 0"),
        talking: (Ended.SUCCEEDED, "exited with code 0"),
    }
    for handle in (quiet, talking):
        backend.cleanup(handle)
    assert silent.record.logs_uri is not None and printing.record.logs_uri is not None
    assert not logs.exists(silent.record.logs_uri)
    assert read_log(logs, printing.record.logs_uri).startswith(f"hello from {printing.record.id}\n")
