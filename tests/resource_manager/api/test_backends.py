"""The API on SQLite, PostgreSQL and MariaDB: one round trip each, metrics included (their SQL
differs per dialect)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import FakeClock
from tests.resource_manager.api.bodies import policy_body, pool_body, request_body
from tests.resource_manager.api.live import ADMIN_KEY, start_rm

RR = "/v1/resource-requests"


def test_round_trip_on_every_backend(rm_url: str, clock: FakeClock) -> None:
    server = start_rm(rm_url, clock=clock)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            login = http.post("/v1/auth/login", json={"api_key": ADMIN_KEY}).json()
            admin = {"Authorization": f"Bearer {login['access_token']}"}
            assert http.post("/v1/pools", json=pool_body(gpus=1), headers=admin).status_code == 201
            assert http.post("/v1/policies", json=policy_body(), headers=admin).status_code == 201
            keyed = {**admin, "X-Idempotency-Key": "k"}
            held = http.post(RR, json=request_body(run="a"), headers=keyed).json()
            assert http.post(RR, json=request_body(run="a"), headers=keyed).json() == held
            clock.advance(0.25)
            waiting = http.post(RR, json=request_body(run="b"), headers=admin).json()
            assert (held["status"], waiting["status"]) == ("allocated", "pending")
            listed = http.get(RR, params={"metadata[run]": "b"}, headers=admin).json()
            assert [r["id"] for r in listed["items"]] == [waiting["id"]]
            clock.advance(0.5)
            http.post(f"{RR}/{held['id']}/release", headers=admin)
            assert http.get(f"{RR}/{waiting['id']}", headers=admin).json()["status"] == "allocated"
            text = http.get("/metrics", headers=admin).text
    finally:
        server.stop()
    histogram = {
        sample.labels.get("le", sample.name): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "wharf_rm_time_to_admit_seconds"
        for sample in family.samples
    }
    assert histogram["wharf_rm_time_to_admit_seconds_count"] == 2
    assert histogram["0.005"] == 1 and histogram["0.5"] == 1 and histogram["1.0"] == 2
    assert 0.5 <= histogram["wharf_rm_time_to_admit_seconds_sum"] <= 0.52  # waited 0.5 s
