"""Hide the credentials a URL carries before the URL is shown to anyone.

:func:`mask_credentials` works on any text a user gave as a URL, parsable or not (a message
saying a URL is invalid must not print its password): the userinfo before the host's ``@`` is
replaced by ``***`` (a username before a password is kept; in http(s) URLs a lone username, a
token, is masked too), as is the value of a query parameter named like a secret
(``?password=``, ``?sslpassword=``, ``?token=``); the rest is left as given.
"""

from __future__ import annotations

import re

MASK = "***"

_TOKEN_SCHEMES = frozenset({"http", "https"})
"""Schemes whose lone userinfo (``https://TOKEN@host``) is a token, not a user name."""

_SECRET_PARAMETER = re.compile(
    r"([?&;][^=&;#]*(?:pass|pwd|secret|token|credential|api_?key|access_?key)[^=&;#]*=)[^&;#]*",
    re.IGNORECASE,
)


def mask_credentials(url: str) -> str:
    """``url`` with the password (or an http(s) URL's lone username, often a token) of its
    userinfo, and the values of its query parameters named like secrets, as ``***``.

    ``postgresql://wharf:S3cret@db/wharf`` -> ``postgresql://wharf:***@db/wharf``;
    ``https://TOKEN@host`` -> ``https://***@host``; a URL without ``@`` is returned unchanged.
    A password holding a raw ``/`` (``http://u:pa/ss@host``) is masked up to its last ``@``."""
    url = _SECRET_PARAMETER.sub(rf"\1{MASK}", url)
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
