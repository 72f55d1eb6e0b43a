"""Authentication: logins, token expiry and revocation, API keys, run-token revocation; how a
role's refusal names its project."""

from __future__ import annotations

import base64
import json
from uuid import UUID

import pytest

from tests.server.conftest import World
from tests.server.live import service_key
from wharf.server.auth import api_keys
from wharf.store.account_models import ProjectRole


def login(world: World, username: str, password: str) -> tuple[int, dict[str, object]]:
    response = world.client().post(
        "/api/v1/auth/login", json={"username": username, "password": password}
    )
    return response.status_code, response.json()


def me(world: World, credential: str | None) -> int:
    return world.client(credential).get("/api/v1/auth/me").status_code


def test_password_login_issues_a_working_token(world: World) -> None:
    world.user("alice", password="correct horse")
    status, answer = login(world, "alice", "correct horse")
    assert status == 200 and answer["token_type"] == "bearer" and answer["expires_in"] == 3600
    info = world.client(str(answer["access_token"])).get("/api/v1/auth/me").json()
    assert (info["kind"], info["name"], info["is_admin"], info["run_id"]) == (
        "user",
        "alice",
        False,
        None,
    )


@pytest.mark.parametrize(
    ("username", "password"),
    [("alice", "wrong password"), ("nobody", "correct horse"), ("nopass", "whatever1")],
)
def test_bad_logins_are_refused_alike(world: World, username: str, password: str) -> None:
    world.user("alice", password="correct horse")
    world.user("nopass")  # no password: cannot log in with one
    status, answer = login(world, username, password)
    assert status == 401
    assert answer == {"detail": "Invalid username or password.", "type": "AuthenticationError"}


def test_passwords_are_stored_as_argon2_hashes(world: World) -> None:
    user = world.user("alice", password="correct horse")
    stored = world.state.accounts.credentials.get(user.id).password_hash
    assert stored is not None and stored.startswith("$argon2id$") and "correct" not in stored


def test_access_tokens_expire(world: World) -> None:
    token = world.credentials["member"]
    assert me(world, token) == 200
    world.clock.advance(3599)
    assert me(world, token) == 200
    world.clock.advance(1)
    response = world.client(token).get("/api/v1/auth/me")
    assert response.status_code == 401 and "expired" in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"


def test_logout_revokes_every_token_of_the_user(world: World) -> None:
    world.user("alice", password="correct horse")
    first = str(login(world, "alice", "correct horse")[1]["access_token"])
    second = str(login(world, "alice", "correct horse")[1]["access_token"])
    assert world.client(first).post("/api/v1/auth/logout").status_code == 204
    assert me(world, first) == 401 and me(world, second) == 401
    again = str(login(world, "alice", "correct horse")[1]["access_token"])
    assert me(world, again) == 200  # a new login works


def test_deactivated_users_are_locked_out(world: World) -> None:
    admin = world.as_role("admin")
    viewer = world.users["viewer"]
    token = world.credentials["viewer"]
    response = admin.patch(f"/api/v1/users/{viewer.id}", json={"active": False})
    assert response.status_code == 200
    assert me(world, token) == 401
    assert admin.patch(f"/api/v1/users/{viewer.id}", json={"active": True}).status_code == 200
    assert me(world, token) == 401  # deactivation also revoked the old tokens


def test_a_deactivated_user_is_told_so_only_with_the_right_password(world: World) -> None:
    """A deactivated user's login said "Invalid username or password", which sent them to
    retype a password that was right."""
    alice = world.user("alice", password="correct horse")
    world.state.accounts.credentials.set_active(alice.id, False)
    assert login(world, "alice", "correct horse") == (
        403,
        {
            "detail": "The account 'alice' is deactivated: a workspace admin reactivates it "
            "with `wharf user update alice --active`.",
            "type": "PermissionDeniedError",
        },
    )
    assert login(world, "alice", "wrong password") == (
        401,
        {"detail": "Invalid username or password.", "type": "AuthenticationError"},
    )


def test_users_change_their_own_password_only(world: World) -> None:
    alice = world.user("alice", password="correct horse")
    token = str(login(world, "alice", "correct horse")[1]["access_token"])
    client = world.client(token)
    assert (
        client.patch(f"/api/v1/users/{alice.id}", json={"password": "battery staple"}).status_code
        == 200
    )
    assert me(world, token) == 401  # the change revoked the session it was made with
    client = world.client(str(login(world, "alice", "battery staple")[1]["access_token"]))
    assert client.patch(f"/api/v1/users/{alice.id}", json={"is_admin": True}).status_code == 403
    other = world.users["member"]
    assert client.patch(f"/api/v1/users/{other.id}", json={"password": "x" * 10}).status_code == 403


