"""Request size limits as plain ASGI middleware, checked before any routing or parsing.

- The request target (path + query string) longer than ``max_url_bytes`` gets 414: clients
  split ``oneof:[...]`` filters into smaller requests on it (ZenML's batched fetch).
- A body larger than ``max_body_bytes`` gets 413: announced by ``Content-Length``, or counted
  while buffering a body sent without one (then replayed to the app), so the app never reads
  more than the limit.
Both answer with the same JSON error shape as ``wharf.server.errors``.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


async def _reply(send: Send, status: int, detail: str, kind: str) -> None:
    body = json.dumps({"detail": detail, "type": kind}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class SizeLimits:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_url_bytes: int) -> None:
        self.app = app
        self.max_body = max_body_bytes
        self.max_url = max_url_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        target = len(scope.get("raw_path") or scope["path"].encode()) + len(
            scope.get("query_string", b"")
        )
        if target > self.max_url:
            await _reply(
                send,
                414,
                f"The request URI has {target} bytes, more than the {self.max_url} allowed; "
                "split the filter into several requests.",
                "URITooLong",
            )
            return
        length = _content_length(scope)
        if length is not None and length > self.max_body:
            await self._too_large(send)
            return
        if length is None and scope.get("method") in ("POST", "PUT", "PATCH"):
            buffered = await self._buffer(receive)
            if buffered is None:
                await self._too_large(send)
                return
            receive = _replay(buffered, receive)
        await self.app(scope, receive, send)

    async def _too_large(self, send: Send) -> None:
        await _reply(
            send,
            413,
            f"The request body is larger than the {self.max_body} bytes allowed.",
            "PayloadTooLarge",
        )

    async def _buffer(self, receive: Receive) -> list[Message] | None:
        messages: list[Message] = []
        total = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            total += len(message.get("body", b""))
            if total > self.max_body:
                return None
            if not message.get("more_body", False):
                return messages


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(messages: list[Message], then: Receive) -> Receive:
    """Hand out the buffered messages, then wait on the real channel (disconnects)."""
    pending = list(messages)

    async def receive() -> Any:
        if pending:
            return pending.pop(0)
        return await then()

    return receive
