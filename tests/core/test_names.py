"""The one-line rule of :func:`wharf.core.names.one_line` (descriptions, hosts, start tokens)."""

from __future__ import annotations

import pytest

from wharf.core.names import one_line


@pytest.mark.parametrize("text", ["host-1.example", "a b", "équipe", ""])
def test_one_line_texts_pass_unchanged(text: str) -> None:
    assert one_line(text) == text


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("a\x00b", "0000"),
        ("a\nb", "000A"),
        ("a\tb", "0009"),
        ("a\u2028b", "2028"),
        ("\udc00", "DC00"),
    ],
)
def test_control_characters_separators_and_lone_surrogates_are_refused(
    text: str, code: str
) -> None:
    with pytest.raises(ValueError, match=f"found U\\+{code}"):
        one_line(text)
