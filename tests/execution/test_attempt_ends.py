"""describe_exception: a step's error in words the store keeps on every database."""

from __future__ import annotations

from wharf.core.errors import InputError
from wharf.execution.attempt_ends import REASON_CHARACTERS, describe_exception
from wharf.store.column_rules import MAX_TEXT_LENGTH


def test_named_by_its_type_and_message() -> None:
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"
    assert describe_exception(KeyError()) == "KeyError"
    assert describe_exception(InputError("Wharf's own words.")) == "Wharf's own words."


def test_a_nul_character_is_written_out() -> None:
    # The store refuses NUL in text: the step's failure would be recorded without its words.
    assert describe_exception(ValueError("bad\x00byte")) == "ValueError: bad\\x00byte"
    assert describe_exception(InputError("a\x00")) == "a\\x00"


def test_a_long_message_is_cut_to_what_the_store_keeps() -> None:
    reason = describe_exception(ValueError("x" * (REASON_CHARACTERS + 5)))
    assert reason == f"ValueError: {'x' * REASON_CHARACTERS}... (5 more characters)"
    assert len(reason) <= MAX_TEXT_LENGTH
    assert describe_exception(ValueError("x" * REASON_CHARACTERS)).endswith("x")


def test_a_lone_surrogate_is_written_out() -> None:
    # No UTF-8 text holds one: the store's model refused the reason, and the step ended with
    # "Internal error: ValidationError" instead of its own words.
    assert describe_exception(ValueError("x \udcff")) == "ValueError: x \\udcff"


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str fails")


def test_an_exception_whose_str_fails_reads_as_pythons_traceback_shows_it() -> None:
    assert describe_exception(UnprintableError()) == "UnprintableError: <exception str() failed>"
