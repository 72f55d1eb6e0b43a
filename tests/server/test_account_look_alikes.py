"""New account names that would pass for another over HTTP: POST /users, /projects and
/service_accounts refuse compatibility forms (fullwidth, mathematical letters, ligatures) and
names mixing Latin, Greek and Cyrillic letters ('admin' with a Cyrillic a), 400 with the reason;
names differing only by case stay distinct accounts, found by their exact name.
"""

from __future__ import annotations

import pytest

from tests.server.conftest import World, body

ROUTES = {"user": "/api/v1/users", "project": "/api/v1/projects"}
ROUTES["service account"] = "/api/v1/service_accounts"


@pytest.mark.parametrize("what", list(ROUTES))
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("\u0430dmin", "must not mix Cyrillic and Latin letters"),  # Cyrillic a
        ("r\u03bfot", "must not mix Greek and Latin letters"),  # Greek omicron
        ("\uff41\uff44\uff4d\uff49\uff4e", "must be written in plain characters ('admin'"),
        (
            "\U0001d41a\U0001d41d\U0001d426\U0001d422\U0001d427",
            "must be written in plain characters ('admin'",
        ),
        ("\ufb01le", "must be written in plain characters ('file'"),
    ],
    ids=["cyrillic-a", "greek-o", "fullwidth", "math-bold", "ligature"],
)
def test_a_look_alike_name_is_refused(world: World, what: str, name: str, reason: str) -> None:
    admin = world.as_role("admin")
    answer = admin.post(ROUTES[what], json={"name": name})
    assert answer.status_code == 400, body(answer)
    assert answer.json()["type"] == "InputError"
    assert answer.json()["detail"].startswith(f"A {what} name {reason}")


@pytest.mark.parametrize("name", ["Москва", "Ελλάδα", "東京とうきょう", "café", "José.García"])
def test_one_scripts_names_are_taken(world: World, name: str) -> None:
    answer = world.as_role("admin").post("/api/v1/users", json={"name": name})
    assert answer.status_code == 201, body(answer)
    assert answer.json()["name"] == name


def test_names_differing_by_case_are_distinct_accounts(world: World) -> None:
    admin = world.as_role("admin")
    lower = admin.post("/api/v1/users", json={"name": "root", "is_admin": True}).json()
    upper = admin.post("/api/v1/users", json={"name": "Root"}).json()
    assert lower["id"] != upper["id"] and upper["is_admin"] is False
    found = admin.get("/api/v1/users/by-name", params={"name": "Root"}).json()
    assert (found["id"], found["is_admin"]) == (upper["id"], False)
