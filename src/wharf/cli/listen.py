"""Whether a server command can listen where it is asked to (:func:`check_address`), checked
before it opens anything, so a port in use or an unknown host is one line (exit 1) rather than
uvicorn's start-up log ending in a bind error (exit 3). Shared by ``wharf server serve|up`` and
``wharf resource-manager serve``."""

from __future__ import annotations

import click


def check_address(host: str, port: int, *, in_use_hint: str = "") -> None:
    """``host``:``port`` can be listened on now (as uvicorn binds: SO_REUSEADDR), else one line
    saying why; ``in_use_hint`` (e.g. `` (a server there? ...)``) follows a port in use."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise click.BadParameter(f"{host!r}: {exc.strerror}.", param_hint="'--host'") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            hint = in_use_hint if exc.errno == errno.EADDRINUSE else ""
            raise click.ClickException(
                f"Cannot listen on {host}:{port}: {exc.strerror}{hint}."
            ) from None
