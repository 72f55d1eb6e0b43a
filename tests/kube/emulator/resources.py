"""The resource types the emulator serves, and how to look them up.

A ``ResourceType`` names a REST resource (group/version/plural) and its object ``kind``; it says
whether objects live in a namespace and whether ``status`` only changes through the ``/status``
subresource. ``RESOURCES`` is the complete, fixed set the emulator serves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    """One served resource, e.g. ``("", "v1", "Pod", "pods")`` or ``("batch", "v1", "Job", …)``."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    has_status: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``batch/v1`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified_plural(self) -> str:
        """``pods`` / ``jobs.batch``: the resource name a real server uses in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


NAMESPACES = ResourceType("", "v1", "Namespace", "namespaces", False, True, ("ns",), ("status",))
PODS = ResourceType("", "v1", "Pod", "pods", True, True, ("po",), ("status", "log", "binding"))
SECRETS = ResourceType("", "v1", "Secret", "secrets", True, False)
CONFIGMAPS = ResourceType("", "v1", "ConfigMap", "configmaps", True, False, ("cm",))
SERVICEACCOUNTS = ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, False, ("sa",))
EVENTS = ResourceType("", "v1", "Event", "events", True, False, ("ev",))
JOBS = ResourceType("batch", "v1", "Job", "jobs", True, True, (), ("status",))
CRONJOBS = ResourceType("batch", "v1", "CronJob", "cronjobs", True, True, ("cj",), ("status",))

RESOURCES: tuple[ResourceType, ...] = (
    NAMESPACES,
    PODS,
    SECRETS,
    CONFIGMAPS,
    SERVICEACCOUNTS,
    EVENTS,
    JOBS,
    CRONJOBS,
)


def resource_for(group: str, version: str, plural: str) -> ResourceType | None:
    """The resource served at ``/apis/<group>/<version>/<plural>`` (``/api/v1`` for group "")."""
    for rtype in RESOURCES:
        if (rtype.group, rtype.version, rtype.plural) == (group, version, plural):
            return rtype
    return None


def resource_of_kind(api_version: str, kind: str) -> ResourceType | None:
    """The resource whose objects have this ``apiVersion`` and ``kind``."""
    for rtype in RESOURCES:
        if rtype.api_version == api_version and rtype.kind == kind:
            return rtype
    return None
