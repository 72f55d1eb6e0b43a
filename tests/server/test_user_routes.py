"""``PATCH /api/v1/users/{id}`` on one's own account, over real HTTP: an admin may change their
password, but not deactivate or demote themselves (409, the account unchanged), which could
leave no one able to administer the server; another admin may."""

from __future__ import annotations

import pytest

from tests.server.conftest import World


@pytest.mark.parametrize(
    ("change", "says"),
    [({"active": False}, "deactivate"), ({"is_admin": False}, "take the admin role from")],
)
def test_an_admin_cannot_lock_themselves_out(
    world: World, change: dict[str, bool], says: str
) -> None:
    boss = world.user("boss", is_admin=True, password="boss password")
    own = world.client(world.token_for(boss))
    refused = own.patch(f"/api/v1/users/{boss.id}", json=change)
    assert refused.status_code == 409
    assert refused.json()["detail"] == f"You cannot {says} your own account; another admin can."
    me = own.get("/api/v1/auth/me")
    assert me.status_code == 200 and me.json()["is_admin"] is True
    assert own.patch(f"/api/v1/users/{boss.id}", json={"password": "new password"}).is_success
    other_admin = world.as_role("admin")
    assert other_admin.patch(f"/api/v1/users/{boss.id}", json=change).status_code == 200
