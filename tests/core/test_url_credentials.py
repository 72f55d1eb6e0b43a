"""``mask_credentials`` hides a URL's password or token whether the URL parses or not, and the
values of its query parameters named like secrets (``is_secret_parameter``)."""

from __future__ import annotations

import pytest

from wharf.core.url_credentials import is_secret_parameter, mask_credentials


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://wharf:S3cret@db/wharf", "postgresql://wharf:***@db/wharf"),
        ("mysql+pymysql://u:S3cret@bad host/db", "mysql+pymysql://u:***@bad host/db"),
        ("http://u:S3cret@[::1", "http://u:***@[::1"),
        ("u:S3cret@host/db", "u:***@host/db"),
        ("https://S3cret@host/x", "https://***@host/x"),
        ("http://u:S3c/ret@host/x", "http://u:***@host/x"),
        ("http://u:S3c@ret@host", "http://u:***@host"),
        ("http://host:8080/p?mail=a@b", "http://host:8080/p?mail=a@b"),
        ("http://host/p@x", "http://host/p@x"),
        ("sqlite:///tmp/w.db", "sqlite:///tmp/w.db"),
        ("embedded", "embedded"),
        ("postgresql://wharf@db/wharf", "postgresql://wharf@db/wharf"),
        ("postgresql://w@h/db?password=S3cret", "postgresql://w@h/db?password=***"),
        (
            "postgresql://w@h/db?sslmode=require&sslpassword=S3cret",
            "postgresql://w@h/db?sslmode=require&sslpassword=***",
        ),
        (
            "mysql://root@h/db?passwd=S3cret&charset=utf8",
            "mysql://root@h/db?passwd=***&charset=utf8",
        ),
        ("https://h/x?api_key=S3cret#top", "https://h/x?api_key=***#top"),
        ("https://h/x?page=2&sort=name", "https://h/x?page=2&sort=name"),
        ("https://rm.example/?token=S3cret", "https://rm.example/?token=***"),
        ("http://h:8237/?Access_Token=S3cret&x=1", "http://h:8237/?Access_Token=***&x=1"),
        ("s3://bucket?secret=S3cret&region=eu", "s3://bucket?secret=***&region=eu"),
        ("https://h/x?key=S3cret;sig=S3cret", "https://h/x?key=***;sig=***"),
        (
            "https://b.s3/o?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=S3cret&X-Amz-Expires=60",
            "https://b.s3/o?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60",
        ),
        ("https://a.blob/c?sv=2022&sig=S3cret", "https://a.blob/c?sv=2022&sig=***"),
        ("https://h/?auth=S3cret&apiKey=S3cret", "https://h/?auth=***&apiKey=***"),
        ("https://h/?pwd=S3cret&secret-key=S3cret", "https://h/?pwd=***&secret-key=***"),
        ("https://h/?pass%77ord=S3cret", "https://h/?pass%77ord=***"),
        ("https://u:pw@h/?token=S3cret", "https://u:***@h/?token=***"),
        ("postgresql://w@h/db?password=", "postgresql://w@h/db?password=***"),
        ("http://h/?token", "http://h/?token"),
        (
            "https://h/?author=a&signal=1&design=x&sigma=2&keys=3",
            "https://h/?author=a&signal=1&design=x&sigma=2&keys=3",
        ),
    ],
)
def test_credentials_are_masked_and_the_rest_kept(given: str, shown: str) -> None:
    assert mask_credentials(given) == shown


@pytest.mark.parametrize(
    "name",
    [
        "password", "PASSWD", "sslpassword", "passphrase", "pwd", "secret", "client_secret",
        "token", "access_token", "refresh-token", "credential", "credentials", "signature",
        "X-Amz-Signature", "sig", "auth", "Authorization", "key", "api_key", "apikey", "apiKey",
        "access_key", "secret_key", "x-api-key", "sslkey",
    ],
)  # fmt: skip
def test_names_that_look_secret(name: str) -> None:
    assert is_secret_parameter(name)


@pytest.mark.parametrize(
    "name",
    ["page", "sort", "region", "sslmode", "charset", "author", "authSource", "sigma", "keys", ""],
)
def test_names_that_do_not(name: str) -> None:
    assert not is_secret_parameter(name)
