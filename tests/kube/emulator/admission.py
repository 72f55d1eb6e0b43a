"""The emulator's ServiceAccount admission: a pod naming a service account its namespace lacks
is refused, as kube-apiserver's ``ServiceAccount`` admission plugin refuses it.

Owns :func:`check_service_account`, which ``ObjectStore.create`` calls for every new pod while
``ObjectStore.service_account_admission`` is on (off by default: the bed creates no
ServiceAccounts). ``default`` always passes (a real namespace controller creates it in every
namespace). The refusal is the real one: 403 Forbidden, ``pods "NAME" is forbidden: error
looking up service account NS/SA: serviceaccount "SA" not found`` (NAME: the pod's name, or its
``generateName`` for a controller's pod), which the Job controller puts in its ``FailedCreate``
event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.object_rules import Key

DEFAULT_ACCOUNT = "default"


def check_service_account(
    accounts: Mapping[Key, dict[str, Any]], pod: Mapping[str, Any], generate_name: str | None
) -> None:
    """Refuse ``pod`` (defaulted, not yet stored) if its service account does not exist in its
    namespace (``accounts``: the stored ServiceAccounts by (namespace, name))."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    account = str((pod.get("spec") or {}).get("serviceAccountName") or DEFAULT_ACCOUNT)
    if account == DEFAULT_ACCOUNT or (namespace, account) in accounts:
        return
    name = generate_name or metadata.get("name")
    raise ApiError(
        403,
        "Forbidden",
        f'pods "{name}" is forbidden: error looking up service account '
        f'{namespace}/{account}: serviceaccount "{account}" not found',
        {"name": name, "kind": "pods"},
    )
