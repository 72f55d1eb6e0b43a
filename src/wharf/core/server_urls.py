"""What a server's base URL (a Wharf server's, a Resource Manager's) may hold, checked where
a client is given one (``HttpSession``, the RM's ``HttpTransport``): whether it came from
``wharf login``, ``--rm-url``, the config file or an environment variable.

A base URL has no query string: every request appends its route to the URL, and after a query
(``https://host/prefix?x=1``) the route would land inside it (``?x=1/api/v1/runs``), so every
call would reach ``/prefix`` instead. Such a URL is refused with one line naming it, its secret
parameters masked; a path parameter (``/prefix;token=T``) stays in the path and is allowed.
"""

from __future__ import annotations

from wharf.core.errors import InputError
from wharf.core.url_credentials import mask_credentials


def check_base_url(url: str, server: str) -> None:
    """Raise ``InputError`` when ``url``, the base URL of ``server`` ("Wharf server",
    "Resource Manager"), has a query string (a ``?`` before any ``#``), even an empty one."""
    if "?" in url.partition("#")[0]:
        raise InputError(
            f"Invalid {server} URL {mask_credentials(url)!r}: a server URL cannot have a query "
            "string ('?...'), the request paths would go after it; give the URL without it."
        )
