"""A dynamic pipeline's per-step Kubernetes settings, checked by the submitting client before
the run is recorded where its steps are known then: the steps its function names, decorated
with their settings (``orchestrator_dynamic.known_steps``). Before, an invalid entry was found
only in the orchestrator pod, once the run was recorded and its Job created: the step failed
there. Steps the function gets otherwise are still checked as they run.

No cluster: the refusal comes before anything reaches one (the ``workspace`` and stack of
:mod:`.test_orchestrator`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integrations.kubernetes.test_orchestrator import kubernetes_stack, workspace
from wharf import pipeline, step
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.orchestrator import KubernetesOrchestrator
from wharf.integrations.kubernetes.orchestrator_dynamic import known_steps
from wharf.integrations.kubernetes.step_operator import KubernetesStepOperator
from wharf.sdk.workspace import Workspace
from wharf.store.models import ComponentRecord

__all__ = ["workspace"]  # the fixture, from test_orchestrator

K8S = "orchestrator.kubernetes"
OPERATOR = "k8s-op"


@step
def fine() -> int:
    return 1


@step(settings={K8S: {"pod_settings": {"node_selector": {"pool": "a"}}}})
def mistyped(x: int) -> int:
    return x


@step(settings={K8S: {"namespace": "elsewhere"}})
def moved() -> int:
    return 1


@step(step_operator=OPERATOR, settings={"step_operator.kubernetes": {"active_deadline_seconds": 0}})
def bad_deadline() -> int:
    return 1


@step(settings={K8S: {"active_deadline_seconds": 60}})
def placed() -> int:
    return 1


@pipeline(dynamic=True)
def calls_mistyped() -> None:
    for _ in range(2):
        mistyped(fine())


@pipeline(dynamic=True)
def calls_moved() -> None:
    moved()


@pipeline(dynamic=True)
def calls_bad_deadline() -> None:
    bad_deadline()


@pipeline(dynamic=True)
def calls_valid_steps() -> None:
    fine()
    placed()


def component(type: ComponentType, name: str, **configuration: Any) -> ComponentRecord:
    return ComponentRecord.model_validate(
        {
            "id": uuid.uuid4(),
            "name": name,
            "type": type,
            "flavor": "kubernetes",
            "configuration": {"namespace": "ml", "image": "wharf/python:3.11", **configuration},
            "created": "2026-01-01T00:00:00Z",
        }
    )


ORCHESTRATOR = KubernetesOrchestrator(component(ComponentType.ORCHESTRATOR, "k8s"))


def refusal(spec_of: Any, step_operator: object | None = None) -> str:
    with pytest.raises(InputError) as raised:
        ORCHESTRATOR.runtime_policy(spec_of.compile(), step_operator)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "\n" not in message, message
    return message


def test_the_steps_a_dynamic_pipelines_function_names_are_known_before_it_runs() -> None:
    names = sorted(spec.name for spec in known_steps(calls_mistyped.compile()))
    assert names == ["fine", "mistyped"]
    (spec,) = known_steps(calls_moved.compile())
    assert spec.config.settings[K8S] == {"namespace": "elsewhere"}
    assert known_steps(calls_mistyped.compile().model_copy(update={"source": "absent:p"})) == []


def test_an_invalid_setting_of_a_step_it_calls_is_refused_naming_the_step_and_field() -> None:
    message = refusal(calls_mistyped)
    assert message.startswith(f"Step 'mistyped': invalid settings['{K8S}']"), message
    assert "'pod_settings.node_selector' is not a known field" in message, message


def test_a_step_it_calls_may_not_move_its_job_to_another_namespace() -> None:
    message = refusal(calls_moved)
    assert message.startswith(f"Step 'moved': settings['{K8S}'] sets namespace"), message


def test_an_invalid_step_operator_setting_of_a_step_it_calls_is_refused() -> None:
    operator = KubernetesStepOperator(component(ComponentType.STEP_OPERATOR, OPERATOR))
    message = refusal(calls_bad_deadline, operator)
    assert message.startswith("Step 'bad_deadline': invalid settings['step_operator.kubernetes']")
    assert "active_deadline_seconds" in message, message


def test_valid_settings_of_the_steps_it_calls_pass() -> None:
    assert ORCHESTRATOR.runtime_policy(calls_valid_steps.compile()).isolate_all


def test_a_run_refused_for_a_steps_settings_records_nothing(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubernetes_stack(workspace, monkeypatch, image="wharf/python:3.11")
    with pytest.raises(InputError, match=r"^Step 'mistyped': invalid settings"):
        calls_mistyped.run_in(workspace)
    assert workspace.store.runs.list().items == []
