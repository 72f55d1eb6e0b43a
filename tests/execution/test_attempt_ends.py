"""describe_exception: a step's error in words the store keeps on every database."""

from __future__ import annotations

from wharf.core.errors import InputError
from wharf.execution.attempt_ends import describe_exception


def test_named_by_its_type_and_message() -> None:
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"
    assert describe_exception(KeyError()) == "KeyError"
    assert describe_exception(InputError("Wharf's own words.")) == "Wharf's own words."


def test_a_nul_character_is_written_out() -> None:
    # The store refuses NUL in text: the step's failure would be recorded without its words.
    assert describe_exception(ValueError("bad\x00byte")) == "ValueError: bad\\x00byte"
    assert describe_exception(InputError("a\x00")) == "a\\x00"