def test_a_password_reset_revokes_every_access_and_run_token_of_the_user(world: World) -> None:
    from tests.server.matrix import Things

    things = Things(world)
    member = world.users["member"]
    world.state.accounts.credentials.set_password(member.id, world.state.passwords.hash("old pw!"))
    sessions = [str(login(world, "member", "old pw!")[1]["access_token"]) for _ in range(2)]
    run_token = world.client(sessions[0]).post(f"/api/v1/runs/{things.run.id}/token").json()
    runner = world.client(run_token["access_token"])
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 200
    reset = world.as_role("admin").patch(
        f"/api/v1/users/{member.id}", json={"password": "new pw!!"}
    )
    assert reset.status_code == 200
    assert [me(world, session) for session in sessions] == [401, 401]
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 401
    assert login(world, "member", "old pw!")[0] == 401
    status, answer = login(world, "member", "new pw!!")
    assert status == 200 and me(world, str(answer["access_token"])) == 200


def test_deactivation_revokes_run_tokens_too(world: World) -> None:
    from tests.server.matrix import Things

    things = Things(world)
    member = world.as_role("member")
    runner = world.client(member.post(f"/api/v1/runs/{things.run.id}/token").json()["access_token"])
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 200
    user = world.users["member"]
    admin = world.as_role("admin")
    assert admin.patch(f"/api/v1/users/{user.id}", json={"active": False}).status_code == 200
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 401
    assert admin.patch(f"/api/v1/users/{user.id}", json={"active": True}).status_code == 200
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 401  # still revoked


def test_api_keys_are_shown_once_stored_hashed_and_revocable(world: World) -> None:
    admin = world.as_role("admin")
    account = admin.post("/api/v1/service_accounts", json={"name": "ci"}).json()
    created = admin.post(f"/api/v1/service_accounts/{account['id']}/api_keys", json={"name": "k"})
    assert created.status_code == 201
    secret, key = created.json()["secret"], created.json()["key"]
    assert secret.startswith("wharf_") and "secret" not in key and "key_hash" not in key
    listed = admin.get(f"/api/v1/service_accounts/{account['id']}/api_keys").json()["items"]
    assert [k["id"] for k in listed] == [key["id"]] and "secret" not in json.dumps(listed)
    parsed = api_keys.parse(secret)
    assert parsed is not None and str(parsed[0]) == key["id"]
    stored = world.state.accounts.api_keys.get_for_auth(parsed[0])
    assert stored.key_hash == api_keys.digest(parsed[1]) and secret not in stored.key_hash

    world.state.accounts.memberships.set_role(
        world.a.id, ProjectRole.MEMBER, service_account_id=UUID(account["id"])
    )
    assert me(world, secret) == 200
    used = world.state.accounts.api_keys.get(stored.key.id)
    assert used.last_used is not None  # recorded on use (at most once a minute)

    revoke = f"/api/v1/service_accounts/{account['id']}/api_keys/{key['id']}/revoke"
    revoked = admin.post(revoke).json()
    assert revoked["revoked_at"] is not None
    assert me(world, secret) == 401
    assert admin.post(revoke).json()["revoked_at"] == revoked["revoked_at"]  # idempotent


def test_deactivated_service_accounts_are_locked_out(world: World) -> None:
    account = world.state.accounts.service_accounts.create("ci")
    key = service_key(world.state, account.id)
    assert me(world, key) == 200
    world.as_role("admin").patch(f"/api/v1/service_accounts/{account.id}", json={"active": False})
    assert me(world, key) == 401


@pytest.mark.parametrize(
    "credential",
    [
        "garbage",
        "a.b.c",
        "wharf_not-a-key",
        "wharf_" + "0" * 32 + "_secret",
        "x" * 5000,
        # an unsigned payload nested too deeply to decode: refused before it is parsed
        base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode()
        + "."
        + base64.urlsafe_b64encode(b"[" * 2000).decode()
        + ".c2ln",
    ],
    ids=["garbage", "dots", "key", "unknown-key", "long", "deep-payload"],
)
def test_malformed_credentials_are_401(world: World, credential: str) -> None:
    for path in ("/api/v1/auth/me", "/api/v1/runs/not-a-uuid"):
        response = world.client(credential).get(path)
        assert response.status_code == 401, response.text
        assert response.json()["type"] == "AuthenticationError"


def test_tampered_and_foreign_tokens_are_refused(world: World) -> None:
    token = world.credentials["member"]
    assert token is not None
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = str(world.users["padmin"].id)
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert me(world, f"{header}.{forged}.{signature}") == 401
    none_header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    assert me(world, f"{none_header}.{payload}.") == 401
    assert me(world, "Basic dXNlcjpwYXNz") == 401
    response = world.client().get("/api/v1/auth/me", headers={"authorization": "Basic abc"})
    assert response.status_code == 401


