"""Kubernetes names, label values and the labels and annotations Wharf puts on its objects.

Owns the syntax checks of Kubernetes names (``is_*``), turning any text into a valid label value
(:func:`label_value`) or resource name (:func:`resource_name`), the run labels and annotations
(:func:`run_labels`, :func:`run_annotations`) and label selectors.

Invariants: a valid value is kept as it is; any other is rewritten *and* suffixed with a hash of
the original text (:func:`short_hash`), so two different inputs stay apart even when they share
a long prefix; the result depends only on the input; annotations carry the full, unchanged
values under the same ``wharf.io/...`` keys.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

LABEL_VALUE_MAX = 63
"""Longest label value (and DNS-1123 label) Kubernetes accepts."""
JOB_NAME_MAX = 63
"""A Job's name becomes its pods' ``job-name`` label value, so it must be a valid label value."""
CRONJOB_NAME_MAX = 52
"""The CronJob controller appends ``-<11 digits>`` to name the Jobs it creates."""
SUBDOMAIN_MAX = 253
"""Longest DNS-1123 subdomain (Secret, ConfigMap names)."""
HASH_LENGTH = 8

PIPELINE_KEY = "wharf.io/pipeline"
RUN_ID_KEY = "wharf.io/run-id"
RUN_NAME_KEY = "wharf.io/run-name"
STEP_KEY = "wharf.io/step"
STEP_RUN_ID_KEY = "wharf.io/step-run-id"

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NOT_LABEL_CHAR = re.compile(r"[^-A-Za-z0-9_.]+")
_NOT_NAME_CHAR = re.compile(r"[^-a-z0-9]+")


def is_label_value(text: str) -> bool:
    """True when ``text`` is a valid label value (empty, or ≤ 63 of ``[-A-Za-z0-9_.]`` that
    begin and end with a letter or digit)."""
    return len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(text) is not None


def is_dns1123_label(text: str) -> bool:
    """True for a DNS-1123 label: ≤ 63 lowercase letters, digits and ``-``, alphanumeric ends."""
    return len(text) <= LABEL_VALUE_MAX and _DNS_LABEL.fullmatch(text) is not None


def is_dns1123_subdomain(text: str) -> bool:
    """True for a DNS-1123 subdomain: ≤ 253 characters of dot-separated DNS-1123 labels."""
    return len(text) <= SUBDOMAIN_MAX and _DNS_SUBDOMAIN.fullmatch(text) is not None


def is_label_key(text: str) -> bool:
    """True for a label or annotation key: ``[prefix/]name``, the prefix a DNS-1123 subdomain,
    the name ≤ 63 characters of ``[-A-Za-z0-9_.]`` with alphanumeric ends."""
    prefix, slash, name = text.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return len(name) <= LABEL_VALUE_MAX and _LABEL_NAME.fullmatch(name) is not None


def short_hash(*parts: str) -> str:
    """8 hex digits of the SHA-256 of ``parts`` (joined unambiguously)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:HASH_LENGTH]


def label_value(text: str) -> str:
    """``text`` as a valid label value: unchanged when already valid, else sanitised (invalid
    characters become ``-``, ends trimmed to alphanumerics), cut to fit and suffixed with
    ``-<hash of text>``."""
    if is_label_value(text):
        return text
    return _with_hash(_NOT_LABEL_CHAR.sub("-", text), text, LABEL_VALUE_MAX, r"[-_.]+")


def resource_name(*parts: str, max_length: int = JOB_NAME_MAX) -> str:
    """A DNS-1123 label of at most ``max_length`` characters from ``parts`` joined with ``-``
    (empty parts skipped). Kept as is when the join is already valid; otherwise lowercased,
    other characters turned into ``-``, cut from the end (so a leading prefix survives) and
    suffixed with ``-<hash of the parts>``. Use ``max_length=52`` for CronJobs."""
    if not HASH_LENGTH + 2 <= max_length <= LABEL_VALUE_MAX:
        raise ValueError(f"max_length must be between {HASH_LENGTH + 2} and {LABEL_VALUE_MAX}.")
    kept = [part for part in parts if part]
    if not kept:
        raise ValueError("A resource name needs at least one non-empty part.")
    joined = "-".join(kept)
    if len(joined) <= max_length and is_dns1123_label(joined):
        return joined
    cleaned = re.sub(r"-{2,}", "-", _NOT_NAME_CHAR.sub("-", joined.lower()))
    return _with_hash(cleaned, "\x00".join(kept), max_length, r"-+")


def _with_hash(cleaned: str, original: str, max_length: int, trim: str) -> str:
    suffix = short_hash(original)
    room = max_length - HASH_LENGTH - 1
    body = re.sub(f"^{trim}|{trim}$", "", cleaned)[:room]
    body = re.sub(f"{trim}$", "", body)
    return f"{body}-{suffix}" if body else suffix


def _run_values(
    pipeline: str,
    run_id: str | None,
    run_name: str | None,
    step: str | None,
    step_run_id: str | None,
) -> dict[str, str]:
    values = {
        PIPELINE_KEY: pipeline,
        RUN_ID_KEY: run_id,
        RUN_NAME_KEY: run_name,
        STEP_KEY: step,
        STEP_RUN_ID_KEY: step_run_id,
    }
    return {key: value for key, value in values.items() if value is not None}


def run_labels(
    pipeline: str,
    run_id: str | None = None,
    run_name: str | None = None,
    step: str | None = None,
    *,
    step_run_id: str | None = None,
) -> dict[str, str]:
    """Labels ``wharf.io/pipeline``, ``-/run-id``, ``-/run-name``, ``-/step`` (and
    ``-/step-run-id``) for what is known (None: left out), each value through
    :func:`label_value`."""
    values = _run_values(pipeline, run_id, run_name, step, step_run_id)
    return {key: label_value(value) for key, value in values.items()}


def run_annotations(
    pipeline: str,
    run_id: str | None = None,
    run_name: str | None = None,
    step: str | None = None,
    *,
    step_run_id: str | None = None,
) -> dict[str, str]:
    """The same keys as :func:`run_labels` with the full, unchanged values."""
    return _run_values(pipeline, run_id, run_name, step, step_run_id)


def label_selector(labels: Mapping[str, str]) -> str:
    """An equality selector (``k1=v1,k2=v2``) matching objects that carry all ``labels``;
    values are sanitised as :func:`run_labels` sanitises them."""
    return ",".join(f"{key}={label_value(value)}" for key, value in sorted(labels.items()))
