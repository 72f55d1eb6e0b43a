"""YAML files users give (pool and policy files, the Resource Manager's credentials file), or
YAML given inline (``--selector``), and what is wrong with them, as one line:
:func:`yaml_problem`, :func:`parse_yaml`, :func:`load_mapping`.

A refusal names the file (or the option), the line and column and what is wrong, never the
offending line itself: PyYAML's own message spans several lines and quotes it, and such a file
may hold a secret pasted in by mistake. PyYAML is imported only when a file is read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from wharf.core.errors import InputError

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
"""A fragment of the file a YAML error message quotes (a character, a tag, an alias)."""
_SYNTAX = re.compile(r"[^\w\s]{1,2}|\\[a-z]|<[a-z ]+>")
"""A quoted fragment that is syntax (``','``, ``'\\t'``, ``'<stream end>'``), not a value's."""


def yaml_problem(exc: Exception, text: str) -> str:
    """Where the YAML of ``text`` is wrong and what is wrong (``at line 2, column 5: ...``),
    never the line itself; the fragments of the file PyYAML's message quotes (a tag, an alias,
    a character of a value) are left out too, syntax such as ``','`` or ``'<stream end>'``
    kept."""
    import yaml

    def shown(words: str) -> str:
        def keep(quoted: re.Match[str]) -> str:
            inner = quoted.group()[1:-1]
            return quoted.group() if _SYNTAX.fullmatch(inner) else "(not shown)"

        return _QUOTED.sub(keep, words)

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = shown(exc.problem or exc.context or "a syntax error")
        if exc.problem and exc.context:
            what += f" ({shown(exc.context)})"
        if mark is None:
            return f"({what})"
        return f"at line {mark.line + 1}, column {mark.column + 1}: {what}"
    if isinstance(exc, yaml.reader.ReaderError):  # a control character or a bad encoding
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        return f"at line {line}, column {column}: {exc.reason}"
    return f"({type(exc).__name__})"


def parse_yaml(text: str, source: str) -> Any:
    """What the YAML (or JSON) ``text`` holds; ``InputError`` in one line naming ``source``
    (a file's path, or the option the text was given with: ``--selector``) and where the YAML
    is wrong (:func:`yaml_problem`) if it is not valid."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{source} is not valid YAML {yaml_problem(exc, text)}.") from None


def load_mapping(path: Path) -> dict[str, Any]:
    """The mapping a YAML (or JSON) file holds; ``InputError`` in one line if the file cannot
    be read, is no UTF-8 text, is no valid YAML, or holds anything but a mapping (a list, a
    single value, nothing)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"Cannot read {path}: {exc.strerror}.") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} is not UTF-8 text (at byte {exc.start + 1}). Save it as UTF-8 and try again."
        ) from None
    data = parse_yaml(text, str(path))
    if isinstance(data, dict):
        return data
    if data is None:
        raise InputError(f"{path} holds nothing: it must hold a mapping of fields (name: ...).")
    kind = "a list" if isinstance(data, list) else "a single value"
    raise InputError(f"{path} must hold a mapping of fields (name: ...), not {kind}.")
