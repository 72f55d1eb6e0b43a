"""Request size limits as plain ASGI middleware (:class:`SizeLimits`), for the workspace server
and the Resource Manager's API alike, checked before any routing, authentication or parsing.

Invariants: the app never reads more than the body limit, and the middleware holds at most the
limit (plus one read) per request. ASGI's types are spelled here, so this module imports no web
framework.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PAYLOAD_TOO_LARGE, URI_TOO_LONG = 413, 414
DEFAULT_ERROR_NAMES: Mapping[int, str] = {
    PAYLOAD_TOO_LARGE: "PayloadTooLarge",
    URI_TOO_LONG: "URITooLong",
}


class SizeLimits:
    """``app`` behind the size limits.

    A request target (path + query string) longer than ``max_url_bytes`` gets 414 (when a bound
    is given): clients split ``oneof:[...]`` filters into smaller requests on it. A body larger
    than ``max_body_bytes`` gets 413: a ``Content-Length`` over the limit is refused from the
    head alone (nothing of the body is read, the connection is closed); a body sent without one
    (chunked) is counted while it is buffered and refused as soon as it passes the limit, else
    replayed to the app. Both answer ``{"detail": ..., <error_key>: <name>}``, the error shape
    of the service using it.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        max_url_bytes: int | None = None,
        error_key: str = "type",
        error_names: Mapping[int, str] = DEFAULT_ERROR_NAMES,
    ) -> None:
        self.app = app
        self.max_body = max_body_bytes
        self.max_url = max_url_bytes
        self._error_key = error_key
        self._error_names = error_names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.max_url is not None:
            target = len(scope.get("raw_path") or scope["path"].encode()) + len(
                scope.get("query_string", b"")
            )
            if target > self.max_url:
                await self._reply(
                    send,
                    URI_TOO_LONG,
                    f"The request URI has {target} bytes, more than the {self.max_url} allowed; "
                    "split the filter into several requests.",
                )
                return
        length, chunked = _body_framing(scope)
        if length is not None and length > self.max_body:
            await self._too_large(send)
            return
        if length is None and (chunked or scope.get("method") in ("POST", "PUT", "PATCH")):
            buffered = await self._buffer(receive)
            if buffered is None:
                await self._too_large(send)
                return
            receive = _replay(buffered, receive)
        await self.app(scope, receive, send)

    async def _too_large(self, send: Send) -> None:
        await self._reply(
            send,
            PAYLOAD_TOO_LARGE,
            f"The request body is larger than the {self.max_body} bytes allowed.",
        )

    async def _reply(self, send: Send, status: int, detail: str) -> None:
        name = self._error_names.get(status)
        content = {"detail": detail, **({self._error_key: name} if name else {})}
        body = json.dumps(content).encode()
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

    async def _buffer(self, receive: Receive) -> list[Message] | None:
        """The body's messages, or None as soon as they pass the limit (the rest unread)."""
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


def _body_framing(scope: Scope) -> tuple[int | None, bool]:
    """The announced ``Content-Length`` (None if absent or not a number) and whether the body
    is sent with a ``Transfer-Encoding`` instead."""
    length: int | None = None
    chunked = False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                length = None
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked


def _replay(messages: list[Message], then: Receive) -> Receive:
    """Hand out the buffered messages, then wait on the real channel (disconnects)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        return await then()

    return receive
