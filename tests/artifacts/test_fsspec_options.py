"""Checking and resolving an fsspec store's configuration: URLs, and no clear-text secrets."""

from __future__ import annotations

import pytest

from wharf.artifacts.fsspec_options import check_configuration, check_path, resolve_options
from wharf.core.errors import InputError


def test_paths_are_urls_normalised() -> None:
    assert check_path("s3://bucket/prefix/") == "s3://bucket/prefix"
    assert check_path("GS://b") == "gs://b"
    assert check_path("file:///tmp/x/") == "file:///tmp/x"
    for bad in ("", "/local/dir", "s3://", "file://relative", "s3://b/../c", "s3://b//c", 3):
        with pytest.raises(InputError):
            check_path(bad)


@pytest.mark.parametrize(
    "options",
    [
        {"key": "AKIA"},
        {"secret": "x"},
        {"token": "t"},
        {"account_key": "k"},
        {"connection_string": "c"},
        {"client_kwargs": {"aws_secret_access_key": "s"}},
        {"config": {"credentials": "x"}},
    ],
)
def test_clear_text_secrets_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(InputError, match="clear text"):
        check_configuration({"path": "s3://b", **options})


def test_secrets_come_from_named_environment_variables() -> None:
    config = check_configuration(
        {"path": "s3://b", "key_env": "K", "secret_env": "S", "endpoint_url": "http://h:1"}
    )
    assert resolve_options(config, {"K": "id", "S": "shh"}) == {
        "key": "id",
        "secret": "shh",
        "endpoint_url": "http://h:1",
    }
    with pytest.raises(InputError, match="'S', which is not set"):
        resolve_options(config, {"K": "id"})
    with pytest.raises(InputError, match="names an environment variable"):
        check_configuration({"path": "s3://b", "key_env": ""})


@pytest.mark.parametrize(
    ("configuration", "option", "shown"),
    [
        (
            {"path": "s3://b", "endpoint_url": "http://minio:S3cret@127.0.0.1:9000"},
            "endpoint_url",
            "http://minio:***@127.0.0.1:9000",
        ),
        (
            {"path": "s3://b", "client_kwargs": {"endpoint_url": "https://S3cret@h"}},
            "client_kwargs.endpoint_url",
            "https://***@h",
        ),
        ({"path": "s3://AKIA:S3cret@bucket/p"}, "path", "s3://AKIA:***@bucket/p"),
    ],
)
def test_a_url_holding_credentials_is_refused_without_showing_them(
    configuration: dict[str, object], option: str, shown: str
) -> None:
    """They would be stored in clear text and shown wherever the component's configuration is
    (``component list``, a run's stack, the store's error messages)."""
    with pytest.raises(InputError) as refused:
        check_configuration(configuration)
    message = str(refused.value)
    assert f"option '{option}'" in message and repr(shown) in message
    assert "S3cret" not in message


def test_a_path_that_is_no_url_is_refused_without_its_credentials() -> None:
    with pytest.raises(InputError, match="must be a URL") as refused:
        check_path("AKIA:S3cret@bucket/p")
    assert "'AKIA:***@bucket/p'" in str(refused.value)


def test_an_at_sign_elsewhere_is_no_credential() -> None:
    configuration = {"path": "s3://b/p@v", "project": "me@example.com", "endpoint_url": "http://h"}
    assert check_configuration(configuration)["project"] == "me@example.com"
