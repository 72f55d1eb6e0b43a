"""Bodies of the RM's FastAPI routes over HTTP: one not sent as JSON is told so (422)."""

from __future__ import annotations

import json
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


def test_text_with_a_lone_surrogate_is_refused_and_not_stored(
    http: httpx.Client, token: Callable[[], dict[str, str]]
) -> None:
    headers = {**token(), "content-type": "application/json"}
    descriptor = {"name": "seats", "kind": "license", "units": [{"name": "seat", "multiplier": 1}]}
    body = json.dumps({**descriptor, "description": "a\udc00b"}).encode()  # "\\udc00": ASCII
    response = http.post("/v1/descriptors", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert "lone surrogate" in response.json()["detail"]
    assert http.get("/v1/descriptors/seats", headers=headers).status_code == 404
