"""The signing key a workspace server or Resource Manager keeps in Wharf's home: made once
(0600), then read back; a key file that is not a usable key stops ``serve`` in one line naming
the file and what to do, where it was a decoding error or "'secret_key' needs 32+ entries"."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.server.test_cli_server import free_port, wharf
from wharf.cli.secret_key import stored_secret_key

RM_ADMIN_KEY = "an-admin-api-key-of-forty-characters-xyz"
SERVES = {
    "server": ("server", "serve", "--admin-username", "admin", "--admin-password", "a long pw!"),
    "resource_manager": ("resource-manager", "serve", "--admin-api-key", RM_ADMIN_KEY),
}


def test_a_key_is_made_once_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "home" / "server" / "secret_key"
    key = stored_secret_key(path, 32)
    assert len(key) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert stored_secret_key(path, 32) == key


@pytest.mark.parametrize("text", [b"\xff\xfe not text", b"short\n", b"   \n"])
def test_an_unusable_key_on_file_is_refused_and_kept(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "secret_key"
    path.write_bytes(text)
    with pytest.raises(click.ClickException, match="is not a usable key") as caught:
        stored_secret_key(path, 32)
    assert str(path) in caught.value.message
    assert path.read_bytes() == text  # never replaced: tokens signed with it would end


@pytest.mark.parametrize("kind", sorted(SERVES))
def test_serve_refuses_an_unusable_key_on_file_in_one_line(tmp_path: Path, kind: str) -> None:
    home = tmp_path / "home"
    path = home / kind / "secret_key"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe")
    refused = wharf(home, *SERVES[kind], "--port", str(free_port()))
    assert_one_line_error(refused, f"The secret key in {path} is not a usable key")
    assert "give --secret-key, or remove the file" in refused.stderr
