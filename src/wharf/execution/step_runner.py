"""One attempt of one step, in this thread: load inputs, call the user function, publish outputs.

Owns :class:`StepRunner` (the user-code error boundary: :class:`StepAbortError` turns a
``sys.exit`` in a step into its failure) and the import of user code
(:func:`import_step`, :func:`import_user_object`, :func:`loading_user_code`; the script again
in a pool's worker: :func:`load_script_copy`, ``script_workers``). Invariants: the
user function runs inside the step context and an :class:`InterruptibleRegion`; the step's
``environment=`` variables are set from the loading of its inputs to the saving of its outputs
(:mod:`wharf.execution.step_variables`); outputs are all saved to the artifact store before any
is recorded, and if one fails to save the others are removed; an input or output that the
artifact store could not be reached for is tried again through a short outage
(:mod:`wharf.execution.artifact_outages`); :meth:`StepRunner.run` only saves them: the caller
records them with the step's end (``attempt_ends.finish_attempt``); a process forked by user
code (the function, a materializer) that leaves it ends there, never ending its parent's step
(:mod:`wharf.execution.forked_children`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from wharf.artifacts import SavedArtifact, load_artifact, load_materializer, save_artifact
from wharf.artifacts.materializers import script_classes
from wharf.config.spec import StepSpec
from wharf.core.errors import (
    InputError,
    MaterializationError,
    StepInterfaceError,
    WharfError,
)
from wharf.execution import script_workers
from wharf.execution.artifact_outages import through_artifact_outage
from wharf.execution.context import StepContext, step_context
from wharf.execution.forked_children import child_ends_here, ending_children
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.execution.services import RunServices
from wharf.execution.step_like import StepLike, split_step_outputs
from wharf.execution.step_region import StepRegion
from wharf.execution.step_variables import step_variables
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    PipelineRunRecord,
    StepRunRecord,
)

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

StepResolver = Callable[[StepSpec], StepLike]

CALLER_SHOWS_STEP_ERROR = "wharf_caller_shows_step_error"
"""Set on a step resolver whose caller raises a step's exception again after the run (chained
to ``RunFailedError``): a function ``(exception) -> bool``, true if the caller takes over
showing that exception of the user's code (it then shows its traceback). The failure of a
step's last attempt is then logged in one line, so that its traceback is shown once."""

SCRIPT_MODULE = script_classes.SCRIPT_MODULE
"""The user's script's module name in a step's own process (artifacts find its classes)."""


