"""The step cache key: a pure function of everything that can change a step's outputs.

The execution layer gathers the facts (it reads files, imports modules and calls the user's
``cache_func``); this module only hashes them (a step's source without its comments:
:func:`code_digest`). Two steps share a key iff all facts that the
step's ``CachePolicy`` includes are equal. The hash is SHA-256 over a length-prefixed,
canonical encoding, so no two different fact sets can collide by concatenation.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class InputFact:
    """One input artifact as the cache key sees it."""

    artifact_version_id: str
    content_hash: str | None
    data_type: str | None = None
    """The class its value was saved from, and the materializer that saved it: the same bytes
    can be two values (an enum saved as its value, and that value itself)."""
    materializer: str | None = None


@dataclass(frozen=True)
class CacheKeyFacts:
    project_id: str
    artifact_store_id: str
    artifact_store_path: str
    step_source: str
    """Import path of the step function; part of the key even when code is excluded."""
    code_hash: str
    parameters: Mapping[str, Any]
    inputs: Mapping[str, InputFact]
    outputs: Mapping[str, str]
    """Output name -> materializer import path."""
    caching_parameters: Mapping[str, Any] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)
    file_digests: Sequence[tuple[str, str]] = ()
    """(path relative to the source root, SHA-256 of the bytes), any order."""
    source_dependencies: Sequence[tuple[str, str]] = ()
    """(import path, source code), any order."""
    cache_func_result: str | None = None


@dataclass(frozen=True)
class KeyPolicy:
    """The switches of ``CachePolicy`` that affect hashing."""

    include_step_code: bool = True
    include_step_parameters: bool = True
    include_artifact_values: bool = True
    include_artifact_ids: bool = True
    ignored_inputs: frozenset[str] = frozenset()
    expires_after: int | None = None
    """Seconds a result is reused (``CachePolicy.expires_after``): in the key when set, so a
    result recorded under another expiry (or none) is never reused under this one."""


def canonical(value: Any) -> str:
    """One string per value: JSON with sorted keys where that is faithful (every dict key a
    str, no set, no tuple), so such keys stay as they were; else a type-tagged encoding, which
    JSON can never produce (plain JSON turns the key ``1`` into ``"1"`` and a tuple into a list,
    giving ``{1: x}`` and ``{"1": x}``, or ``(1, 2)`` and ``[1, 2]``, one key, and cannot sort a
    dict whose keys mix types)."""
    if _plain(value):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    return "tagged:" + json.dumps(_tagged(value), separators=(",", ":"))


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return not isinstance(value, set | frozenset | tuple)


def _tagged(value: Any) -> Any:
    """``value`` as nested lists, each tagged with its kind; dict items and set elements
    sorted by their own encoding (so key order and set iteration order do not count)."""
    if isinstance(value, dict):
        items = [[_tagged(k), _tagged(v)] for k, v in value.items()]
        return ["dict", sorted(items, key=_encoded)]
    if isinstance(value, set | frozenset):
        return ["set", sorted((_tagged(v) for v in value), key=_encoded)]
    if isinstance(value, list):
        return ["list", [_tagged(v) for v in value]]
    if isinstance(value, tuple):
        return ["tuple", [_tagged(v) for v in value]]
    for kind in (bool, int, float, str):  # subclasses too (an IntEnum, numpy's float64)
        if isinstance(value, kind):
            return [kind.__name__, json.dumps(value)]
    if value is None:
        return ["null", "null"]
    return ["repr", repr(value)]


def _encoded(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class _Hasher:
    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, tag: str, value: str) -> None:
        for part in (tag, value):
            data = part.encode("utf-8", "surrogatepass")  # a lone surrogate is a value too
            self._h.update(len(data).to_bytes(8, "big"))
            self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


_LAYOUT = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
)


@functools.lru_cache(maxsize=1024)  # a step's source is digested once per decision
def code_digest(source_code: str | None, code_hash: str) -> str:
    """The step's code as the cache key sees it: SHA-256 of its source without comments,
    blank lines and trailing white space (:func:`without_comments`), so an edit of those alone
    keeps the key (a docstring, which code can read, counts); ``code_hash`` where the source is
    unknown. Source without any of them gives ``code_hash`` itself, the key it had before. A
    ``code_hash`` that is not the hash of ``source_code`` with or without its comments (it
    covers the values the step's function closes over, ``wharf.execution.held_values``, and what
    it reaches of its module, hashed from that same source without comments) counts too."""
    if source_code is None:
        return code_hash
    digest = hashlib.sha256(without_comments(source_code).encode()).hexdigest()
    if code_hash in (digest, hashlib.sha256(source_code.encode()).hexdigest()):
        return digest
    # the code hash holds more than the source (the values a nested step closes over)
    return hashlib.sha256(f"{digest}\0{code_hash}".encode()).hexdigest()


@functools.lru_cache(maxsize=1024)  # read where a step is defined and where it is decided
def without_comments(source: str) -> str:
    """``source`` without its comments, the lines holding nothing else, blank lines and
    trailing white space; text inside a string is never touched. Source that does not
    tokenize is returned whole."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    code_rows: set[int] = set()
    open_rows: set[int] = set()  # rows that end inside a token (a multi-line string)
    comments: dict[int, int] = {}
    for token in tokens:
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.start[1]
        elif token.type not in _LAYOUT:
            code_rows.update(range(token.start[0], token.end[0] + 1))
            open_rows.update(range(token.start[0], token.end[0]))
    kept = []
    for row, line in enumerate(source.splitlines(keepends=True), start=1):
        if row in open_rows:
            kept.append(line)
        elif row in code_rows:
            kept.append(line[: comments.get(row, len(line))].rstrip() + "\n")
    return "".join(kept)


def compute_cache_key(facts: CacheKeyFacts, policy: KeyPolicy) -> str:
    h = _Hasher()
    h.add("project", facts.project_id)
    h.add("artifact_store", facts.artifact_store_id)
    h.add("artifact_store_path", facts.artifact_store_path)
    h.add("source", facts.step_source)
    if policy.include_step_code:
        h.add("code", facts.code_hash)
    if policy.include_step_parameters:
        for name in sorted(facts.parameters):
            h.add("param:" + name, canonical(facts.parameters[name]))
    for name in sorted(facts.inputs):
        if name in policy.ignored_inputs:
            continue
        fact = facts.inputs[name]
        h.add("input", name)
        if policy.include_artifact_values and fact.content_hash is not None:
            h.add("input_value", fact.content_hash)
            if fact.data_type is not None or fact.materializer is not None:
                h.add("input_type", canonical([fact.data_type, fact.materializer]))
        elif policy.include_artifact_ids:
            h.add("input_id", fact.artifact_version_id)
    for name in sorted(facts.outputs):
        h.add("output:" + name, facts.outputs[name])
    for name in sorted(facts.caching_parameters):
        h.add("caching:" + name, canonical(facts.caching_parameters[name]))
    for name in sorted(facts.environment):
        h.add("env:" + name, facts.environment[name])
    for path, digest in sorted(facts.file_digests):
        h.add("file:" + path, digest)
    for path, code in sorted(facts.source_dependencies):
        h.add("source_dep:" + path, code)
    if facts.cache_func_result is not None:
        h.add("cache_func", facts.cache_func_result)
    if policy.expires_after is not None:
        h.add("expires_after", str(policy.expires_after))
    return h.hexdigest()
