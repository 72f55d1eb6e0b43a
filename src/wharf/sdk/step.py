"""The ``@step`` decorator and the :class:`Step` object it makes.

A step is a plain function plus configuration. Called inside a static pipeline's definition it
records an invocation and returns output handles; called inside a running dynamic pipeline it
runs as a step of that run; called anywhere else it is just the function.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, overload

from pydantic import ValidationError

from wharf.artifacts.materializers.associated_types import annotation_problem
from wharf.artifacts.materializers.base import Materializer
from wharf.config.component_settings import is_component_key, parse_component_settings
from wharf.config.settings import CachePolicy, ResourceSettings, RetryConfig
from wharf.core.cache_key import without_comments
from wharf.core.enums import StepRuntime
from wharf.core.errors import InputError, StepInterfaceError
from wharf.core.exact_values import RESERVED_TEXT, reserved
from wharf.core.names import definition_name
from wharf.core.step_interface import StepInterface, parse_interface
from wharf.core.suggestions import close_names
from wharf.core.type_checks import annotation_classes, describe_annotation
from wharf.execution.dynamic import active_dynamic_run
from wharf.execution.dynamic_futures import MapResultsFuture, StepFuture
from wharf.execution.held_values import closure_values
from wharf.sdk import compiler

P = ParamSpec("P")
R = TypeVar("R")

KNOWN_SETTINGS = ("resources",)
RESERVED_CALL_ARGUMENTS = {
    "id": "the step's name in the run",
    "after": "the steps it runs after",
}
"""The keywords a step call in a pipeline takes for itself, not for the step's function."""


def _source_of(func: Callable[..., Any]) -> tuple[str | None, str, tuple[str, ...]]:
    """(source code or None, code hash, what of its held values the hash cannot hold). The
    hash is of the source without comments, blank lines and trailing white space
    (``core.cache_key.without_comments``), else of the bytecode; it also covers the values the
    function closes over (``wharf.execution.held_values``)."""
    try:
        code = inspect.getsource(func)
    except (OSError, TypeError):
        code = None
    if code is not None:
        digest = hashlib.sha256(without_comments(code).encode()).hexdigest()
    else:
        raw = func.__code__.co_code + repr(func.__code__.co_consts).encode()
        digest = hashlib.sha256(raw).hexdigest()
    closure = closure_values(func)  # a step made by a factory: the values it closes over
    if closure.digest is not None:
        digest = hashlib.sha256(f"{digest}\0{closure.digest}".encode()).hexdigest()
    return code, digest, closure.unhashed


def _script_file(func: Callable[..., Any]) -> str | None:
    if func.__module__ != "__main__":
        return None
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return os.path.abspath(path) if path else None


