"""The REST store's HTTP session (:mod:`wharf.store.rest.http`): a server URL that is not
``http(s)://`` or does not parse is refused at once as an ``InputError`` that names it, never an
httpx exception and never ``StoreUnavailableError`` (which the engine would wait out as an
outage); so is a credential with characters no HTTP header can carry (a pasted line break)."""

from __future__ import annotations

import pytest

from wharf.core.errors import InputError
from wharf.store.rest.http import HttpSession


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://[::1", "Invalid Wharf server URL 'http://[::1'"),
        ("http://127.0.0.1:port", "Invalid Wharf server URL"),
        ("127.0.0.1:8237", "must start with http:// or https://"),
        ("ftp://server", "must start with http:// or https://"),
        ("", "must start with http:// or https://"),
    ],
)
def test_a_bad_server_url_is_an_input_error(url: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        HttpSession(url, "credential")
    assert fragment in str(caught.value)


def test_a_good_url_loses_its_trailing_slash() -> None:
    session = HttpSession("https://wharf.example:8237/", None)
    assert session.url == "https://wharf.example:8237"
    session.close()


@pytest.mark.parametrize("credential", ["wharf_abc\n", "wharf_a bc", "wharf_abcé", "tab\tkey"])
def test_a_credential_no_header_can_carry_is_an_input_error(credential: str) -> None:
    """It used to fail at the first request as 'Cannot reach the Wharf server' (an outage) or
    as an 'ascii' codec error."""
    with pytest.raises(InputError, match="copy it again"):
        HttpSession("http://127.0.0.1:8237", credential)
