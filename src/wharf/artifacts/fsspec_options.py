"""The configuration of an ``fsspec`` artifact store: checked at registration, resolved at use.

A component of flavor ``fsspec`` has a ``path`` (an fsspec URL: ``s3://bucket/prefix``,
``gs://…``, ``az://…``/``abfs://…``, ``file:///absolute/dir``) and any other keys, passed to the
fsspec backend as keyword arguments (``endpoint_url``, ``anon``, ``client_kwargs`` …).
Entry points: :func:`check_configuration`, :func:`resolve_options`.

Invariants: secrets never reach the metadata store in clear text; this module imports only the
standard library, so registering a store does not need fsspec.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from wharf.core.errors import InputError
from wharf.core.url_credentials import mask_credentials

ENV_SUFFIX = "_env"
"""``<name>_env=VARIABLE``: the option ``<name>`` is read from the environment variable."""

_SECRET_NAME = re.compile(
    r"(^|_)(key|secret|token|password|passwd|credentials?|sas|sas_token|account_key|"
    r"connection_string|private_key|client_secret|session_token|access_key_id|"
    r"secret_access_key)$",
    re.IGNORECASE,
)
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://(.*)$", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """Whether an option of that name would hold a secret (``key``, ``aws_secret_access_key``)."""
    return bool(_SECRET_NAME.search(name))


def check_configuration(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration to store for an fsspec artifact store; ``InputError`` if it is not one.

    ``path`` must be a URL with a scheme (``file://`` ones absolute); it is stored without a
    trailing ``/``. A key (at any depth) whose name looks like a secret (``key``, ``secret``,
    ``token``, ``password``, ``credential``, ``sas_token``, ``account_key``,
    ``connection_string`` …) is refused with a message saying what to do: name an environment
    variable with ``<name>_env=VARIABLE`` instead, or give neither and let each backend find
    credentials its usual way (``AWS_*`` variables, profiles and instance roles for S3;
    application-default credentials for GCS; ``AZURE_*`` for Azure).
    """
    config = dict(configuration)
    config["path"] = check_path(config.get("path"))
    _refuse_secrets(config, "")
    for name, value in config.items():
        if name.endswith(ENV_SUFFIX) and (not isinstance(value, str) or not value):
            raise InputError(
                f"The option '{name}' of an fsspec artifact store names an environment variable;"
                f" got {value!r}."
            )
    return config


def check_path(raw: Any) -> str:
    """The root URL of an fsspec store, normalised (no trailing ``/``)."""
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(
            "An fsspec artifact store needs a 'path' URL, e.g. -c path=s3://bucket/prefix, "
            f"got {raw!r}."
        )
    shown = mask_credentials(raw.strip())
    match = _SCHEME.match(raw.strip())
    if match is None:
        raise InputError(
            f"The 'path' of an fsspec artifact store must be a URL such as s3://bucket/prefix, "
            f"gs://bucket/prefix, az://container/prefix or file:///absolute/dir; got {shown!r}."
        )
    if shown != raw.strip():
        raise InputError(_credentials_in_url("path", shown))
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme in ("file", "local"):
        if not rest.startswith("/"):
            raise InputError(f"A file:// artifact store path must be absolute, got {raw!r}.")
        stripped = "/" + rest.strip("/")
    else:
        stripped = rest.strip("/")
        if not stripped:
            raise InputError(f"The artifact store path {raw!r} names no bucket or container.")
    parts = stripped.split("/")
    if any(part in (".", "..") for part in parts) or "" in parts[1:]:
        raise InputError(f"The artifact store path {raw!r} has empty, '.' or '..' segments.")
    return f"{scheme}://{stripped}"


def _credentials_in_url(name: str, shown: str) -> str:
    return (
        f"Refusing to store the option '{name}' of an fsspec artifact store in clear text: its "
        f"URL {shown!r} holds credentials. Leave them out of the URL and give them the backend's "
        f"usual way (environment, profile, instance role) or as '-c key{ENV_SUFFIX}=VARIABLE' "
        f"and '-c secret{ENV_SUFFIX}=VARIABLE'."
    )


def _refuse_secrets(options: Mapping[str, Any], where: str) -> None:
    for name, value in options.items():
        if not isinstance(name, str):
            continue
        if name.endswith(ENV_SUFFIX):
            continue
        if isinstance(value, str) and "://" in value and name != "path":
            shown = mask_credentials(value)  # an endpoint_url such as http://user:pass@host
            if shown != value:
                raise InputError(_credentials_in_url(f"{where}{name}", shown))
        if looks_secret(name) and value not in (None, False, ""):
            raise InputError(
                f"Refusing to store the option '{where}{name}' of an fsspec artifact store in "
                f"clear text: it looks like a secret. Give '-c {name}{ENV_SUFFIX}=VARIABLE' to "
                "read it from an environment variable where the store is used, or leave it out "
                "to use the backend's usual credentials (environment, profile, instance role)."
                if not where
                else f"Refusing to store the option '{where}{name}' of an fsspec artifact store in"
                " clear text: it looks like a secret. Put it in the backend's usual place "
                "(environment, profile, instance role) or give a top-level "
                f"'{name}{ENV_SUFFIX}=VARIABLE' option."
            )
        if isinstance(value, Mapping):
            _refuse_secrets(value, f"{where}{name}.")


def resolve_options(
    configuration: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The keyword arguments for the fsspec backend: every option but ``path``, with each
    ``<name>_env=VARIABLE`` replaced by ``<name>=<value of VARIABLE>`` (``secret_env=MY_S3_SECRET``
    gives s3fs ``secret=$MY_S3_SECRET``); a variable that is not set is an error naming it."""
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {}
    for name, value in configuration.items():
        if name == "path":
            continue
        if name.endswith(ENV_SUFFIX) and len(name) > len(ENV_SUFFIX):
            target = name[: -len(ENV_SUFFIX)]
            if not isinstance(value, str) or value not in env:
                raise InputError(
                    f"The artifact store option '{name}' names the environment variable "
                    f"{value!r}, which is not set in this process."
                )
            options[target] = env[value]
        else:
            options[name] = value
    return options
