"""Cache resolution: gather a step's cache-key facts (the I/O half of the cache key).

``wharf.core.cache_key`` hashes; this module reads the files, imports the modules and calls the
user's ``cache_func`` that a ``CachePolicy`` names (the launcher asks the store for a reusable
run, ``steps.find_cached_or_create``). Invariants: a source dependency counts by its source and
its code as loaded (a module edited since its import never lends the old code's result to the
new code), its functions' defaults and closed-over values by content (one the key cannot read
gives the step a key never met again: not cached); ``__main__`` in a cache policy is the
step's script, wherever the key is computed; the values a step's function closes over count
(``execution.held_values``, part of its code hash); ``expires_after`` counts from the
result's making (:func:`expiry_for`); what the step's code reaches of its own module counts
with its code hash (``sdk.compiler.code_hash_with_references``, read where the pipeline is
compiled).
Caching is on unless the step (or else its pipeline) sets ``enable_cache=False``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from wharf.config.settings import CachePolicy
from wharf.config.spec import StepSpec
from wharf.core.cache_key import (
    CacheKeyFacts,
    InputFact,
    KeyPolicy,
    code_digest,
    compute_cache_key,
    without_comments,
)
from wharf.core.errors import InputError
from wharf.execution.held_values import UnhashedValueError, loaded_code_digest
from wharf.execution.services import RunServices
from wharf.execution.step_runner import import_user_object
from wharf.store.models import ArtifactVersionRecord

MAIN = "__main__"

logger = logging.getLogger(__name__)


def cache_enabled(spec: StepSpec) -> bool:
    return spec.config.enable_cache is not False


def _import_object(path: str, spec: StepSpec | None = None) -> Any:
    """The object at ``module:attr`` or ``module.attr``, or the module ``path`` itself; in
    ``__main__``, the step's script (``spec.source_file``), loaded if this process runs
    another ``__main__`` (an orchestrator's process: see :func:`_script_object`)."""
    if ":" not in path:
        if path == MAIN and spec is not None and spec.source_file:
            return _script_object(path, spec, None)
        try:
            return importlib.import_module(path)
        except ImportError:
            pass  # module.attr
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if module_name == MAIN and spec is not None and spec.source_file:
        return _script_object(path, spec, attr)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(f"Cannot import '{path}' named in a cache policy: {exc}") from exc
    return obj


def _script_object(path: str, spec: StepSpec, attr: str | None) -> Any:
    """``attr`` of the script that defines the step (the script itself if None): this
    process's ``__main__`` if it defines the step, else the script loaded as the step's own
    process loads it (``step_runner.import_user_object``), as where an orchestrator decides
    the steps (a Kubernetes orchestrator's pod, whose ``__main__`` is Wharf's own)."""
    main = sys.modules.get(MAIN)
    main_file = getattr(main, "__file__", None)
    try:
        if main_file is not None and os.path.abspath(main_file) == spec.source_file:
            script = main  # this process runs the script (its step may be defined anywhere)
        else:
            step = import_user_object("step", spec.name, spec.source, spec.source_file)
            script = sys.modules[_module_of(step)]
        obj: Any = script
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (InputError, KeyError, AttributeError) as exc:
        raise InputError(f"Cannot import '{path}' named in a cache policy: {exc}") from exc
    return obj


def _module_of(step: Any) -> str:
    func = getattr(step, "func", step)
    return str(inspect.unwrap(func).__module__)


def file_digests(root: Path, paths: tuple[str, ...]) -> list[tuple[str, str]]:
    digests = []
    resolved_root = root.resolve()
    for rel in paths:
        path = (resolved_root / rel).resolve()
        if not path.is_relative_to(resolved_root) or not path.is_file():
            raise InputError(f"Missing file for cache computation: {rel} (under {root}).")
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digests.append((str(path.relative_to(resolved_root)), h.hexdigest()))
    return digests


def source_dependency(obj: Any, path: str) -> str:
    """What the cache key holds of a source dependency: its source code as the file has it
    now, comments left out (as of the step's own code, ``core.cache_key.code_digest``), and a
    digest of its code as this process loaded it (``loaded_code_digest``). A module edited
    after it was imported (a notebook, a long-lived process) gives the new source but runs the
    old code: with the source alone, the old code's result was stored under the new code's
    key, and a fresh process running the new code reused it. The loaded code counts its
    functions' defaults and closed-over values by content (``execution.held_values``); raises
    ``UnhashedValueError`` if one cannot be read."""
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError) as exc:
        raise InputError(
            f"Cannot read the source code of '{path}' named in a cache policy: {exc}"
        ) from exc
    return f"{without_comments(source)}\n# loaded: {loaded_code_digest(obj)}"


