"""Component settings on steps and pipelines (``settings={"orchestrator.kubernetes": ...}``):
keys, plain JSON in the spec, the step's entry deep-merged over the pipeline's, and the check
against the stack's components before a run is recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from wharf import pipeline, step
from wharf.config.component_settings import (
    check_component_settings,
    layered,
    parse_component_settings,
    step_layered,
)
from wharf.config.settings import ResourceSettings
from wharf.config.spec import PipelineSpec
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.orchestrator import KubernetesOrchestrator
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
)
from wharf.integrations.kubernetes.step_operator import KubernetesStepOperator
from wharf.store.models import ComponentRecord

K8S = "orchestrator.kubernetes"


@step(
    settings={
        K8S: {"pod_settings": {"node_selectors": {"pool": "a"}}, "ttl_seconds_after_finished": 5},
        "resources": {"cpu_count": 1},
    }
)
def first() -> int:
    return 1


@step(settings={K8S: KubernetesOrchestratorSettings(active_deadline_seconds=60)})
def second(value: int) -> int:
    return value


@step
def third(value: int) -> int:
    return value


@pipeline(
    settings={
        K8S: {"pod_settings": {"node_selectors": {"zone": "z1"}, "labels": {"team": "vision"}}},
        "step_operator.kubernetes": {"image": "registry/train:1"},
    }
)
def settled() -> None:
    third(second(first()))


def component(type: ComponentType, **configuration: str) -> ComponentRecord:
    return ComponentRecord(
        id=uuid4(),
        name="k8s",
        type=type,
        flavor="kubernetes",
        configuration=configuration,
        created=datetime.now(UTC),
    )


def test_the_spec_holds_the_pipeline_entries_and_each_step_its_own_over_them() -> None:
    spec = settled.compile()
    assert spec.config.settings == {
        K8S: {"pod_settings": {"node_selectors": {"zone": "z1"}, "labels": {"team": "vision"}}},
        "step_operator.kubernetes": {"image": "registry/train:1"},
    }
    steps = spec.steps
    assert steps["first"].config.settings[K8S] == {
        "pod_settings": {
            "node_selectors": {"zone": "z1", "pool": "a"},  # merged key by key
            "labels": {"team": "vision"},
        },
        "ttl_seconds_after_finished": 5,
    }
    assert steps["first"].config.resources == ResourceSettings(cpu_count=1)  # still Wharf's
    # A model counts with the fields its user set only.
    assert steps["second"].config.settings[K8S] == {
        "pod_settings": {"node_selectors": {"zone": "z1"}, "labels": {"team": "vision"}},
        "active_deadline_seconds": 60,
    }
    assert steps["third"].config.settings == spec.config.settings
    assert steps["third"].config.settings["step_operator.kubernetes"] == {
        "image": "registry/train:1"
    }
    # Plain JSON: the spec survives a round trip as it is stored.
    assert PipelineSpec.model_validate_json(spec.model_dump_json()) == spec


def test_nested_models_count_only_what_their_user_set() -> None:
    settings = KubernetesOrchestratorSettings(
        pod_settings=KubernetesPodSettings(annotations={"a": "1"})
    )
    parsed = parse_component_settings("step 's'", {K8S: settings})
    assert parsed == {K8S: {"pod_settings": {"annotations": {"a": "1"}}}}
    nested = parse_component_settings(
        "step 's'", {K8S: {"pod_settings": KubernetesPodSettings(labels={"b": "2"})}}
    )
    assert nested == {K8S: {"pod_settings": {"labels": {"b": "2"}}}}


def test_an_unknown_component_type_names_the_valid_ones() -> None:
    with pytest.raises(InputError) as caught:

        @step(settings={"orchestrater.kubernetes": {}})
        def misspelt() -> None: ...

    message = str(caught.value)
    assert "Unknown component type 'orchestrater'" in message and "step 'misspelt'" in message
    for valid in (
        "'orchestrator.<flavor>'",
        "'artifact_store.<flavor>'",
        "'step_operator.<flavor>'",
    ):
        assert valid in message


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"orchestrator.": {}}, "names no flavor"),
        ({K8S: ["namespace"]}, "must be a mapping or a settings object"),
        ({K8S: {"when": datetime.now(UTC)}}, "must be JSON-serialisable"),
        ({"kubernetes": {}}, "Unknown setting 'kubernetes'"),
    ],
)
def test_malformed_entries_are_refused_at_definition(
    settings: dict[str, object], words: str
) -> None:
    with pytest.raises(InputError, match=words):
        pipeline(settings=settings)(lambda: None)


def test_layering_merges_mappings_and_replaces_lists_without_touching_its_inputs() -> None:
    base = {"pod_settings": {"tolerations": [{"key": "a"}], "labels": {"x": "1"}}}
    layer = {"pod_settings": {"tolerations": [{"key": "b"}], "labels": {"y": "2"}}}
    assert layered(base, layer) == {
        "pod_settings": {"tolerations": [{"key": "b"}], "labels": {"x": "1", "y": "2"}}
    }
    assert base["pod_settings"]["labels"] == {"x": "1"}
    assert step_layered({K8S: {"image": "a"}}, {"step_operator.kubernetes": {"image": "b"}}) == {
        K8S: {"image": "a"},
        "step_operator.kubernetes": {"image": "b"},
    }


def test_the_stacks_components_validate_their_entries_naming_the_step_and_field() -> None:
    orchestrator = KubernetesOrchestrator(component(ComponentType.ORCHESTRATOR, namespace="ml"))
    operator = KubernetesStepOperator(component(ComponentType.STEP_OPERATOR))
    check_component_settings(settled.compile(), (orchestrator, None, operator))

    @step(settings={K8S: {"pod_settings": {"node_selector": {"pool": "a"}}}})
    def typo() -> None: ...

    @pipeline
    def with_typo() -> None:
        typo()

    with pytest.raises(InputError) as caught:
        check_component_settings(with_typo.compile(), (orchestrator,))
    message = str(caught.value)
    assert message.startswith(f"Invalid settings['{K8S}'] of step 'typo':"), message
    assert "node_selector" in message

    @pipeline(settings={"step_operator.kubernetes": {"backoff_limit_margin": -1}})
    def negative() -> None:
        third(1)

    with pytest.raises(InputError, match=r"of pipeline 'negative'.*backoff_limit_margin"):
        check_component_settings(negative.compile(), (orchestrator, operator))


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("orchestrator.kubernets", "orchestrator.kubernetes"),
        ("step_operator.Kubernetes", "step_operator.kubernetes"),
    ],
)
def test_a_misspelt_installed_flavor_is_refused_at_definition(key: str, meant: str) -> None:
    with pytest.raises(InputError) as caught:

        @step(settings={key: {"pod_settings": {"labels": {"team": "ml"}}}})
        def misspelt() -> None: ...

    assert str(caught.value) == (
        f"settings['{key}'] of step 'misspelt' names no installed "
        f"{key.partition('.')[0]} flavor: did you mean '{meant}'?"
    )


def test_entries_for_flavors_not_in_the_stack_are_kept_and_ignored() -> None:
    @pipeline(settings={"orchestrator.airflow": {"anything": json.dumps({"at": 1})}})
    def elsewhere() -> None:
        third(1)

    spec = elsewhere.compile()
    assert spec.steps["third"].config.settings == {
        "orchestrator.airflow": {"anything": '{"at": 1}'}
    }
    orchestrator = KubernetesOrchestrator(component(ComponentType.ORCHESTRATOR))
    check_component_settings(spec, (orchestrator,))
