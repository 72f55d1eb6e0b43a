"""The compiled form of a pipeline, as stored in a snapshot and read by orchestrators.

A :class:`PipelineSpec` is plain data (JSON-serialisable); it is everything an orchestrator
needs to run the pipeline in another process: each step's import path, parameters, input
wiring, output materializers and configuration. Invariant: ``steps`` is keyed by step name and
every ``InputSpec`` names an upstream step listed in that step's ``upstream``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from wharf.config.component_settings import ComponentSettings
from wharf.config.settings import CachePolicy, ResourceSettings, RetryConfig, Schedule
from wharf.core.enums import ExecutionMode, StepRuntime
from wharf.core.exact_values import ExactValues


class InputSpec(BaseModel):
    """A step input fed by another step's output."""

    model_config = ConfigDict(frozen=True)

    step: str
    output: str


class OutputSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    materializer: str | None = None
    """Import path of an explicit materializer; None = chosen by the value's type at run time."""
    data_type: str | None = None
    """Import path of the annotated type, if any."""


class StepConfig(BaseModel):
    """Per-step settings after merging the step's own values over its pipeline's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enable_cache: bool | None = None
    cache_policy: CachePolicy = Field(default_factory=CachePolicy)
    retry: RetryConfig | None = None
    resources: ResourceSettings | None = None
    runtime: StepRuntime | None = None
    step_operator: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    caching_parameters: ExactValues = Field(default_factory=dict)
    enable_heartbeat: bool = True
    settings: ComponentSettings = Field(default_factory=dict)
    """Stack component settings (``{"orchestrator.kubernetes": {...}}``, plain JSON): the
    step's own deep-merged over its pipeline's (``wharf.config.component_settings``)."""


class StepSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    """``module:qualname`` of the step function."""
    source_file: str | None = None
    """File of the step's module when it is ``__main__`` (a script), so that another
    process can load it."""
    source_code: str | None = None
    code_hash: str
    docstring: str | None = None
    upstream: tuple[str, ...] = ()
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    parameters: ExactValues = Field(default_factory=dict)
    """JSON-able literal arguments, defaults included; a tuple stays a tuple, an int key an
    int, where the step runs (``wharf.core.exact_values``)."""
    outputs: dict[str, OutputSpec] = Field(default_factory=dict)
    config: StepConfig = Field(default_factory=StepConfig)


def wants_resources(spec: StepSpec | None) -> bool:
    """True when a step demands at least one resource (and so waits for an allocation)."""
    resources = spec.config.resources if spec is not None else None
    return resources is not None and not resources.empty


CodeSource = Literal["archive", "image", "local"]
"""Where an isolated step gets the pipeline's code: ``archive`` (the code archive recorded with
the run, see :class:`CodeArchiveRef`), ``image`` (baked into where the step runs: nothing is
packaged) or ``local`` (imported from the submitter's file system, as on this machine)."""


class CodeArchiveRef(BaseModel):
    """The pipeline's source packaged for a run (``wharf.execution.code_archive``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uri: str
    """Where the archive lies in the run's artifact store."""
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of its content (paths, executable bits and file hashes), not of its bytes."""
    source_root: str
    """The submitter's directory the archive holds: a script's file under it is found at the
    same relative path in the unpacked archive."""
    files: int = Field(ge=0)
    size: int = Field(ge=0)
    """Bytes of the files, before compression."""


class PipelineConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enable_cache: bool | None = None
    execution_mode: ExecutionMode = ExecutionMode.STOP_ON_FAILURE
    max_parallelism: int | None = Field(default=None, ge=1)
    retry: RetryConfig | None = None
    schedule: Schedule | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    code_source: CodeSource | None = None
    """None: ``archive`` when the orchestrator (or the step operator) runs steps outside this
    file system, else ``local``."""
    settings: ComponentSettings = Field(default_factory=dict)
    """Pipeline-level stack component settings (plain JSON), for every step and for the
    components running the pipeline itself (e.g. the orchestrator pod)."""


class PipelineSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    source: str | None = None
    dynamic: bool = False
    parameters: ExactValues = Field(default_factory=dict)
    config: PipelineConfig = Field(default_factory=PipelineConfig)
    steps: dict[str, StepSpec] = Field(default_factory=dict)
    code: CodeArchiveRef | None = None
    """The code archive isolated steps import the pipeline's code from (None: their own)."""
