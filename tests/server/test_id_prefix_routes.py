"""``id_prefix`` on the list routes, over real HTTP: short ids find a record its caller may
read, nothing of another project, and a malformed prefix is a 422 with a message."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import World
from tests.server.matrix import Things

LISTS = [
    ("/api/v1/runs", lambda t: t.run.id),
    ("/api/v1/steps", lambda t: t.step.id),
    ("/api/v1/pipelines", lambda t: t.pipeline.id),
    ("/api/v1/artifact_versions", lambda t: t.version.id),
    ("/api/v1/artifacts", lambda t: t.version.artifact_id),
    ("/api/v1/schedules", lambda t: t.schedule.id),
]


@pytest.mark.parametrize(("path", "record_id"), LISTS, ids=[p for p, _ in LISTS])
def test_a_prefix_finds_the_record_for_its_readers_only(
    world: World, path: str, record_id: Any
) -> None:
    things = Things(world)
    wanted = record_id(things)
    for length in (4, 8, 32):
        prefix = wanted.hex[:length]
        answer = world.as_role("viewer").get(path, params={"id_prefix": prefix})
        assert answer.status_code == 200, answer.text
        found = [item["id"] for item in answer.json()["items"]]
        assert str(wanted) in found and all(i.replace("-", "").startswith(prefix) for i in found)
    hidden = world.as_role("other").get(path, params={"id_prefix": wanted.hex[:8]})
    assert hidden.status_code == 200 and hidden.json()["items"] == []


@pytest.mark.parametrize("bad", ["ABCD", "12-4", "g123", "0" * 33, ""])
def test_a_malformed_prefix_is_422(world: World, bad: str) -> None:
    answer = world.as_role("viewer").get("/api/v1/runs", params={"id_prefix": bad})
    assert answer.status_code == 422
    assert "id_prefix" in answer.text
