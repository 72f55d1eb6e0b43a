"""Contract: free texts and keys have one length limit on every database. A status reason, logs
URI or artifact URI over 65,535 bytes was stored on SQLite and PostgreSQL and refused by MariaDB
(its ``TEXT`` column); a cache key or hash over 255 characters was stored on SQLite only. Now
:data:`MAX_TEXT_LENGTH` characters (of up to 4 bytes each) and :data:`MAX_KEY_LENGTH` are kept
everywhere and one more is refused before the store is asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.store.column_rules import MAX_KEY_LENGTH, MAX_TEXT_LENGTH
from wharf.store.models import RunUpdate, StepRunUpdate

EMOJI = "\U0001f600"  # 4 bytes in UTF-8: the longest text in bytes


def _run_reason(world: World, text: str) -> str | None:
    return world.run(status_reason=text).status_reason


def _run_update_reason(world: World, text: str) -> str | None:
    run = world.run()
    return world.store.runs.update(run.id, RunUpdate(status_reason=text)).status_reason


def _step(field: str) -> Callable[[World, str], Any]:
    def make(world: World, text: str) -> Any:
        step = world.step(**{field: text})
        return getattr(world.store.steps.get(step.id), field)

    return make


def _step_update(field: str) -> Callable[[World, str], Any]:
    def make(world: World, text: str) -> Any:
        step = world.store.steps.update(world.step().id, StepRunUpdate(**{field: text}))
        return getattr(world.store.steps.get(step.id), field)

    return make


def _version(field: str) -> Callable[[World, str], Any]:
    def make(world: World, text: str) -> Any:
        version = world.version(**{field: text})
        return getattr(world.store.artifacts.get_version(version.id), field)

    return make


LONG_TEXTS: dict[str, Callable[[World, str], Any]] = {
    "run status_reason": _run_reason,
    "run update status_reason": _run_update_reason,
    "step status_reason": _step("status_reason"),
    "step logs_uri": _step("logs_uri"),
    "step update status_reason": _step_update("status_reason"),
    "step update logs_uri": _step_update("logs_uri"),
    "version uri": _version("uri"),
    "version data_type": _version("data_type"),
    "version materializer": _version("materializer"),
}
KEYS: dict[str, Callable[[World, str], Any]] = {
    "step cache_key": _step("cache_key"),
    "step code_hash": _step("code_hash"),
    "step update cache_key": _step_update("cache_key"),
    "version content_hash": _version("content_hash"),
}


@pytest.mark.parametrize("field", LONG_TEXTS)
def test_long_texts_up_to_the_limit_are_kept(world: World, field: str) -> None:
    write = LONG_TEXTS[field]
    longest = EMOJI * MAX_TEXT_LENGTH
    assert write(world, longest) == longest
    with pytest.raises(ValidationError, match=f"at most {MAX_TEXT_LENGTH} characters"):
        write(world, "x" * (MAX_TEXT_LENGTH + 1))


@pytest.mark.parametrize("field", KEYS)
def test_keys_up_to_the_limit_are_kept(world: World, field: str) -> None:
    write = KEYS[field]
    longest = EMOJI * MAX_KEY_LENGTH
    assert write(world, longest) == longest
    with pytest.raises(ValidationError, match=f"at most {MAX_KEY_LENGTH} characters"):
        write(world, "k" * (MAX_KEY_LENGTH + 1))


def test_a_refused_write_changes_nothing(world: World) -> None:
    run = world.run(status=S.RUNNING)
    with pytest.raises(ValidationError):
        world.run(status_reason="x" * (MAX_TEXT_LENGTH + 1))
    assert world.store.runs.list().total == 1
    assert world.store.runs.get(run.id) == run
