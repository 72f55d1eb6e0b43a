"""Name rules of the Kubernetes API: DNS-1123 labels and subdomains, qualified names, label values.

Each ``*_errors`` function returns the list of problems a real kube-apiserver reports for the
value (an empty list means valid), worded exactly as apimachinery's ``util/validation`` words
them, so messages built from them match a real server's ``Status`` text. Pure functions, no state.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_ENV_VAR_NAME_RE = re.compile(_ENV_VAR_NAME_FMT)
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """The wording apimachinery uses for a value that does not match a pattern."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def dns1123_label_errors(value: str) -> list[str]:
    """A lowercase RFC 1123 label (namespace names, container names): ≤ 63, ``[a-z0-9-]``."""
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errors.append(
            regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character",
                _DNS1123_LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    """A lowercase RFC 1123 subdomain (most object names): ≤ 253, labels joined by dots."""
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """A label/annotation key: optional DNS subdomain prefix and ``/``, then a name ≤ 63."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors = ["prefix part must be non-empty"]
        else:
            errors = [f"prefix part {e}" for e in dns1123_subdomain_errors(prefix)]
    else:
        return [
            regex_error(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errors.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(
            "name part "
            + regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """A label value: empty, or ≤ 63 characters of ``[A-Za-z0-9-_.]`` starting/ending alnum."""
    errors = []
    if len(value) > LABEL_VALUE_MAX:
        errors.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def env_var_name_errors(value: str) -> list[str]:
    """A container environment variable name (C identifier-ish, dots and dashes allowed)."""
    if _ENV_VAR_NAME_RE.fullmatch(value):
        return []
    return [
        regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, "
            "'_', '-', or '.', and must not start with a digit",
            _ENV_VAR_NAME_FMT,
            "my.env-name",
            "MY_ENV.NAME",
            "MyEnvName1",
        )
    ]


def config_map_key_errors(value: str) -> list[str]:
    """A key of a Secret's or ConfigMap's data: ≤ 253 of ``[-._a-zA-Z0-9]``, not ``.``/``..``."""
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_KEY_RE.fullmatch(value):
        errors.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    if value == ".":
        errors.append("must not be '.'")
    elif value == "..":
        errors.append("must not be '..'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors
