"""The one factory for Kubernetes API clients used by Wharf's Kubernetes integration.

Owns :func:`kube_clients` (in-cluster configuration or the user's kubeconfig), the retry policy
for a short API outage (:func:`outage_retries`) and the one-line errors for a refused or
unreachable API server (:func:`cluster_call`, :func:`api_error`).

Invariants: each call builds its own ``Configuration`` (the client's process-wide default is
never read or changed, so clients for two clusters live side by side); an API failure meets the
user as one :class:`WharfError` line, never as the client's own exception.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client import ApiException
from kubernetes.config.config_exception import ConfigException
from pydantic import ValidationError
from urllib3.exceptions import HTTPError
from urllib3.util.retry import Retry

from wharf.core.errors import InputError, WharfError

IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
KUBECONFIG_ENV = "KUBECONFIG"
DEFAULT_KUBECONFIG = "~/.kube/config"
CREDENTIAL_CHECK_INTERVAL_S = 10.0
OUTAGE_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Answers of an API server that is overloaded or restarting (its load balancer's included)."""
OUTAGE_RETRIES = 15
"""Retries of a request in an outage: with the backoff of :func:`outage_retries`, about 62 s."""
ANONYMOUS = "system:anonymous"
NO_CREDENTIALS = (
    " (the request carried no credentials: the kubeconfig's user gave none; an exec plugin "
    "such as a cloud CLI may have failed, see the message above)"
)
CREDENTIALS_REFUSED = (
    " (the cluster refused the kubeconfig's credentials: renew them, e.g. log in to the "
    "cluster again, or check -c context / -c kubeconfig)"
)

NO_NAMESPACE = (
    " (create it, e.g. `kubectl create namespace {namespace}`, or set the component's or the "
    "pipeline's `namespace` to one that exists)"
)


@dataclass(frozen=True)
class KubeClients:
    """An API client and the typed APIs on it (close ``api_client`` when done)."""

    api_client: client.ApiClient
    core: client.CoreV1Api
    batch: client.BatchV1Api

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]


def kube_clients(
    *, context: str | None = None, kubeconfig: str | None = None, ride_out_outages: bool = False
) -> KubeClients:
    """Clients for the cluster this process should talk to.

    Inside a pod (``KUBERNETES_SERVICE_HOST`` set) the service account's in-cluster
    configuration is used; elsewhere the user's kubeconfig (``kubeconfig``, else
    ``$KUBECONFIG``, a list of files as kubectl reads it, else ``~/.kube/config``) with an
    optional ``context``, so every auth plugin of the official client works. ``kubeconfig`` or
    ``context`` given: the kubeconfig is used even inside a pod. The client's per-request
    credential hook runs at most once per ``CREDENTIAL_CHECK_INTERVAL_S`` (the loaders refresh
    a token well before it expires, so none is used stale).

    ``ride_out_outages`` (the orchestrator pod's and the step operator's clients, which start
    and clean up steps): requests are retried through a short API outage
    (:func:`outage_retries`); a client for a command the user waits on fails at once instead.
    Raises :class:`InputError` with one line when no usable configuration is found."""
    configuration = client.Configuration()
    if os.environ.get(IN_CLUSTER_ENV) and kubeconfig is None and context is None:
        try:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except ConfigException as exc:
            raise InputError(f"Cannot use the in-cluster Kubernetes configuration: {exc}") from exc
    else:
        _load_kubeconfig(configuration, kubeconfig, context)
    hook = configuration.refresh_api_key_hook
    if hook is not None:
        configuration.refresh_api_key_hook = _at_most_every(CREDENTIAL_CHECK_INTERVAL_S, hook)
    if ride_out_outages:
        configuration.retries = outage_retries()
    api_client = client.ApiClient(configuration)
    return KubeClients(api_client, client.CoreV1Api(api_client), client.BatchV1Api(api_client))


