"""Steps that wait for their resources, end to end with real processes, in both modes
(:mod:`tests.e2e.resource_modes`): queueing for a scarce resource, allocation timeouts, settings
and tolerance rules, CPU pinning, a killed step's capacity released:

- ``embedded``: SQLite store, the Resource Manager in-process;
- ``team``: the SDK talks to a workspace server, which talks to a Resource Manager service,
  both real ``wharf … serve`` processes on PostgreSQL (:mod:`tests.e2e.team`).

Here the team-mode tests share one team (``shared_mode``; starting one costs seconds of CPU):
each test has a home of its own, but the team's store, pools and stacks outlive it.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.e2e.resource_modes import (
    LICENSE,
    Mode,
    _module_team,
    assert_no_holder_stretch,
    mode,
    mode_workspace,
    rm_workspace,
    shared_mode,
    steps,
)
from tests.e2e.test_isolated import make_stack
from wharf import Client, ResourceSettings, RunFailedError, pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.core.errors import IllegalOperationError
from wharf.sdk.workspace import Workspace

__all__ = [  # the fixtures; (LICENSE, Mode, mode, rm_workspace, steps taken from here by others)
    "LICENSE",
    "Mode",
    "_module_team",
    "mode",
    "mode_workspace",
    "rm_workspace",
    "shared_mode",
    "steps",
]


def test_steps_queue_for_a_scarce_resource(shared_mode: Mode, mode_workspace: Workspace):
    client = Client(mode_workspace.config, mode_workspace.store)
    shared_mode.ensure_pool(mode_workspace, "licenses", {"license": 1})
    holder = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

    @pipeline(dynamic=True)
    def p() -> None:
        futures = [holder.submit(label=f"s{i}") for i in range(3)]
        for future in futures:
            future.result()

    run = p.run_in(mode_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    spans = sorted(
        tuple(float(x) for x in client.load_step_output(run.id, name).split(":")[1:3])
        for name in ("hold_license", "hold_license_2", "hold_license_3")
    )
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.01, "one licence: the steps never overlap"
    records = steps(mode_workspace, run.id)
    assert all(r.resource_request_id for r in records)
    for r in records:
        request = mode_workspace.requests.get(r.resource_request_id)
        assert request.status is ResourceRequestStatus.RELEASED
        assert request.metadata["step_name"] == r.name
        assert request.metadata["pipeline_run_id"] == str(run.id)
    assert "license" in client.load_step_output(run.id, "hold_license")
    assert_no_holder_stretch(mode_workspace)


def test_allocation_timeout_message(shared_mode: Mode, mode_workspace: Workspace, tmp_path: Path):
    shared_mode.ensure_pool(mode_workspace, "licenses", {"license": 1})
    release = tmp_path / "release"
    holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})
    impatient = steps_lib.hold_license.with_options(
        settings={
            "resources": ResourceSettings(
                resources={"license": 1}, allocation_wait_timeout_seconds=2
            )
        }
    )

    started = tmp_path / "started"

    @pipeline(dynamic=True)
    def p() -> None:
        held = holder.submit(path=str(release), started=str(started))
        while not started.exists():
            time.sleep(0.02)
        try:
            impatient(label="late")
        finally:
            release.write_text("go")
            held.wait()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(mode_workspace)
    run = failed.value.run
    late = next(r for r in steps(mode_workspace, run.id) if r.name == "hold_license")
    assert late.status is ExecutionStatus.FAILED
    assert late.status_reason.startswith("Timed out after 2 seconds waiting for resource request")
    assert "Increase `ResourceSettings.allocation_wait_timeout_seconds`" in late.status_reason
    assert str(late.resource_request_id) in late.status_reason


def test_legacy_settings(shared_mode: Mode, mode_workspace: Workspace):
    shared_mode.ensure_pool(mode_workspace, "licenses", {"license": 1})
    legacy = steps_lib.hold_license.with_options(
        settings={"resources": {"pool_resources": {"license": 1}, "preemptible": False}}
    )

    @pipeline(dynamic=True)
    def p() -> None:
        legacy(label="legacy", seconds=0)

    run = p.run_in(mode_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    record = steps(mode_workspace, run.id)[0]
    request = mode_workspace.requests.get(record.resource_request_id)
    assert request.reclaim_tolerance.value == "none"


def test_inline_and_isolated_tolerance_rules(mode_workspace: Workspace):
    runs_before = mode_workspace.store.runs.list().total
    inline_reclaimable = steps_lib.hold_license.with_options(
        settings={"resources": ResourceSettings(resources="license", reclaim_tolerance="any")}
    )

    @pipeline
    def bad_inline() -> None:
        inline_reclaimable(label="x")

    with pytest.raises(IllegalOperationError, match="will run inline"):
        bad_inline.run_in(mode_workspace)

    make_stack(mode_workspace, "procs-tolerance", "local_process")
    mode_workspace.config = load_config(active_stack="procs-tolerance")
    no_heartbeat = steps_lib.hold_license.with_options(
        enable_heartbeat=False,
        settings={"resources": ResourceSettings(cpu_count=1, reclaim_tolerance="coordinated")},
    )

    @pipeline
    def bad_isolated() -> None:
        no_heartbeat(label="y")

    with pytest.raises(IllegalOperationError, match="heartbeat is disabled"):
        bad_isolated.run_in(mode_workspace)
    assert mode_workspace.store.runs.list().total == runs_before  # nothing half-made


def test_isolated_step_is_pinned_to_its_cpus(
    wharf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedded only: the allocation comes from the local pool describing this machine."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    rm_workspace = Workspace.open(load_config())
    try:
        _pinned(rm_workspace)
    finally:
        rm_workspace.close()


def _pinned(rm_workspace: Workspace) -> None:
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.fail("this test needs a machine with at least 2 CPUs and CPU affinity")
    make_stack(rm_workspace, "procs", "local_process")
    rm_workspace.config = load_config(active_stack="procs")
    one_cpu = steps_lib.affinity.with_options(settings={"resources": ResourceSettings(cpu_count=1)})

    @pipeline
    def p() -> None:
        one_cpu()

    run = p.run_in(rm_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    client = Client(rm_workspace.config, rm_workspace.store)
    assert client.load_step_output(run.id, "affinity") == 1


def test_sigkill_releases_the_capacity(shared_mode: Mode, mode_workspace: Workspace):
    shared_mode.ensure_pool(mode_workspace, "licenses", {"license": 1})
    make_stack(mode_workspace, "procs-kill", "local_process")
    mode_workspace.config = load_config(active_stack="procs-kill")
    killer = steps_lib.self_kill.with_options(settings={"resources": LICENSE})
    after = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

    @pipeline(execution_mode="continue_on_failure")
    def p() -> None:
        killer()
        after(label="next", seconds=0)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(mode_workspace)
    run = failed.value.run
    found = {r.name: r for r in steps(mode_workspace, run.id)}
    assert found["self_kill"].status is ExecutionStatus.FAILED
    assert found["self_kill"].status_reason.startswith("The step process was killed by SIGKILL")
    request = mode_workspace.requests.get(found["self_kill"].resource_request_id)
    assert request.status is ResourceRequestStatus.RELEASED
    assert found["hold_license"].status is ExecutionStatus.COMPLETED


def test_settings_the_resource_manager_would_refuse_fail_the_step_saying_why(
    shared_mode: Mode, mode_workspace: Workspace
) -> None:
    selector = [{"kind": "license", "resource_selector": {"x": 1}}]  # no such selector form
    odd = steps_lib.hold_license.with_options(
        settings={"resources": ResourceSettings(resources=selector)}
    )

    @pipeline(raise_on_failure=False)
    def p() -> None:
        odd(label="odd")

    run = p.run_in(mode_workspace)
    assert run.status is ExecutionStatus.FAILED, run.status_reason
    said = [run.status_reason or ""] + [
        s.status_reason or "" for s in steps(mode_workspace, run.id)
    ]
    assert any("cannot be requested from the Resource Manager" in r for r in said), said
    assert not any("Internal error" in r for r in said), said  # the user's settings, not a bug
