"""Contract: text holding a NUL character (U+0000) is refused alike on every database, nothing
written. PostgreSQL cannot store it while SQLite and MariaDB did, so a run named ``'a\\x00b'``
existed on two databases only. JSON documents (parameters, metadata) keep it everywhere, since
JSON writes it ``\\u0000``."""

from __future__ import annotations

import re

import pytest

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.enums import MetadataResourceType
from wharf.core.errors import InputError
from wharf.sql.nul_text import MESSAGE
from wharf.store.models import RunUpdate, StepRunCreate, StepRunFilter, StepRunUpdate

NUL = "a\x00b"


def test_runs_refuse_nul_text(world: World) -> None:
    runs = world.store.runs
    with pytest.raises(InputError, match=re.escape(MESSAGE)):
        world.run(name=NUL)
    with pytest.raises(InputError, match=re.escape(MESSAGE)):
        world.run(status_reason=NUL)
    run = world.run(status_reason="queued")
    with pytest.raises(InputError, match=re.escape(MESSAGE)):
        runs.update(run.id, RunUpdate(status=S.FAILED, status_reason=NUL))
    assert runs.list().total == 1
    assert runs.get(run.id) == run


def test_steps_refuse_nul_text(world: World) -> None:
    steps = world.store.steps
    run = world.run(status=S.RUNNING)
    for field in ("logs_uri", "status_reason", "cache_key", "source_code"):
        with pytest.raises(InputError, match=re.escape(MESSAGE)):
            world.step(run.id, **{field: NUL})
    step = world.step(run.id)
    with pytest.raises(InputError, match=re.escape(MESSAGE)):
        steps.update(step.id, StepRunUpdate(status=S.FAILED, status_reason=NUL))
    with pytest.raises(InputError, match=re.escape(MESSAGE)):
        steps.update(step.id, StepRunUpdate(logs_uri=NUL))
    ok = StepRunCreate(run_id=run.id, name="ok", status=S.RUNNING)
    with pytest.raises(InputError, match=re.escape(MESSAGE)):
        steps.create_many([ok, ok.model_copy(update={"name": "bad", "logs_uri": NUL})])
    assert steps.list(StepRunFilter(run_id=run.id)).total == 1
    assert steps.get(step.id) == step


def test_artifact_versions_refuse_nul_text(world: World) -> None:
    for field in ("uri", "data_type", "materializer", "content_hash"):
        with pytest.raises(InputError, match=re.escape(MESSAGE)):
            world.version(**{field: NUL})
    assert world.store.artifacts.list_versions().total == 0


def test_json_documents_keep_nul(world: World) -> None:
    run = world.run(status=S.RUNNING)
    step = world.step(run.id, parameters={NUL: NUL})
    assert world.store.steps.get(step.id).parameters == {NUL: NUL}
    metadata = world.store.run_metadata
    metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, {"key": NUL})
    [record] = metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert record.value == NUL
