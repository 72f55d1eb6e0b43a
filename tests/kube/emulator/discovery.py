"""The discovery documents the emulator serves: ``/version``, ``/api``, ``/apis``, resource lists.

Built from ``resources.RESOURCES`` (plus the access reviews of ``access``) so that discovery
always names exactly what the emulator serves, shaped as a real kube-apiserver shapes them (``APIVersions``, ``APIGroupList``,
``APIGroup``, ``APIResourceList``). Pure functions of the resource table and the server address.
"""

from __future__ import annotations

from typing import Any

from tests.kube.emulator.access import REVIEW_GROUP, REVIEW_KIND, REVIEW_PLURAL, REVIEW_VERSION
from tests.kube.emulator.resources import RESOURCES, ResourceType

GIT_VERSION = "v1.30.0-wharf-emulator"
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
IN_CATEGORY_ALL = frozenset({"pods", "jobs", "cronjobs"})

# Served resources that are not stored objects: (group, version) -> APIResource entries.
NON_STORED: dict[tuple[str, str], list[dict[str, Any]]] = {
    (REVIEW_GROUP, REVIEW_VERSION): [
        {
            "name": REVIEW_PLURAL,
            "singularName": "",
            "namespaced": False,
            "kind": REVIEW_KIND,
            "verbs": ["create"],
        }
    ],
}

# The verbs of each subresource, as a real server lists them.
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "finalize": ["update"],
}


def version() -> dict[str, Any]:
    return {
        "major": "1",
        "minor": "30",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """``GET /api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_versions() -> set[tuple[str, str]]:
    return {(r.group, r.version) for r in RESOURCES} | set(NON_STORED)


def _groups() -> list[str]:
    return sorted({group for group, _ in _group_versions() if group})


def api_group(group: str) -> dict[str, Any] | None:
    """``GET /apis/<group>``, or None if the group is not served."""
    versions = sorted({v for g, v in _group_versions() if g == group})
    if not versions:
        return None
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_group_list() -> dict[str, Any]:
    """``GET /apis``."""
    groups = []
    for name in _groups():
        group = api_group(name)
        assert group is not None
        del group["kind"], group["apiVersion"]
        groups.append(group)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    """``GET /api/v1`` or ``GET /apis/<group>/<version>``, or None if not served."""
    if (group, version) not in _group_versions():
        return None
    served = [r for r in RESOURCES if (r.group, r.version) == (group, version)]
    resources: list[dict[str, Any]] = [dict(e) for e in NON_STORED.get((group, version), [])]
    for rtype in served:
        resources.append(_main_resource(rtype))
        subresources = list(rtype.subresources)
        if rtype.plural == "namespaces":
            subresources.append("finalize")
        resources.extend(_subresource(rtype, sub) for sub in subresources)
    if group == "":
        resources.append(
            {
                "name": "bindings",
                "singularName": "binding",
                "namespaced": True,
                "kind": "Binding",
                "verbs": ["create"],
            }
        )
    group_version = f"{group}/{version}" if group else version
    resources.sort(key=lambda r: r["name"])
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _main_resource(rtype: ResourceType) -> dict[str, Any]:
    verbs = list(ALL_VERBS)
    if rtype.plural == "namespaces":
        verbs.remove("deletecollection")
    entry: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": verbs,
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.plural in IN_CATEGORY_ALL:
        entry["categories"] = ["all"]
    return entry


def _subresource(rtype: ResourceType, sub: str) -> dict[str, Any]:
    kinds = {"log": "Pod", "binding": "Binding"}
    return {
        "name": f"{rtype.plural}/{sub}",
        "singularName": "",
        "namespaced": rtype.namespaced,
        "kind": kinds.get(sub, rtype.kind),
        "verbs": SUBRESOURCE_VERBS.get(sub, ["get"]),
    }