def test_run_tokens_die_with_their_api_key(world: World) -> None:
    account = world.state.accounts.service_accounts.create("orchestrator")
    world.state.accounts.memberships.set_role(
        world.a.id, ProjectRole.MEMBER, service_account_id=account.id
    )
    key = service_key(world.state, account.id)
    from tests.server.matrix import Things

    things = Things(world)
    token = world.client(key).post(f"/api/v1/runs/{things.run.id}/token").json()["access_token"]
    assert world.client(token).get(f"/api/v1/runs/{things.run.id}").status_code == 200
    key_id = api_keys.parse(key)
    assert key_id is not None
    world.state.accounts.api_keys.revoke(key_id[0])
    assert world.client(token).get(f"/api/v1/runs/{things.run.id}").status_code == 401


def test_run_tokens_die_with_their_users_logout_and_expire(world: World) -> None:
    from tests.server.matrix import Things

    things = Things(world)
    member = world.as_role("member")
    token = member.post(f"/api/v1/runs/{things.run.id}/token").json()["access_token"]
    runner = world.client(token)
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 200
    world.clock.advance(7 * 86400)
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 401
    world.clock.advance(-7 * 86400)
    assert member.post("/api/v1/auth/logout").status_code == 204
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 401


def test_a_run_token_cannot_log_out_and_is_told_how_it_ends(world: World) -> None:
    from tests.server.matrix import Things

    things = Things(world)
    member = world.as_role("member")
    token = member.post(f"/api/v1/runs/{things.run.id}/token").json()["access_token"]
    runner = world.client(token)
    refused = runner.post("/api/v1/auth/logout")
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"] == (
        "A run-scoped token cannot log out: it ends when it expires, or when the account that "
        "requested it logs out, is deactivated or loses its API key."
    )
    assert runner.get(f"/api/v1/runs/{things.run.id}").status_code == 200  # nothing revoked
    assert member.get("/api/v1/auth/me").status_code == 200


def test_an_api_key_cannot_log_out_and_is_told_how_it_is_revoked(world: World) -> None:
    """Answering 204 would tell the key's holder it was revoked, while it kept working."""
    account = world.state.accounts.service_accounts.create("ci")
    world.state.accounts.memberships.set_role(
        world.a.id, ProjectRole.MEMBER, service_account_id=account.id
    )
    robot = world.client(service_key(world.state, account.id))
    refused = robot.post("/api/v1/auth/logout")
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"] == (
        "An API key cannot log out: it stays valid until an admin revokes it "
        "(`wharf api-key revoke ACCOUNT KEY`)."
    )
    assert robot.get("/api/v1/auth/me").status_code == 200  # nothing revoked, as it says


def test_only_health_and_login_are_open(world: World) -> None:
    anonymous = world.client()
    assert anonymous.get("/health").json()["status"] == "ok"
    assert anonymous.get("/openapi.json").status_code == 200
    assert anonymous.get("/api/v1/users").status_code == 401


def test_the_auth_cache_keeps_revocation_and_expiry(world: World) -> None:
    from wharf.server.auth.cache import AuthCache

    world.state.auth_cache = AuthCache(60)
    account = world.state.accounts.service_accounts.create("ci")
    key = service_key(world.state, account.id)
    assert me(world, key) == 200
    parsed = api_keys.parse(key)
    assert parsed is not None
    # Revoked behind this process's back (as by another replica): still cached here...
    world.state.accounts.api_keys.revoke(parsed[0])
    assert me(world, key) == 200
    # ...but a revocation through this server clears the cache at once.
    admin = world.as_role("admin")
    other = service_key(world.state, account.id, name="other")
    assert me(world, other) == 200
    other_id = api_keys.parse(other)
    assert other_id is not None
    revoke = f"/api/v1/service_accounts/{account.id}/api_keys/{other_id[0]}/revoke"
    assert admin.post(revoke).status_code == 200
    assert me(world, other) == 401 and me(world, key) == 401
    from tests.server.matrix import Things

    run = Things(world).run
    member = world.as_role("member")
    token = member.post(f"/api/v1/runs/{run.id}/token").json()["access_token"]
    assert me(world, token) == 200
    world.clock.advance(7 * 86400)
    assert me(world, token) == 401  # a cached token still expires on time


def test_a_viewer_refused_a_write_is_told_the_project_by_name(world: World) -> None:
    refused = world.as_role("viewer").post(
        "/api/v1/pipelines", json={"project_id": str(world.a.id), "name": "p"}
    )
    assert refused.status_code == 403
    detail = refused.json()["detail"]
    assert detail == "The viewer role in project 'A' does not allow to create pipelines."
