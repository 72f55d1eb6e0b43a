"""The token signing key a server keeps in Wharf's home when it is given none.

Owns :func:`stored_secret_key`: the key in a file of the home (0600, in a 0700 directory), made
on first use. Invariants: a key on file is never replaced (every token signed with it would stop
working), and one that is not a usable key (not UTF-8 text, or shorter than the server takes) is
refused in one line that says what to do, before the server starts.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import click


def stored_secret_key(path: Path, shortest: int) -> str:
    """The key in ``path``, made there on first use; ``shortest``: the fewest characters the
    server takes. Two servers starting at once with no key on file read the same one."""
    try:
        return _read(path, shortest)
    except FileNotFoundError:
        pass
    from wharf.config.global_config import private_directory

    private_directory(path.parent)  # 0700: the key signs every token
    key = secrets.token_urlsafe(48)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server made it meanwhile: that one is the key
        return _read(path, shortest)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(key)
    return key


def _read(path: Path, shortest: int) -> str:
    """The key on file; raises FileNotFoundError when there is none."""
    unusable = (
        f"The secret key in {path} is not a usable key (UTF-8 text of at least {shortest} "
        "characters): give --secret-key, or remove the file to have a new key made (the tokens "
        "signed with the old one then stop working)."
    )
    try:
        key = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise click.ClickException(unusable) from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        reason = exc.strerror or exc
        raise click.ClickException(f"Cannot read the secret key in {path}: {reason}.") from None
    if len(key) < shortest:
        raise click.ClickException(unusable)
    return key