def outage_retries() -> Retry:
    """urllib3's retry policy for a short API outage (a control plane restarting): connection
    failures and :data:`OUTAGE_STATUSES`, on every verb, :data:`OUTAGE_RETRIES` times, backing
    off 1, 2, 4, then 5 s and honouring ``Retry-After``; once spent, the last answer is
    returned (the client raises it as an ``ApiException``). Every verb is safe to repeat:
    Wharf's creates name their objects (a repeated create meets 409 and adopts what the first
    made) and a repeated delete meets 404."""
    retries = OUTAGE_RETRIES
    return Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        redirect=0,
        allowed_methods=None,
        status_forcelist=OUTAGE_STATUSES,
        backoff_factor=0.5,
        backoff_max=5.0,
        raise_on_status=False,
        respect_retry_after_header=True,
    )


def _at_most_every(
    interval_s: float, hook: Callable[[client.Configuration], None]
) -> Callable[[client.Configuration], None]:
    """``hook``, run on the first call and then only once ``interval_s`` has passed since it last
    ran (concurrent callers may both run it: it only re-assigns the same settings). The
    kubeconfig loader's hook installs a fresh copy of itself each time it runs; the throttled
    one is put back in its place, keeping the freshest inner hook."""
    last_run = [float("-inf")]
    current = [hook]

    def throttled(configuration: client.Configuration) -> None:
        now = time.monotonic()
        if now - last_run[0] >= interval_s:
            current[0](configuration)
            last_run[0] = now
            installed = configuration.refresh_api_key_hook
            if installed is not None and installed is not throttled:
                current[0] = installed
                configuration.refresh_api_key_hook = throttled

    return throttled


def _load_kubeconfig(
    configuration: client.Configuration, kubeconfig: str | None, context: str | None
) -> None:
    files = kubeconfig or os.environ.get(KUBECONFIG_ENV) or DEFAULT_KUBECONFIG
    paths = [str(Path(p).expanduser()) for p in files.split(os.pathsep) if p]
    if not any(Path(p).is_file() for p in paths):
        raise InputError(
            f"No kubeconfig found at {files}: name one with -c kubeconfig=PATH or $KUBECONFIG."
        )
    where = f"the kubeconfig {files}" + (f" (context {context})" if context else "")
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(paths),
            context=context,
            client_configuration=configuration,
        )
    except ConfigException as exc:
        raise InputError(f"Cannot use {where}: {_one_line(exc)}") from exc
    except (OSError, ValueError, yaml.YAMLError) as exc:  # unreadable file, malformed YAML
        raise InputError(f"Cannot read {where}: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def cluster_call(action: str) -> Iterator[None]:
    """Turn a refusal, an unreachable API server or a body the client itself refuses into one
    :class:`WharfError` line saying that ``action`` could not be done, and why."""
    try:
        yield
    except ApiException as exc:
        raise api_error(exc, action) from None
    except HTTPError as exc:
        cause = getattr(exc, "reason", None) or exc  # MaxRetryError: the last attempt's error
        reason = _one_line(cause)
        raise WharfError(f"Cannot {action}: the Kubernetes API is unreachable ({reason})") from None
    except ValidationError as exc:  # the client (33 and newer) checks a body before sending it
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:])  # [0]: the body's argument
        raise WharfError(
            f"Cannot {action}: the Kubernetes client refused the request: {where}: {first['msg']}"
        ) from None


def api_error(exc: ApiException, action: str) -> WharfError:
    """A one-line error for an API refusal: what could not be done, and the server's reason."""
    message = exc.reason or "refused"
    details: dict[str, Any] = {}
    try:
        body = json.loads(exc.body or "{}")
        message = body.get("message") or message
        details = body.get("details") or {}
    except (TypeError, ValueError, AttributeError):
        pass
    hint = ""
    if exc.status == 401:
        hint = CREDENTIALS_REFUSED
    elif ANONYMOUS in message:
        hint = NO_CREDENTIALS
    elif exc.status == 404 and details.get("kind") == "namespaces":
        hint = NO_NAMESPACE.format(namespace=details.get("name"))
    return WharfError(f"Cannot {action} (HTTP {exc.status}): {message}{hint}")
