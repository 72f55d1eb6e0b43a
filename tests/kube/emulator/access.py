"""Who may do what on the emulator, and ``SelfSubjectAccessReview`` answers that agree.

Two users exist, as on a kube-apiserver with a static token file and RBAC: the kubeconfig's
token is ``USER``, allowed everything except what a test takes away with ``deny(verb,
resource)``; a request without a token is ``system:anonymous``, who may only read the public
info endpoints (health, /version). A refused request gets RBAC's 403 ``Forbidden`` with its exact
message and details. ``review`` answers ``POST …/selfsubjectaccessreviews`` from the same rules,
so a preflight check (``scripts/k8s-smoke``) sees what the requests themselves would meet.
Thread-safe.
"""

from __future__ import annotations

import copy
import threading
from typing import TYPE_CHECKING, Any

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import NAMESPACES

if TYPE_CHECKING:
    from tests.kube.emulator.routes import ApiPath

ANONYMOUS = "system:anonymous"
USER = "wharf-test"
REVIEW_GROUP = "authorization.k8s.io"
REVIEW_VERSION = "v1"
REVIEW_PLURAL = "selfsubjectaccessreviews"
REVIEW_KIND = "SelfSubjectAccessReview"
REVIEW_PATH = f"/apis/{REVIEW_GROUP}/{REVIEW_VERSION}/{REVIEW_PLURAL}"
ALLOWED_REASON = (
    'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" '
    f'to User "{USER}"'
)


class Access:
    """The emulator's authorisation rules (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._denied: set[tuple[str, str]] = set()

    def deny(self, verb: str, resource: str) -> None:
        """Refuse ``verb`` on ``resource`` ("pods", "pods/log", "cronjobs"…) to the token's user."""
        with self._lock:
            self._denied.add((verb, resource))

    def reset(self) -> None:
        """Allow the token's user everything again."""
        with self._lock:
            self._denied.clear()

    def allows(self, user: str, verb: str, resource: str) -> bool:
        if user == ANONYMOUS:
            return False
        with self._lock:
            return (verb, resource) not in self._denied

    def check(self, user: str, verb: str, path: ApiPath) -> None:
        """Raise RBAC's 403 unless ``user`` may ``verb`` what ``path`` names."""
        if not self.allows(user, verb, path.resource):
            group = path.rtype.group if path.rtype else ""
            plural = path.rtype.plural if path.rtype else path.resource
            namespace = path.namespace or (path.name if path.rtype == NAMESPACES else None)
            raise forbidden(user, verb, group, plural, path.subresource, namespace, path.name)

    def review(self, user: str, body: Any) -> dict[str, Any]:
        """The answered ``SelfSubjectAccessReview`` for a request ``body``."""
        if user == ANONYMOUS:
            raise forbidden(user, "create", REVIEW_GROUP, REVIEW_PLURAL, None, None, None)
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise ApiError(400, "BadRequest", "a SelfSubjectAccessReview needs a spec")
        spec = body["spec"]
        attributes = spec.get("resourceAttributes")
        if isinstance(attributes, dict):
            resource = attributes.get("resource") or ""
            if attributes.get("subresource"):
                resource = f"{resource}/{attributes['subresource']}"
            allowed = self.allows(user, attributes.get("verb") or "", resource)
        elif isinstance(spec.get("nonResourceAttributes"), dict):
            allowed = True
        else:
            raise ApiError(
                422,
                "Invalid",
                f'{REVIEW_KIND}.{REVIEW_GROUP} "" is invalid: spec.resourceAttributes: Invalid '
                'value: "null": exactly one of nonResourceAttributes or resourceAttributes '
                "must be specified",
                {"group": REVIEW_GROUP, "kind": REVIEW_KIND},
            )
        status: dict[str, Any] = {"allowed": allowed}
        if allowed:
            status["reason"] = ALLOWED_REASON
        return {
            "kind": REVIEW_KIND,
            "apiVersion": f"{REVIEW_GROUP}/{REVIEW_VERSION}",
            "metadata": {"creationTimestamp": None},
            "spec": copy.deepcopy(spec),
            "status": status,
        }


def forbidden(
    user: str,
    verb: str,
    group: str,
    plural: str,
    subresource: str | None,
    namespace: str | None,
    name: str | None,
) -> ApiError:
    """RBAC's 403, e.g. ``pods "p" is forbidden: User "u" cannot get resource "pods" in API
    group "" in the namespace "default"``."""
    resource = f"{plural}/{subresource}" if subresource else plural
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    why = f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {where}'
    qualified = f"{plural}.{group}" if group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    details: dict[str, str] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = plural
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


def forbidden_path(user: str, method: str, url_path: str) -> ApiError:
    """RBAC's 403 on a non-resource path (discovery, unknown paths)."""
    why = f'User "{user}" cannot {method.lower()} path "{url_path}"'
    return ApiError(403, "Forbidden", f"forbidden: {why}", {})
