"""The emulator's API server: the Kubernetes REST API over the stdlib ``ThreadingHTTPServer``.

``ApiServer`` listens on 127.0.0.1 (a free port) and serves discovery, health, CRUD, list/watch,
``/status``, ``/log``, ``/binding`` and deletecollection for the resource types of
``resources.RESOURCES``, over HTTP/1.1 with keep-alive: normal answers carry Content-Length,
watch and followed-log streams use chunked encoding (``streams``, ``podlogs``). The connection
plumbing (bodies, the bearer token, ``Status`` answers) is ``handler``'s; path parsing is
``routes``'. ``Faults`` are applied before each API call, after routing, so they match by verb
and resource. Object semantics all live in the ``ObjectStore``: this module only translates
requests into store calls and their results into answers.
"""

from __future__ import annotations

import hmac
import json
import logging
import random
import threading
from pathlib import Path
from typing import Any

from tests.kube.emulator import discovery, podlogs
from tests.kube.emulator.access import (
    ANONYMOUS,
    REVIEW_PATH,
    REVIEW_PLURAL,
    USER,
    Access,
    forbidden_path,
)
from tests.kube.emulator.errors import ApiError, bad_request
from tests.kube.emulator.faults import Faults
from tests.kube.emulator.handler import RequestHandler, Server
from tests.kube.emulator.resources import PODS
from tests.kube.emulator.routes import (
    ApiPath,
    Query,
    dry_run_of,
    method_not_allowed,
    not_found_path,
    parse_api_path,
    split_group_version,
    verb_of,
)
from tests.kube.emulator.store import ObjectStore
from tests.kube.emulator.streams import (
    WatchRegistry,
    WatchStream,
    error_event_line,
)

log = logging.getLogger(__name__)

# What RBAC's system:public-info-viewer lets anyone read, even without a token.
PUBLIC_PATHS = ("/healthz", "/readyz", "/livez", "/version")
# A real server ends a watch after a random 30-60 minutes unless the client asks sooner.
DEFAULT_WATCH_TIMEOUT = (1800, 3600)
SUCCESS_BINDING = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


