"""What a stored name may be, and how two names compare: one rule on every database.

Owns :func:`normalize_name` (the rule), :func:`lookup_form`, :data:`MAX_NAME_LENGTH`,
:func:`definition_name` (the stricter rule for the pipeline and step names a script defines),
:func:`account_name` (the rule for new user, project and service account names),
:func:`pipeline_name` and :func:`check_artifact_names` (the room the names a pipeline's runs and
artifacts are built from leave) and :func:`one_line` (the rule of one-line texts that are not
names: descriptions, hosts).

Invariant: names compare case-sensitively, code point by code point, and uniqueness is the same
on every database: SQLite and PostgreSQL compare stored strings exactly, and MySQL/MariaDB's
``utf8mb4_bin`` pads with spaces (``'dup'`` equals ``'dup '``), which cannot matter since a name
never ends with whitespace; NFC makes equivalent spellings identical bytes. Pure: no I/O.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from datetime import datetime

from wharf.core.errors import InputError
from wharf.core.ids import parse_uuid

MAX_NAME_LENGTH = 255
"""Longest stored name (the store's name columns)."""
RUN_NAME_TIME_FORMAT = "%Y_%m_%d-%H_%M_%S_%f"
"""A pipeline's run is named ``PIPELINE-START``, its start in this format (:func:`run_name`)."""
RUN_NAME_SUFFIX_LENGTH = len("-2026_01_01-00_00_00_000000")
MAX_PIPELINE_NAME_LENGTH = MAX_NAME_LENGTH - RUN_NAME_SUFFIX_LENGTH
"""Longest pipeline name: its runs' names (:data:`RUN_NAME_TIME_FORMAT` appended) must fit."""


def run_name(pipeline: str, start: datetime) -> str:
    """The name of a run of ``pipeline`` started at ``start``: ``PIPELINE-START``."""
    return f"{pipeline}-{start:{RUN_NAME_TIME_FORMAT}}"


_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _refused(char: str) -> bool:
    category = unicodedata.category(char)
    return category in _REFUSED_CATEGORIES or (category == "Zs" and char != " ")


def normalize_name(value: str, what: str) -> str:
    """``value`` in NFC form, or InputError naming ``what`` ("user", "project"...) if the
    result breaks the rule.

    The rule: the NFC form has 1 to :data:`MAX_NAME_LENGTH` characters, neither starts nor ends
    with whitespace, and holds no control or invisible characters: Unicode categories Cc, Cf,
    Cs, Co and Cn, line and paragraph separators (Zl, Zp), and space separators other than the
    plain space U+0020 (no-break and zero-width spaces included).
    """
    name = unicodedata.normalize("NFC", value)
    if not name or len(name) > MAX_NAME_LENGTH:
        raise InputError(
            f"A {what} name must have 1 to {MAX_NAME_LENGTH} characters, got {value[:300]!r}."
        )
    if name != name.strip():
        raise InputError(f"A {what} name must not start or end with whitespace: {name!r}.")
    bad = next((char for char in name if _refused(char)), None)
    if bad is not None:
        raise InputError(
            f"A {what} name must not contain control or invisible characters "
            f"(found U+{ord(bad):04X}): {name!r}."
        )
    return name


ACCOUNT_NAME_PUNCTUATION = "._-@"
"""The characters other than letters and digits a new account name may hold."""


def account_name(value: str, what: str) -> str:
    """``value`` as the name of a new ``what`` ("user", "project", "service account"), or
    InputError: the stored-name rule (:func:`normalize_name`), then letters (with their marks),
    digits and ``. _ - @`` only (no spaces, slashes or other punctuation: such names are typed
    in commands and logins), starting with a letter or digit; nothing that passes for another
    name (:func:`_look_alike`); and no UUID in any spelling :func:`uuid.UUID` reads (commands
    resolve an account by id first, so such a name would reach another account). Only creation
    checks it: accounts named before the rule keep working, since lookups use
    :func:`lookup_form`."""
    name = normalize_name(value, what)
    bad = next((c for c in name if not (_word_char(c) or c in ACCOUNT_NAME_PUNCTUATION)), None)
    if bad is not None or unicodedata.category(name[0])[0] not in "LN":
        found = f"found {bad!r}" if bad is not None else f"starts with {name[0]!r}"
        raise InputError(
            f"A {what} name may hold only letters, digits, '.', '_', '-' and '@', starting "
            f"with a letter or digit ({found}): {_shortened(name)}."
        )
    problem = _look_alike(name)
    if problem is not None:
        raise InputError(f"A {what} name {problem}: {_shortened(name)}.")
    return check_not_an_id(name, what)


def check_not_an_id(name: str, what: str) -> str:
    """``name``, or InputError if it is a UUID in any spelling :func:`uuid.UUID` reads: commands
    take an id or a name and look an id up first, so such a name could not be reached (and
    looked up first, it would take over another record's id)."""
    if parse_uuid(name) is not None:
        raise InputError(
            f"A {what} name must not be a UUID (commands take a {what}'s id or name, and an id "
            f"is looked up first, so the name could not be reached): {_shortened(name)}."
        )
    return name


_CONFUSABLE_SCRIPTS = frozenset({"LATIN", "GREEK", "CYRILLIC"})
"""Scripts whose letters look alike (Latin a, Greek alpha, Cyrillic a): a name uses one of them."""


def _look_alike(name: str) -> str | None:
    """What makes ``name`` pass for another one, or None: compatibility forms (fullwidth
    letters, mathematical bold letters, ligatures), or letters of more than one of Latin, Greek
    and Cyrillic ('admin' spelt with a Cyrillic a, U+0430)."""
    plain = unicodedata.normalize("NFKC", name)
    if plain != name:
        return f"must be written in plain characters ({plain!r}, not compatibility forms)"
    scripts = {
        unicodedata.name(c, "?").split()[0] for c in name if unicodedata.category(c)[0] == "L"
    }
    mixed = sorted(scripts & _CONFUSABLE_SCRIPTS)
    if len(mixed) > 1:
        return f"must not mix {' and '.join(s.title() for s in mixed)} letters, which look alike"
    return None


def _word_char(char: str) -> bool:
    """A letter, a digit or a combining mark (which some scripts' letters need)."""
    return unicodedata.category(char)[0] in "LNM"


def one_line(value: str) -> str:
    """``value``, if it is one line that every database stores (else ValueError, for a model's
    validator): no control characters (line breaks and tabs included, and NUL, which PostgreSQL
    cannot store), no line or paragraph separators, no lone surrogates."""
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")), None)
    if bad is not None:
        raise ValueError(f"must be one line without control characters (found U+{ord(bad):04X})")
    return value


def lookup_form(value: str) -> str | None:
    """The form ``value`` would be stored in, or None if no stored name can equal it (so a
    lookup answers "not found" alike on every database)."""
    try:
        return normalize_name(value, "")
    except InputError:
        return None


ARTIFACT_NAME_SEPARATOR = "::"
"""Joins pipeline, step and output into an artifact's name (``pipeline::step::output``)."""


def definition_name(value: str, what: str, *, folder: bool = False) -> str:
    """``value`` as a ``what`` ("pipeline", "step") name given in code, or InputError: the
    stored-name rule (:func:`normalize_name`) and no ``::``, which would make two artifacts'
    names equal (pipeline ``a::b`` with step ``c``, pipeline ``a`` with step ``b::c``); a name
    that is also a ``folder`` of the artifact store (a pipeline's) has no slash or backslash and
    is not ``.`` or ``..``."""
    name = normalize_name(value, what)
    if ARTIFACT_NAME_SEPARATOR in name:
        raise InputError(
            f"A {what} name must not contain '{ARTIFACT_NAME_SEPARATOR}' (it separates the parts "
            f"of an artifact's name): {name!r}."
        )
    if folder and (name in (".", "..") or "/" in name or "\\" in name):
        raise InputError(
            f"A {what} name must not contain a slash or backslash or be '.' or '..' (it names "
            f"a folder of the artifact store): {name!r}."
        )
    return name


def pipeline_name(value: str) -> str:
    """``value`` as a pipeline's name (:func:`definition_name`), or InputError if its runs'
    names would be longer than a stored name."""
    name = definition_name(value, "pipeline", folder=True)
    if len(name) > MAX_PIPELINE_NAME_LENGTH:
        raise InputError(
            f"A pipeline name must have at most {MAX_PIPELINE_NAME_LENGTH} characters (its runs "
            f"are named after it plus a {RUN_NAME_SUFFIX_LENGTH}-character start time, at most "
            f"{MAX_NAME_LENGTH} in all), got {len(name)}: {_shortened(name)}."
        )
    return name


def check_artifact_names(pipeline: str, step: str, outputs: Iterable[str]) -> None:
    """InputError if step ``step`` of ``pipeline`` (its step run's name) or an artifact it
    outputs (``pipeline::step::output``) would be named longer than a stored name."""
    if len(step) > MAX_NAME_LENGTH:
        raise InputError(
            f"A step id must have at most {MAX_NAME_LENGTH} characters, got {len(step)}: "
            f"{_shortened(step)}."
        )
    for output in outputs:
        length = len(ARTIFACT_NAME_SEPARATOR.join((pipeline, step, output)))
        if length > MAX_NAME_LENGTH:
            raise InputError(
                f"Output '{output}' of step {_shortened(step)} in pipeline "
                f"{_shortened(pipeline)} would be stored as an artifact named "
                f"'PIPELINE{ARTIFACT_NAME_SEPARATOR}STEP{ARTIFACT_NAME_SEPARATOR}OUTPUT' of "
                f"{length} characters, more than the {MAX_NAME_LENGTH} a name may have: "
                "shorten the pipeline, step or output name."
            )


def _shortened(name: str) -> str:
    """``name`` quoted, its middle elided if it is long (an error message stays readable)."""
    if len(name) <= 60:
        return repr(name)
    return repr(f"{name[:30]}...{name[-20:]}")