class StepAbortError(WharfError):
    """The step's code raised what is not an ``Exception``: it exited (``sys.exit``), raised
    ``KeyboardInterrupt`` in a step thread, or a ``BaseException`` of its own. Its step fails
    like on any other error, instead of the exception ending the process that runs the
    pipeline (inline, its step left running) or the step's process before it records its end
    (isolated)."""


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _described(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _abort(exc: BaseException, where: str = "") -> NoReturn:
    """Raise what user code's (the step's function's, a materializer's) ``BaseException``
    that is not an ``Exception`` becomes: a :class:`StepAbortError` failing the step, ``where``
    (e.g. "Output 'x' of step 's'") before its description; a ``KeyboardInterrupt`` in the
    main thread (a Ctrl-C or forced stop of the process, not the step's doing) stays itself."""
    if isinstance(exc, KeyboardInterrupt) and _in_main_thread():
        raise exc
    raise StepAbortError(f"{where}: {_described(exc)}" if where else _described(exc)) from exc


def _check_output_materializers(spec: StepSpec) -> None:
    """Refuse a step whose chosen output materializer (an import path) cannot be there when its
    output is saved, before its code runs rather than once its work is done: its module is
    imported but lacks it (a misspelt name), or its top-level package does not exist (a
    misspelt module). A module that exists but is not imported yet is left alone: the step's
    code may import it. Nothing is imported here."""
    for name, output in spec.outputs.items():
        path = output.materializer
        if path is None or _may_be_imported_later(path):
            continue
        try:
            load_materializer(path)
        except MaterializationError as exc:
            raise MaterializationError(f"Output '{name}' of step '{spec.name}': {exc}") from exc


def _may_be_imported_later(path: str) -> bool:
    module_name = path.partition(":")[0]
    if any(name in sys.modules for name in script_classes.script_aliases(module_name)):
        return False
    try:
        return importlib.util.find_spec(module_name.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


class _ScriptStopped(BaseException):
    """Ends the execution of a script at a pipeline call (not an error: see
    :func:`import_user_object`)."""


@dataclass
class UserCodeLoad:
    """An import of user code that :func:`import_step` is running in this thread."""

    step_name: str
    source: str
    attribute: str
    """The module attribute that holds (or leads to) the step."""
    told: bool = False
    """A pipeline call was already skipped (and logged) during this import."""
    script: ModuleType | None = None
    """The script being executed, when the step comes from one (not an importable module)."""

    @property
    def step_defined(self) -> bool:
        """The script being executed defines the step by now."""
        return self.script is not None and hasattr(self.script, self.attribute)

    def stop_script(self) -> None:
        """Stop executing the script here (call only when :attr:`step_defined`)."""
        raise _ScriptStopped


_LOADING: ContextVar[UserCodeLoad | None] = ContextVar("wharf_user_code_load", default=None)


def loading_user_code() -> UserCodeLoad | None:
    """The import of user code in progress in this thread, if any (pipeline calls made by it
    must not run)."""
    return _LOADING.get()


@contextmanager
def _loading(load: UserCodeLoad) -> Iterator[UserCodeLoad]:
    token = _LOADING.set(load)
    try:
        yield load
    finally:
        _LOADING.reset(token)


def _load_script(path: str, load: UserCodeLoad) -> ModuleType:
    """A user's script (the ``__main__`` of the parent) as a module, loaded once."""
    module = sys.modules.get(SCRIPT_MODULE)
    if module is not None and getattr(module, "__file__", None) == path:
        return module
    spec = importlib.util.spec_from_file_location(SCRIPT_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[SCRIPT_MODULE] = module
    load.script = module
    try:
        spec.loader.exec_module(module)
    except _ScriptStopped:
        pass  # stopped at a pipeline call, the step defined: the module is complete enough
    except BaseException:
        del sys.modules[SCRIPT_MODULE]
        raise
    script_workers.record(script_workers.ScriptLoaded(path, load.step_name, load.attribute))
    return module


def load_script_copy(loaded: script_workers.ScriptLoaded) -> ModuleType:
    """Execute the script a step's process executed, as it did (``__wharf_script__``, pipeline
    calls not run): in a process pool's worker of that process (:mod:`.script_workers`)."""
    with _loading(UserCodeLoad(loaded.step_name, loaded.path, loaded.attribute)) as load:
        return _load_script(loaded.path, load)


def import_step(spec: StepSpec) -> StepLike:
    """The step object named by ``spec.source`` (``module:qualname``)."""
    obj = import_user_object("step", spec.name, spec.source, spec.source_file)
    if not isinstance(obj, StepLike):
        raise InputError(f"'{spec.source}' is not a Wharf step.")
    return obj


def import_user_object(kind: str, name: str, source: str, source_file: str | None) -> Any:
    """The object named by ``source`` (``module:qualname``; a ``__main__`` module is the script
    ``source_file``, executed under the name ``__wharf_script__``), imported while pipeline
    calls do not run; errors name it as ``kind`` (``step``, ``pipeline``) ``name``, raised as
    :class:`InputError` (whatever the import raises, ``SystemExit`` included).

    A script that calls its pipeline at top level (no ``__main__`` guard) must never start a
    pipeline again inside a step's process: a script whose step is defined by the time it
    calls a pipeline stops executing there (the step's process sees the script as it was when
    the parent called the pipeline); otherwise the call does nothing and the script goes on."""
    module_name, _, qualname = source.partition(":")
    if "<locals>" in qualname:
        raise InputError(
            f"{kind.capitalize()} '{name}' is defined inside a function ({qualname}); define it "
            "at module level so that another process can import it."
        )
    where = source_file if module_name == "__main__" and source_file else module_name
    attribute = qualname.split(".")[0]
    script: Any = None
    try:
        with _loading(UserCodeLoad(name, where, attribute)) as load:
            if module_name == "__main__" and source_file:
                main = sys.modules.get("__main__")
                has_it = main is not None and hasattr(main, attribute)
                obj: Any = main if has_it else _load_script(source_file, load)
                script = obj
            else:
                obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, OSError) as exc:
        if script is not None and not hasattr(script, attribute):
            raise InputError(  # the script loaded, but without it: under a guard, or an `if`
                f"{kind.capitalize()} '{name}' is not defined at the top level of {source_file}"
                f' where its own process loads it (under `if __name__ == "__main__":` it is'
                " not): define it at module level, outside the guard."
            ) from exc
        raise InputError(f"Cannot import {kind} '{name}' from '{source}': {exc}") from exc
    except (Exception, SystemExit) as exc:
        # The user's module raised (or exited) while it was imported: it cannot load.
        raise InputError(
            f"Cannot import {kind} '{name}': loading {where} raised {type(exc).__name__}: {exc}"
        ) from exc
    return obj


def _defined_at(func: Callable[..., Any]) -> tuple[str, int] | None:
    """Where the user's function behind ``func`` is defined (file, first line), if known: a
    pickled output's warning points there."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    return None if code is None else (code.co_filename, code.co_firstlineno)


def artifact_name(pipeline_name: str, step_name: str, output: str) -> str:
    return f"{pipeline_name}::{step_name}::{output}"


class StepRunner:
    def __init__(
        self,
        services: RunServices,
        pipeline_name: str,
        run: PipelineRunRecord,
        resolve_step: StepResolver = import_step,
    ) -> None:
        self._services = services
        self._pipeline_name = pipeline_name
        self._run = run
        self._resolve_step = resolve_step

    def caller_shows(self, spec: StepSpec, attempt: int, error: BaseException) -> bool:
        """Whether the caller shows ``error``, raised by attempt ``attempt`` of ``spec``, after
        the run (only the last attempt's: see :data:`CALLER_SHOWS_STEP_ERROR`)."""
        retry = spec.config.retry
        if attempt < 1 + (retry.max_retries if retry is not None else 0):
            return False
        shows = getattr(self._resolve_step, CALLER_SHOWS_STEP_ERROR, None)
        return bool(shows is not None and shows(error))

    def load_inputs(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        stop: StepRegion | None = None,
    ) -> dict[str, Any]:
        """The inputs' values, each loaded through a short outage of the store (ended by
        ``stop``'s interrupt, the step's region: ``StepInterrupted``)."""
        store = self._services.artifact_store
        loaded: dict[str, Any] = {}
        for name, v in inputs.items():
            try:
                loaded[name] = through_artifact_outage(
                    self._services,
                    ending_children(
                        functools.partial(load_artifact, store, v.uri, v.data_type, v.materializer)
                    ),
                    f"load input '{name}' of step '{spec.name}'",
                    stop=stop,
                )
            except (StepInterrupted, Exception):
                raise
            except BaseException as exc:  # a materializer's load is user code too
                _abort(exc, f"Input '{name}' of step '{spec.name}'")
        return loaded

    def run(
        self,
        spec: StepSpec,
        step_run: StepRunRecord,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        allocation: ResourceRequestInfo | None = None,
    ) -> dict[str, ArtifactVersionCreate]:
        """Run the user function and save its outputs; return them, not yet recorded."""
        step = self._resolve_step(spec)
        with step_variables(spec.name, spec.config.environment, region):
            return self._attempt(step, spec, step_run, inputs, region, allocation)

    def _attempt(
        self,
        step: StepLike,
        spec: StepSpec,
        step_run: StepRunRecord,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        allocation: ResourceRequestInfo | None,
    ) -> dict[str, ArtifactVersionCreate]:
        _check_output_materializers(spec)
        stop = region if isinstance(region, StepRegion) else None
        kwargs = {**spec.parameters, **self.load_inputs(spec, inputs, stop)}
        artifact_store = self._services.artifact_store
        uris = {
            # <root>/<pipeline>/<run id>/<unique>: one new directory per artifact (directory
            # creation dominates the cost of small artifacts); names live in the store
            name: artifact_store.new_uri(self._pipeline_name, str(self._run.id))
            for name in spec.outputs
        }
        context = StepContext(self._pipeline_name, self._run, step_run, uris, allocation)
        # A holder's stretch (see HoldersFirst) pauses while the user code runs: waiting
        # steps may poll and be created meanwhile. From the code's return to the release the
        # slot is held but idle again, so the stretch resumes (InlineExecutor ends it once the
        # step's end is recorded). A thread in no stretch (a step's own process) opens none.
        resources = self._services.resources
        holders = resources.holders if resources is not None and allocation is not None else None
        resume = holders is not None and holders.end()
        try:
            with step_context(context), region, child_ends_here():
                value = step.func(**kwargs)
        except (StepInterrupted, Exception):
            raise  # asked to stop, or an ordinary error (the caller records either)
        except BaseException as exc:
            _abort(exc)
        finally:
            if resume and holders is not None:
                holders.begin()
        values = split_step_outputs(step, spec.name, value)
        saved = self._save_all(spec, values, uris, _defined_at(step.func), stop)
        return {
            name: ArtifactVersionCreate(
                project_id=self._services.project_id,
                name=artifact_name(self._pipeline_name, spec.name, name),
                uri=s.uri,
                data_type=s.data_type,
                materializer=s.materializer,
                content_hash=s.content_hash,
                producer_step_run_id=step_run.id,
                artifact_store_id=artifact_store.id,
            )
            for name, s in saved.items()
        }

    def _save_all(
        self,
        spec: StepSpec,
        values: Mapping[str, Any],
        uris: Mapping[str, str],
        warn_at: tuple[str, int] | None,
        stop: StepRegion | None = None,
    ) -> dict[str, SavedArtifact]:
        services = self._services
        saved: dict[str, SavedArtifact] = {}
        try:
            for name, value in values.items():
                saved[name] = self._save(spec, name, value, uris[name], warn_at, stop)
        except BaseException as exc:
            for s in saved.values():
                if isinstance(exc, StepInterrupted):  # the store may be gone: as far as it can
                    with contextlib.suppress(OSError):
                        services.artifact_store.rmtree(s.uri)
                else:
                    services.artifact_store.rmtree(s.uri)
            if isinstance(exc, MaterializationError):
                raise MaterializationError(f"Output '{name}' of step '{spec.name}': {exc}") from exc
            if isinstance(exc, StepInterfaceError):
                raise
            if isinstance(exc, Exception):
                raise MaterializationError(
                    f"Output '{name}' of step '{spec.name}' could not be saved: {exc}"
                ) from exc
            if isinstance(exc, StepInterrupted):
                raise
            # a materializer's save is user code too
            _abort(exc, f"Output '{name}' of step '{spec.name}'")
        return saved

    def _save(
        self,
        spec: StepSpec,
        name: str,
        value: Any,
        uri: str,
        warn_at: tuple[str, int] | None,
        stop: StepRegion | None = None,
    ) -> SavedArtifact:
        """Save output ``name`` at ``uri``, again (at the same URI, cleared first) while the
        artifact store cannot be reached, for up to the run's liveness timeout; ``stop``'s
        interrupt ends that wait (``StepInterrupted``: the step ends stopped, nothing saved)."""
        services = self._services
        store = services.artifact_store
        return through_artifact_outage(
            services,
            ending_children(
                lambda: save_artifact(
                    value,
                    store,
                    uri,
                    services.materializers,
                    materializer=spec.outputs[name].materializer,
                    warn_at=warn_at,
                )
            ),
            f"save output '{name}' of step '{spec.name}'",
            before_again=lambda: store.rmtree(uri),
            stop=stop,
        )
