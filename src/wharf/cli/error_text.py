"""How the CLI shows an error message: :func:`one_line_values` escapes and shortens the values a
message quotes ('like this'), the user's input echoed back.

Invariants: a quoted value never breaks the line and never moves the terminal's cursor (its
control and invisible characters are written as escapes, ``\\n``, ``\\x1b``, ``\\u200b``), and
never fills the screen (longer than :data:`MAX_SHOWN` characters, it is cut to that and ``…``;
a path or URL keeps :data:`MAX_SHOWN_PATH`). The message's own line breaks, outside any quoted
value (a server's last log lines after "failed to start:"), are kept: only what a user typed is
rewritten, so the words of every message stay as their author wrote them.
"""

from __future__ import annotations

import re

MAX_SHOWN = 80
"""Characters of a quoted value shown before ``…``."""

MAX_SHOWN_PATH = 400
"""The same for a value holding a ``/`` (a path or URL: the user needs it whole to find it)."""

_QUOTED = re.compile(r"(?<!\w)'(.*?)'(?!\w)", re.DOTALL)
"""A quoted value: its quotes stand outside words (the apostrophe of "run's" opens none)."""

_KEPT_OUTSIDE = frozenset("\n\t")
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def one_line_values(message: str) -> str:
    """``message`` with each quoted value escaped and shortened, and any other control
    character but a line break or tab escaped."""
    shown = _QUOTED.sub(lambda match: f"'{shown_value(match.group(1))}'", message)
    return _escaped(shown, keep=_KEPT_OUTSIDE)


def shown_value(value: str) -> str:
    """``value`` as an error message quotes it: control and invisible characters escaped, cut
    to :data:`MAX_SHOWN` characters (:data:`MAX_SHOWN_PATH` for a path or URL) and ``…``."""
    limit = MAX_SHOWN_PATH if "/" in value else MAX_SHOWN
    cut = value if len(value) <= limit else value[:limit] + "…"
    return _escaped(cut, keep=frozenset())


def _escaped(text: str, *, keep: frozenset[str]) -> str:
    if text.isprintable() or all(c.isprintable() or c in keep for c in text):
        return text
    import unicodedata  # only for a message that holds one

    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if char not in keep and unicodedata.category(char) in _ESCAPED_CATEGORIES
        else char
        for char in text
    )
