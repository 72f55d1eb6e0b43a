"""User-facing settings models: resources, caching, retries and schedules.

Invariants:
- ``ResourceSettings.reclaim_tolerance`` is ``None`` unless the user set it (directly or via the
  legacy ``preemptible`` flag); serialising and reading a stored configuration keeps it so.
- All models are frozen; serialise with ``model_dump(mode="json", exclude_unset=True)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from wharf.core import resource_kinds as kinds
from wharf.core.enums import ReclaimTolerance, StepRuntime
from wharf.core.resources import (
    MEMORY_PATTERN,
    NAME_PATTERN,
    ByteUnit,
    ResourceDemand,
    ResourceName,
    parse_memory,
)

PoolResourceDemand = ResourceDemand
"""The public name of the one demand model (:class:`wharf.core.resources.ResourceDemand`)."""

ResourceInput = (
    ResourceName | dict[ResourceName, PositiveInt] | ResourceDemand | list[ResourceDemand]
)
"""A resource name is checked where it is written, as a demand's is (not when the step runs)."""


_POSITIVE_INT: TypeAdapter[int] = TypeAdapter(PositiveInt)


def _check_resource_name(name: str, what: str) -> None:
    if re.fullmatch(NAME_PATTERN, name) is None:
        raise ValueError(f"{what} is not a resource name: it should match pattern '{NAME_PATTERN}'")


LONGEST_WAIT_SECONDS = 9 * 365 * 24 * 3600
"""Longest allocation wait or initialization lease a step may ask for: the Resource Manager
takes durations up to ten years, and the wait it is sent has a margin added (a longer wait
failed the step's creation on the workspace server with an internal error)."""


