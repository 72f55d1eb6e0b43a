"""``/api/v1/components`` over real HTTP: a configuration is checked as the CLI and SDK check
it, so no unknown key (an fsspec store's options are open-ended) and no clear-text secret reaches
the store through the raw route; components are global (the default stack's too): every
principal reads them, only admins change or delete them or delete a stack."""

from __future__ import annotations

from pathlib import Path

from tests.server.conftest import World, body
from tests.server.live import shared_default_stack
from wharf.core.enums import ComponentType


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


def test_only_admins_change_or_delete_the_default_stacks_components(
    world: World, tmp_path: Path
) -> None:
    shared_default_stack(world.state, tmp_path / "artifacts")
    store = world.stores.store
    stack = store.stacks.get_stack_by_name("default")
    artifacts = store.stacks.get_component(stack.components[ComponentType.ARTIFACT_STORE])
    url = f"/api/v1/components/{artifacts.id}"
    moved = {"configuration": {"path": str(tmp_path / "elsewhere")}}
    for role in ("member", "padmin", "other", "viewer"):
        client = world.as_role(role)
        assert client.get(url).status_code == 200  # every principal reads and uses it
        changed = client.patch(url, json=moved)
        assert changed.status_code == 403, (role, changed.text)
        assert changed.json()["detail"] == "Only admins may reconfigure stack components."
        deleted = client.delete(url)
        assert deleted.status_code == 403, (role, deleted.text)
        assert deleted.json()["detail"] == "Only admins may delete stack components."
    assert store.stacks.get_component(artifacts.id) == artifacts
    admin = world.as_role("admin")
    assert body(admin.patch(url, json=moved))["configuration"] == moved["configuration"]


def test_only_admins_delete_the_default_stack(world: World, tmp_path: Path) -> None:
    shared_default_stack(world.state, tmp_path / "artifacts")
    stack = world.stores.store.stacks.get_stack_by_name("default")
    url = f"/api/v1/stacks/{stack.id}"
    for role in ("member", "padmin", "other", "viewer"):
        deleted = world.as_role(role).delete(url)
        assert deleted.status_code == 403, (role, deleted.text)
        assert deleted.json()["detail"] == "Only admins may delete stacks."
    assert world.stores.store.stacks.get_stack(stack.id) == stack


def _component(
    name: str, type: str, flavor: str, configuration: dict[str, object]
) -> dict[str, object]:
    return {"name": name, "type": type, "flavor": flavor, "configuration": configuration}


def test_an_unknown_key_is_refused_naming_it_and_nothing_is_stored(world: World) -> None:
    admin = world.as_role("admin")
    for component, key, hint in (
        (_component("o1", "orchestrator", "local", {"namespace": "prod"}), "namespace", ""),
        (
            _component("o2", "orchestrator", "local_process", {"pyton": "/usr/bin/python3"}),
            "pyton",
            "did you mean 'python'?",
        ),
        (_component("s1", "step_operator", "local_process", {"parallel": 2}), "parallel", ""),
        (_component("a1", "artifact_store", "local", {"paht": "/data"}), "paht", "'path'"),
        (_component("k1", "orchestrator", "kubernetes", {"namespaec": "ml"}), "namespaec", ""),
    ):
        response = admin.post("/api/v1/components", json=component)
        assert response.status_code == 400, response.text
        assert f"'{key}'" in response.json()["detail"] and hint in response.json()["detail"]
    assert body(admin.get("/api/v1/components"))["items"] == []


def test_known_keys_and_open_ended_options_are_stored(world: World) -> None:
    admin = world.as_role("admin")
    for component in (
        _component("o1", "orchestrator", "local", {}),
        _component("o2", "orchestrator", "local_process", {"python": "/usr/bin/python3"}),
        _component("a1", "artifact_store", "local", {"path": "/data"}),
        _component("a2", "artifact_store", "fsspec", {"path": "s3://b/p", "anon": True}),
        _component("k1", "orchestrator", "kubernetes", {"namespace": "ml"}),
    ):
        response = admin.post("/api/v1/components", json=component)
        assert response.status_code == 201, response.text
        assert response.json()["configuration"] == component["configuration"]


def test_an_update_with_an_unknown_key_is_refused_and_changes_nothing(world: World) -> None:
    admin = world.as_role("admin")
    created = body(
        admin.post(
            "/api/v1/components",
            json=_component("o", "orchestrator", "local_process", {"python": "/usr/bin/python3"}),
        )
    )
    url = f"/api/v1/components/{created['id']}"
    refused = admin.patch(url, json={"configuration": {"python": "/x", "code_travel": True}})
    assert refused.status_code == 400, refused.text
    assert "'code_travel'" in refused.json()["detail"]
    assert body(admin.get(url)) == created


def test_an_unknown_flavor_is_refused_listing_the_known_ones(world: World) -> None:
    """As the CLI refuses it: stored, no stack using it could ever run."""
    member = world.as_role("member")
    for component, known in (
        (_component("o", "orchestrator", "kubernets", {}), "kubernetes, local, local_process"),
        (_component("a", "artifact_store", "s3", {"path": "s3://b/p"}), "fsspec, local"),
    ):
        refused = member.post("/api/v1/components", json=component)
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"] == (
            f"Unknown {component['type']} flavor '{component['flavor']}'; known: {known}."
        )
    assert body(member.get("/api/v1/components"))["items"] == []


def test_a_local_artifact_store_needs_an_absolute_path(world: World, tmp_path: Path) -> None:
    """The CLI makes a relative path absolute against its own directory; the server cannot
    know the caller's, so it refuses one rather than store a path that means nothing."""
    member, admin = world.as_role("member"), world.as_role("admin")
    for path in ("artifacts", "./data", "~/artifacts", None):
        configuration = {} if path is None else {"path": path}
        refused = member.post(
            "/api/v1/components", json=_component("a", "artifact_store", "local", configuration)
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"] == (
            f"The 'path' of a local artifact store must be an absolute directory path, got "
            f"{path!r}: the server cannot resolve it against your working directory "
            "(`wharf component register` makes a relative path absolute)."
        )
    assert body(member.get("/api/v1/components"))["items"] == []
    good = {"path": str(tmp_path / "artifacts")}
    created = body(
        member.post("/api/v1/components", json=_component("a", "artifact_store", "local", good))
    )
    url = f"/api/v1/components/{created['id']}"
    moved = admin.patch(url, json={"configuration": {"path": "elsewhere"}})
    assert moved.status_code == 400, moved.text
    assert "got 'elsewhere'" in moved.json()["detail"]
    assert body(admin.get(url)) == created
