"""What a name that matches nothing may have meant: the close spellings among the names there
are (:func:`did_you_mean`) and those names, listed up to a cap (:func:`listing`); both in
the tail of such an error (:func:`unmatched`).

Used by the errors for a misspelt step, output or step parameter name. Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

MAX_LISTED = 20
"""Most names :func:`listing` shows; the rest are counted."""
MAX_SUGGESTED = 3
"""Most close spellings :func:`did_you_mean` suggests."""


def close_names(name: str, names: Iterable[str]) -> list[str]:
    """The names close in spelling to ``name`` (a typo of one of them), closest first."""
    return difflib.get_close_matches(name, list(dict.fromkeys(names)), n=MAX_SUGGESTED, cutoff=0.7)


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``) for the names close to ``name``, else
    ``""``: to follow the clause saying ``name`` matched nothing."""
    close = close_names(name, names)
    if not close:
        return ""
    return f"; did you mean {' or '.join(repr(n) for n in close)}?"


def listing(names: Sequence[str], *, limit: int = MAX_LISTED) -> str:
    """``"a, b, c"``; past ``limit`` names, the first ``limit`` and how many more there are."""
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])}, ... ({len(names) - limit} more)"


def unmatched(name: str, names: Sequence[str], kind: str, *, none: str | None = None) -> str:
    """The rest of an error whose text so far says ``name`` is none of ``names`` (its ``kind``,
    a plural: "steps"): ``"; did you mean 'x'? Its steps: a, b, c."``, without a close name
    ``". Its steps: a, b, c."``, without names ``"; " + none + "."`` (``none`` defaults to
    "it has no steps")."""
    if not names:
        return f"; {none or f'it has no {kind}'}."
    close = did_you_mean(name, names)
    return f"{close or '.'} Its {kind}: {listing(names)}."
