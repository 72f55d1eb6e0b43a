"""Turning a dynamic pipeline's step call into its spec, its inputs' versions and its waits.

Owns :class:`StepCalls` (one per dynamic run, held by ``wharf.execution.dynamic``),
:data:`SpecFactory` and :func:`name_of`. A call's ``id=`` (or a fresh id) and ``after=`` are the
call's own, the other arguments the step's. Invariants: a call's invocation id is given out
(``dynamic_ids``) and the call is told to the run's replay check (``check_call``, the
launcher's: its place in the call order) in the function's own thread, when it is made; an
input given another step's output takes only an output of this run's steps
(:meth:`StepCalls.produced`); a map's values are all checked before any of its steps starts; a
call (not a submit) whose input takes a submitted step's output waits for that step first and
raises ``UpstreamNotSucceededError`` if it did not succeed, as a submit's step does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from wharf.config.spec import InputSpec, StepSpec
from wharf.core.errors import StepInterfaceError
from wharf.execution.dynamic_arguments import (
    artifact_of,
    check_artifact,
    is_upstream,
    map_arguments,
)
from wharf.execution.dynamic_futures import OutputArtifact, settle
from wharf.execution.dynamic_ids import StepIds
from wharf.execution.dynamic_waits import CalledSteps, PendingInput, Waits
from wharf.execution.step_like import StepLike
from wharf.store.models import ArtifactVersionRecord

SpecFactory = Callable[[StepLike, str, dict[str, InputSpec], dict[str, Any], list[str]], StepSpec]
"""(step, invocation id, inputs, parameters, upstream ids) -> the step's spec."""

Prepared = tuple[StepSpec, dict[str, ArtifactVersionRecord], Waits]
"""A prepared call: its step's spec, the versions of its inputs known now, what it waits for."""


def name_of(step: StepLike) -> str:
    return str(getattr(step, "name", getattr(step.func, "__name__", "step")))


class StepCalls:
    """Prepares the step calls of one dynamic run: ``ids`` gives out their invocation ids,
    ``called`` knows the future of each call made (what ``after=`` and an input given a
    submitted step's future wait for), ``spec_factory`` makes a call's spec, ``check_call``
    checks it against the run's replay (given the versions of its inputs, None while some are
    of steps not ended), and ``between`` is called between the short waits of a call for a
    submitted step (a forced stop raises there)."""

    def __init__(
        self,
        ids: StepIds,
        called: CalledSteps,
        spec_factory: SpecFactory,
        check_call: Callable[[StepSpec, dict[str, ArtifactVersionRecord] | None], None],
        between: Callable[[], None],
    ) -> None:
        self._ids = ids
        self._called = called
        self._spec_factory = spec_factory
        self._check_call = check_call
        self._between = between
        self._lock = threading.Lock()
        self._produced: set[Any] = set()
        """The ids of the artifact versions this run's steps output (an input takes one)."""

    def produced(self, versions: Iterable[ArtifactVersionRecord]) -> None:
        """A step of this run output ``versions``: later inputs may take them."""
        with self._lock:
            self._produced.update(v.id for v in versions)

    def prepare(
        self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any], defer: bool
    ) -> Prepared:
        """A step call's spec: its ``id=`` (or a fresh id) and ``after=`` are the call's own,
        the other arguments the step's."""
        kwargs = dict(kwargs)
        invocation_id = kwargs.pop("id", None)
        outputs = step.interface.output_names
        if invocation_id is None:
            invocation_id = self._ids.fresh(name_of(step), outputs)
        else:
            self._ids.take(invocation_id, name_of(step), outputs)
        after = kwargs.pop("after", None)
        bound = step.interface.bind(name_of(step), args, kwargs, step_id=invocation_id)
        return self.prepare_bound(step, invocation_id, bound, after, defer)

    def map_calls(
        self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        """The calls of a ``step.map(...)``: each one's invocation id (given out now) and
        arguments bound to the step's inputs, once every value given is checked."""
        step_name = name_of(step)
        arguments = map_arguments(step, step_name, args, kwargs)
        ids = self._ids.fresh_map(step_name, len(arguments), step.interface.output_names)
        for step_id, values in zip(ids, arguments, strict=True):  # refused before any starts
            for name, value in values.items():
                if not is_upstream(value):
                    step.interface.check_parameter(step_id, name, value)
        return list(zip(ids, arguments, strict=True))

    def prepare_bound(
        self, step: StepLike, invocation_id: str, bound: dict[str, Any], after: Any, defer: bool
    ) -> Prepared:
        """The spec of a step call whose id is given out and whose arguments are bound to the
        step's inputs (each one of them), the versions of its inputs known now, and what it
        waits for. ``defer`` (a submit): an input taking a submitted step's output waits
        for it (its version is read once it ended); else it is read now, as an output is (a
        step that did not succeed: :class:`UpstreamNotSucceededError`, as for a submit)."""
        inputs: dict[str, InputSpec] = {}
        versions: dict[str, ArtifactVersionRecord] = {}
        parameters: dict[str, Any] = {}
        upstream: list[str] = []
        pending: dict[str, PendingInput] = {}
        for name, value in bound.items():
            waited = self._called.future_input(step, invocation_id, name, value)
            if waited is not None and not defer:  # a call: its input's step ends first
                settle(waited.future, between=self._between)
                not_succeeded = Waits(inputs={name: waited}).not_succeeded(invocation_id)
                if not_succeeded is not None:
                    raise not_succeeded
            elif waited is not None:
                inputs[name] = InputSpec(step=waited.step, output=waited.output)
                pending[name] = waited
                upstream.append(waited.step)
                continue
            artifact = artifact_of(value, invocation_id, name)
            if artifact is not None:
                self._check_produced_here(invocation_id, name, artifact)
                check_artifact(step, invocation_id, name, artifact)
                inputs[name] = InputSpec(step=artifact.step_name, output=artifact.output_name)
                versions[name] = artifact.version
                upstream.append(artifact.step_name)
                continue
            if step.interface.records(invocation_id, name, value):
                parameters[name] = value
        after_steps = self._called.after(invocation_id, after)
        upstream.extend(after_steps)
        spec = self._spec_factory(
            step, invocation_id, inputs, parameters, list(dict.fromkeys(upstream))
        )
        self._check_call(spec, None if pending else versions)
        waited_after = {k: f for k, f in after_steps.items() if f is not None}
        return spec, versions, Waits(after=waited_after, inputs=pending)

    def _check_produced_here(self, step_id: str, input_name: str, artifact: OutputArtifact) -> None:
        """Refuse an output of another run (a handle kept from it): its producer is no step of
        this run, so the input would name (and depend on) whichever step here has its name."""
        with self._lock:
            if artifact.version.id in self._produced:
                return
        raise StepInterfaceError(
            f"Input '{input_name}' of step '{step_id}' got output '{artifact.output_name}' of "
            f"step '{artifact.step_name}' of another run; an input takes an output of this "
            "run's steps: pass its value (.load()) instead."
        )


__all__ = ["Prepared", "SpecFactory", "StepCalls", "name_of"]