class ResourceSettings(BaseModel):
    """What a step needs to run. Validated and stored with the step; used by the scheduler."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_count: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """CPUs; fractions are allowed (0.5 = 500 mCPU); finite (infinity was stored as no
    demand at all, so the step ran without asking)."""
    gpu_count: NonNegativeInt | None = None
    gpu_class: str | None = None
    """Capacity class of the GPUs, e.g. ``h100``."""
    memory: str | None = Field(default=None, pattern=MEMORY_PATTERN)
    """Memory with a unit suffix, e.g. ``512MiB`` or ``2GB``."""
    resources: ResourceInput = Field(default_factory=list)
    reclaim_tolerance: ReclaimTolerance | None = None
    """None means "the default for the step's runtime" (none inline, any isolated)."""
    allocation_wait_timeout_seconds: PositiveInt = Field(default=3600, le=LONGEST_WAIT_SECONDS)
    initialization_lease_seconds: PositiveInt = Field(default=3600, le=LONGEST_WAIT_SECONDS)

    @model_validator(mode="before")
    @classmethod
    def _legacy_input(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        preemptible = data.pop("preemptible", None)
        if data.get("reclaim_tolerance") is None and preemptible is not None:
            data["reclaim_tolerance"] = (
                ReclaimTolerance.COORDINATED if preemptible else ReclaimTolerance.NONE
            )
        pool_resources = data.pop("pool_resources", None)
        if data.get("resources") is None and pool_resources is not None:
            data["resources"] = pool_resources
        if data.get("reclaim_tolerance", "") is None:
            data.pop("reclaim_tolerance")
        return data

    @field_validator("memory")
    @classmethod
    def _some_memory(cls, value: str | None) -> str | None:
        # "0GiB" matched the pattern, then failed the step at launch (its demand must be
        # positive) with a traceback and a run that said nothing: refuse it where it is written.
        if value is not None and parse_memory(value)[0] == 0:
            raise ValueError(f"memory must be more than 0 bytes, got {value!r} (omit it for none)")
        return value

    @field_validator("resources", mode="before")
    @classmethod
    def _one_error_per_entry(cls, value: Any) -> Any:
        # The union of input forms made pydantic report one error per form ("Input should be
        # a valid string", "... a valid list", ...) for a single bad entry; say what is wrong.
        if isinstance(value, str):
            _check_resource_name(value, f"resources {value!r}")
        elif isinstance(value, dict) and not ({"name", "resource", "kind"} & set(value)):
            for name, quantity in value.items():
                if not isinstance(name, str):
                    raise ValueError(f"resources keys must be resource names, got {name!r}")
                _check_resource_name(name, f"resources key {name!r}")
                try:
                    _POSITIVE_INT.validate_python(quantity)
                except ValidationError:
                    raise ValueError(
                        f"resources[{name!r}] must be a positive whole quantity, got {quantity!r}"
                    ) from None
        return value

    @property
    def reclaim_tolerance_explicitly_set(self) -> bool:
        return self.reclaim_tolerance is not None

    def effective_reclaim_tolerance(self, runtime: StepRuntime) -> ReclaimTolerance:
        if self.reclaim_tolerance is not None:
            return self.reclaim_tolerance
        return ReclaimTolerance.NONE if runtime is StepRuntime.INLINE else ReclaimTolerance.ANY

    @property
    def normalized_resources(self) -> list[ResourceDemand]:
        r = self.resources
        if isinstance(r, str):
            return [ResourceDemand(name=r, quantity=1)]
        if isinstance(r, ResourceDemand):
            return [r]
        if isinstance(r, dict):
            return [ResourceDemand(name=k, quantity=v) for k, v in r.items()]
        return list(r)

    def memory_quantity_and_unit(self) -> tuple[int, ByteUnit] | None:
        return None if self.memory is None else parse_memory(self.memory)

    def canonical_demands(self) -> list[ResourceDemand]:
        """Each resource, then GPUs, CPUs and memory, as separate demands."""
        demands = self.normalized_resources
        if self.gpu_count:
            demands.append(
                ResourceDemand(
                    kind=kinds.GPU.name, quantity=self.gpu_count, class_name=self.gpu_class
                )
            )
        if self.cpu_count is not None:
            cpu = kinds.CPU
            if float(self.cpu_count).is_integer():
                whole = int(self.cpu_count)
                demands.append(ResourceDemand(kind=cpu.name, quantity=whole, unit=cpu.default_unit))
            else:
                per_cpu = cpu.multiplier(cpu.default_unit)
                base = math.ceil(self.cpu_count * per_cpu - 1e-9)
                demands.append(ResourceDemand(kind=cpu.name, quantity=base, unit=cpu.base_unit))
        mem = self.memory_quantity_and_unit()
        if mem is not None:
            demands.append(
                ResourceDemand(kind=kinds.MEMORY.name, quantity=mem[0], unit=mem[1].value)
            )
        return demands

    @property
    def has_basic_resource_demands(self) -> bool:
        """Some demand is of a basic-infrastructure kind (see the resource-kind registry)."""
        return any(kinds.is_basic(d.kind) for d in self.canonical_demands())

    @property
    def empty(self) -> bool:
        return not self.canonical_demands()


MAX_RETRY_DELAY = 86_400.0
"""The longest wait before a retry, in seconds (a day)."""
MAX_RETRY_BACKOFF = 1_000.0


class RetryConfig(BaseModel):
    """How often and how patiently a failed step is retried."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: NonNegativeInt = 0
    delay: float = Field(default=0.0, ge=0.0, le=MAX_RETRY_DELAY)
    """Seconds before the first retry (at most a day)."""
    backoff: float = Field(default=1.0, ge=1.0, le=MAX_RETRY_BACKOFF)
    """Multiplier applied to the delay after each retry; a delay grows to a day at most."""

    def delay_before(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt`` (2 is the first retry), at most
        :data:`MAX_RETRY_DELAY`."""
        try:
            grown = self.delay * self.backoff ** max(0, attempt - 2)
        except OverflowError:
            return MAX_RETRY_DELAY if self.delay > 0 else 0.0
        return min(grown, MAX_RETRY_DELAY)


class CachePolicy(BaseModel):
    """What goes into a step's cache key, and how long a cached result stays valid."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    include_step_code: bool = True
    include_step_parameters: bool = True
    include_artifact_values: bool = True
    include_artifact_ids: bool = True
    ignored_inputs: tuple[str, ...] = ()
    file_dependencies: tuple[str, ...] = ()
    """Paths relative to the source root whose bytes are part of the key."""
    source_dependencies: tuple[str, ...] = ()
    """Import paths (``module:attr``, ``module.attr`` or a whole ``module``) whose source code is
    part of the key."""
    cache_func: str | None = None
    """Import path of a zero-argument function returning a string that is part of the key."""
    expires_after: PositiveInt | None = None
    """Seconds after which a cached result is no longer reused; None = never."""

    @field_validator("source_dependencies", "cache_func", mode="before")
    @classmethod
    def _objects_to_paths(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return tuple(_import_path_of(v) for v in value)
        return _import_path_of(value) if value is not None else None

    @classmethod
    def default(cls) -> CachePolicy:
        return cls()

    @classmethod
    def from_string(cls, value: str) -> CachePolicy:
        if value != "default":
            raise ValueError(f"Unknown cache policy '{value}'; the only named policy is 'default'.")
        return cls()


def _import_path_of(obj: Any) -> Any:
    if isinstance(obj, ModuleType):
        return obj.__name__
    if isinstance(obj, str) or not callable(obj):
        return obj
    fn: Callable[..., Any] = obj
    if "<" in fn.__qualname__:  # <lambda>, <locals>: no import path reaches it at run time
        raise ValueError(
            f"{fn.__qualname__} cannot be imported by its path when the step runs; a cache "
            "policy needs a function defined at module level."
        )
    return f"{fn.__module__}:{fn.__qualname__}"


class Schedule(BaseModel):
    """When a pipeline should run by itself: a cron expression, an interval, or once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    cron_expression: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    interval_seconds: PositiveInt | None = None
    run_once_start_time: datetime | None = None
    catchup: bool = False

    @model_validator(mode="after")
    def _one_trigger(self) -> Schedule:
        problem = schedule_problem(
            self.cron_expression,
            self.interval_seconds,
            self.run_once_start_time,
            self.start_time,
            self.end_time,
        )
        if problem is not None:
            raise ValueError(problem)
        return self


def schedule_problem(
    cron_expression: str | None,
    interval_seconds: int | None,
    run_once_start_time: datetime | None,
    start_time: datetime | None,
    end_time: datetime | None,
) -> str | None:
    """Why these cannot be a schedule's trigger and times (one line), or None: exactly one
    trigger, a cron expression that fires, an end after the start. The SDK's ``Schedule`` and
    the server's ``POST /schedules`` apply this same rule."""
    triggers = [cron_expression, interval_seconds, run_once_start_time]
    if sum(trigger is not None for trigger in triggers) != 1:
        return (
            "A schedule needs exactly one of cron_expression, interval_seconds "
            "or run_once_start_time."
        )
    start, end = _utc(start_time), _utc(end_time)  # a naive time is UTC, as everywhere
    if start and end and end <= start:
        return "A schedule's end_time must be after its start_time."
    if cron_expression is not None:
        from wharf.config.cron import cron_problem, window_problem

        return cron_problem(cron_expression) or window_problem(cron_expression, start, end)
    return None


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
