"""A bench for the emulator's controller tests: a store, a FakeClock, attached controllers.

``ControllerBed`` drives the object store directly (no HTTP). Time moves only through
``advance(seconds)``, which also runs the controllers' tick, as ``Emulator.advance_to`` does.
The kubelet is simulated with ``bind``/``run``/``finish``/``kubelet_delete``: status writes
through ``store.update_internal`` and the grace-0 delete a kubelet makes when a pod has stopped.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.controllers import Controllers
from tests.kube.emulator.resources import CRONJOBS, JOBS, PODS, ResourceType
from tests.kube.emulator.store import ObjectStore

START = datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC)
NODE = "node-1"


def pod_template(command: str = "true", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "wharf-test"}, "annotations": {"note": "from-template"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "python:3.11", "command": [command]}],
            **spec,
        },
    }


def job_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": pod_template(), **spec},
    }


def cronjob_body(
    name: str, schedule: str, *, job_spec: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"pipeline": "nightly"}, "annotations": {"a": "b"}},
                "spec": {"template": pod_template(), **(job_spec or {})},
            },
            **spec,
        },
    }


def terminated_status(phase: str, exit_code: int, *, container: str = "main") -> dict[str, Any]:
    return {
        "phase": phase,
        "containerStatuses": [
            {
                "name": container,
                "ready": False,
                "restartCount": 0,
                "image": "python:3.11",
                "imageID": "",
                "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}},
            }
        ],
    }


class ControllerBed:
    """Store + FakeClock + attached controllers, with kubelet stand-ins for the tests."""

    def __init__(self, *, job_backoff_seconds: float = 0.0) -> None:
        self.clock = FakeClock(START)
        self.store = ObjectStore(self.clock)
        self.controllers = Controllers(
            self.store, self.clock, job_backoff_seconds=job_backoff_seconds
        )
        self._errors = _ErrorRecorder()
        for name in ("tests.kube.emulator.controllers", "tests.kube.emulator.store"):
            logging.getLogger(name).addHandler(self._errors)
        self.controllers.attach()

    def close(self) -> None:
        """Detach the error recorder; fail if any controller reaction raised."""
        for name in ("tests.kube.emulator.controllers", "tests.kube.emulator.store"):
            logging.getLogger(name).removeHandler(self._errors)
        failures = [record.getMessage() for record in self._errors.records]
        assert failures == [], f"controller reactions failed: {failures}"

    # ---- time -------------------------------------------------------------------------------

    def advance(self, seconds: float) -> datetime:
        self.clock.advance_to(self.clock.now() + timedelta(seconds=seconds))
        self.controllers.tick(self.clock.now())
        return self.clock.now()

    def advance_to(self, t: datetime) -> None:
        self.clock.advance_to(t)
        self.controllers.tick(t)

    # ---- reads ------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, name: str, ns: str = "default") -> dict[str, Any] | None:
        items: list[dict[str, Any]] = self.store.list(rtype, ns)["items"]
        return next((obj for obj in items if obj["metadata"]["name"] == name), None)

    def job(self, name: str, ns: str = "default") -> dict[str, Any]:
        return self.store.get(JOBS, ns, name)

    def cronjob(self, name: str, ns: str = "default") -> dict[str, Any]:
        return self.store.get(CRONJOBS, ns, name)

    def pods_of(self, job_name: str, ns: str = "default") -> list[dict[str, Any]]:
        pods = self.store.list(PODS, ns, label_selector=f"job-name={job_name}")["items"]
        return sorted(pods, key=lambda p: int(p["metadata"]["resourceVersion"]))

    def waiting_pods(self, job_name: str, ns: str = "default") -> list[dict[str, Any]]:
        """The job's pods the (simulated) kubelet has not started: phase Pending, not deleting."""
        return [
            p
            for p in self.pods_of(job_name, ns)
            if p["status"]["phase"] == "Pending" and "deletionTimestamp" not in p["metadata"]
        ]

    def jobs(self, ns: str = "default") -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.store.list(JOBS, ns)["items"]
        return items

    def create_job(self, name: str, ns: str = "default", **spec: Any) -> dict[str, Any]:
        self.store.create(JOBS, ns, job_body(name, **spec))
        return self.job(name, ns)

    # ---- kubelet stand-ins --------------------------------------------------------------------

    def bind(self, pod: dict[str, Any]) -> None:
        self.store.bind_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], NODE)

    def set_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        def mutate(current: dict[str, Any]) -> None:
            current.setdefault("status", {}).update(status)

        self.store.update_internal(
            PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], mutate
        )

    def run(self, pod: dict[str, Any]) -> None:
        """Bind the pod and report it Running and Ready."""
        self.bind(pod)
        self.set_status(
            pod,
            {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        )

    def finish(self, pod: dict[str, Any], exit_code: int, **extra: Any) -> None:
        """Report the pod's main container ended with ``exit_code`` (Succeeded iff 0)."""
        status = terminated_status("Succeeded" if exit_code == 0 else "Failed", exit_code)
        status.update(extra)
        self.set_status(pod, status)

    def kubelet_delete(self, pod: dict[str, Any]) -> None:
        """The kubelet's final grace-0 delete of a pod it has stopped."""
        self.store.delete(
            PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], grace_period_seconds=0
        )


class _ErrorRecorder(logging.Handler):
    """Collects ERROR records (a controller reaction that raised is logged, not re-raised)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    conditions: list[dict[str, Any]] = (obj.get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond["type"] == ctype), None)


def required_condition(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    """The object's condition of type ``ctype``; fails the test when there is none."""
    cond = condition(obj, ctype)
    assert cond is not None, f"no {ctype} condition in {obj.get('status')}"
    return cond


def events_for(bed: ControllerBed, name: str, ns: str = "default") -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events about object ``name``, oldest first."""
    from tests.kube.emulator.resources import EVENTS

    items: list[dict[str, Any]] = bed.store.list(EVENTS, ns)["items"]
    mine = [e for e in items if e["involvedObject"]["name"] == name]
    mine.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [(e["type"], e["reason"], e["message"]) for e in mine]
