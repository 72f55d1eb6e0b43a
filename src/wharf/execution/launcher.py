"""Launching one step of a run: decide caching right before it runs, then run it with retries.

Order of events for a step (each arrow is a store write):
    compute cache key -> cached run found?  -> step run CACHED (outputs reused)       [done]
                      -> step run RUNNING -> COMPLETED (outputs linked)            [done]
                                          -> RETRYING, wait, new step run attempt+1 [again]
                                          -> FAILED / STOPPED                       [done]
A retry is a new step run (attempt + 1); the previous one ends RETRYING. A step that was
interrupted is never retried.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import WharfError
from wharf.execution.caching import (
    cache_enabled,
    compute_step_cache_key,
    expiry_for,
    find_cached_step,
)
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.execution.services import RunServices
from wharf.execution.step_runner import StepRunner
from wharf.store.models import (
    ArtifactVersionRecord,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepOutcome:
    name: str
    status: ExecutionStatus
    outputs: dict[str, ArtifactVersionRecord] = field(default_factory=dict)
    step_run: StepRunRecord | None = None
    reason: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status.is_successful


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, WharfError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class StepLauncher:
    def __init__(self, services: RunServices, runner: StepRunner, run_id: object) -> None:
        self._services = services
        self._runner = runner
        self._run_id = run_id

    def launch(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
    ) -> StepOutcome:
        services = self._services
        try:
            cache_key = compute_step_cache_key(
                services,
                spec,
                inputs,
                {n: o.materializer or f"auto:{o.data_type}" for n, o in spec.outputs.items()},
            )
        except WharfError as exc:
            return self._fail_before_start(spec, inputs, str(exc))
        if cache_enabled(spec):
            cached = find_cached_step(services, cache_key)
            if cached is not None:
                return self._publish_cached(spec, inputs, cache_key, cached)
        return self._run_with_retries(spec, inputs, cache_key, region)

    def _base_create(
        self, spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord]
    ) -> dict[str, object]:
        return {
            "run_id": self._run_id,
            "name": spec.name,
            "code_hash": spec.code_hash,
            "source_code": spec.source_code,
            "docstring": spec.docstring,
            "parameters": spec.parameters,
            "inputs": {name: v.id for name, v in inputs.items()},
        }

    def _fail_before_start(
        self, spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord], reason: str
    ) -> StepOutcome:
        record = self._services.store.steps.create(
            StepRunCreate.model_validate(
                {
                    **self._base_create(spec, inputs),
                    "status": ExecutionStatus.FAILED,
                    "status_reason": reason,
                }
            )
        )
        return StepOutcome(spec.name, ExecutionStatus.FAILED, step_run=record, reason=reason)

    def _publish_cached(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        cache_key: str,
        cached: StepRunRecord,
    ) -> StepOutcome:
        store = self._services.store
        record = store.steps.create(
            StepRunCreate.model_validate(
                {
                    **self._base_create(spec, inputs),
                    "status": ExecutionStatus.CACHED,
                    "cache_key": cache_key,
                    "cache_expires_at": cached.cache_expires_at,
                    "original_step_run_id": cached.id,
                    "outputs": cached.outputs,
                    "source_code": spec.source_code or cached.source_code,
                    "docstring": spec.docstring or cached.docstring,
                }
            )
        )
        outputs = {name: store.artifacts.get_version(v) for name, v in cached.outputs.items()}
        return StepOutcome(spec.name, ExecutionStatus.CACHED, outputs, record)

    def _run_with_retries(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        cache_key: str,
        region: InterruptibleRegion,
    ) -> StepOutcome:
        services = self._services
        store = services.store
        retry = spec.config.retry
        max_attempts = 1 + (retry.max_retries if retry else 0)
        attempt = 1
        while True:
            record = store.steps.create(
                StepRunCreate.model_validate(
                    {
                        **self._base_create(spec, inputs),
                        "status": ExecutionStatus.RUNNING,
                        "attempt": attempt,
                        "cache_key": cache_key,
                        "cache_expires_at": expiry_for(services, spec),
                    }
                )
            )
            try:
                outputs = self._runner.run(spec, record, inputs, region)
            except StepInterrupted:
                reason = region.reason or "Step was interrupted."
                final = store.steps.update(
                    record.id,
                    StepRunUpdate(status=ExecutionStatus.STOPPED, status_reason=reason),
                )
                return StepOutcome(
                    spec.name, ExecutionStatus.STOPPED, step_run=final, reason=reason
                )
            except Exception as exc:
                reason = describe_exception(exc)
                logger.error(
                    "Step '%s' attempt %d failed: %s",
                    spec.name,
                    attempt,
                    reason,
                    exc_info=not isinstance(exc, WharfError),
                )
                if attempt < max_attempts and not region.interrupted:
                    store.steps.update(
                        record.id,
                        StepRunUpdate(status=ExecutionStatus.RETRYING, status_reason=reason),
                    )
                    assert retry is not None
                    attempt += 1
                    services.sleep(retry.delay_before(attempt))
                    continue
                final = store.steps.update(
                    record.id, StepRunUpdate(status=ExecutionStatus.FAILED, status_reason=reason)
                )
                return StepOutcome(spec.name, ExecutionStatus.FAILED, step_run=final, reason=reason)
            final = store.steps.update(
                record.id,
                StepRunUpdate(
                    status=ExecutionStatus.COMPLETED,
                    outputs={name: v.id for name, v in outputs.items()},
                ),
            )
            return StepOutcome(spec.name, ExecutionStatus.COMPLETED, outputs, final)