def _source_dependencies(spec: StepSpec, paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each source dependency's fact; one holding a value the key cannot read (a default
    that cannot be pickled) gets a fact of its own, never met again: the step is not reused,
    nor is its result, and a warning says why."""
    facts = []
    for path in paths:
        try:
            fact = source_dependency(_import_object(path, spec), path)
        except UnhashedValueError as exc:
            logger.warning(
                "Step '%s' is not cached: its cache policy's source dependency '%s' holds %s, "
                "whose content its cache key cannot read; make it a value the key can read "
                "(one that can be pickled) or leave it out of source_dependencies.",
                spec.name,
                path,
                exc,
            )
            fact = f"unhashed: {uuid.uuid4().hex}"
        facts.append((path, fact))
    return facts


def _cache_func_result(path: str, spec: StepSpec) -> str:
    func = _import_object(path, spec)
    if not callable(func):
        raise InputError(f"The cache function '{path}' is not callable.")
    try:
        result = func()
    except Exception as exc:
        raise InputError(f"Failed to run cache function '{path}': {exc}") from exc
    if not isinstance(result, str):
        raise InputError(
            f"The cache function '{path}' must return a str, not {type(result).__name__}."
        )
    return result


def compute_step_cache_key(
    services: RunServices,
    spec: StepSpec,
    inputs: Mapping[str, ArtifactVersionRecord],
    output_materializers: Mapping[str, str],
) -> str:
    policy: CachePolicy = spec.config.cache_policy
    facts = CacheKeyFacts(
        project_id=str(services.project_id),
        artifact_store_id=str(services.artifact_store.id),
        artifact_store_path=services.artifact_store.path,
        step_source=spec.source,
        code_hash=code_digest(spec.source_code, spec.code_hash),
        parameters=spec.parameters,
        inputs={
            name: InputFact(
                str(version.id), version.content_hash, version.data_type, version.materializer
            )
            for name, version in inputs.items()
        },
        outputs=output_materializers,
        caching_parameters=spec.config.caching_parameters,
        environment=spec.config.environment,
        file_digests=file_digests(services.source_root, policy.file_dependencies)
        if policy.file_dependencies
        else (),
        source_dependencies=_source_dependencies(spec, tuple(policy.source_dependencies)),
        cache_func_result=_cache_func_result(policy.cache_func, spec)
        if policy.cache_func
        else None,
    )
    return compute_cache_key(
        facts,
        KeyPolicy(
            include_step_code=policy.include_step_code,
            include_step_parameters=policy.include_step_parameters,
            include_artifact_values=policy.include_artifact_values,
            include_artifact_ids=policy.include_artifact_ids,
            ignored_inputs=frozenset(policy.ignored_inputs),
            expires_after=policy.expires_after,
        ),
    )


def expiry_for(services: RunServices, spec: StepSpec) -> datetime | None:
    """When a result of ``spec`` made now stops being reused (``expires_after`` from now): set
    when a step run is created and again when it completes, so the time counts from the
    result's making, however long the step ran."""
    after = spec.config.cache_policy.expires_after
    return None if after is None else services.clock() + timedelta(seconds=after)
