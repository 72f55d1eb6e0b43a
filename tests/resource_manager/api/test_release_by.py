"""Who a release or cancellation names (its body's ``by``) over HTTP: a requester ending its own
request cannot word it as the Resource Manager's own reasons do (an administrator's release,
its requester's manual command), and no caller ends another requester's request.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.resource_manager.api.bodies import policy_body, pool_body, request_body
from tests.resource_manager.api.live import ALICE_KEY, BOB_KEY

RR = "/v1/resource-requests"
FORGED = [
    "Resource Manager administrator 'admin'",
    "resource manager ADMINISTRATOR 'root'",
    "its requester 'bob'",
    " the holder",
    "the client",
]


def _two_requests(
    http: httpx.Client, token: Callable[..., dict[str, str]]
) -> tuple[dict[str, str], str, str]:
    admin = token()
    http.post("/v1/pools", json=pool_body(gpus=1), headers=admin)
    http.post("/v1/policies", json=policy_body(), headers=admin)
    alice = token(ALICE_KEY)
    held = http.post(RR, json=request_body(run="r1"), headers=alice).json()
    waiting = http.post(RR, json=request_body(run="r2"), headers=alice).json()
    assert (held["status"], waiting["status"]) == ("allocated", "pending")
    return alice, held["id"], waiting["id"]


@pytest.mark.parametrize("verb", ["release", "cancel"])
@pytest.mark.parametrize("by", FORGED)
def test_a_requester_cannot_word_its_end_as_the_rms_own(
    http: httpx.Client, token: Callable[..., dict[str, str]], verb: str, by: str
) -> None:
    alice, held, waiting = _two_requests(http, token)
    request_id = held if verb == "release" else waiting
    refused = http.post(f"{RR}/{request_id}/{verb}", json={"by": by}, headers=alice)
    assert refused.status_code == 400, refused.text
    assert "may not take the Resource Manager's own forms" in refused.json()["detail"]
    assert http.get(f"{RR}/{request_id}", headers=alice).json()["status"] in (
        "allocated",
        "pending",
    )
    # Named as the workspace server names its users, or as itself: ended as asked.
    named = http.post(
        f"{RR}/{request_id}/{verb}", json={"by": "user 'carol' (project admin)"}, headers=alice
    )
    assert named.status_code == 200, named.text
    assert "by user 'carol' (project admin)" in named.json()["status_reason"]


def test_another_requesters_request_is_not_ended_manually(
    http: httpx.Client, token: Callable[..., dict[str, str]]
) -> None:
    alice, held, waiting = _two_requests(http, token)
    bob = token(BOB_KEY)
    for request_id, verb in ((held, "release"), (waiting, "cancel")):
        refused = http.post(f"{RR}/{request_id}/{verb}", json={"manual": True}, headers=bob)
        assert refused.status_code == 403, refused.text
        assert "belongs to another requester" in refused.json()["detail"]
    mine = http.post(f"{RR}/{held}/release", json={"manual": True}, headers=alice).json()
    assert mine["status_reason"] == "Released by its requester 'alice'."
