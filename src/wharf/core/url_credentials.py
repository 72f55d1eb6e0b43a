"""Hide the credentials a URL carries before the URL is shown to anyone.

:func:`mask_credentials` works on any text a user gave as a URL, parsable or not (a message
saying a URL is invalid must not print its password): the userinfo before the host's ``@`` is
replaced by ``***`` (a username before a password is kept; in http(s) URLs a lone username, a
token, is masked too), as is the value of a query parameter named like a secret; the rest is
left as given.

A parameter is named like a secret when its name (percent-decoded, any case), cut into words at
every character that is no letter or digit, has a word that

- contains ``pass``, ``pwd``, ``secret``, ``token``, ``credential`` or ``signature``
  (``password``, ``passwd``, libpq's ``sslpassword``, ``access_token``, ``X-Amz-Credential``,
  ``X-Amz-Signature``), or
- is ``auth``, ``authorization`` or ``sig`` (an Azure SAS signature), or
- ends in ``key`` (``key``, ``api_key``, ``apiKey``, ``access_key``, ``secret-key``).

A parameter wrongly taken for a secret (``?monkey=``) only has its value hidden in a message.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

MASK = "***"

_TOKEN_SCHEMES = frozenset({"http", "https"})
"""Schemes whose lone userinfo (``https://TOKEN@host``) is a token, not a user name."""

_PARAMETER = re.compile(r"(?P<name>[?&;](?P<key>[^=&;#]*)=)[^&;#]*")
"""A query parameter: its name with the character before it and its '=', then its value."""
_SECRET_PART = re.compile(r"pass|pwd|secret|token|credential|signature")
_SECRET_WORDS = frozenset({"auth", "authorization", "sig"})


def is_secret_parameter(name: str) -> bool:
    """Whether a query parameter called ``name`` holds a secret (see the module's rule)."""
    words = re.split(r"[^a-z0-9]+", unquote_plus(name).lower())
    return any(
        _SECRET_PART.search(word) or word in _SECRET_WORDS or word.endswith("key") for word in words
    )


def _mask_parameter(parameter: re.Match[str]) -> str:
    if is_secret_parameter(parameter.group("key")):
        return f"{parameter.group('name')}{MASK}"
    return parameter.group()


def mask_credentials(url: str) -> str:
    """``url`` with the password (or an http(s) URL's lone username, often a token) of its
    userinfo, and the values of its query parameters named like secrets, as ``***``.

    ``postgresql://wharf:S3cret@db/wharf`` -> ``postgresql://wharf:***@db/wharf``;
    ``https://TOKEN@host`` -> ``https://***@host``; ``https://h/?token=T`` ->
    ``https://h/?token=***``; a URL without ``@`` nor a secret parameter is returned unchanged.
    A password holding a raw ``/`` (``http://u:pa/ss@host``) is masked up to its last ``@``."""
    url = _PARAMETER.sub(_mask_parameter, url)
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    prefix = f"{scheme}{sep}"
    authority_end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, authority_end)
    if at < 0:
        user, colon, after = rest[:authority_end].partition(":")
        if not colon or after.isdigit() or "@" not in rest:
            return url
        at = rest.rfind("@")  # a raw '/' (or '?', '#') in the password cut the authority short
    userinfo = rest[:at]
    user, colon, _ = userinfo.partition(":")
    if not colon and scheme.lower() not in _TOKEN_SCHEMES:
        return url  # a lone user name (postgresql://wharf@db): no secret
    shown = f"{user}:{MASK}" if colon and user else MASK
    return f"{prefix}{shown}{rest[at:]}"
