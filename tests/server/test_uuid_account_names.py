"""A new user, project or service account may not be named with a UUID in any spelling
``uuid.UUID`` reads (lower or upper case, without hyphens, with digits of another script or an
underscore between digits): commands resolve an account by id first, so a project named after
another project's id was unreachable by name and ``wharf project add-member <that id>`` acted on
the other project. 400 over HTTP; one line from the CLI, before any server is asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.server.conftest import World, body
from tests.server.test_cli_server import wharf

ROUTES = {"user": "/api/v1/users", "project": "/api/v1/projects"}
ROUTES["service account"] = "/api/v1/service_accounts"
SPELLINGS = {
    "lower": "0f8fad5b-d9cb-469f-a165-70867728950e",
    "upper": "0F8FAD5B-D9CB-469F-A165-70867728950E",
    "no-hyphens": "0f8fad5bd9cb469fa16570867728950e",
    "arabic-indic-digits": "\u0660" * 32,
    "underscore": "0f8fad5_d9cb469fa16570867728950e",
}


@pytest.mark.parametrize("what", list(ROUTES))
@pytest.mark.parametrize("name", list(SPELLINGS.values()), ids=list(SPELLINGS))
def test_a_uuid_name_is_refused(world: World, what: str, name: str) -> None:
    answer = world.as_role("admin").post(ROUTES[what], json={"name": name})
    assert answer.status_code == 400, body(answer)
    assert answer.json()["type"] == "InputError"
    assert answer.json()["detail"].startswith(f"A {what} name must not be a UUID")


def test_a_project_cannot_take_another_projects_id_as_its_name(world: World) -> None:
    admin = world.as_role("admin")
    for name in (str(world.a.id), world.a.id.hex):
        answer = admin.post("/api/v1/projects", json={"name": name})
        assert answer.status_code == 400, body(answer)
    names = [p["name"] for p in admin.get("/api/v1/projects", params={"size": 100}).json()["items"]]
    assert str(world.a.id) not in names and world.a.id.hex not in names


def test_names_that_only_hold_hex_digits_and_hyphens_are_taken(world: World) -> None:
    admin = world.as_role("admin")
    for name in ("cafe-babe", "0f8fad5b-d9cb-469f-a165-70867728950", "deadbeef" * 5):
        answer = admin.post("/api/v1/projects", json={"name": name})
        assert answer.status_code == 201, body(answer)


@pytest.mark.parametrize("command", [("user", "create", "--no-password"), ("project", "create")])
def test_the_cli_refuses_a_uuid_name_in_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    refused = wharf(tmp_path / "home", *command, SPELLINGS["upper"])
    assert_one_line_error(refused, f"A {command[0]} name must not be a UUID")
