"""What the Kubernetes client's own models refuse in settings given in the API's shape.

Owns :func:`api_shape_problem`. The official client (33 and newer) validates a request's body
against its pydantic models before sending it, and raises pydantic's multi-line error; settings
passed through as the API takes them (``affinity``, ``env``, ``volumes``, a pod failure
policy…) are checked against those same models when they are given, so a wrong type or a
misspelt field is one line naming it, before anything is recorded or created. Invariant: with
a client that does not validate (older than 33), or none installed, nothing is refused here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def api_shape_problem(model_name: str, value: Any) -> str | None:
    """What the client's model ``model_name`` (``V1Affinity``, ``V1EnvVar``…) refuses in
    ``value``, as one phrase (``'nodeAffinty' is not a known field``); None if nothing."""
    try:
        from kubernetes import client as models
    except ImportError:  # the kubernetes extra is not installed
        return None
    validate = getattr(getattr(models, model_name, None), "model_validate", None)
    if validate is None:
        return None
    try:
        validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        if first["type"] == "extra_forbidden":
            return f"'{where}' is not a known field"
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return None
