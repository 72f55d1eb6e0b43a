"""The ``@pipeline`` decorator: compile the definition, record it, and run it on the stack.

Owns :class:`Pipeline` (built by :func:`pipeline`; calling it is :meth:`Pipeline.run_in` on a
freshly opened workspace) and :data:`NOT_RUN`.

Invariants: a run the orchestrator refuses records nothing, and no half-made run is left behind
when anything fails before the orchestrator takes over; while a step's process imports the
user's code, calling a pipeline runs nothing.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, overload

from wharf.config.component_settings import check_component_settings, parse_component_settings
from wharf.config.settings import CachePolicy, RetryConfig, Schedule
from wharf.config.spec import CodeSource, InputSpec, PipelineConfig, PipelineSpec, StepSpec
from wharf.core.enums import ComponentType, ExecutionMode, ExecutionStatus
from wharf.core.errors import InputError, PipelineDefinitionError, StepInterfaceError
from wharf.core.exact_values import unstorable
from wharf.core.ids import new_id
from wharf.core.names import pipeline_name, run_name
from wharf.core.suggestions import unmatched
from wharf.execution.artifact_outages import through_artifact_outage
from wharf.execution.code_archive import code_travels, ship_code, wharf_state
from wharf.execution.outages import retry_through_outage
from wharf.execution.refusal import RunRefusedError
from wharf.execution.run_heartbeat import creating_process, creation_patience
from wharf.execution.step_runner import UserCodeLoad, loading_user_code
from wharf.orchestrators.base import BaseOrchestrator, RunJob
from wharf.sdk.compiler import StepDefaults, build_step_spec, compiling
from wharf.sdk.run_failure import FailureWatch
from wharf.sdk.scheduling import record_schedule, schedule_on
from wharf.sdk.step import Step, parse_settings
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    PipelineRunRecord,
    RunStart,
)
from wharf.store.ports import Store

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


class _NotRun:
    """What a pipeline call returns while a step's process loads the user's code: nothing ran,
    so there is no run to look at."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"No pipeline ran (so no '{name}'): a step's process imports your script to find "
            "its step, and pipeline calls do nothing then. Put the pipeline call and the code "
            'using its result under `if __name__ == "__main__":`.'
        )

    def __repr__(self) -> str:
        return "<pipeline not run: a step's process is loading its step>"


NOT_RUN: Any = _NotRun()
"""Returned by a pipeline call made while a step's process loads the user's code."""