def _one_line(error: ValidationError) -> str:
    """A validation error's problems on one line (``field: message; ...``)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'value'}: {e['msg']}" for e in error.errors()
    )


def _not_stored_as_is(value: Any) -> str | None:
    """What of ``value`` the run's record (JSON) would not keep as it is (a set comes back as
    a list in its hashing order, bytes as a str, NaN as null, ``1`` as a key as ``"1"``, an
    object not at all), so the cache key computed from it elsewhere would differ; None if
    nothing."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if reserved(value):
        return RESERVED_TEXT
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the float {value!r}"
    if isinstance(value, list | tuple):
        return next((p for p in map(_not_stored_as_is, value) if p is not None), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"a dict with the {type(key).__name__} key {key!r}"
            problem = _not_stored_as_is(item)
            if problem is not None:
                return problem
        return None
    return f"a {type(value).__name__}"


def _caching_parameters(owner: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``caching_parameters`` checked: JSON values under str names, as the record keeps them."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise StepInterfaceError(
            f"caching_parameters of {owner} must be a dict, not {type(given).__name__}."
        )
    for name, value in given.items():
        problem = (
            f"a {type(name).__name__} name" if not isinstance(name, str) else None
        ) or _not_stored_as_is(value)
        if problem is not None:
            raise StepInterfaceError(
                f"caching_parameters[{name!r}] of {owner} holds {problem}, which a run's record "
                "cannot keep as it is; use JSON values (str, int, float, bool, None, and lists "
                "and str-keyed dicts of them), e.g. a sorted list for a set or str(value)."
            )
    return dict(given)


def _materializer_path(owner: str, cls: Any) -> str:
    """The import path of an output materializer given as a class or a ``module:name`` path;
    anything else is refused here rather than when the step saves its output."""
    if isinstance(cls, str):
        return cls
    if not (isinstance(cls, type) and issubclass(cls, Materializer)):
        raise StepInterfaceError(
            f"output_materializers of {owner} must be Materializer subclasses or "
            f"'module:name' import paths, not {cls!r}."
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def parse_settings(owner: str, settings: Mapping[str, Any] | None) -> ResourceSettings | None:
    """Validate a ``settings`` mapping; return its resource settings, if any (component
    entries are :func:`~wharf.config.component_settings.parse_component_settings`')."""
    if not settings:
        return None
    for key in settings:
        if key not in KNOWN_SETTINGS and not is_component_key(key):
            raise StepInterfaceError(
                f"Unknown setting '{key}' on {owner}; known settings: {', '.join(KNOWN_SETTINGS)}, "
                "and '<component type>.<flavor>' for a stack component "
                "(e.g. 'orchestrator.kubernetes')."
            )
    resources = settings.get("resources")
    if resources is None or isinstance(resources, ResourceSettings):
        return resources
    if isinstance(resources, Mapping):
        try:
            return ResourceSettings.model_validate(dict(resources))
        except ValueError as exc:
            raise StepInterfaceError(f"Invalid resource settings on {owner}: {exc}") from exc
    raise StepInterfaceError(
        f"settings['resources'] of {owner} must be a ResourceSettings or a mapping."
    )


class Step(Generic[P, R]):
    """A pipeline step. Build it with :func:`step`."""

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        enable_cache: bool | None = None,
        cache_policy: CachePolicy | str | None = None,
        retry: RetryConfig | Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        runtime: StepRuntime | str | None = None,
        step_operator: str | None = None,
        output_materializers: Any = None,
        environment: Mapping[str, str] | None = None,
        caching_parameters: Mapping[str, Any] | None = None,
        enable_heartbeat: bool = True,
    ) -> None:
        if not callable(func) or inspect.isclass(func):
            raise StepInterfaceError("@step decorates a function.")
        if inspect.iscoroutinefunction(func) or inspect.isgeneratorfunction(func):
            raise StepInterfaceError(
                f"Step '{func.__name__}' must be a plain function, not a coroutine or generator."
            )
        self.func = func
        try:
            self.name = definition_name(name or func.__name__, "step")
        except InputError as exc:
            raise StepInterfaceError(str(exc)) from None
        self.interface: StepInterface = parse_interface(func, self.name)
        self.source = f"{func.__module__}:{func.__qualname__}"
        self.source_file = _script_file(func)
        # unhashed: values the function holds that its cache key cannot tell from others of
        # their type ("'name', a Type (why)"): not cached while its code is in its key
        self.source_code, self.code_hash, self.unhashed = _source_of(func)
        self.docstring = inspect.getdoc(func)
        if enable_cache is not None and not isinstance(enable_cache, bool):
            raise StepInterfaceError(
                f"enable_cache of step '{self.name}' must be True, False or None, "
                f"not {enable_cache!r}."
            )
        self.enable_cache = enable_cache
        if isinstance(cache_policy, str):
            cache_policy = CachePolicy.from_string(cache_policy)
        unknown = set(cache_policy.ignored_inputs if cache_policy else ()) - set(
            self.interface.inputs
        )
        if unknown:  # a misspelt input would silently stay in the cache key
            raise StepInterfaceError(
                f"The cache policy of step '{self.name}' ignores unknown inputs "
                f"{sorted(unknown)}; inputs are {list(self.interface.inputs)}."
            )
        self.cache_policy = cache_policy
        try:
            self.retry = RetryConfig.model_validate(retry) if isinstance(retry, Mapping) else retry
        except ValidationError as exc:
            raise StepInterfaceError(
                f"Invalid retry settings of step '{self.name}': {_one_line(exc)}"
            ) from None
        self.resources = parse_settings(f"step '{self.name}'", settings)
        self.component_settings = parse_component_settings(f"step '{self.name}'", settings)
        try:
            self.runtime = StepRuntime(runtime) if runtime is not None else None
        except ValueError as exc:
            raise StepInterfaceError(
                f"Unknown runtime '{runtime}' for step '{self.name}'; use inline or isolated."
            ) from exc
        self.step_operator = step_operator
        self.output_materializers = self._parse_materializers(output_materializers)
        self.environment = dict(environment or {})
        for key, value in self.environment.items():
            if not (isinstance(key, str) and isinstance(value, str)):
                raise StepInterfaceError(
                    f"environment of step '{self.name}' maps names to strings; "
                    f"{key!r} is {value!r}."
                )
        self.caching_parameters = _caching_parameters(f"step '{self.name}'", caching_parameters)
        self.enable_heartbeat = enable_heartbeat
        self._options: dict[str, Any] = {
            "name": name,
            "enable_cache": enable_cache,
            "cache_policy": cache_policy,
            "retry": retry,
            "settings": settings,
            "runtime": runtime,
            "step_operator": step_operator,
            "output_materializers": output_materializers,
            "environment": environment,
            "caching_parameters": caching_parameters,
            "enable_heartbeat": enable_heartbeat,
        }
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def _parse_materializers(self, value: Any) -> dict[str, str]:
        if value is None:
            return {}
        names = self.interface.output_names
        owner = f"step '{self.name}'"
        if isinstance(value, Mapping):
            unknown = set(value) - set(names)
            if unknown:
                raise StepInterfaceError(
                    f"output_materializers of step '{self.name}' name unknown outputs: "
                    f"{sorted(unknown)}; outputs are {list(names)}."
                )
            chosen = dict(value)
        else:
            chosen = dict.fromkeys(names, value)
        for output in self.interface.outputs:
            if output.name in chosen:
                self._check_saves(output.name, output.annotation, chosen[output.name])
        return {k: _materializer_path(owner, v) for k, v in chosen.items()}

    def _check_saves(self, output: str, annotation: Any, materializer: Any) -> None:
        """Refuse a materializer class named for an output whose annotation names no type it
        saves (a path, or an annotation that is not checked, is checked when it saves)."""
        if not (isinstance(materializer, type) and issubclass(materializer, Materializer)):
            return
        classes = annotation_classes(annotation)
        if classes is None:
            return
        subject = f"Output '{output}' of step '{self.name}'"
        problem = annotation_problem(
            subject, materializer, classes, describe_annotation(annotation)
        )
        if problem is not None:
            raise StepInterfaceError(problem)

    def with_options(self, **changes: Any) -> Step[P, R]:
        """A copy of this step with some options changed (same function, same source)."""
        return Step(self.func, **{**self._options, **changes})

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        context = compiler.active_compilation()
        if context is not None or active_dynamic_run() is not None:
            self._check_reserved(args, kwargs)
        if context is not None:
            result: Any = context.invoke(self, args, dict(kwargs))
            return result  # type: ignore[no-any-return]
        dynamic_run = active_dynamic_run()
        if dynamic_run is not None:
            outputs: Any = dynamic_run.call(self, args, dict(kwargs))
            return outputs  # type: ignore[no-any-return]
        return self.func(*args, **kwargs)

    def _check_reserved(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Refuse a keyword that a step call in a pipeline takes as its own (``id=``,
        ``after=``) where it can only have been meant for the step's parameter of that name
        (not bound positionally): it would be taken away from the parameter; and a misspelt
        one (``aftr=``), which the step's parameters alone would not suggest."""
        positional = list(self.interface.inputs)[: len(args)]
        for name, meaning in RESERVED_CALL_ARGUMENTS.items():
            if name in kwargs and name in self.interface.inputs and name not in positional:
                raise StepInterfaceError(
                    f"Step '{self.name}' has a parameter named '{name}', which a step call in a "
                    f"pipeline takes as its own '{name}=' ({meaning}): "
                    "pass the parameter positionally, or rename it."
                )
        known = [*self.interface.inputs, *RESERVED_CALL_ARGUMENTS]
        for key in kwargs:
            close = [] if key in known else close_names(key, known)
            if close and close[0] in RESERVED_CALL_ARGUMENTS:
                raise StepInterfaceError(
                    f"Step '{self.name}' got an unexpected argument '{key}'; did you mean "
                    f"'{close[0]}=' ({RESERVED_CALL_ARGUMENTS[close[0]]})?"
                )

    def submit(self, *args: Any, **kwargs: Any) -> StepFuture:
        """Launch this step concurrently inside a dynamic pipeline; returns a future."""
        dynamic_run = active_dynamic_run()
        if dynamic_run is None:
            raise StepInterfaceError(
                "Submitting a step is only possible within a dynamic pipeline."
            )
        self._check_reserved(args, kwargs)
        return dynamic_run.submit(self, args, kwargs)

    def map(self, *args: Any, **kwargs: Any) -> MapResultsFuture:
        """Launch one step per element of the list inputs (``unmapped(x)`` passes x whole)."""
        dynamic_run = active_dynamic_run()
        if dynamic_run is None:
            raise StepInterfaceError(
                "Mapping over step inputs is only possible within a dynamic pipeline."
            )
        self._check_reserved(args, kwargs)
        return dynamic_run.map(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<Step {self.name} ({self.source})>"


@overload
def step(func: Callable[P, R], /) -> Step[P, R]: ...
@overload
def step(
    *,
    name: str | None = None,
    enable_cache: bool | None = None,
    cache_policy: CachePolicy | str | None = None,
    retry: RetryConfig | Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    runtime: StepRuntime | str | None = None,
    step_operator: str | None = None,
    output_materializers: Any = None,
    environment: Mapping[str, str] | None = None,
    caching_parameters: Mapping[str, Any] | None = None,
    enable_heartbeat: bool = True,
) -> Callable[[Callable[P, R]], Step[P, R]]: ...
def step(func: Any = None, /, **options: Any) -> Any:
    """Make a function a pipeline step: ``@step`` or ``@step(enable_cache=False, ...)``."""
    if func is not None:
        return Step(func, **options)

    def decorate(f: Callable[P, R]) -> Step[P, R]:
        return Step(f, **options)

    return decorate
