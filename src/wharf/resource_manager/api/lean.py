"""Lean routes: the per-request hot path (create, renew, release ...) as plain Starlette endpoints
served ahead of FastAPI's middleware stack, without its per-request dependency injection.

Owns: :class:`LeanRoutes` (a route table with its OpenAPI description), :class:`Call` (the
authenticated caller of one request), :func:`parse_body`, :func:`path_uuid`.

Invariants (the same as the FastAPI routes'): a request is served only for a valid bearer token;
the app's exception handlers still map its errors, and a malformed body or path parameter is a
422 in FastAPI's format; blocking service calls run in the thread pool, never on the event loop
(the combined writes are awaited through the service's ``*_async`` methods, blocking no thread).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, cast
from uuid import UUID

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from wharf.core.errors import InputError
from wharf.resource_manager.api.deps import AppState, authenticate, idempotency_key
from wharf.resource_manager.service import Principal, ResourceManagerService

P = ParamSpec("P")
T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)
Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Call:
    """One authenticated request: the service, the caller, its idempotency key and the longest
    lease it may ask for."""

    service: ResourceManagerService
    caller: Principal
    key: str | None
    max_lease_seconds: int

    @classmethod
    def of(cls, request: Request) -> Call:
        state: AppState = request.app.state.rm
        caller = authenticate(state, request.headers.get("authorization"))
        key = idempotency_key(request.headers.get("x-idempotency-key"))
        return cls(state.service, caller, key, state.settings.max_lease_seconds)

    def check_lease(self, lease_seconds: int | None) -> None:
        """InputError unless ``lease_seconds`` is given and at most the longest lease."""
        if lease_seconds is None or lease_seconds > self.max_lease_seconds:
            asked = "no lease" if lease_seconds is None else f"a lease of {lease_seconds} s"
            raise InputError(
                f"lease_seconds must be at most {self.max_lease_seconds} (this Resource "
                f"Manager's longest lease), got {asked}: renew the lease instead, so the "
                "capacity comes back if the holder dies."
            )

    @staticmethod
    async def run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in the thread pool."""
        return await run_in_threadpool(fn, *args, **kwargs)


def _invalid(error: ValidationError, where: str) -> RequestValidationError:
    errors = error.errors(include_url=False)
    return RequestValidationError([{**e, "loc": (where, *e["loc"])} for e in errors])


def parse_body(model: type[ModelT], body: bytes) -> ModelT:
    try:
        return model.model_validate_json(body or b"null")
    except ValidationError as error:
        raise _invalid(error, "body") from None


def path_uuid(request: Request, name: str) -> UUID:
    try:
        return UUID(request.path_params[name])
    except ValueError:
        raise RequestValidationError(
            [{"loc": ("path", name), "msg": "Input should be a valid UUID", "type": "uuid_parsing"}]
        ) from None


def parse_query(model: type[ModelT], data: dict[str, Any]) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise _invalid(error, "query") from None


@dataclass(frozen=True, slots=True)
class _Doc:
    method: str
    path: str
    summary: str
    body: type[BaseModel] | None
    response: Any
    status: int
    query: Sequence[str]
    tag: str


@dataclass
class LeanRoutes:
    """Routes declared with ``@routes.add(...)``; mount with :meth:`mount`."""

    tag: str
    routes: list[Route] = field(default_factory=list)
    _docs: list[_Doc] = field(default_factory=list)

    def add(
        self,
        method: str,
        path: str,
        summary: str,
        *,
        response: Any,
        body: type[BaseModel] | None = None,
        status: int = 200,
        query: Sequence[str] = (),
    ) -> Callable[[Endpoint], Endpoint]:
        def register(endpoint: Endpoint) -> Endpoint:
            self.routes.append(Route(path, endpoint, methods=[method]))
            doc = _Doc(method.lower(), path, summary, body, response, status, query, self.tag)
            self._docs.append(doc)
            return endpoint

        return register

    def mount(self, app: FastAPI) -> None:
        """Serve these routes ahead of FastAPI's middleware stack and every FastAPI route, and
        describe them in ``/openapi.json`` from the models they were declared with.

        They stay in the router too, so a wrong method on their paths gets FastAPI's 405."""
        app.router.routes[:0] = self.routes
        build = app.build_middleware_stack
        routes = tuple(self.routes)

        def build_with_lean_routes() -> ASGIApp:
            return _Dispatch(app, build(), routes)

        app.build_middleware_stack = build_with_lean_routes  # type: ignore[method-assign]
        generate = app.openapi

        def openapi() -> dict[str, Any]:
            if app.openapi_schema is None:
                schema = generate()
                for doc in self._docs:
                    _document(schema, doc)
                app.openapi_schema = schema
            return app.openapi_schema

        app.openapi = openapi  # type: ignore[method-assign]


def _schema(schema: dict[str, Any], kind: Any) -> dict[str, Any]:
    """The JSON schema of ``kind``, its definitions moved into ``components``."""
    found = TypeAdapter(kind).json_schema(ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in found.pop("$defs", {}).items():
        components.setdefault(name, definition)
    title = found.get("title")
    if isinstance(title, str) and found.get("type") == "object" and "properties" in found:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", title).strip("_")  # Page[X] -> Page_X
        components.setdefault(name, found)
        return {"$ref": f"#/components/schemas/{name}"}
    return found


def _document(schema: dict[str, Any], doc: _Doc) -> None:
    parameters: list[dict[str, Any]] = [
        {"name": part[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
        for part in doc.path.split("/")
        if part.startswith("{")
    ]
    text = {"required": False, "schema": {"type": "string"}}
    parameters += [{"name": name, "in": "query", **text} for name in doc.query]
    if doc.method != "get":
        parameters.append({"name": "X-Idempotency-Key", "in": "header", **text})
    content = {"application/json": {"schema": _schema(schema, doc.response)}}
    operation: dict[str, Any] = {
        "tags": [doc.tag],
        "summary": doc.summary,
        "parameters": parameters,
        "responses": {str(doc.status): {"description": doc.summary, "content": content}},
    }
    if doc.body is not None:
        body = {"application/json": {"schema": _schema(schema, doc.body)}}
        operation["requestBody"] = {"required": True, "content": body}
    schema.setdefault("paths", {}).setdefault(doc.path, {})[doc.method] = operation


class _Dispatch:
    """Lean routes first, straight to their endpoint; everything else to FastAPI's stack.

    FastAPI's middlewares (error pages, body limits, exit stacks) cost about a tenth of a
    renewal; a lean endpoint needs none of them: its errors are mapped here by the app's own
    exception handlers, so the answer is the same as through the stack."""

    def __init__(self, app: FastAPI, inner: ASGIApp, routes: Sequence[Route]) -> None:
        self._app = app
        self._inner = inner
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self._routes:
                match, child = route.matches(scope)
                if match is Match.FULL:
                    scope.update(child)
                    await self._serve(route, scope, receive, send)
                    return
        await self._inner(scope, receive, send)

    async def _serve(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request)
        except Exception as error:
            handler = self._handler(error)
            if handler is None:
                raise
            response = await handler(request, error)
        await response(scope, receive, send)

    def _handler(self, error: Exception) -> Callable[..., Awaitable[Response]] | None:
        handlers = self._app.exception_handlers
        for kind in type(error).__mro__:
            found = handlers.get(kind)
            if found is not None:
                return cast(Callable[..., Awaitable[Response]], found)
        return None
