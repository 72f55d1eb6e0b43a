"""The user config file holds a bearer credential (``wharf login``): it is written readable by
its owner only, atomically, whatever the umask, and one an older version left readable by
others is made private."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf.config.global_config import load_config, read_user_config, write_user_config


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that takes nothing away: any permission a writer asks for, it gets."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_config_is_private_whatever_the_umask(tmp_path: Path, open_umask: None) -> None:
    home = tmp_path / "deep" / "home"
    write_user_config(home, {"server_url": "http://h", "api_key": "secret-token"})
    assert mode(home / "config.json") == 0o600
    assert mode(home) == 0o700
    assert read_user_config(home)["api_key"] == "secret-token"
    assert [p.name for p in home.iterdir()] == ["config.json"]  # no temporary file left


def test_an_existing_readable_config_is_made_private_on_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "config.json").write_text(json.dumps({"api_key": "old"}))
    (home / "config.json").chmod(0o644)
    write_user_config(home, {"api_key": "new", "project": "p"})
    assert (mode(home), mode(home / "config.json")) == (0o700, 0o600)
    assert read_user_config(home) == {"api_key": "new", "project": "p"}


def test_a_readable_config_is_made_private_when_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o755)
    (home / "config.json").write_text(json.dumps({"api_key": "token"}))
    (home / "config.json").chmod(0o644)
    assert load_config({"WHARF_HOME": str(home)}).api_key == "token"
    assert (mode(home), mode(home / "config.json")) == (0o700, 0o600)


def test_the_default_home_is_made_private(tmp_path: Path, open_umask: None) -> None:
    home = tmp_path / "fresh"
    load_config({"WHARF_HOME": str(home)})  # the default store lives there: it is made
    assert mode(home) == 0o700


def test_an_unwritable_home_is_one_line(tmp_path: Path) -> None:
    from wharf.core.errors import InputError

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="Cannot write Wharf config file"):
        write_user_config(blocker / "home", {"api_key": "x"})


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("heartbeat_interval", "often", "must be a finite number of seconds between 0.1 and"),
        ("heartbeat_interval", 0, "must be a finite number of seconds between 0.1 and"),
        ("local_step_slots", "two", "must be a whole number from 1 to 2147483647, not 'two'"),
        ("logging_verbosity", "loud", "must be one of DEBUG"),
        ("code_archive_limit_mib", -1, "must be a finite number of MiB greater than 0, not '-1'"),
    ],
)
def test_a_bad_value_in_the_config_file_names_the_file_and_key(
    tmp_path: Path, key: str, value: object, problem: str
) -> None:
    from wharf.core.errors import InputError

    write_user_config(tmp_path, {key: value})
    with pytest.raises(InputError) as caught:
        load_config({"WHARF_HOME": str(tmp_path)})
    message = str(caught.value)
    assert message.startswith(f"'{key}' in {tmp_path / 'config.json'} {problem}"), message
    assert "WHARF_" not in message


def test_a_bad_value_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    from wharf.core.errors import InputError

    write_user_config(tmp_path, {"heartbeat_interval": 5})
    environ = {"WHARF_HOME": str(tmp_path), "WHARF_HEARTBEAT_INTERVAL": "often"}
    with pytest.raises(InputError) as caught:
        load_config(environ)
    assert str(caught.value) == (
        "WHARF_HEARTBEAT_INTERVAL must be a finite number of seconds between 0.1 and "
        "2147483.647, not 'often'."
    )


def test_the_environment_wins_over_a_bad_value_in_the_file(tmp_path: Path) -> None:
    write_user_config(tmp_path, {"heartbeat_interval": "often"})
    environ = {"WHARF_HOME": str(tmp_path), "WHARF_HEARTBEAT_INTERVAL": "2"}
    assert load_config(environ).heartbeat_interval == 2.0


def test_a_bad_explicit_argument_names_the_argument(tmp_path: Path) -> None:
    from wharf.core.errors import InputError

    with pytest.raises(
        InputError,
        match=r"^The heartbeat_interval argument must be a finite number of seconds between 0.1 and",
    ):
        load_config({"WHARF_HOME": str(tmp_path)}, heartbeat_interval=-1)


def test_a_relative_artifact_root_is_made_absolute_where_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default stack recorded the relative path: each process then put the artifact store
    # under its own working directory, and a run's artifacts could not be loaded from another
    # one ("... is outside the artifact store '<other dir>/arts'").
    from wharf import Client, pipeline, step
    from wharf.sdk.workspace import Workspace

    @step(enable_cache=False)
    def produce() -> int:
        return 42

    @pipeline(name="relative_root")
    def relative_root() -> None:
        produce()

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WHARF_ARTIFACT_ROOT", "arts")
    for var in ("WHARF_STORE_URL", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path / "a")
    assert load_config().artifact_root == tmp_path / "a" / "arts"
    workspace = Workspace.open(load_config())
    try:
        relative_root.run_in(workspace)
    finally:
        workspace.close()

    monkeypatch.chdir(tmp_path / "b")
    with Client() as client:
        (version,) = client.list_artifact_versions(name="relative_root::produce::output").items
        assert version.uri.startswith(str(tmp_path / "a" / "arts"))
        assert client.load_artifact(version) == 42
