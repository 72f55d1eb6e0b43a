"""Bodies of the RM's FastAPI routes over HTTP: one not sent as JSON is told so (422)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.resource_manager.api.bodies import pool_body


def test_a_body_not_sent_as_json_is_told_so(
    http: httpx.Client, token: Callable[[], dict[str, str]]
) -> None:
    headers = token()
    body = httpx.Request("POST", "/", json=pool_body()).content
    for extra, said in (({}, "no Content-Type"), ({"content-type": "text/plain"}, "'text/plain'")):
        response = http.post("/v1/pools", content=body, headers={**headers, **extra})
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert "Content-Type: application/json" in detail and said in detail, detail
    assert http.get("/v1/pools", headers=headers).json() == []
