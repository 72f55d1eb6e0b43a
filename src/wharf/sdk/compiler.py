"""Compiling a static pipeline definition into a :class:`PipelineSpec`.

The pipeline function is called once with a :class:`Compilation` active; every step call
records an invocation and returns :class:`StepOutput` handles that later invocations take as
inputs. Invariants of the result: invocation ids are unique (``name``, ``name_2``, ...), every
input names an earlier invocation's declared output, parameters are JSON-serialisable and fit
their annotations, as do upstream outputs whose annotation is known (``wharf.core.type_checks``),
and the step graph is acyclic (checked by :class:`wharf.core.dag.Dag`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wharf.config.component_settings import ComponentSettings, step_layered
from wharf.config.spec import InputSpec, OutputSpec, StepConfig, StepSpec
from wharf.core.dag import Dag
from wharf.core.errors import InputError, PipelineDefinitionError, StepInterfaceError
from wharf.core.names import check_artifact_names
from wharf.core.suggestions import unmatched
from wharf.core.type_checks import check_input_annotation

if TYPE_CHECKING:
    from wharf.sdk.step import Step

logger = logging.getLogger(__name__)

_ACTIVE: ContextVar[Compilation | None] = ContextVar("wharf_compilation", default=None)


def active_compilation() -> Compilation | None:
    return _ACTIVE.get()


@dataclass(frozen=True)
class StepOutput:
    """Handle to one output of a step invocation inside a pipeline definition."""

    invocation_id: str
    output_name: str

    def __iter__(self) -> Iterator[Any]:
        raise PipelineDefinitionError(
            f"Output '{self.output_name}' of step '{self.invocation_id}' is a single artifact "
            "handle; it cannot be unpacked while the pipeline is being defined."
        )

    def __bool__(self) -> bool:
        # Without this every handle is true: `if step_output:` would silently take one branch.
        raise PipelineDefinitionError(
            f"Output '{self.output_name}' of step '{self.invocation_id}' has no value while a "
            "static pipeline is being defined, so it cannot decide a condition; use "
            "@pipeline(dynamic=True) and branch on its .load()."
        )

    def load(self) -> Any:
        # A dynamic pipeline's step result has .load(): say why this one has none.
        raise PipelineDefinitionError(
            f"Output '{self.output_name}' of step '{self.invocation_id}' has no value while a "
            "static pipeline is being defined, so it cannot be loaded; use "
            "@pipeline(dynamic=True) to use step results in the pipeline's code, or pass the "
            "output to another step."
        )


@dataclass
class Invocation:
    id: str
    step: Step[Any, Any]
    inputs: dict[str, StepOutput]
    parameters: dict[str, Any]
    after: list[str]


def _type_path(annotation: Any) -> str | None:
    if isinstance(annotation, type):
        return f"{annotation.__module__}:{annotation.__qualname__}"
    return None


@dataclass
class Compilation:
    """Records step invocations while a pipeline function runs."""

    pipeline_name: str
    invocations: dict[str, Invocation] = field(default_factory=dict)
    _suffixes: dict[str, int] = field(default_factory=dict)

    def invoke(self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        invocation_id = kwargs.pop("id", None) or self._fresh_id(step.name)
        if invocation_id in self.invocations:
            raise PipelineDefinitionError(f"Duplicate step id '{invocation_id}'.")
        try:
            check_artifact_names(self.pipeline_name, invocation_id, step.interface.output_names)
        except InputError as exc:
            raise PipelineDefinitionError(str(exc)) from None
        after = kwargs.pop("after", None)
        if after is None:
            after = []
        if isinstance(after, StepOutput | str):
            after = [after]
        after_ids = [a.invocation_id if isinstance(a, StepOutput) else str(a) for a in after]
        bound = step.interface.bind(step.name, args, kwargs, step_id=invocation_id)
        inputs: dict[str, StepOutput] = {}
        parameters: dict[str, Any] = {}
        for name, value in bound.items():
            if isinstance(value, StepOutput):
                self._check_input(step, invocation_id, name, value)
                inputs[name] = value
            elif isinstance(value, tuple | list) and any(isinstance(v, StepOutput) for v in value):
                raise StepInterfaceError(
                    f"Input '{name}' of step '{invocation_id}' mixes step outputs in a "
                    f"{type(value).__name__}; pass each output to its own input."
                )
            elif step.interface.records(invocation_id, name, value):
                parameters[name] = value
        self.invocations[invocation_id] = Invocation(
            invocation_id, step, inputs, parameters, after_ids
        )
        outputs = tuple(StepOutput(invocation_id, n) for n in step.interface.output_names)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _check_input(
        self, step: Step[Any, Any], invocation_id: str, name: str, output: StepOutput
    ) -> None:
        """Refuse an upstream output whose annotation no value of can fit input ``name``'s
        (:func:`~wharf.core.type_checks.check_input_annotation`)."""
        upstream = self.invocations.get(output.invocation_id)
        if upstream is None:  # not of this pipeline: step_specs says so
            return
        annotations = {o.name: o.annotation for o in upstream.step.interface.outputs}
        if output.output_name in annotations:
            check_input_annotation(
                invocation_id,
                name,
                step.interface.inputs[name].annotation,
                annotations[output.output_name],
                f"output '{output.output_name}' of step '{output.invocation_id}'",
            )

    def _fresh_id(self, name: str) -> str:
        if name not in self.invocations:
            return name
        n = self._suffixes.get(name, 1) + 1
        while f"{name}_{n}" in self.invocations:
            n += 1
        self._suffixes[name] = n
        return f"{name}_{n}"

    def step_specs(self, pipeline_defaults: StepDefaults) -> dict[str, StepSpec]:
        specs: dict[str, StepSpec] = {}
        for inv in self.invocations.values():
            inputs: dict[str, InputSpec] = {}
            for name, out in inv.inputs.items():
                upstream = self.invocations.get(out.invocation_id)
                if upstream is None:
                    raise PipelineDefinitionError(
                        f"Input '{name}' of step '{inv.id}' comes from step "
                        f"'{out.invocation_id}', which is not part of pipeline "
                        f"'{self.pipeline_name}'."
                    )
                inputs[name] = InputSpec(step=out.invocation_id, output=out.output_name)
            for a in inv.after:
                if a not in self.invocations:
                    raise PipelineDefinitionError(
                        f"Step '{inv.id}' runs after step '{a}', which pipeline "
                        f"'{self.pipeline_name}' does not have"
                        + unmatched(a, [i for i in self.invocations if i != inv.id], "steps")
                    )
            upstream_ids = list(dict.fromkeys([i.step for i in inputs.values()] + inv.after))
            specs[inv.id] = build_step_spec(
                inv.step, inv.id, inputs, inv.parameters, upstream_ids, pipeline_defaults
            )
        Dag({name: spec.upstream for name, spec in specs.items()})  # raises on cycles
        return specs


def code_hash_with_references(step: Step[Any, Any]) -> tuple[str, list[str]]:
    """The step's code hash, covering also what its code reaches of its own module (helpers,
    classes, constants and other objects: ``wharf.execution.module_references``), read here, where
    the pipeline is compiled and its module is whole, so that whoever decides its caching later (an
    orchestrator pod that never imports it) sees the same facts; and what of those the hash cannot
    hold (a constant too large to hash, an object that cannot be pickled: the step must not be
    cached)."""
    import hashlib

    from wharf.core.cache_key import canonical
    from wharf.execution.module_references import module_references, unhashed_references

    references = module_references(step.func)
    if not references:
        return step.code_hash, []
    digest = hashlib.sha256(f"{step.code_hash}\0{canonical(references)}".encode()).hexdigest()
    return digest, unhashed_references(references)


def build_step_spec(
    step: Step[Any, Any],
    invocation_id: str,
    inputs: dict[str, InputSpec],
    parameters: dict[str, Any],
    upstream: list[str],
    defaults: StepDefaults,
) -> StepSpec:
    code_hash, unhashed = code_hash_with_references(step)
    return StepSpec(
        name=invocation_id,
        source=step.source,
        source_file=step.source_file,
        source_code=step.source_code,
        code_hash=code_hash,
        docstring=step.docstring,
        upstream=tuple(upstream),
        inputs=inputs,
        parameters=parameters,
        outputs={
            o.name: OutputSpec(
                materializer=step.output_materializers.get(o.name),
                data_type=_type_path(o.annotation),
            )
            for o in step.interface.outputs
        },
        config=defaults.merge(step, unhashed),
    )


@dataclass(frozen=True)
class StepDefaults:
    """Pipeline-level values that a step's own settings override."""

    enable_cache: bool | None = None
    cache_policy: Any = None
    retry: Any = None
    environment: dict[str, str] = field(default_factory=dict)
    resources: Any = None
    component_settings: ComponentSettings = field(default_factory=dict)

    def merge(self, step: Step[Any, Any], unhashed: Sequence[str] = ()) -> StepConfig:
        """The step's config; not cached if it holds or reads (``unhashed``, what of its own
        module the key cannot read) a value its key cannot tell from another."""
        values: dict[str, Any] = {
            "enable_cache": step.enable_cache
            if step.enable_cache is not None
            else self.enable_cache,
            "retry": step.retry or self.retry,
            "resources": step.resources or self.resources,
            "runtime": step.runtime,
            "step_operator": step.step_operator,
            "environment": {**self.environment, **step.environment},
            "caching_parameters": step.caching_parameters,
            "enable_heartbeat": step.enable_heartbeat,
            "settings": step_layered(self.component_settings, step.component_settings),
        }
        policy = step.cache_policy or self.cache_policy
        if policy is not None:
            values["cache_policy"] = policy
        unread = [*step.unhashed, *unhashed]
        if unread and getattr(policy, "include_step_code", True):
            # its key cannot tell what it holds from another value: a hit could be wrong
            logger.warning(
                "Step '%s' is not cached: it holds %s, whose content its cache key cannot "
                "read; pass it as a parameter or an input, or leave the step's code out of "
                "its key (CachePolicy(include_step_code=False)) and name what matters in "
                "caching_parameters.",
                step.name,
                ", ".join(unread),
            )
            values["enable_cache"] = False
        return StepConfig(**values)


@contextmanager
def compiling(pipeline_name: str) -> Iterator[Compilation]:
    compilation = Compilation(pipeline_name)
    token = _ACTIVE.set(compilation)
    try:
        yield compilation
    finally:
        _ACTIVE.reset(token)
