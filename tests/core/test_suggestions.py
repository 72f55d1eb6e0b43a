"""What an error for a name that matches nothing suggests and lists."""

from __future__ import annotations

from wharf.core.suggestions import MAX_LISTED, did_you_mean, listing, unmatched


def test_a_typo_is_matched_to_the_close_names_only() -> None:
    assert did_you_mean("laod", ["prepare", "load", "train"]) == "; did you mean 'load'?"
    assert did_you_mean("zzz", ["prepare", "load", "train"]) == ""


def test_a_long_list_is_capped_and_the_rest_counted() -> None:
    names = [f"step_{i}" for i in range(MAX_LISTED + 7)]
    shown = listing(names)
    assert shown.startswith("step_0, step_1, ")
    assert shown.endswith(f"step_{MAX_LISTED - 1}, ... (7 more)")
    assert listing(["a", "b"]) == "a, b"


def test_the_tail_of_an_error_suggests_and_lists() -> None:
    assert unmatched("laod", ["load", "train"], "steps") == (
        "; did you mean 'load'? Its steps: load, train."
    )
    assert unmatched("zzz", ["load"], "steps") == ". Its steps: load."
    assert unmatched("zzz", [], "steps") == "; it has no steps."


def test_names_sharing_only_some_letters_are_not_suggested() -> None:
    assert did_you_mean("laod", ["load", "reload", "clean"]) == "; did you mean 'load'?"
    assert did_you_mean("trian", ["train", "test"]) == "; did you mean 'train'?"
