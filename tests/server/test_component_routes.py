"""``POST /api/v1/components`` over real HTTP: an fsspec artifact store is checked as the CLI
and SDK check it, so no clear-text secret reaches the store through the raw route."""

from __future__ import annotations

from tests.server.conftest import World, body


def _fsspec(configuration: dict[str, object]) -> dict[str, object]:
    return {
        "name": "remote",
        "type": "artifact_store",
        "flavor": "fsspec",
        "configuration": configuration,
    }


def test_a_clear_text_secret_is_refused_and_nothing_is_stored(world: World) -> None:
    admin = world.as_role("admin")
    for configuration in (
        {"path": "s3://bucket/prefix", "secret": "hunter2"},
        {"path": "s3://bucket/prefix", "client_kwargs": {"aws_secret_access_key": "hunter2"}},
        {"path": "no-scheme"},
    ):
        response = admin.post("/api/v1/components", json=_fsspec(configuration))
        assert response.status_code == 400, response.text
        assert "hunter2" not in response.text
    listed = body(admin.get("/api/v1/components", params={"type": "artifact_store"}))
    assert [c["name"] for c in listed["items"] if c["flavor"] == "fsspec"] == []


def test_a_variable_name_and_a_url_are_stored(world: World) -> None:
    admin = world.as_role("admin")
    configuration = {"path": "s3://bucket/prefix/", "secret_env": "MY_SECRET"}
    created = body(admin.post("/api/v1/components", json=_fsspec(configuration)))
    assert created["configuration"] == {"path": "s3://bucket/prefix", "secret_env": "MY_SECRET"}
