"""Label values, resource names and run labels follow Kubernetes' rules and never collide."""

from __future__ import annotations

import pytest

from wharf.integrations.kubernetes.labels import (
    CRONJOB_NAME_MAX,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    label_selector,
    label_value,
    resource_name,
    run_annotations,
    run_labels,
    short_hash,
)


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("", True),
        ("a", True),
        ("My_Pipeline.v2-x", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-a", False),
        ("a_", False),
        ("a b", False),
        ("ü", False),
    ],
)
def test_is_label_value(text: str, valid: bool) -> None:
    assert is_label_value(text) is valid


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("app", True),
        ("wharf.io/run-id", True),
        ("kubernetes.io/hostname", True),
        ("Wharf.io/run", False),
        ("wharf.io/", False),
        ("/run", False),
        ("a/b/c", False),
        ("x" * 64, False),
        ("example.com/" + "x" * 63, True),
    ],
)
def test_is_label_key(key: str, valid: bool) -> None:
    assert is_label_key(key) is valid


@pytest.mark.parametrize(
    ("text", "label", "subdomain"),
    [
        ("abc-1", True, True),
        ("a.b", False, True),
        ("Abc", False, False),
        ("-a", False, False),
        ("a" * 64, False, True),
    ],
)
def test_dns1123_names(text: str, label: bool, subdomain: bool) -> None:
    assert is_dns1123_label(text) is label
    assert is_dns1123_subdomain(text) is subdomain


@pytest.mark.parametrize("text", ["train", "My_Pipeline.v2", "a" * 63, "", "run-2024"])
def test_a_valid_label_value_is_kept(text: str) -> None:
    assert label_value(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "a" * 64,
        "my pipeline",
        "-leading",
        "trailing_",
        "ünïcode name",
        "___",
        "x" * 200 + "!",
        "a/b:c",
    ],
)
def test_an_invalid_label_value_becomes_valid_with_a_hash_of_the_original(text: str) -> None:
    value = label_value(text)
    assert is_label_value(value)
    assert value.endswith(short_hash(text))
    assert label_value(value) == value  # idempotent


def test_two_long_names_sharing_a_prefix_stay_apart() -> None:
    first, second = "p" * 80 + "_one", "p" * 80 + "_two"
    assert label_value(first) != label_value(second)
    assert len(label_value(first)) == 63


def test_a_cut_value_keeps_its_readable_beginning() -> None:
    assert label_value("training pipeline " + "x" * 100).startswith("training-pipeline-xxx")


@pytest.mark.parametrize(
    ("parts", "max_length", "expected"),
    [
        (("wharf", "1a2b3c4d", "train"), 63, "wharf-1a2b3c4d-train"),
        (("", "1a2b3c4d", "train"), 63, "1a2b3c4d-train"),
    ],
)
def test_a_valid_resource_name_is_the_parts_joined(
    parts: tuple[str, ...], max_length: int, expected: str
) -> None:
    assert resource_name(*parts, max_length=max_length) == expected


@pytest.mark.parametrize(
    ("parts", "max_length"),
    [
        (("team-a", "1a2b3c4d", "Train_Model"), 63),
        (("team-a", "1a2b3c4d", "step", "p" * 80), 63),
        (("team-a", "nightly", "p" * 80), CRONJOB_NAME_MAX),
        (("team-a", "a..b--c__d"), 63),
    ],
)
def test_resource_names_are_dns_labels_that_keep_the_prefix(
    parts: tuple[str, ...], max_length: int
) -> None:
    name = resource_name(*parts, max_length=max_length)
    assert is_dns1123_label(name)
    assert len(name) <= max_length
    assert name.startswith("team-a-")
    assert name.endswith(short_hash(*parts))


def test_resource_names_of_different_parts_never_collide() -> None:
    long = "p" * 80
    names = {
        resource_name("x", long + "a"),
        resource_name("x", long + "b"),
        resource_name("x", "Train"),
        resource_name("x", "train_"),
        resource_name("x-train"),
    }
    assert len(names) == 5


def test_resource_name_refuses_impossible_lengths_and_nothing() -> None:
    with pytest.raises(ValueError):
        resource_name("a", max_length=64)
    with pytest.raises(ValueError):
        resource_name("", "")


def test_run_labels_are_sanitised_and_annotations_keep_the_full_values() -> None:
    long_name = "nightly training run of " + "x" * 60
    labels = run_labels("train_pipeline", "0f" * 16, long_name, "Train Model")
    assert labels == {
        "wharf.io/pipeline": "train_pipeline",
        "wharf.io/run-id": "0f" * 16,
        "wharf.io/run-name": label_value(long_name),
        "wharf.io/step": label_value("Train Model"),
    }
    assert all(is_label_value(v) and is_label_key(k) for k, v in labels.items())
    assert run_annotations("train_pipeline", "0f" * 16, long_name, "Train Model") == {
        "wharf.io/pipeline": "train_pipeline",
        "wharf.io/run-id": "0f" * 16,
        "wharf.io/run-name": long_name,
        "wharf.io/step": "Train Model",
    }


def test_unknown_run_values_are_left_out() -> None:
    assert run_labels("p") == {"wharf.io/pipeline": "p"}
    assert run_labels("p", step_run_id="s1") == {
        "wharf.io/pipeline": "p",
        "wharf.io/step-run-id": "s1",
    }


def test_label_selector_matches_the_sanitised_labels() -> None:
    labels = run_labels("my pipeline", "r1")
    assert (
        label_selector(labels)
        == f"wharf.io/pipeline={label_value('my pipeline')},wharf.io/run-id=r1"
    )
    assert label_selector({"wharf.io/pipeline": "my pipeline"}) == label_selector(
        run_labels("my pipeline")
    )
