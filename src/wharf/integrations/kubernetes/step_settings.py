"""A step's Kubernetes settings: the component's (and run's) with the step's own layered over.

Here the ``orchestrator.kubernetes`` and ``step_operator.kubernetes`` entries of a snapshot's
spec (``wharf.config.component_settings``) meet their models: a step Job is built from
:func:`step_settings`, the orchestrator pod from :func:`pipeline_settings`.

Invariants: an invalid entry is one :class:`InputError` naming the step and the field, raised
before any object is created in the cluster; a step asking for other :data:`RUN_WIDE` fields than
its backend's is refused, never silently run elsewhere; fields only the orchestrator pod reads
(``max_parallelism``, ``synchronous``...) take effect from the pipeline level and the component.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from wharf.config.component_settings import settings_key
from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesStepOperatorSettings,
)

FLAVOR = "kubernetes"
ORCHESTRATOR_SETTINGS_KEY = settings_key(ComponentType.ORCHESTRATOR, FLAVOR)
STEP_OPERATOR_SETTINGS_KEY = settings_key(ComponentType.STEP_OPERATOR, FLAVOR)
RUN_WIDE = ("namespace", "context", "kubeconfig")
"""Fields a backend's watches and clients are bound to: one value for all the steps it runs."""

SettingsT = TypeVar("SettingsT", KubernetesOrchestratorSettings, KubernetesStepOperatorSettings)


def key_of(settings: KubernetesOrchestratorSettings | KubernetesStepOperatorSettings) -> str:
    """The ``settings`` key whose entries layer over ``settings``."""
    if isinstance(settings, KubernetesOrchestratorSettings):
        return ORCHESTRATOR_SETTINGS_KEY
    return STEP_OPERATOR_SETTINGS_KEY


def layered_for_step(base: SettingsT, spec: StepSpec) -> SettingsT:
    """``base`` with the step's entry (for ``base``'s component) layered over it, validated;
    RUN_WIDE fields may differ from ``base``'s (see :func:`step_settings` for a backend)."""
    key = key_of(base)
    layer = spec.config.settings.get(key)
    if not layer:
        return base
    try:
        return base.merged(layer)
    except InputError as exc:
        raise InputError(f"Step '{spec.name}': invalid settings['{key}']: {exc}") from None


def step_settings(base: SettingsT, spec: StepSpec) -> SettingsT:
    """The settings of ``spec``'s Job on a backend of ``base`` settings: the step's entry
    layered over ``base``; a RUN_WIDE field set to another value than ``base``'s is refused."""
    settings = layered_for_step(base, spec)
    _check_run_wide(base, settings, spec)
    return settings


def check_orchestrated_steps(
    base: KubernetesOrchestratorSettings,
    spec: PipelineSpec,
    step_operator: object | None = None,
    called: Iterable[StepSpec] = (),
) -> None:
    """Refuse, before a run of ``spec`` is recorded, a step the orchestrator pod would fail
    before its pod because its entry moves its Job elsewhere (RUN_WIDE; a step that names a
    step operator runs there, and may); ``base``: the run's settings. An invalid entry of
    ``spec``'s steps is left to the caller's settings check, which names it. The steps a
    dynamic pipeline's function calls are known only as it runs; ``called``: those known
    before (``orchestrator_dynamic.known_steps``), whose entries are checked here as the pod
    would check them: over ``base``, or over the settings of ``step_operator`` (the stack's)
    when it is a Kubernetes one and the step names a step operator."""
    for step in spec.steps.values():
        if step.config.step_operator is not None:
            continue
        try:
            settings = layered_for_step(base, step)
        except InputError:
            continue
        _check_run_wide(base, settings, step)
    operator_settings = getattr(step_operator, "settings", None)
    for step in called:
        if step.config.step_operator is None:
            step_settings(base, step)
        elif isinstance(operator_settings, KubernetesStepOperatorSettings):
            layered_for_step(operator_settings, step)


def _check_run_wide(base: SettingsT, settings: SettingsT, spec: StepSpec) -> None:
    for name in RUN_WIDE:
        wanted, current = getattr(settings, name), getattr(base, name)
        if wanted != current:
            raise InputError(
                f"Step '{spec.name}': settings['{key_of(base)}'] sets {name} to "
                f"{wanted!r}, but the step's Job runs where the run's other steps run "
                f"({name} {current!r}): set {name} on the component or for the whole pipeline."
            )


def pipeline_settings(
    base: KubernetesOrchestratorSettings, spec: PipelineSpec
) -> KubernetesOrchestratorSettings:
    """The orchestrator's settings for a run of ``spec``: the component's with the pipeline's
    ``orchestrator.kubernetes`` entry layered over them (the orchestrator pod, its Job, and the
    base of every step Job)."""
    layer = spec.config.settings.get(ORCHESTRATOR_SETTINGS_KEY)
    if not layer:
        return base
    try:
        return base.merged(layer)
    except InputError as exc:
        raise InputError(
            f"Pipeline '{spec.name}': invalid settings['{ORCHESTRATOR_SETTINGS_KEY}']: {exc}"
        ) from None