class Pipeline(Generic[P]):
    """A pipeline definition. Build it with :func:`pipeline`."""

    def __init__(
        self,
        func: Callable[P, Any],
        *,
        name: str | None = None,
        dynamic: bool = False,
        enable_cache: bool | None = None,
        cache_policy: CachePolicy | str | None = None,
        settings: Mapping[str, Any] | None = None,
        execution_mode: ExecutionMode | str | None = None,
        max_parallelism: int | None = None,
        retry: RetryConfig | Mapping[str, Any] | None = None,
        schedule: Schedule | None = None,
        environment: Mapping[str, str] | None = None,
        raise_on_failure: bool = True,
        code_source: CodeSource | None = None,
    ) -> None:
        self.func = func
        try:
            self.name = pipeline_name(name or func.__name__)
        except InputError as exc:
            raise PipelineDefinitionError(str(exc)) from None
        for option, value in (("dynamic", dynamic), ("raise_on_failure", raise_on_failure)):
            if not isinstance(value, bool):
                raise PipelineDefinitionError(
                    f"{option} of pipeline '{self.name}' must be True or False, not {value!r}."
                )
        if enable_cache is not None and not isinstance(enable_cache, bool):
            raise PipelineDefinitionError(
                f"enable_cache of pipeline '{self.name}' must be True, False or None, "
                f"not {enable_cache!r}."
            )
        self.dynamic = dynamic
        self.raise_on_failure = raise_on_failure
        """A call whose run ends failed raises ``RunFailedError`` (False: returns the run)."""
        self.source = f"{func.__module__}:{func.__qualname__}"
        try:
            mode = ExecutionMode(execution_mode) if execution_mode else None
        except ValueError as exc:
            known = ", ".join(m.value for m in ExecutionMode)
            raise PipelineDefinitionError(
                f"Unknown execution mode '{execution_mode}'; use one of {known}."
            ) from exc
        if isinstance(cache_policy, str):
            cache_policy = CachePolicy.from_string(cache_policy)
        if max_parallelism is not None and max_parallelism < 1:
            raise PipelineDefinitionError("max_parallelism must be at least 1.")
        if code_source not in (None, "archive", "image", "local"):
            raise PipelineDefinitionError(
                f"Unknown code_source '{code_source}'; use 'archive', 'image' or 'local'."
            )
        self.defaults = StepDefaults(
            enable_cache=enable_cache,
            cache_policy=cache_policy,
            retry=RetryConfig.model_validate(retry) if isinstance(retry, Mapping) else retry,
            environment=dict(environment or {}),
            resources=parse_settings(f"pipeline '{self.name}'", settings),
            component_settings=parse_component_settings(f"pipeline '{self.name}'", settings),
        )
        self.config = PipelineConfig(
            enable_cache=enable_cache,
            execution_mode=mode or ExecutionMode.STOP_ON_FAILURE,
            max_parallelism=max_parallelism,
            retry=self.defaults.retry,
            schedule=schedule,
            environment=dict(environment or {}),
            code_source=code_source,
            settings=self.defaults.component_settings,
        )
        self._steps: dict[str, Step[Any, Any]] = {}
        self.__doc__ = func.__doc__

    # ------------------------------------------------------------------ compile

    def compile(self, *args: P.args, **kwargs: P.kwargs) -> PipelineSpec:
        """The compiled form of this pipeline for these parameters (for a dynamic pipeline:
        no steps; they are decided while it runs)."""
        bound = self._bind(args, kwargs)
        if self.dynamic:
            return PipelineSpec(
                name=self.name,
                source=self.source,
                dynamic=True,
                parameters=bound,
                config=self.config,
            )
        with compiling(self.name) as compilation:
            definition: Callable[..., Any] = self.func
            result = definition(**bound)
        if result is not None and not _is_outputs(result):
            logger.warning("The return value of pipeline '%s' is ignored.", self.name)
        if not compilation.invocations:
            raise PipelineDefinitionError(f"Pipeline '{self.name}' has no steps.")
        steps = compilation.step_specs(self.defaults)
        self._steps = {i.id: i.step for i in compilation.invocations.values()}
        return PipelineSpec(
            name=self.name,
            source=self.source,
            dynamic=self.dynamic,
            parameters=bound,
            config=self.config,
            steps=steps,
        )

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        signature = inspect.signature(self.func)
        takes = [n for n, p in signature.parameters.items() if p.kind is not p.VAR_KEYWORD]
        if len(takes) == len(signature.parameters):  # no **kwargs: a name it lacks is a typo
            for key in kwargs:
                if key not in signature.parameters:
                    raise StepInterfaceError(
                        f"Pipeline '{self.name}' got an unexpected argument '{key}'"
                        + unmatched(key, takes, "parameters", none="it takes none")
                    )
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise StepInterfaceError(f"Pipeline '{self.name}': {exc}") from exc
        bound.apply_defaults()
        given = set(kwargs) | set(list(signature.parameters)[: len(args)])
        for key, value in bound.arguments.items():
            problem = unstorable(value)
            if problem is not None:
                what = "" if key in given else " (its default)"
                raise StepInterfaceError(
                    f"Pipeline parameter '{key}' of '{self.name}'{what} is {problem}; a pipeline "
                    "takes JSON values (str, int, float, bool, None, lists and dicts of them): "
                    "make other objects in a step."
                )
        return dict(bound.arguments)

    def _resolve_step(self, spec: StepSpec) -> Step[Any, Any]:
        step = self._steps.get(spec.name)
        if step is None:
            from wharf.execution.step_runner import import_step

            return import_step(spec)  # type: ignore[return-value]
        return step

    def _dynamic_spec(
        self,
        step: Any,
        invocation_id: str,
        inputs: dict[str, InputSpec],
        parameters: dict[str, Any],
        upstream: list[str],
    ) -> StepSpec:
        self._steps[invocation_id] = step
        return build_step_spec(step, invocation_id, inputs, parameters, upstream, self.defaults)

    # ------------------------------------------------------------------ run

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> PipelineRunRecord:
        loading = loading_user_code()
        if loading is not None:
            return self._not_run(loading)
        workspace = Workspace.open()
        try:
            return self.run_in(workspace, *args, **kwargs)
        finally:
            workspace.close()

    def run_in(self, workspace: Workspace, *args: Any, **kwargs: Any) -> PipelineRunRecord:
        """Run this pipeline with an already open workspace (tests and embedding use this).

        Compile to a :class:`PipelineSpec` -> the orchestrator's checks (``runtime_policy``: a
        refused run, or a schedule it cannot fire, records nothing) and the artifact store's
        (``check_usable``: a remote store that does not answer, a missing bucket, refused
        credentials, one line; nothing recorded, no step run) -> pipeline, snapshot and
        run records in one write (``runs.record``, under ids chosen beforehand, repeated
        through an outage of the store of up to two minutes, or the run's liveness timeout if
        longer: ``wharf.execution.run_heartbeat.creation_patience``; the run is not taken for
        lost meanwhile, and a repeat gets the run the first try wrote): the run recorded
        running at once when the orchestrator starts it in this process (the local ones), else
        a placeholder (initializing) it replaces -> the orchestrator runs it -> the finished
        run record. A run that ended failed raises
        :class:`~wharf.sdk.run_failure.RunFailedError` unless ``raise_on_failure=False``; a run
        whose credential the store refused while it ran (its API key revoked) raises
        :class:`~wharf.execution.refusal.RunRefusedError` either way (its
        end cannot be recorded). With a :class:`Schedule` the schedule is recorded with the
        run; on an orchestrator that fires schedules itself, the call records the schedule and
        runs nothing (:mod:`wharf.sdk.scheduling`).
        """
        loading = loading_user_code()
        if loading is not None:
            return self._not_run(loading)
        spec = self.compile(*args, **kwargs)
        store = workspace.store
        stack = workspace.active_stack()
        orchestrator: BaseOrchestrator = workspace.component_instance(
            stack, ComponentType.ORCHESTRATOR
        )
        artifact_store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
        step_operator = None
        if ComponentType.STEP_OPERATOR in stack.components:
            step_operator = workspace.component_instance(stack, ComponentType.STEP_OPERATOR)
        orchestrator.runtime_policy(spec, step_operator)  # refuse before anything is recorded
        check_component_settings(spec, (orchestrator, artifact_store, step_operator))
        check_usable = getattr(artifact_store, "check_usable", None)
        if check_usable is not None:  # a remote store that is unusable fails here, in one line
            check_usable()
        services = workspace.run_services(artifact_store)
        spec = ship_code(
            spec,
            artifact_store,
            travels=code_travels(spec, orchestrator, step_operator),
            limit_bytes=int(workspace.config.code_archive_limit_mib * 1024 * 1024),
            hashes_dir=workspace.config.code_hashes,
            keep_out=wharf_state(workspace.config),  # never the home and live store inside it
            through_outage=functools.partial(through_artifact_outage, services),
        )
        if spec.config.schedule is not None and orchestrator.schedules_runs:
            return schedule_on(self.name, workspace, orchestrator, stack.id, spec, services)
        name = run_name(self.name, services.clock())
        # Ids chosen before the first try: a repeat whose answer was lost (an outage) gets the
        # run and snapshot it wrote, never a second run. Repeated for up to creation_patience;
        # the run's first liveness window covers that time (creating_process), so no sweep
        # ends it while this call still retries.
        ids = {"id": new_id(), "snapshot_id": new_id()}
        if orchestrator.starts_runs_in_process:
            # Recorded running at once: no placeholder to replace (one write per call).
            start = RunStart(
                **ids,
                name=name,
                status=ExecutionStatus.RUNNING,
                orchestrator_run_id=orchestrator.new_run_id(),
                user_id=workspace.user.id,
                orchestrator=creating_process(services.heartbeat_interval),
            )
        else:
            start = RunStart(**ids, name=name, user_id=workspace.user.id)
        pipeline, snapshot, run = retry_through_outage(
            lambda: store.runs.record(workspace.project.id, self.name, stack.id, spec, start),
            what=f"record a run of pipeline {self.name}",
            patience=creation_patience(services.heartbeat_interval),
            clock=services.clock,
            sleep=services.sleep,
        )
        watch = FailureWatch()
        job = RunJob(
            snapshot,
            run,
            services,
            resolve_step=watch.steps(self._resolve_step, raises=self.raise_on_failure),
            pipeline_function=(
                watch.body(self.func, raises=self.raise_on_failure) if self.dynamic else None
            ),
            step_operator=step_operator,
            spec_factory=self._dynamic_spec,
        )
        if spec.config.schedule is not None:
            try:
                record_schedule(
                    self.name, workspace, pipeline.id, snapshot.id, spec.config.schedule
                )
            except BaseException:
                store.runs.delete(run.id)  # nothing has run: leave no run behind
                raise
        try:
            finished = orchestrator.submit_run(job)
        except RunRefusedError:  # started, and refused its credential: nothing can be written
            raise
        except BaseException as exc:
            self._forget_unstarted(store, run, exc)
            raise
        if self.raise_on_failure:
            watch.check(store, finished)
        return finished

    def _not_run(self, loading: UserCodeLoad) -> PipelineRunRecord:
        """A call made while a step's process imports the user's code (see
        ``wharf.execution.step_runner.loading_user_code``): a script without an ``if __name__
        == "__main__":`` guard must not start its pipeline again in every step. Logs once why
        it was skipped (at DEBUG where the script stops there, as documented; at INFO with a
        hint where the rest of the script goes on); a script that already defines the step stops
        executing there, anything else gets :data:`NOT_RUN` back."""
        stop = loading.step_defined
        if not loading.told:
            loading.told = True
            told = (
                "Not running pipeline '%s' in the process of step '%s': the step is loaded from "
                "%s, whose top level calls the pipeline"
            )
            if stop:
                told += " (the rest of the script is skipped here)."
            else:
                told += (
                    ' (the script goes on here). Put the call under `if __name__ == "__main__":` '
                    "or define the step before it."
                )
            level = logging.DEBUG if stop else logging.INFO
            logger.log(level, told, self.name, loading.step_name, loading.source)
        if stop:
            loading.stop_script()
        result: PipelineRunRecord = NOT_RUN
        return result

    @staticmethod
    def _forget_unstarted(store: Store, run: PipelineRunRecord, exc: BaseException) -> None:
        """After a failure: delete a placeholder nobody started, and end a run that was
        recorded running if the orchestrator never took it over (a run is never left
        running with nothing running it)."""
        try:
            current = store.runs.get(run.id)
            if current.is_placeholder:
                store.runs.delete(run.id)
            elif not current.status.is_finished:
                reason = f"The run failed to start: {exc!r}"
                store.runs.finish(run.id, ExecutionStatus.FAILED, reason)
        except Exception:  # the original error is the one to raise (e.g. the store is down)
            logger.warning("Could not clean up run %s after a failure.", run.id, exc_info=True)


def _is_outputs(value: Any) -> bool:
    from wharf.sdk.compiler import StepOutput

    if isinstance(value, StepOutput):
        return True
    return isinstance(value, tuple) and all(isinstance(v, StepOutput) for v in value)


@overload
def pipeline(func: Callable[P, Any], /) -> Pipeline[P]: ...
@overload
def pipeline(
    *,
    name: str | None = None,
    dynamic: bool = False,
    enable_cache: bool | None = None,
    cache_policy: CachePolicy | str | None = None,
    settings: Mapping[str, Any] | None = None,
    execution_mode: ExecutionMode | str | None = None,
    max_parallelism: int | None = None,
    retry: RetryConfig | Mapping[str, Any] | None = None,
    schedule: Schedule | None = None,
    environment: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
    code_source: CodeSource | None = None,
) -> Callable[[Callable[P, Any]], Pipeline[P]]: ...
def pipeline(func: Any = None, /, **options: Any) -> Any:
    """Make a function a pipeline: ``@pipeline`` or ``@pipeline(enable_cache=False, ...)``."""
    if func is not None:
        return Pipeline(func, **options)

    def decorate(f: Callable[P, Any]) -> Pipeline[P]:
        return Pipeline(f, **options)

    return decorate