class ApiServer:
    """The HTTP front of one emulator: ``start()`` returns its URL, ``stop()`` ends everything."""

    def __init__(
        self,
        store: ObjectStore,
        faults: Faults,
        watches: WatchRegistry,
        access: Access,
        *,
        token: str,
        log_dir: Path,
    ) -> None:
        self.store = store
        self.faults = faults
        self.watches = watches
        self.access = access
        self.token = token
        self.log_dir = log_dir
        self.stopping = threading.Event()
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"{host!s}:{port}"

    def start(self, port: int = 0) -> str:
        """Listen on ``port`` (0: a free one); the URL."""
        self.stopping.clear()
        self._httpd = Server(self, port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kube-emulator-http",
            daemon=True,
        )
        self._thread.start()
        return f"http://{self.address}"

    def stop(self) -> None:
        self.stopping.set()
        for stream in self.watches.snapshot():
            stream.drop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def bookmark(self) -> None:
        """Ask every open watch stream that allows bookmarks for a BOOKMARK event."""
        for stream in self.watches.snapshot():
            stream.request_bookmark()

    # -- request handling (called on the handler's thread) -------------------------------------

    def user_of(self, authorization: str | None) -> str:
        """The token's ``USER``, ``system:anonymous`` without a token; 401 for a wrong one."""
        if authorization is None:
            return ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode(), self.token.encode()
        ):
            return USER
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def dispatch(
        self,
        h: RequestHandler,
        method: str,
        path: str,
        query: Query,
        body: bytes,
        *,
        user: str,
    ) -> None:
        """Answer one request from ``user`` (see ``access`` for who may do what)."""
        normalised = path.rstrip("/") or "/"
        if normalised in PUBLIC_PATHS:
            _only_get(method)
            if normalised == "/version":
                h.send_json(200, discovery.version())
            else:
                h.send_body(200, b"ok", "text/plain; charset=utf-8")
            return
        if normalised == REVIEW_PATH:
            if method != "POST":
                raise method_not_allowed()
            self.faults.before("create", REVIEW_PLURAL)
            h.send_json(201, self.access.review(user, _json_body(body)))
            return
        document = self._discovery(path)
        if document is not None:
            if user == ANONYMOUS:
                raise forbidden_path(user, method, path)
            _only_get(method)
            h.send_json(200, document)
            return
        try:
            api_path = self._api_path(path)
            verb = verb_of(method, api_path, query.flag("watch"))
        except ApiError:
            if user == ANONYMOUS:  # RBAC refuses before the server looks for the resource
                raise forbidden_path(user, method, path) from None
            raise
        self.access.check(user, verb, api_path)
        if verb == "watch":
            self._watch(h, api_path, query)
            return
        self.faults.before(verb, api_path.resource)
        if verb == "get" and api_path.subresource == "log":
            self._log(h, api_path, query)
        else:
            code, reply = self._call(verb, api_path, query, body, h.content_type())
            if self.faults.answer_lost(verb, api_path.resource):  # applied, never answered
                raise ConnectionResetError(f"injected fault: the answer to {verb} is lost")
            h.send_json(code, reply)

    @staticmethod
    def _api_path(path: str) -> ApiPath:
        split = split_group_version(path)
        if split is None or not split[2]:
            raise not_found_path()
        return parse_api_path(*split)

    def _discovery(self, path: str) -> dict[str, Any] | None:
        path = path.rstrip("/") or "/"
        if path == "/api":
            return discovery.api_versions(self.address)
        if path == "/apis":
            return discovery.api_group_list()
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "apis":
            return discovery.api_group(parts[1])
        if len(parts) == 2 and parts[0] == "api":
            return discovery.api_resource_list("", parts[1])
        if len(parts) == 3 and parts[0] == "apis":
            return discovery.api_resource_list(parts[1], parts[2])
        return None

    def _call(
        self, verb: str, p: ApiPath, query: Query, body: bytes, content_type: str
    ) -> tuple[int, dict[str, Any]]:
        store, rtype = self.store, p.rtype
        if verb == "create" and (rtype is None or p.subresource == "binding"):
            return 201, self._bind(p, _json_body(body), query.dry_run())
        assert rtype is not None
        if verb == "list":
            return 200, store.list(
                rtype,
                p.namespace,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                limit=query.integer("limit"),
                continue_token=query.get("continue"),
            )
        if verb == "get":
            return 200, store.get(rtype, p.namespace, _name(p))
        if verb == "create":
            return 201, store.create(rtype, p.namespace, _json_body(body), dry_run=query.dry_run())
        if verb == "update":
            return 200, store.replace(
                rtype,
                p.namespace,
                _name(p),
                _json_body(body),
                subresource=p.subresource,
                dry_run=query.dry_run(),
            )
        if verb == "patch":
            return 200, store.patch(
                rtype,
                p.namespace,
                _name(p),
                _json_body(body, expect_object=False),
                content_type,
                subresource=p.subresource,
                dry_run=query.dry_run(),
            )
        options = _delete_options(query, body)
        if verb == "delete":
            return 200, store.delete(rtype, p.namespace, _name(p), **options)
        return 200, self._delete_collection(p, query, options)

    def _delete_collection(
        self, p: ApiPath, query: Query, options: dict[str, Any]
    ) -> dict[str, Any]:
        assert p.rtype is not None
        found = self.store.list(
            p.rtype,
            p.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
        )
        deleted = []
        for item in found["items"]:
            meta = item["metadata"]
            try:
                reply = self.store.delete(p.rtype, meta.get("namespace"), meta["name"], **options)
            except ApiError as error:
                if error.code == 404:
                    continue
                raise
            deleted.append(item if reply.get("kind") == "Status" else reply)
        found["items"] = deleted
        found["metadata"] = {"resourceVersion": str(self.store.resource_version)}
        return found

    def _bind(self, p: ApiPath, binding: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        """``POST pods/{name}/binding`` or ``POST namespaces/{ns}/bindings``: bind a pod."""
        assert p.namespace is not None
        body_name = (binding.get("metadata") or {}).get("name")
        name = p.name or body_name
        if not name:
            raise bad_request("a Binding needs metadata.name (the pod's name)")
        if p.name and body_name and body_name != p.name:
            raise bad_request("name in URL does not match name in Binding object")
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise ApiError(422, "Invalid", "Binding target name (the node) is required")
        if dry_run:
            self.store.get(PODS, p.namespace, name)
        else:
            self.store.bind_pod(p.namespace, name, node)
        return {**SUCCESS_BINDING, "code": 201}

    def _watch(self, h: RequestHandler, p: ApiPath, query: Query) -> None:
        assert p.rtype is not None
        timeout = query.integer("timeoutSeconds")
        if timeout is None or timeout <= 0:
            timeout = random.randint(*DEFAULT_WATCH_TIMEOUT)
        bookmarks = query.flag("allowWatchBookmarks")
        try:
            self.faults.before("watch", p.resource)
            watcher = self.store.watch(
                p.rtype,
                p.namespace,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                resource_version=query.integer("resourceVersion"),
                send_bookmarks=bookmarks,
            )
        except ApiError as error:
            if error.code != 410:
                raise
            # A real server answers 200 and a single ERROR event carrying the 410 Status (an
            # injected 410 looks the same; other failures are plain HTTP errors, as on a server).
            response = h.start_stream("application/json")
            response.write(error_event_line(error.status()))
            response.finish()
            return
        response = h.start_stream("application/json")
        stream = WatchStream(
            response,
            watcher,
            self.store,
            p.rtype,
            timeout_seconds=timeout,
            bookmarks=bookmarks,
            stopping=self.stopping,
        )
        self.watches.add(stream)
        self.faults.open_stream(stream)
        try:
            stream.run()
        finally:
            self.faults.close_stream(stream)
            self.watches.remove(stream)

    def _log(self, h: RequestHandler, p: ApiPath, query: Query) -> None:
        assert p.namespace is not None
        target = podlogs.resolve(
            self.store,
            self.log_dir,
            p.namespace,
            _name(p),
            query.get("container"),
            query.flag("previous"),
        )
        data, end = podlogs.read(
            target.path, query.integer("tailLines"), query.integer("limitBytes")
        )
        if not query.flag("follow"):
            h.send_body(200, data, "text/plain")
            return
        response = h.start_stream("text/plain")
        if response.write(data):
            podlogs.follow(response, self.store, target, end, self.stopping)


def _only_get(method: str) -> None:
    if method != "GET":
        raise method_not_allowed()


def _name(p: ApiPath) -> str:
    assert p.name is not None
    return p.name


def _json_body(body: bytes, *, expect_object: bool = True) -> Any:
    if not body:
        raise bad_request("the request body is empty")
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise bad_request(f"the request body is not valid JSON: {error}") from None
    if expect_object and not isinstance(value, dict):
        raise bad_request("the request body must be a JSON object")
    return value


def _delete_options(query: Query, body: bytes) -> dict[str, Any]:
    """DeleteOptions from the query and (overriding it) a JSON ``DeleteOptions`` body."""
    options = _json_body(body) if body.strip() else {}
    if not isinstance(options, dict):
        raise bad_request("DeleteOptions must be a JSON object")
    grace = options.get("gracePeriodSeconds", query.integer("gracePeriodSeconds"))
    policy = options.get("propagationPolicy") or query.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    if orphan is None and query.get("orphanDependents") is not None:
        orphan = query.flag("orphanDependents")
    if policy is None and orphan is not None:
        policy = "Orphan" if orphan else "Background"
    dry_run = dry_run_of(list(options.get("dryRun") or [])) or query.dry_run()
    return {
        "grace_period_seconds": grace,
        "propagation_policy": policy,
        "dry_run": dry_run,
        "preconditions": options.get("preconditions"),
    }
