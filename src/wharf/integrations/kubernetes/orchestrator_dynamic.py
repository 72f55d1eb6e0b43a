"""A dynamic pipeline's body in its orchestrator pod, for the engine's dynamic runner.

Owns :class:`DynamicBody` (the run loop's ``RunJob.pipeline_function`` and
``RunJob.spec_factory``), the submitter's side of a pipeline defined in its script
(:func:`main_script`, :data:`SCRIPT_KEY`) and what the submitter knows of a dynamic pipeline's
steps before it runs (:func:`known_steps`).

Invariant: the pipeline is imported when the run loop first calls the body, so a pipeline that
cannot be imported ends its run failed with the reason (not a pod failure its Job would retry).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from wharf.artifacts.store import ArtifactStore
from wharf.config.spec import InputSpec, PipelineSpec, StepSpec
from wharf.core.errors import InputError
from wharf.execution.code_fetch import cached_code, use_tree
from wharf.execution.step_like import StepLike
from wharf.execution.step_runner import SCRIPT_MODULE, import_user_object
from wharf.sdk.compiler import build_step_spec
from wharf.sdk.pipeline import Pipeline
from wharf.sdk.step import Step

SCRIPT_KEY = "pipeline_script"
"""Run metadata key: the submitter's script that defines a ``__main__`` dynamic pipeline."""
MAIN = "__main__"


def main_script(spec: PipelineSpec) -> str | None:
    """The path of this process's script when ``spec`` is a dynamic pipeline it defines (the
    submitter records it for the pod, :data:`SCRIPT_KEY`); else None."""
    if not spec.dynamic or not defined_in_script(spec):
        return None
    path = getattr(sys.modules.get(MAIN), "__file__", None)
    return str(Path(path).resolve()) if path else None


def defined_in_script(spec: PipelineSpec) -> bool:
    """Whether ``spec``'s pipeline is defined in the submitter's script (``__main__``)."""
    return (spec.source or "").partition(":")[0] == MAIN


def known_steps(spec: PipelineSpec) -> list[StepSpec]:
    """The specs (with the pipeline's defaults, as at run time) of the steps a dynamic
    pipeline's function names, as this process has them: the pipeline is looked up among the
    modules imported already (the submitter's; never imported here: nothing runs), its steps
    among the names its code uses (globals, closures, attributes of modules). Empty for a
    pipeline not found; steps it gets otherwise (as arguments, built at run time) are checked
    when they run."""
    module, _, qualname = (spec.source or "").partition(":")
    found: Any = sys.modules.get(module)
    for part in qualname.split(".") if found is not None else ():
        found = getattr(found, part, None)
    if not spec.dynamic or not isinstance(found, Pipeline):
        return []
    specs: dict[str, StepSpec] = {}
    for step in _named_steps(found.func):
        if step.name not in specs:
            specs[step.name] = build_step_spec(step, step.name, {}, {}, [], found.defaults)
    return list(specs.values())


def _named_steps(func: Callable[..., Any]) -> Iterator[Step[Any, Any]]:
    """The steps among the names ``func``'s code (nested code included) uses."""
    code: CodeType | None = getattr(func, "__code__", None)
    if code is None:
        return
    names: set[str] = set(code.co_freevars)
    codes = [code]
    while codes:
        current = codes.pop()
        names.update(current.co_names)
        codes.extend(c for c in current.co_consts if isinstance(c, CodeType))
    scope: dict[str, Any] = dict(getattr(func, "__globals__", {}))
    cells = zip(code.co_freevars, getattr(func, "__closure__", None) or (), strict=False)
    for name, cell in cells:
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    values = [scope[name] for name in sorted(names) if name in scope]
    modules = [value for value in values if isinstance(value, ModuleType)]  # ``mod.step()``
    values += [getattr(module, name, None) for module in modules for name in sorted(names)]
    yield from (value for value in values if isinstance(value, Step))


class DynamicBody:
    """The function of a dynamic pipeline and its step-spec builder, imported on first use.

    The pipeline the snapshot names (``PipelineSpec.source``) is imported from the run's code
    archive when the snapshot records one (fetched into this pod's code cache and put first on
    ``sys.path``, as a step pod does: ``wharf.execution.code_fetch``), else from the image;
    top-level pipeline calls of the user's module do not run while it is imported
    (``step_runner.import_user_object``). A pipeline defined in the submitter's script
    (``__main__``) is loaded from that script's copy in the archive (``script``); steps defined
    there get the specs of a local run (``__main__:name`` with the submitter's path), which
    step pods resolve in their own tree. Steps launched at run time get the specs a local run
    gives them (``sdk.compiler.build_step_spec`` with the pipeline's defaults).
    """

    def __init__(
        self,
        spec: PipelineSpec,
        artifact_store: ArtifactStore,
        code_cache: Path,
        script: str | None = None,
    ) -> None:
        self._spec = spec
        self._artifact_store = artifact_store
        self._code_cache = code_cache
        self._script = script
        """The submitter's script (its path there) for a pipeline defined in one."""
        self._lock = threading.Lock()
        self._pipeline: Pipeline[Any] | None = None

    def __call__(self, **parameters: Any) -> Any:
        """Run the pipeline's function (the run loop's ``pipeline_function``)."""
        return self.pipeline().func(**parameters)

    def step_spec(
        self,
        step: StepLike,
        invocation_id: str,
        inputs: dict[str, InputSpec],
        parameters: dict[str, Any],
        upstream: list[str],
    ) -> StepSpec:
        """The spec of a step launched at run time (the run loop's ``spec_factory``)."""
        pipeline = self.pipeline()
        spec = build_step_spec(
            step,  # type: ignore[arg-type]
            invocation_id,
            inputs,
            parameters,
            upstream,
            pipeline.defaults,
        )
        module, _, qualname = spec.source.partition(":")
        if module == SCRIPT_MODULE and self._script is not None:  # as the submitter names it
            spec = spec.model_copy(
                update={"source": f"{MAIN}:{qualname}", "source_file": self._script}
            )
        return spec

    def pipeline(self) -> Pipeline[Any]:
        with self._lock:
            if self._pipeline is None:
                self._pipeline = self._load()
            return self._pipeline

    def _load(self) -> Pipeline[Any]:
        spec = self._spec
        if spec.source is None:
            raise InputError(f"Dynamic pipeline '{spec.name}' records no source to import.")
        script = self._script
        if defined_in_script(spec) and script is None:
            raise InputError(
                f"Dynamic pipeline '{spec.name}' is defined in a script whose path its run "
                "does not record; define it in a module the script imports."
            )
        code = spec.code
        if code is not None:
            tree = cached_code(self._artifact_store, code, self._code_cache)
            use_tree(tree)
            if script is not None:
                script = _relocated(script, code.source_root, tree)
        found = import_user_object("pipeline", spec.name, spec.source, script)
        if not isinstance(found, Pipeline):
            raise InputError(f"'{spec.source}' is not a Wharf pipeline.")
        return found


def _relocated(path: str, source_root: str, tree: Path) -> str:
    """``path`` (on the submitter's machine) in the unpacked ``tree`` of ``source_root``."""
    try:
        return str(tree / Path(path).relative_to(source_root))
    except ValueError:
        raise InputError(
            f"The pipeline's script {path} is outside the code archive's source root {source_root}."
        ) from None
