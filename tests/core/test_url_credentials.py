"""``mask_credentials`` hides a URL's password or token whether the URL parses or not."""

from __future__ import annotations

import pytest

from wharf.core.url_credentials import mask_credentials


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
    ],
)
def test_credentials_are_masked_and_the_rest_kept(given: str, shown: str) -> None:
    assert mask_credentials(given) == shown
