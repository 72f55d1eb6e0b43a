"""Contract: text holding a NUL character (U+0000), and a write carrying more than
:data:`MAX_STATEMENT_BYTES`, are refused alike on every database, nothing written. PostgreSQL
cannot store NUL while SQLite and MariaDB did, so a run named ``'a\\x00b'`` existed on two
databases only; JSON documents (parameters, metadata) keep it everywhere, since JSON writes it
``\\u0000``. MariaDB dropped the connection on a write over its 16 MiB packet (read as the
database being unavailable) while SQLite and PostgreSQL stored it."""

from __future__ import annotations

import re

import pytest

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.enums import MetadataResourceType
from wharf.core.errors import InputError
from wharf.sql.parameter_checks import MAX_STATEMENT_BYTES, NUL_MESSAGE
from wharf.store.models import RunUpdate, StepRunCreate, StepRunFilter, StepRunUpdate

NUL = "a\x00b"


def test_runs_refuse_nul_text(world: World) -> None:
    runs = world.store.runs
    with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
        world.run(name=NUL)
    with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
        world.run(status_reason=NUL)
    run = world.run(status_reason="queued")
    with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
        runs.update(run.id, RunUpdate(status=S.FAILED, status_reason=NUL))
    assert runs.list().total == 1
    assert runs.get(run.id) == run


def test_steps_refuse_nul_text(world: World) -> None:
    steps = world.store.steps
    run = world.run(status=S.RUNNING)
    for field in ("logs_uri", "status_reason", "cache_key", "source_code"):
        with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
            world.step(run.id, **{field: NUL})
    step = world.step(run.id)
    with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
        steps.update(step.id, StepRunUpdate(status=S.FAILED, status_reason=NUL))
    with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
        steps.update(step.id, StepRunUpdate(logs_uri=NUL))
    ok = StepRunCreate(run_id=run.id, name="ok", status=S.RUNNING)
    with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
        steps.create_many([ok, ok.model_copy(update={"name": "bad", "logs_uri": NUL})])
    assert steps.list(StepRunFilter(run_id=run.id)).total == 1
    assert steps.get(step.id) == step


def test_artifact_versions_refuse_nul_text(world: World) -> None:
    for field in ("uri", "data_type", "materializer", "content_hash"):
        with pytest.raises(InputError, match=re.escape(NUL_MESSAGE)):
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


TOO_LARGE = "MiB the store takes at once"


def test_writes_up_to_the_size_limit_are_kept(world: World) -> None:
    run = world.run(status=S.RUNNING)
    big = "x" * (MAX_STATEMENT_BYTES - 64 * 1024)
    step = world.step(run.id, parameters={"data": big})
    assert world.store.steps.get(step.id).parameters == {"data": big}
    emoji = "\U0001f600" * ((MAX_STATEMENT_BYTES - 64 * 1024) // 4)  # 4 bytes each
    world.store.run_metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, {"emoji": emoji})
    [record] = world.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert record.value == emoji


def test_writes_over_the_size_limit_are_refused(world: World) -> None:
    steps = world.store.steps
    run = world.run(status=S.RUNNING)
    over = "x" * (MAX_STATEMENT_BYTES + 1)
    with pytest.raises(InputError, match=TOO_LARGE):
        world.step(run.id, parameters={"data": over})
    with pytest.raises(InputError, match=TOO_LARGE):
        world.step(run.id, source_code="\u00e9" * (MAX_STATEMENT_BYTES // 2 + 1))  # 2 bytes each
    ok = StepRunCreate(run_id=run.id, name="ok", status=S.RUNNING)
    with pytest.raises(InputError, match=TOO_LARGE):
        steps.create_many([ok, ok.model_copy(update={"name": "big", "parameters": {"a": over}})])
    with pytest.raises(InputError, match=TOO_LARGE):
        world.store.run_metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, {"k": over})
    assert steps.list(StepRunFilter(run_id=run.id)).total == 0
    assert world.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id) == []
    assert world.store.runs.get(run.id) == run  # the store still answers
